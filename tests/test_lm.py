"""attnbook.lm: perplexity, batches of windows, the evaluation against a bigram table computed by hand, a tiny
training run that lowers the loss, sampling, and the command line of the larger run."""
from __future__ import annotations

import math
import time

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.lm import evaluate_lm, generate, lm_loss, perplexity, random_windows, train_lm
from attnbook.models.llama import Llama, LlamaConfig
from attnbook.training import warmup_cosine_lr


def test_perplexity_of_numbers_and_tensors():
    assert perplexity(0.0) == 1.0
    assert perplexity(math.log(50)) == pytest.approx(50, rel=1e-12)
    assert perplexity(2) == pytest.approx(math.e ** 2, rel=1e-12)
    assert isinstance(perplexity(torch.tensor(2.5)), float)
    assert perplexity(torch.tensor(2.5)) == pytest.approx(math.exp(2.5), rel=1e-6)
    # batch means: average the losses, then exponentiate (not the mean of the perplexities)
    assert perplexity(torch.tensor([2.0, 4.0])) == pytest.approx(math.exp(3.0), rel=1e-12)
    assert perplexity(torch.tensor(3.0, requires_grad=True) * 1) == pytest.approx(math.exp(3.0), rel=1e-6)
    with pytest.raises(TypeError, match="mean_loss"):
        perplexity("3.0")
    with pytest.raises(TypeError, match="mean_loss"):
        perplexity(torch.tensor([1, 2]))


def test_random_windows_are_shifted_by_one_and_seeded():
    ids = torch.arange(100)
    x, y = random_windows(ids, 8, 5, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 5)
    assert torch.equal(y, x + 1)  # consecutive ids: y is x shifted by one
    assert int(y.max()) <= 99
    x2, _ = random_windows(ids, 8, 5, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2)
    with pytest.raises(ValueError, match="ids"):
        random_windows(torch.arange(5), 2, 5, torch.Generator())
    with pytest.raises(TypeError, match="generator"):
        random_windows(ids, 2, 5, 0)


class BigramTable(nn.Module):
    """A model whose logits at each position are log P[token at that position]: a fixed bigram table."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.logp = nn.Parameter(table.log(), requires_grad=False)

    def forward(self, ids):
        return self.logp[ids]  # (B, T, V)


@pytest.mark.parametrize("context", [1, 4, 7, 50])
def test_evaluate_lm_scores_every_token_after_the_first_once(context):
    g = torch.Generator().manual_seed(0)
    table = torch.rand(6, 6, generator=g, dtype=torch.float64) + 0.1
    table = table / table.sum(dim=1, keepdim=True)  # rows are distributions over the next token
    ids = torch.randint(6, (31,), generator=g)
    by_hand = -sum(math.log(table[a, b]) for a, b in zip(ids[:-1].tolist(), ids[1:].tolist())) / 30
    model = BigramTable(table).train()
    assert evaluate_lm(model, ids, context, batch_size=2) == pytest.approx(by_hand, rel=1e-12)
    assert model.training  # mode restored


def tiny_llama(seed=0):
    torch.manual_seed(seed)
    return Llama(LlamaConfig(vocab_size=12, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=32, max_len=8))


def pattern_ids(n: int) -> torch.Tensor:
    """A stream with structure: 0 1 2 ... 9 then a random id of {10, 11}, repeated."""
    g = torch.Generator().manual_seed(1)
    return torch.cat([torch.cat([torch.arange(10), torch.randint(10, 12, (1,), generator=g)]) for _ in range(n)])


def test_train_lm_lowers_the_loss_quickly_and_records_everything():
    ids = pattern_ids(60)
    model = tiny_llama()
    start = time.perf_counter()
    h = train_lm(model, ids[:500], ids[500:], steps=60, batch_size=8, context=8, max_lr=2e-2, eval_every=20,
                 progress=False)
    assert time.perf_counter() - start < 5
    assert len(h.losses) == len(h.lrs) == len(h.grad_norms) == 60
    assert h.val_steps == [20, 40, 60] and h.val_losses[-1] < h.val_losses[0] < math.log(12) + 0.5
    assert h.val_loss < 1.0  # most of the stream is predictable
    assert h.tokens == 60 * 8 * 8 and h.seconds > 0
    assert h.lrs == pytest.approx([warmup_cosine_lr(s, 2e-2, 6, 60, 2e-3) for s in range(60)])
    assert not model.training


def test_train_lm_is_reproducible_and_clips():
    ids = pattern_ids(40)
    runs = [train_lm(tiny_llama(), ids[:300], ids[300:], steps=5, batch_size=4, context=8, max_lr=1e-2,
                     clip=0.01, progress=False) for _ in range(2)]
    assert runs[0].losses == runs[1].losses and runs[0].val_losses == runs[1].val_losses
    assert any(n > 0.01 for n in runs[0].grad_norms)  # recorded before clipping


def test_train_lm_progress_bar_goes_to_stdout(capsys):
    ids = pattern_ids(20)
    train_lm(tiny_llama(), ids[:150], ids[150:], steps=3, batch_size=2, context=8, max_lr=1e-2, desc="tiny run")
    out, err = capsys.readouterr()
    assert "tiny run" in out and "3/3" in out and err == ""


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"steps": 0}, ValueError, "steps"), ({"max_lr": 0.0}, ValueError, "max_lr"),
    ({"warmup_steps": 10}, ValueError, "warmup_steps"), ({"clip": -1.0}, ValueError, "clip"),
    ({"eval_every": 0}, ValueError, "eval_every"), ({"train_ids": torch.zeros(10)}, TypeError, "train_ids"),
    ({"model": "model"}, TypeError, "model"),
])
def test_train_lm_rejects_bad_arguments(kwargs, exc, match):
    args = dict(model=tiny_llama(), train_ids=torch.arange(12).repeat(5), val_ids=torch.arange(12), steps=10,
                batch_size=2, context=4, max_lr=1e-3)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        train_lm(args.pop("model"), args.pop("train_ids"), args.pop("val_ids"), progress=False, **args)


def test_lm_loss_is_the_shifted_cross_entropy():
    model = tiny_llama()
    x, y = torch.randint(12, (2, 8)), torch.randint(12, (2, 8))
    assert torch.allclose(lm_loss(model, x, y), F.cross_entropy(model(x).transpose(1, 2), y))


def test_generate_greedy_and_seeded_sampling():
    model = tiny_llama()
    prompt = torch.tensor([[1, 2, 3]])
    greedy = generate(model, prompt, 10, temperature=0)
    assert greedy.shape == (1, 13) and torch.equal(greedy[:, :3], prompt)
    assert torch.equal(greedy, generate(model, prompt, 10, temperature=0))
    a = generate(model, prompt, 10, temperature=0.8, generator=torch.Generator().manual_seed(0))
    b = generate(model, prompt, 10, temperature=0.8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    # one step by hand: the argmax of the last position's logits
    with torch.no_grad():
        assert greedy[0, 3] == model(prompt)[0, -1].argmax()
    with pytest.raises(TypeError, match="generator"):
        generate(model, prompt, 2, temperature=1.0)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, prompt, 2, temperature=-1.0)


def test_the_command_line_runs_a_tiny_model(capsys):
    from attnbook.lm import main

    assert main(["--steps", "2", "--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--context", "8",
                 "--eval-every", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "validation perplexity: model" in out and "bigram" in out and "sample at temperature 0.8" in out
