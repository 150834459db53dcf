"""Tests of attnbook.flex against dense references written out by hand, transformers' ALiBi and SDPA."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from attnbook.flex import alibi, alibi_slopes, block_counts, document_mask, sliding_window


def dense(mask_mod, n):
    """The (n, n) boolean mask, one call of mask_mod per pair: the definition, pair by pair."""
    return torch.tensor([[bool(mask_mod(0, 0, torch.tensor(i), torch.tensor(j))) for j in range(n)]
                         for i in range(n)])


def test_sliding_window_by_hand():
    allowed = dense(sliding_window(3), 6)
    for i in range(6):
        assert [j for j in range(6) if allowed[i, j]] == [j for j in (i - 2, i - 1, i) if j >= 0]
    both_sides = dense(sliding_window(2, causal=False), 5)
    assert both_sides[2].tolist() == [False, True, True, True, False]


def test_document_mask_by_hand():
    ids = torch.tensor([0, 0, 0, 1, 1, 2])
    allowed = dense(document_mask(ids), 6)
    assert allowed[2].tolist() == [True, True, True, False, False, False]
    assert allowed[4].tolist() == [False, False, False, True, True, False]
    assert allowed[5].tolist() == [False] * 5 + [True]
    assert dense(document_mask(ids, causal=False), 6)[3].tolist() == [False, False, False, True, True, False]


def test_mask_mods_work_on_index_tensors_too():
    n, idx = 7, torch.arange(7)
    for mask_mod in (sliding_window(3), document_mask(torch.tensor([0, 0, 1, 1, 1, 2, 2]))):
        assert torch.equal(mask_mod(0, 0, idx[:, None], idx[None, :]), dense(mask_mod, n))


@pytest.mark.parametrize("n_heads", [1, 2, 6, 8, 12])
def test_alibi_slopes_equal_bloom(n_heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    bloom = build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32).view(n_heads, 2)  # (h, positions)
    torch.testing.assert_close(alibi_slopes(n_heads), bloom[:, 1])  # slope * position 1 (BLOOM rounds in float32)


def test_alibi_score_mod_by_hand():
    score_mod, slopes = alibi(4), alibi_slopes(4)
    assert slopes.tolist() == [0.25, 0.0625, 0.015625, 0.00390625]  # 2^-2, 2^-4, 2^-6, 2^-8
    got = score_mod(torch.tensor(1.0), 0, torch.tensor(1), torch.tensor(5), torch.tensor(2))
    assert got.item() == 1.0 - 0.0625 * 3  # query 5, key 2: three positions back


def test_flex_attention_equals_sdpa_with_the_dense_mask():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    n, h = 256, 2
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, n, 16, generator=g) for _ in range(3))  # (1, h, n, 16)
    idx = torch.arange(n)
    window = sliding_window(64)
    bias = alibi_slopes(h)[:, None, None] * (idx[None, None, :] - idx[None, :, None])  # (h, n, n)
    allowed = (idx[:, None] - idx[None, :] < 64) & (idx[None, :] <= idx[:, None])  # (n, n), by hand
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warning that eager flex_attention is not fused
        block_mask = create_block_mask(window, None, None, n, n, device="cpu")
        out = flex_attention(q, k, v, score_mod=alibi(h), block_mask=block_mask)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                         attn_mask=bias.double().masked_fill(~allowed, float("-inf")))
    assert (out.double() - ref).abs().max() < 1e-5
    computed, total = block_counts(block_mask)
    tiles = allowed.view(2, 128, 2, 128).any(dim=(1, 3))  # (2, 2): a tile is computed if any pair is allowed
    assert (computed, total) == (int(tiles.sum()), 4) == (3, 4)


@pytest.mark.parametrize("call, error, words", [
    (lambda: sliding_window(0), ValueError, "window"),
    (lambda: sliding_window(2.0), TypeError, "window"),
    (lambda: sliding_window(2, causal="yes"), TypeError, "causal"),
    (lambda: document_mask([0, 1]), TypeError, "document_ids"),
    (lambda: document_mask(torch.zeros(2, 2, dtype=torch.long)), TypeError, "1-D integer"),
    (lambda: document_mask(torch.zeros(3)), TypeError, "1-D integer"),
    (lambda: alibi_slopes(0), ValueError, "n_heads"),
    (lambda: alibi(True), TypeError, "n_heads"),
    (lambda: block_counts(torch.ones(2, 2)), TypeError, "BlockMask"),
])
def test_arguments_are_validated(call, error, words):
    with pytest.raises(error, match=words):
        call()
