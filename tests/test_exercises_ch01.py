"""Chapter 1 checkers: what the mutant catalogue (tests/mutants/ch01.py) cannot say.

Which answer passes, and which fails with which hint, is in the catalogue. Here: the book's reference solutions
pass and stubs are not attempted; messages name their input, and do not name a mistake that does not explain
every input nor show the solution's code; the library softmaxes the task forbids (1.3); and the inputs drawn
from the run's seed keep their properties (and give the catalogue's entries their verdicts under another seed)."""
import math

import pytest
import torch

from attnbook.exercises import check, compare
from mutants.ch01 import lookup, project


def not_attempted(*args, **kwargs):
    raise NotImplementedError("replace this line with your code")


@pytest.mark.parametrize("exercise_id, name", [("1.1", "project_qkv"), ("1.2", "soft_lookup"),
                                               ("1.3", "stable_softmax")])
def test_reference_solution_passes(solutions, exercise_id, name):
    result = check(exercise_id, solutions(1)[name])
    assert result.passed, result.message


@pytest.mark.parametrize("exercise_id", ["1.1", "1.2", "1.3"])
def test_stub_is_not_attempted(exercise_id):
    result = check(exercise_id, not_attempted)
    assert result.status == "not attempted", result.message
    assert result.points == 0


# ---------------------------------------------------------------------------------------------------------
# 1.1  project_qkv
# ---------------------------------------------------------------------------------------------------------


def test_1_1_shape_error_is_explained():
    def transposed_when_not_square(X, W_q, W_k, W_v):
        out = X @ W_q, X @ W_k, X @ W_v
        if W_q.shape[0] != W_q.shape[1]:
            out = (X @ W_q.T, X @ W_k.T, X @ W_v.T)
        return out

    result = check("1.1", transposed_when_not_square)
    assert not result.passed
    assert "raised RuntimeError" in result.message and "X of shape (5, 6)" in result.message
    assert "compute X @ W" in result.message


# ---------------------------------------------------------------------------------------------------------
# 1.2  soft_lookup
# ---------------------------------------------------------------------------------------------------------


def test_1_2_the_overflow_message_names_the_large_scores():
    result = check("1.2", lookup(weigh=lambda s: torch.exp(s) / torch.exp(s).sum()))
    assert not result.passed and "large scores" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 1.3: what the task forbids is enforced, and the advice names the steps, never the solution's code
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [lambda x, dim=-1: torch.softmax(x, dim=dim), lambda x, dim=-1: x.softmax(dim),
                                    lambda x, dim=-1: torch.log_softmax(x, dim=dim).exp(),
                                    lambda x, dim=-1: torch.nn.Softmax(dim=dim)(x)],
                         ids=["torch.softmax", "Tensor.softmax", "log_softmax", "nn.Softmax"])
def test_1_3_library_softmax_is_refused(answer):
    result = check("1.3", answer)
    assert not result.passed
    assert "the task asks you to write this without" in result.message, result.message
    assert "exp, amax and sum" in result.message
    assert ".exp()" not in result.message and "e = (" not in result.message and "e / e" not in result.message


# Third learner trial (1.1): hints that fit every input


def test_1_1_einsum_without_a_batch_is_not_told_about_w_at_x():
    result = check("1.1", project(mul=lambda X, W: torch.einsum("nd,dk->nk", X, W)))
    assert not result.passed and "not W @ X" not in result.message, result.message


def test_1_1_a_mistake_on_one_input_only_is_not_named():
    """Scaled queries on the batched inputs only: the scale mistake does not explain the 2-D inputs, so the message
    shows the first wrong entry and the rule instead of a hint about the scale."""
    def project_qkv(X, W_q, W_k, W_v):
        Q = X @ W_q
        if X.dim() == 3:
            Q = Q / math.sqrt(W_q.shape[1])
        return Q, X @ W_k, X @ W_v

    result = check("1.1", project_qkv)
    assert not result.passed and "batch of 2" in result.message, result.message
    assert "chapter 2" not in result.message and "at index" in result.message and "expected" in result.message


# ---------------------------------------------------------------------------------------------------------
# Issue 23: inputs drawn from the run's seed keep the properties they were tuned for
# ---------------------------------------------------------------------------------------------------------

from seed_offsets import OFFSETS  # noqa: E402  (200 values of compare.SEED_OFFSET)


def test_1_2_drawn_scores_overflow_and_underflow_float32_exp(monkeypatch):
    from attnbook.exercises import ch01

    seen = set()
    for o in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        cases = ch01._lookup_cases(ch01.generator(12))
        assert [tuple(c[1].shape) + tuple(c[2].shape) + tuple(c[3].shape) for c in cases] == [
            (3, 4, 3, 4, 3), (2, 5, 2, 5, 4), (3, 4, 3, 4, 2), (3, 1, 3, 1, 2)]
        high = cases[2][2] @ cases[2][1]
        low = cases[3][2] @ cases[3][1]
        assert torch.isinf(high.max().exp()) and high.max() > 95  # exp overflows float32 (above 88.7)
        assert (high == high.max()).sum() == 1  # one best key, so a hard lookup differs from softmax
        assert low.exp() == 0 and low.item() < -105  # exp underflows to 0 in float32 (below -103.9)
        assert str(high.max().item()) in cases[2][0] or f"{high.max().item():.4g}" in cases[2][0]
        seen.add((cases[0][1].tolist()[0], high.max().item(), low.item()))
    assert len(seen) == len(OFFSETS)


def test_1_3_drawn_logits_overflow_float32_exp(monkeypatch):
    from attnbook.exercises import ch01

    seen = set()
    for o in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        cases = ch01._softmax_cases(ch01.generator(13))
        big = [x for _desc, x, _dim in cases[2:5] + cases[6:8]]
        assert all(torch.isinf(x.abs().amax().exp()) for x in big)  # exp overflows float32 (above 88.7)
        assert cases[3][1].exp().sum() == 0  # every exp underflows: 0 / 0 without the shift
        seen.add(float(cases[2][1][0, 0]))
    assert len(seen) > 100  # a new size on most runs


def test_1_x_drawn_cases_give_every_catalogue_entry_its_verdict(monkeypatch):
    """The catalogue's verdicts hold under another seed too (the properties above cover 200); refused routes
    and types do not depend on the values, so only the answers judged by their values are run."""
    import mutants

    entries = [m for m in mutants.load(1) if m.exercise_id in ("1.2", "1.3") and "(generated)" not in m.name
               and not (m.hint or "").startswith(("without", "package's own", "tensor", "dtype", "float16"))]
    for o in OFFSETS[1:2]:
        monkeypatch.setattr(compare, "SEED_OFFSET", o)
        assert not [(m.name, r.message) for m in entries for ok, r in [mutants.run(m)] if not ok], o
