"""Tests of attnbook.speculative: the accept/resample rule against hand-computed 3-token cases, its exact output
distribution against p, a chi-square test of sampled steps (with its false-fail rate and its power against
resampling from p instead of the residual, both computed here), and speculative_generate against plain greedy
decoding of the target, with drafts that agree and one that often does not."""
from __future__ import annotations

import pytest
import torch
from scipy import stats

from attnbook.models import GPT, GPTConfig
from attnbook.speculative import (acceptance_probability, expected_tokens, first_token_distribution,
                                  speculative_generate, speculative_step, truncated_draft, verify_draft)


def t(*rows):
    return torch.tensor(rows, dtype=torch.float64)


P = t([0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8])  # target: two drafted positions and the bonus one
Q = t([0.2, 0.2, 0.6], [0.4, 0.4, 0.2])  # draft


@pytest.mark.parametrize("draft, u, n, dist", [
    ([2], [0.5], 0, [0.75, 0.25, 0.0]),  # p/q = 0.2/0.6 = 1/3 <= 0.5: rejected; residual (0.3, 0.1, 0) / 0.4
    ([2], [0.2], 1, [0.2, 0.5, 0.3]),  # 0.2 < 1/3: accepted, the next token comes from p's next row
    ([0, 1], [0.9, 0.9], 2, [0.1, 0.1, 0.8]),  # p/q = 2.5 and 1.25: both accepted whatever u, then the bonus row
    ([0, 0], [0.1, 0.6], 1, [0.0, 0.5, 0.5]),  # second p/q = 0.2/0.4 = 0.5 <= 0.6: residual (0, 0.1, 0.1) / 0.2
    ([1, 0], [0.99, 0.4], 2, [0.1, 0.1, 0.8]),  # 0.3/0.2 = 1.5 (min 1), then 0.2/0.4 = 0.5 > 0.4
])
def test_verify_draft_by_hand(draft, u, n, dist):
    k = len(draft)
    got_n, got = verify_draft(P[:k + 1], Q[:k], torch.tensor(draft), t(*u))
    assert got_n == n and isinstance(got_n, int)
    torch.testing.assert_close(got, t(*dist))


def test_a_token_the_target_never_writes_is_rejected():
    p, q = t([0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]), t([0.5, 0.25, 0.25])
    n, dist = verify_draft(p, q, torch.tensor([0]), t(0.0))  # even the smallest draw: p/q = 0
    assert n == 0
    torch.testing.assert_close(dist, t(0.0, 0.5, 0.5))


def test_exact_distribution_equals_p():
    g = torch.Generator().manual_seed(0)
    for V in (2, 3, 7):
        for _ in range(20):
            p, q = torch.rand(2, V, generator=g, dtype=torch.float64).mul(3).softmax(-1)
            q[0] = 0.0  # a token the draft never proposes
            q /= q.sum()
            torch.testing.assert_close(first_token_distribution(p, q), p, atol=1e-15, rtol=0)
    # the check has power: the residual is the whole point (p - q made from its definition, not the function)
    p, q = P[0], Q[0]
    wrong = torch.minimum(p, q) + (1 - torch.minimum(p, q).sum()) * p  # resampling from p instead
    assert (wrong - p).abs().max() > 0.05


def _first_tokens(p, q, steps, seed, resample_from_p=False):
    """The first token of `steps` speculative steps with one drafted token, drawn from q."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros(p.size(1))
    for _ in range(steps):
        x = torch.multinomial(q[0], 1, generator=g)
        if resample_from_p:  # the wrong rule: accept as usual, resample from p itself
            accept = bool(torch.rand(1, generator=g, dtype=torch.float64) < p[0, x] / q[0, x])
            first = x if accept else torch.multinomial(p[0], 1, generator=g)
        else:
            first = speculative_step(p, q, x, g)[:1]
        counts[int(first)] += 1
    return counts


STEPS, FALSE_FAIL = 3000, 1e-6


def test_sampled_steps_follow_p_chi_square():
    p, q = P[[0, 2]], Q[:1]
    threshold = stats.chi2.isf(FALSE_FAIL, df=2)  # false-fail rate 1e-6 by construction
    wrong = torch.minimum(p[0], q[0]) + (1 - acceptance_probability(p[0], q[0])) * p[0]
    power = stats.ncx2.sf(threshold, df=2, nc=float(STEPS * ((wrong - p[0]) ** 2 / p[0]).sum()))
    assert power > 1 - 1e-6  # against resampling from p (noncentral chi-square approximation)
    expected = STEPS * p[0].numpy()
    chi2 = ((_first_tokens(p, q, STEPS, seed=1).numpy() - expected) ** 2 / expected).sum()
    assert chi2 < threshold
    chi2_wrong = ((_first_tokens(p, q, STEPS, seed=1, resample_from_p=True).numpy() - expected) ** 2 / expected).sum()
    assert chi2_wrong > threshold


def test_acceptance_and_expected_tokens_by_hand():
    assert float(acceptance_probability(P[0], Q[0])) == pytest.approx(0.6)  # 0.2 + 0.2 + 0.2
    assert expected_tokens(0.5, 2) == pytest.approx(1.75)  # 1 + 0.5 + 0.25
    assert expected_tokens(1.0, 3) == 4.0 and expected_tokens(0.0, 5) == 1.0


def _gpt(seed, n_layers):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=40, block_size=64, d_model=32, n_layers=n_layers, n_heads=4)).eval()


def test_greedy_equals_plain_greedy():
    target = _gpt(0, 3)
    ids = torch.randint(0, 40, (1, 5), generator=torch.Generator().manual_seed(2))
    want = target.generate(ids, 30)
    for draft in (truncated_draft(target, 1), _gpt(7, 1), target):  # agrees often, rarely, always
        for k in (1, 4):
            got, st = speculative_generate(target, draft, ids, 30, k)
            assert torch.equal(got, want)
            assert st["target_calls"] < 30 or st["accepted"] == 0
            assert st["accepted"] <= st["drafted"] and 30 == st["accepted"] + st["target_calls"]
    _, st = speculative_generate(target, _gpt(7, 1), ids, 30, 4)
    assert st["acceptance_rate"] < 0.9  # a different model: the rejections (and cache cuts) were exercised
    assert len(truncated_draft(target, 1).blocks) == 1 and len(target.blocks) == 3


def test_sampling_with_the_target_as_draft_accepts_everything():
    target = _gpt(0, 2)
    ids = torch.zeros(1, 3, dtype=torch.long)
    out, st = speculative_generate(target, target, ids, 20, 3, torch.Generator().manual_seed(0), temperature=1.0)
    assert out.shape == (1, 23) and st["acceptance_rate"] == 1.0 and st["target_calls"] == 5  # 4 tokens per call


def test_bad_arguments():
    target = _gpt(0, 2)
    ids = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="one row more"):
        verify_draft(P[:2], Q, torch.tensor([0, 1]), t(0.5, 0.5))
    with pytest.raises(ValueError, match="draft must be an integer tensor"):
        verify_draft(P, Q, t(0.0, 1.0), t(0.5, 0.5))
    with pytest.raises(ValueError, match="u must hold 2"):
        verify_draft(P, Q, torch.tensor([0, 1]), t(0.5, 1.0))
    with pytest.raises(ValueError, match="probability 0 under q"):
        verify_draft(P[:2], t([0.0, 0.5, 0.5]), torch.tensor([0]), t(0.5))
    with pytest.raises(TypeError, match="p must be a torch.Tensor"):
        verify_draft([0.5], Q, torch.tensor([0, 1]), t(0.5, 0.5))
    with pytest.raises(ValueError, match="alpha"):
        expected_tokens(1.5, 2)
    with pytest.raises(ValueError, match="k must be >= 1"):
        speculative_generate(target, target, ids, 5, 0)
    with pytest.raises(ValueError, match="one sequence"):
        speculative_generate(target, target, ids.repeat(2, 1), 5, 2)
    with pytest.raises(ValueError, match="share a vocabulary"):
        speculative_generate(target, GPT(GPTConfig(vocab_size=41, block_size=64, d_model=32, n_layers=1,
                                                   n_heads=4)), ids, 5, 2)
    with pytest.raises(ValueError, match="block_size"):
        speculative_generate(target, target, ids, 62, 2)
    with pytest.raises(TypeError, match="target must be an attnbook GPT"):
        truncated_draft(torch.nn.Linear(2, 2), 1)
    with pytest.raises(ValueError, match="n_layers=3"):
        truncated_draft(target, 3)
