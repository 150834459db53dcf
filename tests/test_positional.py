"""Tests of attnbook.positional against closed forms (math.sin/cos) and Hugging Face's LLaMA RoPE."""
from __future__ import annotations

import math

import pytest
import torch

from attnbook.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    apply_rope,
    halves_to_interleaved,
    interleaved_to_halves,
    rotate_half,
    shift_matrix,
    shift_operator,
    sinusoidal_permutation,
    sinusoidal_table,
)

F64 = torch.float64


def randn(*shape, seed: int, dtype=F64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def close(actual, expected, atol=1e-12, rtol=1e-12):
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)


# ----------------------------------------------------------------------------------------------------------
# Sinusoidal table
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_len, d_model, base", [(50, 16, 10000.0), (7, 2, 10000.0), (30, 10, 100.0)])
def test_sinusoidal_table_matches_closed_form_everywhere(max_len, d_model, base):
    pe = sinusoidal_table(max_len, d_model, base, dtype=F64)
    assert pe.shape == (max_len, d_model) and pe.dtype == F64
    expected = torch.empty(max_len, d_model, dtype=F64)
    for pos in range(max_len):
        for i in range(d_model // 2):
            angle = pos / base ** (2 * i / d_model)
            expected[pos, 2 * i] = math.sin(angle)
            expected[pos, 2 * i + 1] = math.cos(angle)
    close(pe, expected)


@pytest.mark.parametrize("pos, i", [(0, 0), (1, 0), (3, 2), (17, 5), (99, 255), (511, 100)])
def test_sinusoidal_table_at_chosen_entries(pos, i):
    pe = sinusoidal_table(512, 512, dtype=F64)
    close(pe[pos, 2 * i], torch.tensor(math.sin(pos / 10000 ** (2 * i / 512)), dtype=F64))
    close(pe[pos, 2 * i + 1], torch.tensor(math.cos(pos / 10000 ** (2 * i / 512)), dtype=F64))


def test_sinusoidal_table_default_dtype_is_float32_and_close():
    pe = sinusoidal_table(20, 8)
    assert pe.dtype == torch.float32
    close(pe, sinusoidal_table(20, 8, dtype=F64).float(), atol=1e-7, rtol=0)


def test_sinusoidal_table_position_zero_is_sin0_cos1():
    pe = sinusoidal_table(3, 6, dtype=F64)
    close(pe[0], torch.tensor([0.0, 1.0] * 3, dtype=F64))


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((10, 7), {}, ValueError, "d_model=7 must be even"),
        ((10, 0), {}, ValueError, "d_model"),
        ((0, 8), {}, ValueError, "max_len"),
        ((10.0, 8), {}, TypeError, "max_len"),
        ((10, 8, -1.0), {}, ValueError, "base"),
        ((10, 8), {"dtype": torch.int64}, TypeError, "dtype"),
    ],
)
def test_sinusoidal_table_rejects_bad_arguments(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        sinusoidal_table(*args, **kwargs)


# ----------------------------------------------------------------------------------------------------------
# Layouts: interleaved vs concatenated halves
# ----------------------------------------------------------------------------------------------------------


def halves_table_reference(max_len, d_model, base=10000.0):
    """The concatenated-halves layout, written independently: all sines then all cosines, same frequencies."""
    out = torch.empty(max_len, d_model, dtype=F64)
    half = d_model // 2
    for pos in range(max_len):
        for i in range(half):
            angle = pos / base ** (2 * i / d_model)
            out[pos, i] = math.sin(angle)
            out[pos, half + i] = math.cos(angle)
    return out


@pytest.mark.parametrize("d_model", [2, 8, 14])
def test_halves_layout_is_a_permutation_of_interleaved(d_model):
    inter = sinusoidal_table(40, d_model, dtype=F64)
    halves = halves_table_reference(40, d_model)
    perm = sinusoidal_permutation(d_model)
    assert sorted(perm.tolist()) == list(range(d_model))
    close(inter[:, perm], halves)
    close(interleaved_to_halves(inter), halves)
    close(halves_to_interleaved(halves), inter)


def test_layout_conversions_are_inverse_on_random_data():
    x = randn(3, 5, 12, seed=0)
    close(halves_to_interleaved(interleaved_to_halves(x)), x)
    close(interleaved_to_halves(halves_to_interleaved(x)), x)
    assert not torch.equal(interleaved_to_halves(x), x)


def test_layout_helpers_reject_odd_width():
    with pytest.raises(ValueError, match="d_model=5"):
        sinusoidal_permutation(5)
    with pytest.raises(ValueError, match="pe.size"):
        interleaved_to_halves(torch.zeros(2, 5))
    with pytest.raises(TypeError, match="pe"):
        halves_to_interleaved([1.0, 2.0])


# ----------------------------------------------------------------------------------------------------------
# Shifts are rotations
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("omega", [1.0, 0.3, 1e-3, 2.5])
@pytest.mark.parametrize("k", [0, 1, 5, -3, 40])
def test_shift_matrix_moves_a_pair_by_k(omega, k):
    R = shift_matrix(k, omega, dtype=F64)
    assert R.shape == (2, 2)
    for p in (0, 1, 7, 123):
        v = torch.tensor([math.sin(omega * p), math.cos(omega * p)], dtype=F64)
        w = torch.tensor([math.sin(omega * (p + k)), math.cos(omega * (p + k))], dtype=F64)
        close(R @ v, w)


def test_shift_matrix_is_a_rotation():
    R = shift_matrix(3, 0.7, dtype=F64)
    close(R @ R.T, torch.eye(2, dtype=F64))
    close(torch.linalg.det(R), torch.tensor(1.0, dtype=F64))
    close(shift_matrix(2, 0.7, dtype=F64) @ shift_matrix(1, 0.7, dtype=F64), R)


@pytest.mark.parametrize("d_model, base", [(16, 10000.0), (6, 50.0)])
def test_shift_operator_maps_pe_pos_to_pe_pos_plus_k(d_model, base):
    pe = sinusoidal_table(200, d_model, base, dtype=F64)
    for k in (0, 1, 2, 7, 31, 99):
        R = shift_operator(k, d_model, base, dtype=F64)
        assert R.shape == (d_model, d_model)
        for pos in (0, 1, 5, 50, 100):
            close(R @ pe[pos], pe[pos + k])  # column-vector form
        close(pe[: 200 - k] @ R.T, pe[k:])  # every row at once


def test_shift_operator_is_orthogonal_and_block_diagonal():
    R = shift_operator(5, 8, dtype=F64)
    close(R @ R.T, torch.eye(8, dtype=F64))
    off_block = R.clone()
    for i in range(4):
        off_block[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = 0
    assert torch.count_nonzero(off_block) == 0


def test_shift_helpers_reject_bad_arguments():
    with pytest.raises(TypeError, match="k"):
        shift_matrix("1", 0.5)
    with pytest.raises(TypeError, match="omega"):
        shift_matrix(1, None)
    with pytest.raises(ValueError, match="omega"):
        shift_matrix(1, float("nan"))
    with pytest.raises(ValueError, match="d_model=3"):
        shift_operator(1, 3)
    with pytest.raises(TypeError, match="k"):
        shift_operator(torch.tensor(1), 4)


# ----------------------------------------------------------------------------------------------------------
# Modules
# ----------------------------------------------------------------------------------------------------------


def test_sinusoidal_module_adds_the_table():
    module = SinusoidalPositionalEncoding(8, max_len=32)
    x = randn(2, 5, 8, seed=1)
    close(module(x), x + sinusoidal_table(32, 8, dtype=F64)[:5])
    close(module(x, offset=3), x + sinusoidal_table(32, 8, dtype=F64)[3:8])
    assert module.pe.shape == (32, 8)
    assert "pe" not in module.state_dict()  # fixed function of the arguments, not state
    assert list(module.parameters()) == []


def test_sinusoidal_module_float32_input_keeps_dtype():
    module = SinusoidalPositionalEncoding(4, max_len=10)
    x = torch.zeros(1, 3, 4)
    y = module(x)
    assert y.dtype == torch.float32
    close(y[0], sinusoidal_table(3, 4), atol=1e-7, rtol=0)


def test_sinusoidal_module_dropout_only_in_training():
    module = SinusoidalPositionalEncoding(16, max_len=10, dropout=0.5)
    x = torch.ones(4, 10, 16, dtype=F64)
    module.eval()
    close(module(x), x + sinusoidal_table(10, 16, dtype=F64))
    module.train()
    torch.manual_seed(0)
    y = module(x)
    assert (y == 0).any()


def test_sinusoidal_module_rejects_too_long_and_bad_arguments():
    module = SinusoidalPositionalEncoding(4, max_len=6)
    with pytest.raises(ValueError, match="max_len=6"):
        module(torch.zeros(1, 7, 4))
    with pytest.raises(ValueError, match="max_len=6"):
        module(torch.zeros(1, 4, 4), offset=3)
    with pytest.raises(ValueError, match="d_model=4"):
        module(torch.zeros(1, 3, 5))
    with pytest.raises(ValueError, match="dropout"):
        SinusoidalPositionalEncoding(4, dropout=1.0)
    with pytest.raises(ValueError, match="d_model=5"):
        SinusoidalPositionalEncoding(5)
    with pytest.raises(TypeError, match="x"):
        module(torch.zeros(1, 3, 4, dtype=torch.long))


def test_learned_embedding_adds_its_rows():
    torch.manual_seed(0)
    module = LearnedPositionalEmbedding(10, 6).double()
    assert module.weight.shape == (10, 6) and module.weight.requires_grad
    assert isinstance(module.embedding, torch.nn.Embedding)
    x = randn(3, 4, 6, seed=2)
    close(module(x), x + module.embedding(torch.arange(4)))
    close(module(x, offset=6), x + module.weight[6:10])
    assert sum(p.numel() for p in module.parameters()) == 60


def test_learned_embedding_too_long_names_max_len():
    module = LearnedPositionalEmbedding(512, 8)
    with pytest.raises(ValueError, match=r"sequence length 600 exceeds max_len=512: a learned table has no row for position 512"):
        module(torch.zeros(1, 600, 8))
    with pytest.raises(ValueError, match="max_len=512"):
        module(torch.zeros(1, 10, 8), offset=505)
    module(torch.zeros(1, 512, 8))  # exactly max_len is fine


def test_learned_embedding_rejects_bad_arguments():
    with pytest.raises(ValueError, match="max_len"):
        LearnedPositionalEmbedding(0, 4)
    with pytest.raises(TypeError, match="d_model"):
        LearnedPositionalEmbedding(4, 2.0)
    with pytest.raises(ValueError, match="d_model=4"):
        LearnedPositionalEmbedding(8, 4)(torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="offset"):
        LearnedPositionalEmbedding(8, 4)(torch.zeros(2, 3, 4), offset=-1)


# ----------------------------------------------------------------------------------------------------------
# RoPE
# ----------------------------------------------------------------------------------------------------------

llama = pytest.importorskip("transformers.models.llama.modeling_llama")


def hf_cos_sin(positions, d_head, base=10000.0):
    """cos/sin exactly as LlamaRotaryEmbedding builds them, but in float64."""
    inv_freq = 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=F64) / d_head))
    freqs = positions[..., None].to(F64) * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def test_rotate_half_matches_hugging_face():
    x = randn(2, 3, 5, 8, seed=3)
    close(rotate_half(x), llama.rotate_half(x))


@pytest.mark.parametrize("batch, heads, seq, d_head, base", [(2, 3, 7, 8, 10000.0), (1, 1, 1, 2, 10000.0), (3, 2, 16, 32, 500.0)])
def test_apply_rope_matches_hugging_face(batch, heads, seq, d_head, base):
    q = randn(batch, heads, seq, d_head, seed=4)
    k = randn(batch, heads, seq, d_head, seed=5)
    position_ids = torch.arange(seq).expand(batch, seq)  # (B, seq), as Hugging Face passes them
    cos, sin = hf_cos_sin(position_ids, d_head, base)
    q_hf, k_hf = llama.apply_rotary_pos_emb(q, k, cos, sin)  # unsqueezes dim 1 for the heads
    close(apply_rope(q, base=base), q_hf)
    close(apply_rope(k, base=base), k_hf)


def test_apply_rope_with_per_sequence_positions_matches_hugging_face():
    q = randn(2, 4, 5, 8, seed=6)
    position_ids = torch.tensor([[3, 4, 5, 6, 7], [0, 2, 4, 6, 8]])  # (B, seq)
    cos, sin = hf_cos_sin(position_ids, 8)
    q_hf, _ = llama.apply_rotary_pos_emb(q, q, cos, sin)
    close(apply_rope(q, position_ids[:, None, :]), q_hf)  # (B, 1, seq) broadcasts over heads


def test_apply_rope_matches_llama_rotary_embedding_module():
    """Against LlamaRotaryEmbedding itself (it computes in float32, so float32 tolerance)."""
    config = llama.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=64)
    rotary = llama.LlamaRotaryEmbedding(config)
    q = randn(2, 4, 10, 16, seed=7, dtype=torch.float32)
    position_ids = torch.arange(10)[None].expand(2, 10)
    cos, sin = rotary(q, position_ids)
    q_hf, _ = llama.apply_rotary_pos_emb(q, q, cos, sin)
    torch.testing.assert_close(apply_rope(q), q_hf, atol=1e-5, rtol=1e-5)


def test_apply_rope_matches_complex_rotation():
    """Independent formulation: pair (i, i + d/2) as the complex number x_i + i x_{i+d/2}, times e^{i m theta_i}."""
    d, seq = 12, 9
    x = randn(seq, d, seed=8)
    theta = torch.tensor([10000.0 ** (-2 * i / d) for i in range(d // 2)], dtype=F64)
    z = torch.complex(x[:, : d // 2], x[:, d // 2 :])
    m = torch.arange(seq, dtype=F64)[:, None]
    rotated = z * torch.polar(torch.ones_like(m * theta), m * theta)
    close(apply_rope(x), torch.cat((rotated.real, rotated.imag), dim=-1))


def test_apply_rope_position_zero_is_identity_and_norms_are_preserved():
    x = randn(3, 20, 16, seed=9)
    y = apply_rope(x)
    close(y[:, 0], x[:, 0])
    close(y.norm(dim=-1), x.norm(dim=-1))
    assert not torch.allclose(y[:, 1:], x[:, 1:])


def test_rope_scores_depend_only_on_relative_position():
    d = 16
    q = randn(d, seed=10)
    k = randn(d, seed=11)
    n = 40
    qs = apply_rope(q.expand(n, d).clone())  # row m is q rotated to position m
    ks = apply_rope(k.expand(n, d).clone())
    scores = qs @ ks.T  # (n, n): entry (m, j) = <R_m q, R_j k>
    for offset in range(-n + 1, n):
        diagonal = torch.diagonal(scores, offset=-offset)  # all (m, j) with m - j = offset
        close(diagonal, diagonal[0].expand_as(diagonal), atol=1e-10, rtol=0)
    # and it does depend on the offset
    assert not torch.allclose(torch.diagonal(scores, 0)[0], torch.diagonal(scores, -3)[0])


def test_rope_relative_property_with_explicit_positions():
    d = 8
    q, k = randn(d, seed=12), randn(d, seed=13)
    g = torch.Generator().manual_seed(14)
    for _ in range(50):
        m, j, shift = torch.randint(0, 500, (3,), generator=g).tolist()
        a = apply_rope(q[None], torch.tensor([m])) @ apply_rope(k[None], torch.tensor([j])).T
        b = apply_rope(q[None], torch.tensor([m + shift])) @ apply_rope(k[None], torch.tensor([j + shift])).T
        close(a, b, atol=1e-9, rtol=1e-9)


def test_apply_rope_keeps_dtype_and_accepts_3d():
    x = randn(2, 5, 4, seed=15, dtype=torch.float32)
    assert apply_rope(x).dtype == torch.float32
    close(apply_rope(x.double()), apply_rope(x).double(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "x, positions, exc, match",
    [
        (torch.zeros(2, 5, 7), None, ValueError, "d_head"),
        (torch.zeros(2, 5, 8, dtype=torch.long), None, TypeError, "x"),
        (torch.zeros(8), None, ValueError, "x"),
        (torch.zeros(2, 5, 8), torch.arange(4), ValueError, "positions"),
        (torch.zeros(2, 5, 8), torch.zeros(3, 5, dtype=torch.long), ValueError, "positions"),
        (torch.zeros(2, 5, 8), torch.ones(5, dtype=torch.bool), TypeError, "positions"),
        (torch.zeros(2, 5, 8), [0, 1, 2, 3, 4], TypeError, "positions"),
    ],
)
def test_apply_rope_rejects_bad_arguments(x, positions, exc, match):
    with pytest.raises(exc, match=match):
        apply_rope(x, positions)


def test_apply_rope_rejects_bad_base_and_rotate_half_odd():
    with pytest.raises(ValueError, match="base"):
        apply_rope(torch.zeros(3, 4), base=0.0)
    with pytest.raises(ValueError, match="x.size"):
        rotate_half(torch.zeros(3, 5))
