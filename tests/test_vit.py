"""Tests of attnbook.models.vit against a ViT assembled from PyTorch's own layers, hand formulas and a tiny training run."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.models.vit import ViT, ViTConfig

TOL = dict(atol=1e-12, rtol=1e-10)
SMALL = dict(image_size=8, patch_size=2, in_channels=1, n_classes=10, d_model=16, n_layers=2, n_heads=4, d_ff=24)


def randn(*shape, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Give every parameter random values (LayerNorms start at 1 and 0, which would hide a swapped norm)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    return module


def small_vit(seed: int = 0, **overrides) -> ViT:
    torch.manual_seed(seed)
    return randomize_(ViT(ViTConfig(**{**SMALL, **overrides})).double(), seed).eval()


def torch_layer(block, n_heads: int) -> nn.TransformerEncoderLayer:
    """An nn.TransformerEncoderLayer (pre-norm, exact GELU) holding the weights of one of our EncoderBlocks."""
    d_model, d_ff = block.ffn.fc1.in_features, block.ffn.fc1.out_features
    layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True, dtype=torch.float64)
    a = block.self_attn
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
        layer.self_attn.in_proj_bias.copy_(torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
        layer.self_attn.out_proj.weight.copy_(a.out_proj.weight)
        layer.self_attn.out_proj.bias.copy_(a.out_proj.bias)
        for ours, theirs in ((block.ffn.fc1, layer.linear1), (block.ffn.fc2, layer.linear2),
                             (block.norm1, layer.norm1), (block.norm2, layer.norm2)):
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)
    return layer.eval()


def reference_tokens(model: ViT, images: torch.Tensor) -> torch.Tensor:
    """(B, 1 + N, D) before the first block, from F.unfold (patches) and the model's raw parameters."""
    c = model.config
    P, C, B = c.patch_size, c.in_channels, images.size(0)
    cols = F.unfold(images, kernel_size=P, stride=P)  # (B, C*P*P, N), columns ordered (channel, row, col)
    N = cols.size(-1)
    patches = cols.reshape(B, C, P * P, N).permute(0, 3, 2, 1).reshape(B, N, P * P * C)  # channels innermost
    x = patches @ model.patch_embed.proj.weight.T + model.patch_embed.proj.bias  # (B, N, D)
    cls = model.cls_token.expand(B, 1, c.d_model)  # (B, 1, D)
    return torch.cat([cls, x], dim=1) + model.pos_emb  # (B, 1 + N, D)


def reference_logits(model: ViT, images: torch.Tensor) -> torch.Tensor:
    """The ViT's logits computed with PyTorch's encoder layers, F.layer_norm and the head."""
    c = model.config
    x = reference_tokens(model, images)
    for block in model.blocks:
        x = torch_layer(block, c.n_heads)(x)
    x = F.layer_norm(x, (c.d_model,), model.norm.weight, model.norm.bias, eps=1e-5)
    return model.head(x[:, 0])


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def expected_n_params(c: ViTConfig) -> int:
    """Count by formula: patch projection, CLS, positions, blocks, final norm, head."""
    D, F_, K, P, C = c.d_model, c.d_ff, c.n_classes, c.patch_size, c.in_channels
    N = (c.image_size // P) ** 2
    patch = P * P * C * D + D
    cls_and_pos = D + (1 + N) * D
    attention = 4 * (D * D + D)  # q, k, v, out projections with biases
    ffn = D * F_ + F_ + F_ * D + D
    norms = 2 * 2 * D
    head = D * K + K if c.head == "linear" else (D * D + D) + (D * K + K)
    return patch + cls_and_pos + c.n_layers * (attention + ffn + norms) + 2 * D + head


# ----------------------------------------------------------------------------------------------------------
# shapes, parameters, equivalence with PyTorch's layers
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [{}, dict(patch_size=4), dict(image_size=12, patch_size=4, in_channels=3, n_classes=5, head="mlp"),
     dict(n_layers=1, n_heads=2, head="mlp")],
)
def test_output_shape_and_matches_torch_layers(overrides):
    model = small_vit(seed=1, **overrides)
    c = model.config
    x = randn(3, c.in_channels, c.image_size, c.image_size, seed=2)
    logits = model(x)
    assert logits.shape == (3, c.n_classes)
    torch.testing.assert_close(logits, reference_logits(model, x), **TOL)


@pytest.mark.parametrize(
    "config",
    [ViTConfig(), ViTConfig(**SMALL), ViTConfig(image_size=32, patch_size=4, in_channels=3, n_classes=100, d_model=48,
                                                n_layers=3, n_heads=6, d_ff=96, head="mlp")],
)
def test_parameter_count_matches_formula(config):
    assert n_params(ViT(config)) == expected_n_params(config)


def test_default_config_fits_the_digits():
    c = ViTConfig()
    assert (c.image_size, c.patch_size, c.in_channels, c.n_classes) == (8, 2, 1, 10)
    assert c.n_patches == 16
    assert ViT(c).pos_emb.shape == (1, 17, c.d_model) and ViT(c).cls_token.shape == (1, 1, c.d_model)


def test_mlp_head_is_linear_tanh_linear():
    model = ViT(ViTConfig(**SMALL, head="mlp"))
    layers = list(model.head)
    assert [type(m) for m in layers] == [nn.Linear, nn.Tanh, nn.Linear]
    assert (layers[0].in_features, layers[0].out_features, layers[2].out_features) == (16, 16, 10)
    assert isinstance(ViT(ViTConfig(**SMALL)).head, nn.Linear)


def test_positions_break_permutation_invariance():
    # Without position embeddings the CLS output cannot depend on the order of the patches; with them it does.
    model = small_vit(seed=3, patch_size=4)  # 2x2 grid: swapping the left and right halves permutes patches
    x = randn(2, 1, 8, 8, seed=4)
    swapped = torch.cat([x[..., 4:], x[..., :4]], dim=-1)
    assert not torch.allclose(model(x), model(swapped), atol=1e-6)
    with torch.no_grad():
        model.pos_emb.zero_()
    torch.testing.assert_close(model(x), model(swapped), **TOL)


# ----------------------------------------------------------------------------------------------------------
# attention maps
# ----------------------------------------------------------------------------------------------------------


def test_attention_weights_shapes_and_rows_sum_to_one():
    model = small_vit(seed=5)
    maps = model.attention_weights(randn(2, 1, 8, 8, seed=6))
    assert len(maps) == 2
    for w in maps:
        assert w.shape == (2, 4, 17, 17)
        assert (w >= 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 17, dtype=torch.float64), **TOL)


@pytest.mark.parametrize("layer", [-1, 0, 1])
def test_cls_attention_matches_hand_computed_softmax(layer):
    model = small_vit(seed=7)
    c = model.config
    x = randn(3, 1, 8, 8, seed=8)
    h_in = reference_tokens(model, x)
    index = layer % c.n_layers
    for block in model.blocks[:index]:
        h_in = torch_layer(block, c.n_heads)(h_in)  # the input of block `index`
    block = model.blocks[index]
    h = F.layer_norm(h_in, (c.d_model,), block.norm1.weight, block.norm1.bias, eps=1e-5)  # pre-norm
    d_head = c.d_model // c.n_heads
    a = block.self_attn
    q = (h[:, :1] @ a.q_proj.weight.T + a.q_proj.bias).reshape(3, 1, c.n_heads, d_head)  # CLS query only
    k = (h @ a.k_proj.weight.T + a.k_proj.bias).reshape(3, 17, c.n_heads, d_head)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d_head)  # (B, h, 1, 17)
    expected = torch.softmax(scores, dim=-1)[:, :, 0]  # (B, h, 17): CLS's row

    got = model.cls_attention(x, layer=layer)
    assert got.shape == (3, c.n_heads, c.n_patches)
    torch.testing.assert_close(got, expected[:, :, 1:], **TOL)  # the patches' columns
    # with the weight CLS puts on itself, every head's row sums to 1
    torch.testing.assert_close(got.sum(-1) + expected[:, :, 0], torch.ones(3, c.n_heads, dtype=torch.float64), **TOL)


def test_cls_attention_bad_layer():
    model = small_vit()
    x = randn(1, 1, 8, 8, seed=0)
    with pytest.raises(ValueError, match="layer=2"):
        model.cls_attention(x, layer=2)
    with pytest.raises(TypeError, match="layer"):
        model.cls_attention(x, layer=1.0)


# ----------------------------------------------------------------------------------------------------------
# heads: zero init and reset_head
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("head", ["linear", "mlp"])
def test_zero_head_init_gives_zero_logits(head):
    torch.manual_seed(0)
    model = ViT(ViTConfig(**SMALL, head=head, head_init="zero")).double().eval()
    logits = model(randn(4, 1, 8, 8, seed=9))
    assert torch.equal(logits, torch.zeros(4, 10, dtype=torch.float64))


def test_reset_head_zero_gives_uniform_predictions():
    model = small_vit(seed=10, head="mlp")
    x = randn(4, 1, 8, 8, seed=11)
    assert not torch.equal(model(x), torch.zeros(4, 10, dtype=torch.float64))
    new = model.reset_head(3, init="zero")
    assert model.head is new and isinstance(new, nn.Linear)
    assert (new.in_features, new.out_features) == (16, 3) and new.weight.dtype == torch.float64
    logits = model(x)
    assert torch.equal(logits, torch.zeros(4, 3, dtype=torch.float64))
    torch.testing.assert_close(torch.softmax(logits, -1), torch.full((4, 3), 1 / 3, dtype=torch.float64), **TOL)
    assert (model.config.n_classes, model.config.head, model.config.head_init) == (3, "linear", "zero")
    assert n_params(model) == expected_n_params(model.config)


def test_reset_head_random_is_not_zero_and_keeps_the_body():
    model = small_vit(seed=12)
    before = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("head")}
    model.reset_head(10, init="random")
    after = model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items())
    assert model.head.weight.abs().sum() > 0
    assert model(randn(2, 1, 8, 8, seed=13)).abs().sum() > 0


def test_reset_head_bad_arguments():
    model = small_vit()
    with pytest.raises(ValueError, match="init"):
        model.reset_head(3, init="ones")
    with pytest.raises(ValueError, match="n_classes"):
        model.reset_head(0)


# ----------------------------------------------------------------------------------------------------------
# configuration and input checks
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        (dict(image_size=9), ValueError, "patch_size=2"),
        (dict(d_model=18), ValueError, "n_heads=4"),
        (dict(head="conv"), ValueError, "head"),
        (dict(head_init="ones"), ValueError, "head_init"),
        (dict(dropout=1.0), ValueError, "dropout"),
        (dict(n_layers=0), ValueError, "n_layers"),
        (dict(d_model=16.0), TypeError, "d_model"),
    ],
)
def test_config_validation(overrides, error, match):
    with pytest.raises(error, match=match):
        ViTConfig(**{**SMALL, **overrides})


def test_bad_images_and_config_type():
    model = small_vit()
    with pytest.raises(ValueError, match="in_channels=1"):
        model(torch.zeros(2, 3, 8, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="image_size=8"):
        model(torch.zeros(2, 1, 6, 6, dtype=torch.float64))
    with pytest.raises(TypeError, match="images"):
        model(torch.zeros(2, 1, 8, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="config"):
        ViT(dict(SMALL))


# ----------------------------------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------------------------------


def test_short_training_run_on_digits_decreases_the_loss():
    datasets = pytest.importorskip("sklearn.datasets")
    digits = datasets.load_digits()
    x = torch.tensor(digits.images[:64], dtype=torch.float32)[:, None] / 16.0  # (64, 1, 8, 8)
    y = torch.tensor(digits.target[:64])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is as fast, and immune to other processes on the cores
    try:
        torch.manual_seed(0)
        model = ViT(ViTConfig(d_model=16, n_layers=1, n_heads=2, d_ff=32))
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        with torch.no_grad():
            first = F.cross_entropy(model(x), y).item()
        for _ in range(30):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            last = F.cross_entropy(model(x), y).item()
    finally:
        torch.set_num_threads(threads)
    assert model.cls_token.grad.abs().sum() > 0 and model.pos_emb.grad.abs().sum() > 0
    assert last < 0.6 * first, (first, last)  # starts near chance, ln 10 = 2.30
