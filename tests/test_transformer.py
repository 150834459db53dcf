"""Tests of attnbook.models.transformer: the encoder-decoder against nn.Transformer with copied weights (float64),
causality and padding by perturbation, greedy decoding against an argmax loop written here, the cross-attention
weights against nn.MultiheadAttention's, and argument errors that name the argument.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attnbook.layers import DecoderBlock, EncoderBlock
from attnbook.masks import causal_mask, padding_mask
from attnbook.models import Decoder, Encoder, EncoderDecoder, Transformer, TransformerConfig, greedy_decode
from attnbook.positional import sinusoidal_table

pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # nn.Transformer with norm_first

TOL = dict(atol=1e-10, rtol=1e-10)
V_SRC, V_TGT, D, H, FF = 11, 13, 16, 4, 24
PAD, BOS, EOS = 0, 1, 2


from hf_float64 import randomize_  # noqa: E402  (random values in every parameter: default inits hide bugs)


def small_config(**kwargs) -> TransformerConfig:
    base = dict(src_vocab_size=V_SRC, tgt_vocab_size=V_TGT, d_model=D, n_heads=H, d_ff=FF, n_encoder_layers=2,
                n_decoder_layers=2, max_len=20)
    return TransformerConfig(**{**base, **kwargs})


def small_model(seed: int = 0, **kwargs) -> Transformer:
    torch.manual_seed(seed)
    return randomize_(Transformer(small_config(**kwargs)).double(), seed + 1).eval()


def ids(B, n, vocab, seed, low=3):
    """Token ids in [low, vocab) (no PAD/BOS/EOS unless low says so)."""
    return torch.randint(low, vocab, (B, n), generator=torch.Generator().manual_seed(seed))


def pad_after(x: torch.Tensor, lengths) -> torch.Tensor:
    """x with PAD at positions >= lengths[b] of row b."""
    keep = padding_mask(torch.tensor(lengths), x.size(1))  # (B, n)
    return x.masked_fill(~keep, PAD)


# ----------------------------------------------------------------------------------------------------------
# Shapes and structure
# ----------------------------------------------------------------------------------------------------------


def test_shapes_and_default_config():
    c = TransformerConfig(13, 13)
    assert (c.d_model, c.n_heads, c.d_ff, c.n_encoder_layers, c.n_decoder_layers, c.max_len) == (64, 4, 128, 2, 2, 64)
    assert c.norm_first and c.pad_id == 0 and c.dropout == 0.0 and c.activation == "relu"
    model = small_model()
    src, tgt_in = ids(3, 7, V_SRC, seed=1), ids(3, 5, V_TGT, seed=2)
    memory = model.encode(src)
    assert memory.shape == (3, 7, D)
    assert model.decode(tgt_in, memory, model.make_src_mask(src)).shape == (3, 5, V_TGT)
    assert model(src, tgt_in).shape == (3, 5, V_TGT)
    assert model(src[:1, :1], tgt_in[:1, :1]).shape == (1, 1, V_TGT)  # batch 1, one position each
    assert EncoderDecoder is Transformer
    assert isinstance(model.encoder, Encoder) and isinstance(model.decoder, Decoder)
    assert len(model.encoder.blocks) == 2 and len(model.decoder.blocks) == 2


def test_parameter_count_equals_nn_transformer_plus_embeddings_and_head():
    """Our blocks hold the same parameters as PyTorch's layers; add two embeddings and the output Linear."""
    model = Transformer(small_config())
    ref = nn.Transformer(D, H, 2, 2, FF, batch_first=True, norm_first=True)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(model) == n(ref) + V_SRC * D + V_TGT * D + (D * V_TGT + V_TGT)
    post = Transformer(small_config(norm_first=False))  # no final LayerNorms (nn.Transformer always has two)
    assert n(post) == n(model) - 2 * 2 * D


def test_tied_output_projection_shares_the_target_embedding():
    model = Transformer(small_config(tie_weights=True))
    assert model.lm_head.weight is model.decoder.embed.tok.weight
    untied = Transformer(small_config())
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(untied) - count(model) == V_TGT * D


def test_embedding_is_scaled_by_sqrt_d_model_and_adds_sinusoidal_positions():
    model = small_model()
    src = ids(2, 6, V_SRC, seed=3)
    by_hand = model.encoder.embed.tok.weight[src] * math.sqrt(D) + sinusoidal_table(6, D, dtype=torch.float64)
    torch.testing.assert_close(model.encoder.embed(src), by_hand, **TOL)


# ----------------------------------------------------------------------------------------------------------
# Equivalence with nn.Transformer (weights copied through the blocks' from_torch)
# ----------------------------------------------------------------------------------------------------------


def torch_transformer(norm_first: bool, activation: str, seed: int) -> nn.Transformer:
    torch.manual_seed(seed)
    ref = nn.Transformer(D, H, 2, 3, FF, dropout=0.1, activation=activation, batch_first=True,
                         norm_first=norm_first)
    return randomize_(ref.double(), seed).eval()


def ours_from(ref: nn.Transformer, norm_first: bool, activation: str) -> Transformer:
    model = Transformer(small_config(n_decoder_layers=3, norm_first=norm_first, activation=activation,
                                     dropout=0.1)).double()
    randomize_(model, seed=7)  # embeddings and head: random, shared with the reference below
    model.encoder.blocks = nn.ModuleList(EncoderBlock.from_torch(layer) for layer in ref.encoder.layers)
    model.decoder.blocks = nn.ModuleList(DecoderBlock.from_torch(layer) for layer in ref.decoder.layers)
    if norm_first:
        for ours, theirs in ((model.encoder.norm, ref.encoder.norm), (model.decoder.norm, ref.decoder.norm)):
            with torch.no_grad():
                ours.weight.copy_(theirs.weight)
                ours.bias.copy_(theirs.bias)
    return model.eval()


def embed_by_hand(weight: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return weight[tokens] * math.sqrt(D) + sinusoidal_table(tokens.size(1), D, dtype=torch.float64)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_pre_norm_model_equals_nn_transformer_with_copied_weights(activation):
    """The whole pre-norm model (final LayerNorms included) = nn.Transformer(norm_first=True) between our
    embeddings (computed by hand here) and our output Linear, with source padding and a padded target."""
    ref = torch_transformer(True, activation, seed=4)
    model = ours_from(ref, True, activation)
    src = pad_after(ids(3, 7, V_SRC, seed=5), [7, 4, 2])
    tgt_in = pad_after(ids(3, 6, V_TGT, seed=6), [6, 6, 3])
    tgt_in[:, 0] = BOS
    src_pad, tgt_pad = src == PAD, tgt_in == PAD  # nn.Transformer's convention: True = padding (blocked)
    src_emb = embed_by_hand(model.encoder.embed.tok.weight, src)
    tgt_emb = embed_by_hand(model.decoder.embed.tok.weight, tgt_in)
    hidden = ref(src_emb, tgt_emb, tgt_mask=~causal_mask(6), src_key_padding_mask=src_pad,
                 tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
    expected = hidden @ model.lm_head.weight.T + model.lm_head.bias
    torch.testing.assert_close(model(src, tgt_in), expected, **TOL)


def test_post_norm_stacks_equal_nn_transformer_encoder_and_decoder():
    """Post-norm: nn.Transformer always appends a final LayerNorm, so compare the stacks without it:
    nn.TransformerEncoder / nn.TransformerDecoder (norm=None) with causal + memory padding masks."""
    ref = torch_transformer(False, "relu", seed=8)
    model = ours_from(ref, False, "relu")
    assert model.encoder.norm is None and model.decoder.norm is None
    src = pad_after(ids(2, 5, V_SRC, seed=9), [5, 3])
    tgt_in = ids(2, 4, V_TGT, seed=10)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, FF, batch_first=True), 2, enable_nested_tensor=False)
    enc.layers = ref.encoder.layers
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, FF, batch_first=True), 3)
    dec.layers = ref.decoder.layers
    src_pad = src == PAD
    memory = enc(embed_by_hand(model.encoder.embed.tok.weight, src), src_key_padding_mask=src_pad)
    hidden = dec(embed_by_hand(model.decoder.embed.tok.weight, tgt_in), memory, tgt_mask=~causal_mask(4),
                 memory_key_padding_mask=src_pad)
    torch.testing.assert_close(model.encode(src), memory, **TOL)
    torch.testing.assert_close(model(src, tgt_in), model.lm_head(hidden), **TOL)


def test_cross_attention_weights_equal_nn_multihead_attention_weights():
    """The last decoder layer's cross-attention weights, per head, against nn.MultiheadAttention's own
    weights, for the queries and memory that nn.TransformerDecoderLayer hands to it."""
    ref = torch_transformer(True, "relu", seed=11)
    model = ours_from(ref, True, "relu")
    src = pad_after(ids(2, 6, V_SRC, seed=12), [6, 3])
    tgt_in = ids(2, 5, V_TGT, seed=13)
    seen = {}
    hook = ref.decoder.layers[-1].multihead_attn.register_forward_hook(
        lambda m, args, out: seen.update(args=args), with_kwargs=False)
    src_pad = src == PAD
    with torch.no_grad():
        ref(embed_by_hand(model.encoder.embed.tok.weight, src), embed_by_hand(model.decoder.embed.tok.weight, tgt_in),
            tgt_mask=~causal_mask(5), src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
    hook.remove()
    query, key, value = seen["args"][:3]
    _, expected = ref.decoder.layers[-1].multihead_attn(query, key, value, key_padding_mask=src_pad,
                                                        need_weights=True, average_attn_weights=False)
    got = model.cross_attention_weights(src, tgt_in)
    assert got.shape == (2, H, 5, 6)
    torch.testing.assert_close(got, expected, **TOL)
    assert (got[1, :, :, 3:] == 0).all()  # source padding gets no weight
    torch.testing.assert_close(got.sum(-1), torch.ones(2, H, 5, dtype=torch.float64), **TOL)
    first = model.cross_attention_weights(src, tgt_in, layer=0)
    assert first.shape == (2, H, 5, 6) and not torch.allclose(first, got)


def test_cross_attention_weights_restore_training_mode_and_leave_no_hooks():
    model = small_model(dropout=0.2).train()
    model.cross_attention_weights(ids(1, 4, V_SRC, seed=14), ids(1, 3, V_TGT, seed=15))
    assert model.training
    attn = model.decoder.blocks[-1].cross_attn
    assert not attn._forward_hooks and not attn._forward_pre_hooks


# ----------------------------------------------------------------------------------------------------------
# Masking by perturbation
# ----------------------------------------------------------------------------------------------------------


def test_position_t_does_not_depend_on_later_target_tokens():
    model = small_model(seed=16)
    src, tgt_in = ids(2, 6, V_SRC, seed=17), ids(2, 7, V_TGT, seed=18)
    logits = model(src, tgt_in)
    for t in range(6):
        changed = tgt_in.clone()
        changed[:, t + 1:] = ids(2, 6 - t, V_TGT, seed=100 + t)
        assert not torch.equal(changed, tgt_in)
        after = model(src, changed)
        torch.testing.assert_close(after[:, : t + 1], logits[:, : t + 1], **TOL)
        assert not torch.allclose(after[:, t + 1:], logits[:, t + 1:])  # later positions do see it


def test_without_the_causal_mask_position_t_would_see_the_future():
    """The same decoder with a mask that allows everything: the perturbation test above then fails."""
    model = small_model(seed=19)
    src, tgt_in = ids(2, 6, V_SRC, seed=20), ids(2, 5, V_TGT, seed=21)
    memory = model.encode(src)
    everything = torch.ones(5, 5, dtype=torch.bool)
    changed = tgt_in.clone()
    changed[:, -1] = (changed[:, -1] + 1 - 3) % (V_TGT - 3) + 3
    h1 = model.decoder(tgt_in, memory, everything)
    h2 = model.decoder(changed, memory, everything)
    assert not torch.allclose(h1[:, 0], h2[:, 0])


def test_source_padding_does_not_change_outputs():
    """Padding a source with extra PAD tokens, whatever the PAD's embedding, leaves every logit unchanged."""
    model = small_model(seed=22)
    with torch.no_grad():
        model.encoder.embed.tok.weight[PAD] += 5.0  # a PAD that leaked into attention would move the outputs
    src = pad_after(ids(3, 5, V_SRC, seed=23), [5, 2, 4])
    tgt_in = ids(3, 4, V_TGT, seed=24)
    longer = torch.cat([src, torch.full((3, 3), PAD)], dim=1)  # (3, 8): three more PAD columns
    torch.testing.assert_close(model(longer, tgt_in), model(src, tgt_in), **TOL)
    memory, longer_memory = model.encode(src), model.encode(longer)
    torch.testing.assert_close(longer_memory[1, :2], memory[1, :2], **TOL)  # the real source tokens' states
    # and the mask is what does it: without it, the padding changes the outputs
    unmasked = model.decode(tgt_in, model.encoder(longer), None)
    assert not torch.allclose(unmasked, model(src, tgt_in))


def test_target_padding_does_not_change_real_positions():
    model = small_model(seed=25)
    src = ids(2, 5, V_SRC, seed=26)
    tgt_in = ids(2, 6, V_TGT, seed=27)
    padded = pad_after(tgt_in, [6, 3])
    torch.testing.assert_close(model(src, padded)[1, :3], model(src, tgt_in)[1, :3], **TOL)


def test_masks_have_the_documented_shapes_and_values():
    model = small_model()
    src = pad_after(ids(2, 4, V_SRC, seed=28), [4, 2])
    src_mask = model.make_src_mask(src)
    assert src_mask.shape == (2, 1, 1, 4) and src_mask.dtype == torch.bool
    assert src_mask[1, 0, 0].tolist() == [True, True, False, False]
    tgt = pad_after(ids(2, 3, V_TGT, seed=29), [3, 2])
    tgt_mask = model.make_tgt_mask(tgt)
    assert tgt_mask.shape == (2, 1, 3, 3)
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 0]], dtype=torch.bool)  # row 2: key 2 is padding
    assert torch.equal(tgt_mask[1, 0], expected)
    assert torch.equal(tgt_mask[0, 0], torch.ones(3, 3, dtype=torch.bool).tril())
    no_pad = Transformer(small_config(pad_id=None))
    assert no_pad.make_src_mask(src) is None
    assert no_pad.make_tgt_mask(tgt).shape == (1, 1, 3, 3)


# ----------------------------------------------------------------------------------------------------------
# Greedy decoding
# ----------------------------------------------------------------------------------------------------------


def reference_greedy(model, src, max_len):
    """One row at a time, the whole model rerun at every step, argmax of the last position's logits; stop
    at EOS. Rows are then padded with PAD to a common length."""
    rows = []
    for b in range(src.size(0)):
        ys = [BOS]
        while len(ys) < max_len:
            logits = model(src[b : b + 1], torch.tensor([ys]))  # (1, len(ys), V)
            ys.append(int(logits[0, -1].argmax()))
            if ys[-1] == EOS:
                break
        rows.append(ys)
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


def eos_prone_model(seed: int, eos_boost: float) -> Transformer:
    """A random model whose EOS logit gets a bias, so that rows end at different steps."""
    model = small_model(seed=seed)
    with torch.no_grad():
        model.lm_head.bias[EOS] += eos_boost
    return model


@pytest.mark.parametrize("seed, boost", [(30, 0.0), (31, 1.0), (32, 2.0), (33, 50.0)])
def test_greedy_decode_equals_step_by_step_argmax(seed, boost):
    model = eos_prone_model(seed, boost)
    src = pad_after(ids(4, 6, V_SRC, seed=seed), [6, 3, 5, 1])
    got = greedy_decode(model, src, 10, BOS, EOS)
    expected = reference_greedy(model, src, 10)
    assert got.dtype == torch.long
    assert torch.equal(got, expected), (got, expected)
    assert (got[:, 0] == BOS).all() and got.size(1) <= 10


def test_greedy_decode_stops_when_every_row_has_ended_and_pads_after_eos():
    model = eos_prone_model(34, 50.0)  # EOS wins at the first step
    got = greedy_decode(model, ids(3, 4, V_SRC, seed=35), 10, BOS, EOS)
    assert got.tolist() == [[BOS, EOS]] * 3
    ended = False
    for seed in range(36, 60):  # find a model whose rows end at different steps, check the padding
        model = eos_prone_model(seed, 1.5)
        src = ids(4, 5, V_SRC, seed=seed)
        out = greedy_decode(model, src, 12, BOS, EOS)
        ends = [(row == EOS).nonzero()[0].item() if (row == EOS).any() else None for row in out]
        if None not in ends and len(set(ends)) > 1:
            ended = True
            assert out.size(1) == max(ends) + 1  # stopped as soon as the last row ended
            for row, end in zip(out, ends):
                assert (row[end + 1:] == PAD).all()
            break
    assert ended, "no seed gave rows that end at different steps"


def test_greedy_decode_max_len_one_and_mode():
    model = small_model(seed=40, dropout=0.3).train()
    src = ids(2, 3, V_SRC, seed=41)
    assert greedy_decode(model, src, 1, BOS, EOS).tolist() == [[BOS], [BOS]]
    a = greedy_decode(model, src, 8, BOS, EOS)
    b = greedy_decode(model, src, 8, BOS, EOS)
    assert torch.equal(a, b)  # dropout is off while decoding ...
    assert model.training  # ... and the mode is restored


# ----------------------------------------------------------------------------------------------------------
# Argument errors name the argument
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(src_vocab_size=0), ValueError, "src_vocab_size"),
        (dict(tgt_vocab_size=1.5), TypeError, "tgt_vocab_size"),
        (dict(d_model=18, n_heads=4), ValueError, "d_model=18 is not divisible by n_heads=4"),
        (dict(d_model=15, n_heads=5), ValueError, "d_model=15 must be even"),
        (dict(n_encoder_layers=-1), ValueError, "n_encoder_layers"),
        (dict(dropout=1.0), ValueError, "dropout"),
        (dict(norm_first="yes"), TypeError, "norm_first"),
        (dict(activation="tanh"), ValueError, "activation"),
        (dict(pad_id=20), ValueError, "pad_id"),
        (dict(max_len=0), ValueError, "max_len"),
        (dict(tie_weights=1), TypeError, "tie_weights"),
    ],
)
def test_config_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        small_config(**kwargs)


def test_forward_and_greedy_decode_errors():
    model = small_model()
    src, tgt = ids(2, 4, V_SRC, seed=42), ids(2, 3, V_TGT, seed=43)
    with pytest.raises(TypeError, match="config"):
        Transformer({"d_model": 8})
    with pytest.raises(TypeError, match="src must be an integer tensor"):
        model(src.double(), tgt)
    with pytest.raises(ValueError, match="tgt_in must have shape"):
        model(src, tgt[0])
    with pytest.raises(ValueError, match=r"src must hold ids in \[0, 11\)"):
        model(src + V_SRC, tgt)
    with pytest.raises(ValueError, match="max_len=20"):
        model(ids(2, 21, V_SRC, seed=44), tgt)
    with pytest.raises(ValueError, match="same batch size"):
        model(src, tgt[:1])
    with pytest.raises(ValueError, match="memory must have shape"):
        model.decode(tgt, torch.zeros(2, 4, D + 1, dtype=torch.float64), None)
    with pytest.raises(ValueError, match="max_len=21 is more than"):
        greedy_decode(model, src, 21, BOS, EOS)
    with pytest.raises(ValueError, match="max_len must be >= 1"):
        greedy_decode(model, src, 0, BOS, EOS)
    with pytest.raises(ValueError, match="eos_id=13"):
        greedy_decode(model, src, 5, BOS, V_TGT)
    with pytest.raises(TypeError, match="bos_id"):
        greedy_decode(model, src, 5, 1.0, EOS)
    with pytest.raises(TypeError, match="model"):
        greedy_decode(nn.Linear(2, 2), src, 5, BOS, EOS)
    with pytest.raises(ValueError, match="layer=2"):
        model.cross_attention_weights(src, tgt, layer=2)
