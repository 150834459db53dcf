"""Tests of attnbook.masks: hand-written expected masks, and the conventions checked against torch itself."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnbook.attention import scaled_dot_product_attention
from attnbook.masks import CONVENTIONS, causal_mask, combine_masks, convert_mask, padding_mask

T, F_ = True, False
INF = math.inf


# ----------------------------------------------------------------------------------------------------------
# causal_mask
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        ((1,), [[T]]),
        ((3,), [[T, F_, F_], [T, T, F_], [T, T, T]]),
        ((3, 3), [[T, F_, F_], [T, T, F_], [T, T, T]]),
        ((2, 4), [[T, F_, F_, F_], [T, T, F_, F_]]),
        ((4, 2), [[T, F_], [T, T], [T, T], [T, T]]),
    ],
)
def test_causal_mask_hand_written(args, expected):
    m = causal_mask(*args)
    assert m.dtype == torch.bool
    assert torch.equal(m, torch.tensor(expected))


@pytest.mark.parametrize("q_len, k_len", [(1, 1), (5, None), (5, 5), (3, 7), (7, 3), (16, 16)])
def test_causal_mask_equals_ones_tril(q_len, k_len):
    expected = torch.ones(q_len, q_len if k_len is None else k_len, dtype=torch.bool).tril()
    assert torch.equal(causal_mask(q_len, k_len), expected)


def test_causal_mask_device_keyword():
    assert causal_mask(3, device="cpu").device.type == "cpu"


@pytest.mark.parametrize(
    "args, exc, match",
    [
        ((0,), ValueError, "q_len"),
        ((-2,), ValueError, "q_len"),
        ((3.0,), TypeError, "q_len"),
        (("3",), TypeError, "q_len"),
        ((True,), TypeError, "q_len"),
        ((None,), TypeError, "q_len"),
        ((3, 0), ValueError, "k_len"),
        ((3, -1), ValueError, "k_len"),
        ((3, 2.0), TypeError, "k_len"),
        ((3, False), TypeError, "k_len"),
    ],
)
def test_causal_mask_argument_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        causal_mask(*args)


# ----------------------------------------------------------------------------------------------------------
# padding_mask
# ----------------------------------------------------------------------------------------------------------

PAD_EXPECTED = torch.tensor(
    [
        [T, T, F_, F_],
        [F_, F_, F_, F_],
        [T, T, T, T],
        [T, F_, F_, F_],
    ]
)


@pytest.mark.parametrize(
    "lengths",
    [
        [2, 0, 4, 1],
        (2, 0, 4, 1),
        torch.tensor([2, 0, 4, 1]),
        torch.tensor([2, 0, 4, 1], dtype=torch.int32),
        torch.tensor([2, 0, 4, 1], dtype=torch.uint8),
    ],
    ids=["list", "tuple", "int64", "int32", "uint8"],
)
def test_padding_mask_hand_written(lengths):
    m = padding_mask(lengths)
    assert m.dtype == torch.bool
    assert torch.equal(m, PAD_EXPECTED)


def test_padding_mask_with_max_len():
    expected = torch.tensor([[T, T, F_, F_, F_, F_], [T, T, T, F_, F_, F_]])
    assert torch.equal(padding_mask([2, 3], max_len=6), expected)
    assert torch.equal(padding_mask(torch.tensor([2, 3]), max_len=6), expected)
    assert torch.equal(padding_mask([2, 3], max_len=3), expected[:, :3])


def test_padding_mask_edge_cases():
    assert padding_mask([0, 0]).shape == (2, 0)
    assert padding_mask([], max_len=3).shape == (0, 3)
    assert torch.equal(padding_mask([1]), torch.tensor([[T]]))
    assert torch.equal(padding_mask([0], max_len=2), torch.tensor([[F_, F_]]))


def test_padding_mask_broadcasts_to_attention_shape():
    m = padding_mask([3, 1])[:, None, None, :]
    assert m.shape == (2, 1, 1, 3)
    full = m.expand(2, 4, 5, 3)
    assert torch.equal(full[1, 2, 3], torch.tensor([T, F_, F_]))


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        (([2, -1],), {}, ValueError, "lengths"),
        ((torch.tensor([3, -2]),), {}, ValueError, "lengths"),
        (([2, 5],), {"max_len": 4}, ValueError, "max_len"),
        ((torch.tensor([2, 5]),), {"max_len": 3}, ValueError, "max_len"),
        (([2, 3],), {"max_len": -1}, ValueError, "max_len"),
        (([2, 3],), {"max_len": 4.0}, TypeError, "max_len"),
        (([2, 3],), {"max_len": "4"}, TypeError, "max_len"),
        (([2, 3],), {"max_len": True}, TypeError, "max_len"),
        ((torch.tensor([[2, 3]]),), {}, ValueError, "lengths"),
        ((torch.tensor(3),), {}, ValueError, "lengths"),
        ((torch.tensor([2.0, 3.0]),), {}, TypeError, "lengths"),
        ((torch.tensor([True, False]),), {}, TypeError, "lengths"),
        (([2.0, 3.0],), {}, TypeError, "lengths"),
        (([2, 3.5],), {}, TypeError, "lengths"),
        (([True, 2],), {}, TypeError, "lengths"),
        (("23",), {}, TypeError, "lengths"),
        ((3,), {}, TypeError, "lengths"),
        ((None,), {}, TypeError, "lengths"),
    ],
)
def test_padding_mask_argument_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        padding_mask(*args, **kwargs)


# ----------------------------------------------------------------------------------------------------------
# combine_masks
# ----------------------------------------------------------------------------------------------------------


def test_combine_causal_and_padding_broadcasts():
    causal = causal_mask(3)  # (3, 3)
    pad = padding_mask([3, 2])[:, None, None, :]  # (2, 1, 1, 3)
    out = combine_masks(causal, pad)
    assert out.shape == (2, 1, 3, 3)
    expected = torch.tensor(
        [
            [[[T, F_, F_], [T, T, F_], [T, T, T]]],
            [[[T, F_, F_], [T, T, F_], [T, T, F_]]],
        ]
    )
    assert torch.equal(out, expected)


def test_combine_masks_is_elementwise_and():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(2, 1, 4, 5, generator=g) < 0.5
    b = torch.rand(3, 1, 5, generator=g) < 0.5
    c = torch.rand(5, generator=g) < 0.7
    out = combine_masks(a, b, c)
    assert out.shape == (2, 3, 4, 5)
    for i in range(2):
        for j in range(3):
            for r in range(4):
                for s in range(5):
                    assert bool(out[i, j, r, s]) == (bool(a[i, 0, r, s]) and bool(b[j, 0, s]) and bool(c[s]))


def test_combine_masks_skips_none():
    a = causal_mask(4)
    assert torch.equal(combine_masks(None, a, None), a)
    b = padding_mask([4, 2])[:, None, :]
    assert torch.equal(combine_masks(a, None, b), combine_masks(a, b))


def test_combine_masks_all_none_gives_none():
    assert combine_masks() is None
    assert combine_masks(None) is None
    assert combine_masks(None, None, None) is None


def test_combine_masks_does_not_modify_inputs():
    a = causal_mask(3)
    b = torch.tensor([T, F_, T])
    a0, b0 = a.clone(), b.clone()
    combine_masks(a, b)
    assert torch.equal(a, a0) and torch.equal(b, b0)


@pytest.mark.parametrize(
    "masks, exc, match",
    [
        ((causal_mask(3), torch.ones(3)), TypeError, "masks"),
        ((causal_mask(3), torch.ones(3, dtype=torch.int64)), TypeError, "masks"),
        ((causal_mask(3), [[True]]), TypeError, "masks"),
        (("mask",), TypeError, "masks"),
        ((causal_mask(3), torch.ones(4, dtype=torch.bool)), ValueError, "broadcast"),
        ((causal_mask(2, 3), causal_mask(3, 2)), ValueError, "broadcast"),
    ],
)
def test_combine_masks_argument_errors(masks, exc, match):
    with pytest.raises(exc, match=match):
        combine_masks(*masks)


def test_combine_masks_error_names_the_right_argument():
    """The error must name the offending argument's position among *all* the arguments.

    (Currently fails: None entries are dropped before numbering, so the float mask passed second
    is reported as "masks[0]".)
    """
    with pytest.raises(TypeError, match=r"masks\[1\]"):
        combine_masks(None, torch.ones(3))


# ----------------------------------------------------------------------------------------------------------
# convert_mask
# ----------------------------------------------------------------------------------------------------------

SAMPLES = {
    "allow": torch.tensor([[T, F_, F_], [T, T, F_]]),
    "block": torch.tensor([[F_, T, T], [F_, F_, T]]),
    "additive": torch.tensor([[0.0, -INF, -INF], [0.0, 0.0, -INF]]),
}


def test_conventions_constant():
    assert set(CONVENTIONS) == {"allow", "block", "additive"}


@pytest.mark.parametrize("src", CONVENTIONS)
@pytest.mark.parametrize("dst", CONVENTIONS)
def test_convert_mask_all_pairs(src, dst):
    out = convert_mask(SAMPLES[src], src, dst)
    expected = SAMPLES[dst]
    assert out.dtype == expected.dtype
    assert torch.equal(out, expected)


@pytest.mark.parametrize("src", CONVENTIONS)
@pytest.mark.parametrize("dst", CONVENTIONS)
def test_convert_mask_round_trip(src, dst):
    g = torch.Generator().manual_seed(3)
    allow = torch.rand(2, 3, 4, 5, generator=g) < 0.5
    x = convert_mask(allow, "allow", src)
    back = convert_mask(convert_mask(x, src, dst), dst, src)
    assert back.dtype == x.dtype
    assert torch.equal(back, x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_convert_mask_additive_dtype(dtype):
    out = convert_mask(SAMPLES["allow"], "allow", "additive", dtype=dtype)
    assert out.dtype == dtype
    assert torch.equal(out, SAMPLES["additive"].to(dtype))


def test_additive_large_negative_values_read_as_blocked():
    additive = torch.tensor([[0.0, -1e9, -INF, -3.0e38], [-1.0, 5.0, -100.0, -1e5]])
    expected_allow = torch.tensor([[T, F_, F_, F_], [T, T, T, F_]])
    assert torch.equal(convert_mask(additive, "additive", "allow"), expected_allow)
    assert torch.equal(convert_mask(additive, "additive", "block"), ~expected_allow)
    half = torch.tensor([0.0, torch.finfo(torch.float16).min], dtype=torch.float16)
    assert torch.equal(convert_mask(half, "additive", "allow"), torch.tensor([T, F_]))
    # -1e9 becomes a true -inf in the additive result
    assert torch.equal(
        convert_mask(torch.tensor([0.0, -1e9]), "additive", "additive"), torch.tensor([0.0, -INF])
    )


def test_additive_minus_1e9_gives_same_attention_as_boolean():
    """An additive mask with -1e9 gives the same attention as the boolean mask convert_mask reads from it."""
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 2, 4, 5, generator=g, dtype=torch.float64) for _ in range(3))
    allow = causal_mask(4)
    additive = torch.zeros(4, 4, dtype=torch.float64).masked_fill(~allow, -1e9)
    read = convert_mask(additive, "additive", "allow")
    assert torch.equal(read, allow)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=additive),
        F.scaled_dot_product_attention(q, k, v, attn_mask=read),
        atol=1e-12,
        rtol=1e-12,
    )


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((SAMPLES["allow"], "allowed", "block"), {}, ValueError, "src"),
        ((SAMPLES["allow"], "allow", "Block"), {}, ValueError, "dst"),
        ((SAMPLES["allow"], "allow", None), {}, ValueError, "dst"),
        ((SAMPLES["allow"], "sdpa", "mha"), {}, ValueError, "src"),
        (([[True]], "allow", "block"), {}, TypeError, "mask"),
        ((SAMPLES["additive"], "allow", "block"), {}, TypeError, "allow"),
        ((SAMPLES["additive"], "block", "allow"), {}, TypeError, "block"),
        ((torch.ones(2, 2, dtype=torch.int64), "allow", "block"), {}, TypeError, "allow"),
        ((torch.ones(2, 2, dtype=torch.uint8), "block", "allow"), {}, TypeError, "block"),
        ((SAMPLES["allow"], "additive", "allow"), {}, TypeError, "additive"),
        ((torch.zeros(2, 2, dtype=torch.int64), "additive", "allow"), {}, TypeError, "additive"),
        ((SAMPLES["allow"], "allow", "additive"), {"dtype": torch.int64}, TypeError, "dtype"),
        ((SAMPLES["allow"], "allow", "additive"), {"dtype": torch.bool}, TypeError, "dtype"),
    ],
)
def test_convert_mask_argument_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        convert_mask(*args, **kwargs)


@pytest.mark.parametrize("dtype", ["float32", float, None])
def test_convert_mask_non_dtype_dtype_is_a_type_error(dtype):
    """`dtype` that is not a torch.dtype must raise TypeError naming `dtype`.

    (Currently fails: `dtype.is_floating_point` raises AttributeError for a str, a Python type or None.)
    """
    with pytest.raises(TypeError, match="dtype"):
        convert_mask(SAMPLES["allow"], "allow", "additive", dtype=dtype)


# ----------------------------------------------------------------------------------------------------------
# The conventions against torch: nn.MultiheadAttention takes "block" (or "additive") masks,
# F.scaled_dot_product_attention and ours take "allow" masks.
# ----------------------------------------------------------------------------------------------------------


def _mha_by_hand(mha: torch.nn.MultiheadAttention, x: torch.Tensor, allow: torch.Tensor):
    """The same computation as `mha(x, x, x)`, with our scaled_dot_product_attention and an allow-mask."""
    B, L, E = x.shape
    H = mha.num_heads
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)

    def heads(t):  # (B, L, E) -> (B, H, L, E/H)
        return t.view(B, L, H, E // H).transpose(1, 2)

    q, k, v = heads(x @ w_q.T + b_q), heads(x @ w_k.T + b_k), heads(x @ w_v.T + b_v)
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=allow)
    out = out.transpose(1, 2).reshape(B, L, E)
    return mha.out_proj(out), weights


@pytest.fixture
def mha_setup():
    torch.manual_seed(0)
    B, L, E, H = 3, 5, 8, 2
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64).eval()
    x = torch.randn(B, L, E, dtype=torch.float64)
    lengths = [5, 3, 1]  # every row keeps key 0, so no row is fully masked (MHA would give NaN there)
    return mha, x, lengths


@pytest.mark.parametrize("convention", ["block", "additive"])
def test_masks_converted_for_multihead_attention_match_allow_masks_to_ours(mha_setup, convention):
    """nn.MultiheadAttention takes "block" or "additive" masks; converted from ours they give our attention."""
    mha, x, lengths = mha_setup
    L = x.size(1)
    allow_causal, allow_pad = causal_mask(L), padding_mask(lengths)
    with torch.no_grad():
        ref_out, ref_w = mha(
            x, x, x,
            attn_mask=convert_mask(allow_causal, "allow", convention, dtype=torch.float64),
            key_padding_mask=convert_mask(allow_pad, "allow", convention, dtype=torch.float64),
            need_weights=True,
            average_attn_weights=False,
        )
        out, w = _mha_by_hand(mha, x, combine_masks(allow_causal, allow_pad[:, None, None, :]))
    torch.testing.assert_close(out, ref_out, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=1e-12)


def test_block_masks_given_directly_to_multihead_attention(mha_setup):
    """Hand-written "block" masks (True = may NOT attend) are what MultiheadAttention expects."""
    mha, x, lengths = mha_setup
    block_causal = torch.tensor(
        [[F_, T, T, T, T], [F_, F_, T, T, T], [F_, F_, F_, T, T], [F_, F_, F_, F_, T], [F_, F_, F_, F_, F_]]
    )
    block_pad = torch.tensor([[F_] * 5, [F_, F_, F_, T, T], [F_, T, T, T, T]])
    assert torch.equal(convert_mask(causal_mask(5), "allow", "block"), block_causal)
    assert torch.equal(convert_mask(padding_mask(lengths), "allow", "block"), block_pad)
    with torch.no_grad():
        ref_out, ref_w = mha(x, x, x, attn_mask=block_causal, key_padding_mask=block_pad, average_attn_weights=False)
        allow = combine_masks(
            convert_mask(block_causal, "block", "allow"), convert_mask(block_pad, "block", "allow")[:, None, None, :]
        )
        out, w = _mha_by_hand(mha, x, allow)
    torch.testing.assert_close(out, ref_out, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("src", CONVENTIONS)
def test_converted_masks_to_torch_sdpa(src):
    """Every convention, converted to "allow", gives torch's SDPA the attention its "allow" original gives."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 2, 4, 3, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 2, 6, 3, generator=g, dtype=torch.float64) for _ in range(2))
    allow = torch.rand(4, 6, generator=g) < 0.5
    allow[:, 0] = True
    mask = convert_mask(allow, "allow", src, dtype=torch.float64)
    as_allow = convert_mask(mask, src, "allow")
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=allow)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=as_allow), ref, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, attn_mask=as_allow)[0], ref, atol=1e-12, rtol=1e-12)
    if src == "additive":  # torch's SDPA adds float masks: the additive form itself works there too
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), ref, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("shapes", [
    [(2, 1, 3), (4, 1)], [(), (5,)], [(0,), (1,)], [(1, 0), (3, 1)], [(7,)], [], [(2, 3), (2, 3), (1, 3)],
    [(2, 3), (3, 2)], [(0,), (3,)], [(4, 1, 2), (3, 3)],
])
def test_broadcast_shapes_agrees_with_torch(shapes):
    """The package's plain-Python broadcast_shapes (no sympy import) gives torch.broadcast_shapes' shape, or
    ValueError where torch raises."""
    from attnbook._validate import broadcast_shapes
    try:
        expected = torch.broadcast_shapes(*shapes)
    except RuntimeError:
        with pytest.raises(ValueError, match="do not broadcast"):
            broadcast_shapes(*shapes)
    else:
        assert broadcast_shapes(*shapes) == expected
