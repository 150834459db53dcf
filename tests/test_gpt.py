"""Tests of attnbook.models.gpt: logits against Hugging Face's GPT2LMHeadModel built from a config (no download),
greedy generation against step-by-step argmax of HF's logits, the KV cache against uncached runs and the size
formula 2 · layers · kv_heads · d_head · seq · batch · bytes, sampling against the softmax it samples from, and
nucleus (top-p) filtering against transformers' TopPLogitsWarper.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

transformers = pytest.importorskip("transformers")

from attnbook.models import GPT, GPTConfig, sample_next, top_p_filter  # noqa: E402
from attnbook.multihead import KVCache  # noqa: E402

TOL = dict(atol=1e-10, rtol=1e-10)
VOCAB, BLOCK, D, LAYERS, HEADS = 101, 24, 32, 2, 4


def randomize_(module: nn.Module, seed: int, scale: float = 0.5) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)
    return module


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # parameters() yields the tied matrix once


def small_gpt(n_kv_heads=None, seed=0) -> GPT:
    """A random float64 GPT in eval mode. Large position embeddings keep greedy decoding from repeating one
    token forever (with a tied head and small weights, a token's own embedding tends to win every step)."""
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=VOCAB, block_size=BLOCK, d_model=D, n_layers=LAYERS, n_heads=HEADS,
                    n_kv_heads=n_kv_heads)
    m = randomize_(GPT(cfg).double().eval(), seed=seed + 1, scale=0.2)
    randomize_(m.pos_emb, seed=seed + 2, scale=2.0)
    return m


def prompt(batch=2, n=5, seed=3):
    return torch.randint(0, VOCAB, (batch, n), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def hf_gpt2():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=BLOCK, n_embd=D, n_layer=LAYERS, n_head=HEADS,
                                  bos_token_id=0, eos_token_id=0)
    return randomize_(transformers.GPT2LMHeadModel(cfg).double().eval(), seed=1, scale=0.3)


def test_default_config_is_gpt2_small_and_count_matches_transformers():
    with torch.device("meta"):  # structure only: no memory, no initialisation
        ours = GPT(GPTConfig())
        ref = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    assert n_params(ours) == n_params(ref) == 124_439_808
    assert ours.lm_head.weight is ours.tok_emb.weight
    c = ours.config
    assert (c.vocab_size, c.block_size, c.d_model, c.n_layers, c.n_heads, c.n_kv_heads, c.dropout) == (
        50257, 1024, 768, 12, 12, None, 0.0)


def test_logits_match_hf(hf_gpt2):
    ours = GPT.from_hf(hf_gpt2)
    assert not ours.training and ours.tok_emb.weight.dtype == torch.float64
    assert n_params(ours) == n_params(hf_gpt2)
    ids = prompt(batch=3, n=BLOCK, seed=4)  # the full block: every position embedding is used
    with torch.no_grad():
        logits = ours(ids)
        expected = hf_gpt2(input_ids=ids).logits
    assert logits.shape == (3, BLOCK, VOCAB)
    torch.testing.assert_close(logits, expected, **TOL)


def test_greedy_generation_matches_argmax_of_hf_logits(hf_gpt2):
    ours = GPT.from_hf(hf_gpt2)
    ids = prompt()
    expected = ids
    with torch.no_grad():
        for _ in range(8):  # greedy decoding by hand, from HF's logits only
            nxt = hf_gpt2(input_ids=expected).logits[:, -1].argmax(-1, keepdim=True)
            expected = torch.cat([expected, nxt], dim=1)
    for use_cache in (True, False):
        assert torch.equal(ours.generate(ids, 8, use_cache=use_cache), expected)


@pytest.mark.parametrize("n_kv_heads", [HEADS, 2, 1])
def test_cached_and_uncached_greedy_generation_agree(n_kv_heads):
    m = small_gpt(n_kv_heads)
    ids = prompt(batch=2, n=4)
    cached = m.generate(ids, 14, use_cache=True)
    uncached = m.generate(ids, 14, use_cache=False)
    assert cached.shape == (2, 18) and torch.equal(cached[:, :4], ids)
    assert torch.equal(cached, uncached)
    assert all(len(set(row)) > 3 for row in cached[:, 4:].tolist())  # not one token repeated: a real test


def test_cached_forward_in_chunks_equals_one_causal_pass():
    m = small_gpt(n_kv_heads=2)
    ids = prompt(batch=2, n=10)
    with torch.no_grad():
        full = m(ids)
        cache = m.new_cache()
        parts = [m(ids[:, :4], cache=cache), m(ids[:, 4:7], cache=cache), m(ids[:, 7:8], cache=cache),
                 m(ids[:, 8:], cache=cache)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, **TOL)
    assert all(kv.seq_len == 10 for kv in cache)


def test_logits_are_causal():
    m = small_gpt()
    ids = prompt(batch=1, n=8)
    changed = ids.clone()
    changed[0, 5] = (ids[0, 5] + 1) % VOCAB
    with torch.no_grad():
        a, b = m(ids), m(changed)
    torch.testing.assert_close(a[:, :5], b[:, :5], **TOL)  # earlier positions cannot see position 5
    assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("n_kv_heads", [HEADS, 2, 1])
def test_cache_holds_n_kv_heads_and_its_bytes_follow_the_formula(n_kv_heads):
    m = small_gpt(n_kv_heads)
    batch, n, new = 3, 5, 7
    out, cache = m.generate(prompt(batch=batch, n=n), new, return_cache=True)
    assert out.shape == (batch, n + new) and len(cache) == LAYERS
    seq = n + new - 1  # the last generated token is never fed back through the model
    d_head = D // HEADS
    for kv in cache:
        assert isinstance(kv, KVCache) and kv.k.shape == kv.v.shape == (batch, n_kv_heads, seq, d_head)
    expected = 2 * LAYERS * n_kv_heads * d_head * seq * batch * 8  # keys and values, float64 = 8 bytes
    assert sum(kv.nbytes() for kv in cache) == expected


def test_sampling_is_reproducible_and_top_k_1_is_greedy():
    m = small_gpt(n_kv_heads=2)
    ids = prompt()

    def sample(seed, **kw):
        return m.generate(ids, 10, temperature=1.5, generator=torch.Generator().manual_seed(seed), **kw)

    assert torch.equal(sample(0), sample(0))
    assert torch.equal(sample(0), sample(0, use_cache=False))  # same draws, same logits
    assert not torch.equal(sample(0), sample(1))
    assert torch.equal(sample(5, top_k=1), m.generate(ids, 10))


def test_sample_next_draws_from_tempered_softmax_restricted_to_top_k():
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0, 0.0], dtype=torch.float64)
    rows = logits.expand(40_000, 5)
    g = torch.Generator().manual_seed(0)
    draws = sample_next(rows, temperature=2.0, top_k=3, generator=g)  # (40000, 1)
    freq = torch.bincount(draws[:, 0], minlength=5).double() / len(draws)
    kept = torch.exp(logits[:3] / 2.0)
    expected = torch.cat([kept / kept.sum(), torch.zeros(2, dtype=torch.float64)])
    torch.testing.assert_close(freq, expected, atol=0.01, rtol=0)  # standard error < 0.0025
    assert torch.equal(sample_next(rows[:3], temperature=0.0), torch.zeros(3, 1, dtype=torch.long))
    big_k = sample_next(rows[:2], 1.0, top_k=50, generator=torch.Generator().manual_seed(1))  # k > vocab: all
    assert big_k.shape == (2, 1)


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9, 0.99, 1.0])
def test_top_p_filter_equals_transformers_top_p_warper(p):
    from transformers import TopPLogitsWarper

    logits = 2.0 * torch.randn(64, 50, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    ours = top_p_filter(logits, p)
    assert torch.equal(ours, TopPLogitsWarper(p)(None, logits))
    assert bool(torch.isfinite(ours).sum(-1).ge(1).all())
    kept = torch.softmax(logits, -1).masked_fill(torch.isinf(ours), 0.0).sum(-1)
    assert bool((kept >= p - 1e-12).all())  # the nucleus holds at least p ...
    smallest_kept = torch.softmax(logits, -1).masked_fill(torch.isinf(ours), 2.0).amin(-1)
    assert bool((kept - smallest_kept < p).all())  # ... and without its least probable token, less


def test_top_p_filter_shapes_dtypes_and_edge_cases():
    logits = torch.randn(2, 3, 9, generator=torch.Generator().manual_seed(0))  # float32, two batch dimensions
    before = logits.clone()
    out = top_p_filter(logits, 0.7)
    assert out.dtype == torch.float32 and out.shape == logits.shape and torch.equal(logits, before)
    assert torch.equal(out, torch.stack([top_p_filter(row, 0.7) for row in logits.reshape(-1, 9)]).view(2, 3, 9))
    kept = torch.isfinite(out)
    assert torch.equal(out[kept], logits[kept])  # kept logits unchanged
    peaked = torch.tensor([0.1, 5.0, -2.0, 0.0], dtype=torch.float64)  # the top token alone holds more than p
    assert torch.isfinite(top_p_filter(peaked, 1e-9)).tolist() == [False, True, False, False]
    underflow = torch.tensor([-1000.0, 0.0, -2000.0])  # probabilities exactly 0, 1, 0
    assert torch.isfinite(top_p_filter(underflow, 1.0)).tolist() == [False, True, False]
    flat = torch.tensor([0.3, 0.1, 0.2, 0.0], dtype=torch.float64)
    assert bool(torch.isfinite(top_p_filter(flat, 1.0)).all())


def test_top_p_filter_arguments():
    with pytest.raises(ValueError, match="p must be"):
        top_p_filter(torch.zeros(3), 0.0)
    with pytest.raises(ValueError, match="p must be"):
        top_p_filter(torch.zeros(3), 1.5)
    with pytest.raises(ValueError, match="p must be"):
        top_p_filter(torch.zeros(3), True)
    with pytest.raises(TypeError, match="logits"):
        top_p_filter(torch.zeros(3, dtype=torch.long), 0.5)


def test_init_follows_nanogpt():
    torch.manual_seed(5)
    n_layers = 6
    m = GPT(GPTConfig(vocab_size=3000, block_size=64, d_model=64, n_layers=n_layers, n_heads=4))
    assert abs(m.tok_emb.weight.std().item() - 0.02) < 0.001
    assert abs(m.blocks[0].ffn.fc1.weight.std().item() - 0.02) < 0.002
    scaled = 0.02 / math.sqrt(2 * n_layers)
    for block in m.blocks:
        assert abs(block.self_attn.out_proj.weight.std().item() - scaled) / scaled < 0.1
        assert abs(block.ffn.fc2.weight.std().item() - scaled) / scaled < 0.1
        assert torch.all(block.self_attn.q_proj.bias == 0)


def test_block_size_errors():
    m = small_gpt()
    with pytest.raises(ValueError, match="block_size"):
        m(prompt(batch=1, n=BLOCK + 1))
    with pytest.raises(ValueError, match="block_size"):
        m.generate(prompt(n=5), BLOCK - 4)
    m.generate(prompt(n=5), BLOCK - 5)  # exactly block_size is fine
    cache = m.new_cache()
    with torch.no_grad():
        m(prompt(batch=1, n=BLOCK - 1), cache=cache)
        with pytest.raises(ValueError, match="block_size"):
            m(prompt(batch=1, n=2), cache=cache)


def test_bad_arguments_name_the_argument():
    m = small_gpt()
    ids = prompt()
    with pytest.raises(ValueError, match="temperature"):
        m.generate(ids, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        m.generate(ids, 2, temperature=1.0, top_k=0)
    with pytest.raises(TypeError, match="generator"):
        m.generate(ids, 2, temperature=1.0, generator=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        m.generate(ids, -1)
    with pytest.raises(ValueError, match="return_cache"):
        m.generate(ids, 2, use_cache=False, return_cache=True)
    with pytest.raises(TypeError, match="input_ids"):
        m(ids.double())
    with pytest.raises(ValueError, match="vocab_size"):
        m(torch.tensor([[0, VOCAB]]))
    with pytest.raises(TypeError, match="cache"):
        m(ids, cache=[KVCache()])
    with pytest.raises(ValueError, match="n_kv_heads"):
        GPTConfig(n_heads=12, n_kv_heads=5)
    with pytest.raises(ValueError, match="n_heads"):
        GPTConfig(d_model=100, n_heads=12)
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        GPT.from_hf(nn.Linear(2, 2))
    assert torch.equal(m.generate(ids, 0), ids)
