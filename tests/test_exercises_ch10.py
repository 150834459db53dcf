"""Chapter 10 checkers: the book's reference solutions pass; plausible wrong answers fail with the right hint."""
import math

import pytest
import torch
import torch.nn.functional as F

from attnbook.exercises import check

# ---------------------------------------------------------------------------------------------------------
# 10.1 the size of a KV cache
# ---------------------------------------------------------------------------------------------------------


def test_10_1_reference_passes(solutions):
    result = check("10.1", solutions(10)["kv_cache_bytes"])
    assert result.passed, result.message


def test_10_1_reference_matches_published_sizes(solutions):
    kv_cache_bytes = solutions(10)["kv_cache_bytes"]
    assert kv_cache_bytes(32, 32, 128, 4096) == 2 * 2**30  # LLaMA-2 7B, float16: 2 GiB, computed by hand
    assert kv_cache_bytes(32, 8, 128, 4096) == 2**29  # Mistral 7B: a quarter of that
    assert kv_cache_bytes(1, 1, 1, 1) == 4  # one key and one value of 2 bytes


def test_10_1_a_correct_variant_passes():
    def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
        numbers_per_layer = 2 * batch * seq_len * n_kv_heads * d_head
        return int(numbers_per_layer * n_layers * bytes_per_el)

    assert check("10.1", kv_cache_bytes).passed


def no_factor_two(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_el


def in_bits(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_el * 8


def no_batch(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * bytes_per_el


def no_layers(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return 2 * n_kv_heads * d_head * seq_len * batch * bytes_per_el


def heads_times_d_model(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    d_model = n_kv_heads * d_head  # the width of all heads together ...
    return 2 * n_layers * n_kv_heads * d_model * seq_len * batch * bytes_per_el  # ... times the heads again


def fixed_fp16(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * 2


def no_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch


def in_gib(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_el / 2**30


def float_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return 2.0 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_el


def d_head_squared(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
    return 2 * n_layers * n_kv_heads * d_head**2 * seq_len * batch * bytes_per_el


@pytest.mark.parametrize(
    "fn, hint",
    [
        (no_factor_two, "the keys K and the values V: multiply by 2"),
        (in_bits, "size in bits"),
        (no_batch, "multiply by the batch size"),
        (no_layers, "multiply by n_layers"),
        (heads_times_d_model, "multiplied by the number of heads twice"),
        (fixed_fp16, "use the argument instead of a fixed 2 bytes"),
        (no_bytes, "multiply by bytes_per_el"),
        (in_gib, "size in GiB"),
        (float_bytes, "expected an int"),
        (d_head_squared, "not d_head²"),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_10_1_wrong_answers_get_hints(fn, hint):
    result = check("10.1", fn)
    assert not result.passed, fn.__name__
    assert hint in result.message, (fn.__name__, result.message)
    assert 'Re-read "How big is the cache?"' in result.message


def test_10_1_no_bytes_on_a_two_byte_case_says_multiply_by_bytes():
    calls = []

    def no_bytes_after_first(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
        calls.append(1)
        if len(calls) == 1:  # right on the first case, then forgets the bytes
            return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_el
        return 2 * n_layers * n_kv_heads * d_head * seq_len * batch

    result = check("10.1", no_bytes_after_first)
    assert not result.passed
    # the second case has 4 bytes per number, where a count of numbers is 1/4 of the answer
    assert "bytes_per_el" in result.message, result.message


def test_10_1_forbids_the_package_function():
    from attnbook import timing

    def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
        dtype = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}[bytes_per_el]
        return timing.kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, dtype)

    result = check("10.1", kv_cache_bytes)
    assert not result.passed and "without attnbook.timing.kv_cache_bytes" in result.message, result.message


def test_10_1_not_attempted():
    def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_el=2):
        raise NotImplementedError

    assert check("10.1", kv_cache_bytes).status == "not attempted"


# ---------------------------------------------------------------------------------------------------------
# 10.2 repeat_kv
# ---------------------------------------------------------------------------------------------------------


def test_10_2_reference_passes(solutions):
    result = check("10.2", solutions(10)["repeat_kv"])
    assert result.passed, result.message


def test_10_2_reference_agrees_with_transformers_and_gives_the_grouping_of_sdpa(solutions):
    repeat_kv = solutions(10)["repeat_kv"]
    modeling_llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    assert torch.equal(repeat_kv(x, 4), modeling_llama.repeat_kv(x, 4))
    # SDPA's enable_gqa pairs query head j with key/value head j // n_rep: the same grouping
    q = torch.randn(2, 12, 6, 4, generator=g, dtype=torch.float64)
    v = torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64)
    shared = F.scaled_dot_product_attention(q, x, v, enable_gqa=True)
    assert torch.allclose(F.scaled_dot_product_attention(q, repeat_kv(x, 4), repeat_kv(v, 4)), shared, atol=1e-12)


def test_10_2_a_correct_variant_passes():
    assert check("10.2", lambda x, n_rep: x.repeat_interleave(n_rep, dim=1)).passed


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda x, n_rep: x.repeat(1, n_rep, 1, 1), "tiled order kv0, kv1, kv0, kv1"),
        (lambda x, n_rep: x.repeat_interleave(n_rep, dim=2), "repeated along dim 2, the sequence"),
        (lambda x, n_rep: x.repeat_interleave(n_rep, dim=0), "repeated along dim 0, the batch"),
        (lambda x, n_rep: x.repeat(1, 1, 1, n_rep), "repeated along dim 3"),
        (lambda x, n_rep: torch.cat([x] * n_rep, dim=1), "tiled order"),
        (lambda x, n_rep: x.repeat_interleave(n_rep, dim=1).float(), "dtype"),
        (lambda x, n_rep: x.expand(x.size(0), x.size(1) * n_rep, x.size(2), x.size(3)), "expand can only stretch"),
        (lambda x, n_rep: x[:, :, None].expand(-1, -1, n_rep, -1, -1).view(x.size(0), -1, x.size(2), x.size(3)),
         ".contiguous() before .view()"),
    ],
    ids=["tiled", "dim2", "dim0", "dim3", "cat", "float", "expand", "view"],
)
def test_10_2_wrong_answers_get_hints(fn, hint):
    result = check("10.2", fn)
    assert not result.passed
    assert hint in result.message, result.message


def test_10_2_total_heads_instead_of_copies_per_head():
    def repeat_kv(x, n_rep):  # reads n_rep as the number of query heads
        return x.repeat_interleave(n_rep // x.size(1), dim=1)

    result = check("10.2", repeat_kv)
    assert not result.passed and "not the total number of query heads" in result.message, result.message


def test_10_2_returning_x_unchanged():
    result = check("10.2", lambda x, n_rep: x.clone())
    assert not result.passed and "repeat each of them n_rep=2 times" in result.message, result.message


def test_10_2_forbids_the_package_and_transformers():
    from attnbook import multihead

    result = check("10.2", lambda x, n_rep: multihead.repeat_kv(x, n_rep))
    assert not result.passed and "without attnbook.multihead.repeat_kv" in result.message, result.message

    def via_transformers(x, n_rep):
        from transformers.models.mistral.modeling_mistral import repeat_kv

        return repeat_kv(x, n_rep)

    pytest.importorskip("transformers")
    result = check("10.2", via_transformers)
    assert not result.passed and "modeling_mistral.repeat_kv" in result.message, result.message


# ---------------------------------------------------------------------------------------------------------
# 10.3 append to a cache and attend over it
# ---------------------------------------------------------------------------------------------------------


def sdpa_reference(q, k, v):
    """Bottom-right causal attention of the last L queries over S keys, with PyTorch's own SDPA."""
    L, S = q.size(-2), k.size(-2)
    mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_10_3_reference_passes(solutions):
    result = check("10.3", solutions(10)["attend_with_cache"])
    assert result.passed, result.message


def test_10_3_reference_agrees_with_sdpa_and_with_the_model_cache(solutions):
    attend_with_cache = solutions(10)["attend_with_cache"]
    g = torch.Generator().manual_seed(1)
    t = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    q, kc, vc, kn, vn = t(2, 3, 4, 8), t(2, 3, 6, 8), t(2, 3, 6, 5), t(2, 3, 4, 8), t(2, 3, 4, 5)
    out, k, v = attend_with_cache(q, kc, vc, kn, vn)
    assert torch.equal(k, torch.cat([kc, kn], dim=2)) and torch.equal(v, torch.cat([vc, vn], dim=2))
    assert torch.allclose(out, sdpa_reference(q, k, v), atol=1e-12)
    # one token at a time over an empty cache gives the causal attention of the whole sequence
    q_all, k_all, v_all = t(1, 2, 5, 4), t(1, 2, 5, 4), t(1, 2, 5, 4)
    kc, vc, rows = k_all[:, :, :0], v_all[:, :, :0], []
    for i in range(5):
        o, kc, vc = attend_with_cache(q_all[:, :, i:i + 1], kc, vc, k_all[:, :, i:i + 1], v_all[:, :, i:i + 1])
        rows.append(o)
    full = F.scaled_dot_product_attention(q_all, k_all, v_all, is_causal=True)
    assert torch.allclose(torch.cat(rows, dim=2), full, atol=1e-12)


def make_attend(*, cat_dim=-2, prepend=False, use_new=True, use_cache=True, scale="sqrt", mask="bottom-right",
                returns="grown"):
    """attend_with_cache with one deliberate mistake (the defaults give a correct one)."""

    def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
        parts_k = [k_new, k_cache] if prepend else [k_cache, k_new]
        parts_v = [v_new, v_cache] if prepend else [v_cache, v_new]
        k, v = torch.cat(parts_k, dim=cat_dim), torch.cat(parts_v, dim=cat_dim)
        k_att = k if use_new and use_cache else (k_cache if use_cache else k_new)
        v_att = v if use_new and use_cache else (v_cache if use_cache else v_new)
        L, S = q.size(-2), k_att.size(-2)
        divisor = {"sqrt": math.sqrt(q.size(-1)), "none": 1.0, "d": q.size(-1)}[scale]
        scores = q @ k_att.transpose(-2, -1) / divisor
        if mask == "bottom-right":
            allowed = torch.ones(L, S, dtype=torch.bool).tril(S - L)
        elif mask == "top-left":
            allowed = torch.ones(L, S, dtype=torch.bool).tril()
        else:
            allowed = torch.ones(L, S, dtype=torch.bool)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out = weights @ v_att
        if returns == "old":
            return out, k_cache, v_cache
        if returns == "swapped":
            return out, v, k
        if returns == "output":
            return out
        return out, k, v

    return attend_with_cache


def test_10_3_a_correct_variant_passes():
    assert check("10.3", make_attend()).passed


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"cat_dim": 1}, "concatenate along the sequence dimension, dim=-2"),
        ({"cat_dim": -1}, "concatenate along the sequence dimension, dim=-2"),
        ({"prepend": True}, "append the new entries after the cached ones"),
        ({"use_new": False}, "ignores the new tokens' own keys and values"),
        ({"use_cache": False}, "attends only to the new tokens"),
        ({"scale": "none"}, "left out the scale"),
        ({"scale": "d"}, "divided the scores by d"),
        ({"mask": "top-left"}, "aligned to the top left"),
        ({"mask": "none"}, "may not see the new tokens after it"),
        ({"returns": "old"}, "is the cache you were given"),
        ({"returns": "swapped"}, "returned the values where the keys belong"),
        ({"returns": "output"}, "expected a tuple (output, k_cache, v_cache)"),
    ],
    ids=lambda x: str(x) if isinstance(x, dict) else "",
)
def test_10_3_wrong_answers_get_hints(kwargs, hint):
    result = check("10.3", make_attend(**kwargs))
    assert not result.passed, kwargs
    assert hint in result.message, (kwargs, result.message)
    assert 'Re-read "The KV cache"' in result.message


def test_10_3_messages_name_the_input():
    assert "one new token: q (2, 3, 1, 4)" in check("10.3", make_attend(scale="none")).message
    assert "a chunk of 3 new tokens" in check("10.3", make_attend(mask="none")).message


def test_10_3_forbids_attention_functions_and_the_cache_class():
    def with_sdpa(q, k_cache, v_cache, k_new, v_new):
        k, v = torch.cat([k_cache, k_new], dim=-2), torch.cat([v_cache, v_new], dim=-2)
        L, S = q.size(-2), k.size(-2)
        mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), k, v

    def with_kv_cache(q, k_cache, v_cache, k_new, v_new):
        from attnbook.multihead import KVCache

        cache = KVCache()
        cache.update(k_cache, v_cache)
        k, v = cache.update(k_new, v_new)
        return make_attend()(q, k[..., :0, :], v[..., :0, :], k, v)

    result = check("10.3", with_sdpa)
    assert not result.passed and "scaled_dot_product_attention" in result.message, result.message
    result = check("10.3", with_kv_cache)
    assert not result.passed and "without attnbook.multihead.KVCache" in result.message, result.message


def test_10_3_in_place_append_is_reported():
    def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
        k_cache.mul_(1.0).add_(1.0)  # changes the caller's cache
        return make_attend()(q, k_cache, v_cache, k_new, v_new)

    result = check("10.3", attend_with_cache)
    assert not result.passed and "in place" in result.message, result.message


def test_10_3_not_attempted():
    def attend_with_cache(q, k_cache, v_cache, k_new, v_new):
        raise NotImplementedError

    assert check("10.3", attend_with_cache).status == "not attempted"
