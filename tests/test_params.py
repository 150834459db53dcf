"""Tests of attnbook.models.params: every formula against the count of a real module (PyTorch layers, attnbook
layers, Hugging Face models built from a config). Big models are built on the meta device: the parameters get
their real shapes but no memory and no initialisation, so counting them is instant."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from attnbook.layers import EncoderBlock, FeedForward, LayerNorm
from attnbook.models import (bert_param_count, count_parameters, encoder_block_param_count, encoder_param_count,
                             ffn_param_count, gpt_param_count, layer_norm_param_count, mha_param_count)
from attnbook.models import params
from attnbook.multihead import MultiHeadAttention


def numel(module: nn.Module) -> int:
    """Independent count: unique parameter tensors by identity."""
    unique = {id(p): p for _, p in module.named_parameters(remove_duplicate=False)}
    return sum(p.numel() for p in unique.values())


def encoder_stack(vocab_size, d_model, n_heads, d_ff, n_layers) -> nn.Module:
    """The chapter's encoder out of PyTorch's own layers: a token embedding and n_layers encoder layers."""
    layers = [nn.TransformerEncoderLayer(d_model, n_heads, d_ff, batch_first=True) for _ in range(n_layers)]
    return nn.ModuleDict({"embedding": nn.Embedding(vocab_size, d_model), "layers": nn.ModuleList(layers)})


def test_exports_match_the_module():
    import attnbook.models as models

    assert sorted(params.__all__) == sorted(name for name, sub in models._EXPORTS.items() if sub == "params")


# ---------------------------------------------------------------------------------------------------------
# count_parameters
# ---------------------------------------------------------------------------------------------------------


def test_count_parameters_of_a_linear_layer_by_hand():
    assert count_parameters(nn.Linear(3, 4)) == 3 * 4 + 4
    assert count_parameters(nn.Linear(3, 4, bias=False)) == 12


def test_count_parameters_counts_tied_weights_once():
    embedding, head = nn.Embedding(10, 6), nn.Linear(6, 10, bias=False)
    head.weight = embedding.weight  # tied, as in GPT-2
    model = nn.ModuleList([embedding, head])
    assert count_parameters(model) == 60 == numel(model)
    assert sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False)) == 120


def test_count_parameters_trainable_only():
    model = nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 2))
    model[0].requires_grad_(False)
    assert count_parameters(model) == 25 + 12
    assert count_parameters(model, trainable_only=True) == 12


@pytest.mark.parametrize("args, exc, match", [
    ((torch.zeros(3),), TypeError, "module"),
    ((nn.Linear(2, 2), 1), TypeError, "trainable_only"),
])
def test_count_parameters_argument_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        count_parameters(*args)


# ---------------------------------------------------------------------------------------------------------
# pieces: attention, feed-forward, LayerNorm, one block
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model, n_heads, n_kv_heads", [
    (16, 4, None), (16, 4, 4), (16, 4, 2), (16, 4, 1), (24, 6, 3), (12, 1, None), (768, 12, 4),
])
@pytest.mark.parametrize("bias", [True, False])
def test_mha_param_count_equals_attnbook_attention_with_gqa(d_model, n_heads, n_kv_heads, bias):
    module = MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=bias)
    assert mha_param_count(d_model, n_heads, n_kv_heads, bias) == numel(module)


@pytest.mark.parametrize("d_model, n_heads", [(16, 4), (768, 12), (10, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_mha_param_count_equals_torch_multihead_attention(d_model, n_heads, bias):
    assert mha_param_count(d_model, n_heads, bias=bias) == numel(nn.MultiheadAttention(d_model, n_heads, bias=bias))


def test_mha_param_count_gqa_by_hand_and_heads_do_not_matter():
    d, d_head = 64, 8  # 8 query heads, 2 key/value heads of 8 features each
    assert mha_param_count(d, 8, 2) == (d * d + d) * 2 + (d * 2 * d_head + 2 * d_head) * 2
    assert mha_param_count(d, 8) == mha_param_count(d, 1) == mha_param_count(d, 64) == 4 * d * d + 4 * d
    assert mha_param_count(d, 8, 1) < mha_param_count(d, 8, 2) < mha_param_count(d, 8)


@pytest.mark.parametrize("d_model, d_ff, bias", [(8, 32, True), (7, 5, True), (768, 3072, True), (8, 32, False)])
def test_ffn_param_count_equals_torch_and_attnbook(d_model, d_ff, bias):
    torch_ffn = nn.Sequential(nn.Linear(d_model, d_ff, bias=bias), nn.ReLU(), nn.Linear(d_ff, d_model, bias=bias))
    assert ffn_param_count(d_model, d_ff, bias) == numel(torch_ffn) == numel(FeedForward(d_model, d_ff, bias=bias))


@pytest.mark.parametrize("d_model", [1, 7, 768])
def test_layer_norm_param_count_equals_torch_and_attnbook(d_model):
    assert layer_norm_param_count(d_model) == numel(nn.LayerNorm(d_model)) == numel(LayerNorm(d_model))


@pytest.mark.parametrize("d_model, n_heads, d_ff", [(8, 2, 32), (12, 3, 7), (768, 12, 3072), (64, 1, 16)])
def test_encoder_block_param_count_equals_torch_and_attnbook(d_model, n_heads, d_ff):
    with torch.device("meta"):
        torch_layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, batch_first=True)
        ours = EncoderBlock(d_model, n_heads, d_ff)
    assert encoder_block_param_count(d_model, n_heads, d_ff) == numel(torch_layer) == numel(ours)


def test_bert_base_block_by_hand():
    d, d_ff = 768, 3072
    attention = 4 * (d * d + d)
    ffn = d * d_ff + d_ff + d_ff * d + d
    assert encoder_block_param_count(d, 12, d_ff) == attention + ffn + 4 * d == 7_087_872


# ---------------------------------------------------------------------------------------------------------
# whole models: the chapter's encoder, BERT, GPT-2
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [(100, 8, 2, 32, 1), (50, 12, 3, 7, 3), (30000, 768, 12, 3072, 12)])
def test_encoder_param_count_equals_a_stack_of_torch_layers(config):
    with torch.device("meta"):
        stack = encoder_stack(*config)
    assert encoder_param_count(*config) == count_parameters(stack) == numel(stack)


def test_encoder_param_count_of_the_chapter_model_is_not_110_1_million():
    with torch.device("meta"):
        stack = encoder_stack(30000, 768, 12, 3072, 12)
    assert count_parameters(stack) == 108_094_464  # the figure, from a real stack
    assert encoder_param_count(30000, 768, 12, 3072, 12) == 108_094_464
    assert round(encoder_param_count(30000, 768, 12, 3072, 12) / 1e6, 1) != 110.1


transformers = pytest.importorskip("transformers")


def test_bert_param_count_equals_hugging_face_bert_base():
    with torch.device("meta"):
        model = transformers.BertModel(transformers.BertConfig())  # default config = BERT-base, no download
    assert bert_param_count() == count_parameters(model) == 109_482_240


@pytest.mark.parametrize("pooler", [True, False])
def test_bert_param_count_equals_hugging_face_on_other_configs(pooler):
    cfg = dict(vocab_size=101, max_position_embeddings=33, type_vocab_size=3, hidden_size=24, num_hidden_layers=2,
               num_attention_heads=4, intermediate_size=40)
    with torch.device("meta"):
        model = transformers.BertModel(transformers.BertConfig(**cfg), add_pooling_layer=pooler)
    ours = bert_param_count(vocab_size=101, max_len=33, type_vocab_size=3, d_model=24, n_layers=2, d_ff=40,
                            pooler=pooler)
    assert ours == count_parameters(model)


def test_bert_large_equals_hugging_face():
    cfg = transformers.BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                  intermediate_size=4096)
    with torch.device("meta"):
        model = transformers.BertModel(cfg)
    assert bert_param_count(d_model=1024, n_layers=24, d_ff=4096) == count_parameters(model)


def test_gpt_param_count_equals_hugging_face_gpt2_small():
    with torch.device("meta"):
        model = transformers.GPT2Model(transformers.GPT2Config())  # default config = GPT-2 small, no download
    assert gpt_param_count() == count_parameters(model) == 124_439_808


@pytest.mark.parametrize("tied", [True, False])
def test_gpt_param_count_equals_hugging_face_lm_head_model(tied):
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=20, n_embd=16, n_layer=3, n_head=4,
                                  tie_word_embeddings=tied)
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(cfg)
    assert (model.lm_head.weight is model.transformer.wte.weight) == tied
    assert gpt_param_count(vocab_size=97, block_size=20, d_model=16, n_layers=3, tied=tied) == count_parameters(model)


def test_gpt3_is_about_175_billion():
    n = gpt_param_count(vocab_size=50257, block_size=2048, d_model=12288, n_layers=96)
    assert 174e9 < n < 176e9
    assert abs(n - 12 * 96 * 12288**2) / n < 0.01  # the 12 L d^2 rule of thumb: embeddings are under 1%


# ---------------------------------------------------------------------------------------------------------
# argument errors name the argument
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, kwargs, exc, match", [
    (mha_param_count, dict(d_model=10, n_heads=3), ValueError, "d_model=10 is not divisible by n_heads=3"),
    (mha_param_count, dict(d_model=16, n_heads=4, n_kv_heads=3), ValueError, "n_kv_heads=3"),
    (mha_param_count, dict(d_model=16, n_heads=4, n_kv_heads=0), ValueError, "n_kv_heads"),
    (mha_param_count, dict(d_model=16, n_heads=4, bias=1), TypeError, "bias"),
    (mha_param_count, dict(d_model=16.0, n_heads=4), TypeError, "d_model"),
    (ffn_param_count, dict(d_model=8, d_ff=0), ValueError, "d_ff"),
    (ffn_param_count, dict(d_model=8, d_ff=32, bias="yes"), TypeError, "bias"),
    (layer_norm_param_count, dict(d_model=0), ValueError, "d_model"),
    (encoder_block_param_count, dict(d_model=10, n_heads=4, d_ff=8), ValueError, "n_heads=4"),
    (encoder_param_count, dict(vocab_size=0, d_model=8, n_heads=2, d_ff=8, n_layers=1), ValueError, "vocab_size"),
    (encoder_param_count, dict(vocab_size=10, d_model=8, n_heads=2, d_ff=8, n_layers=True), TypeError, "n_layers"),
    (bert_param_count, dict(max_len=0), ValueError, "max_len"),
    (bert_param_count, dict(type_vocab_size=1.5), TypeError, "type_vocab_size"),
    (bert_param_count, dict(pooler=None), TypeError, "pooler"),
    (gpt_param_count, dict(block_size=-1), ValueError, "block_size"),
    (gpt_param_count, dict(tied="no"), TypeError, "tied"),
    (gpt_param_count, dict(d_model=0), ValueError, "d_model"),
])
def test_argument_errors_name_the_argument(fn, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fn(**kwargs)
