"""Tests of attnbook.models.bert against Hugging Face's BertModel / BertForMaskedLM built from configs (no download).

Every comparison is in float64 and eval mode, with every HF parameter randomised first (HF initialises biases
and LayerNorms to zeros and ones, which would hide a bias or a norm copied to the wrong place).
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

transformers = pytest.importorskip("transformers")

from attnbook.models import BERT, BERTConfig, BERTForMaskedLM  # noqa: E402

TOL = dict(atol=1e-10, rtol=1e-10)
SMALL = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             max_position_embeddings=16, type_vocab_size=3)
OURS_SMALL = dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_len=16, type_vocab_size=3)


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    return module


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # parameters() yields a tied matrix once


@pytest.fixture(scope="module")
def hf_bert():
    torch.manual_seed(0)
    return randomize_(transformers.BertModel(transformers.BertConfig(**SMALL)).double().eval(), seed=1)


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 100, (3, 9), generator=g)
    types = torch.randint(0, 3, (3, 9), generator=g)
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0  # row 1 has 6 real tokens, row 2 has 3
    mask[2, 3:] = 0
    return ids, types, mask


def test_default_config_is_bert_base_and_counts_match_transformers():
    with torch.device("meta"):  # structure only: no memory, no initialisation
        ours = BERT(BERTConfig())
        ref = transformers.BertModel(transformers.BertConfig())
        ours_mlm = BERTForMaskedLM(BERTConfig())
        ref_mlm = transformers.BertForMaskedLM(transformers.BertConfig())
    assert n_params(ours) == n_params(ref) == 109_482_240
    assert n_params(ours_mlm) == n_params(ref_mlm)
    c = ours.config
    assert (c.vocab_size, c.max_len, c.type_vocab_size, c.d_model, c.n_layers, c.n_heads, c.d_ff) == (
        30522, 512, 2, 768, 12, 12, 3072)
    assert (c.eps, c.activation) == (1e-12, "gelu")


def test_matches_hf_with_padding_mask_and_token_types(hf_bert, batch):
    ids, types, mask = batch
    ours = BERT.from_hf(hf_bert)
    with torch.no_grad():
        ref = hf_bert(input_ids=ids, token_type_ids=types, attention_mask=mask)
        hidden = ours(ids, token_type_ids=types, attention_mask=mask)
        pooled = ours.pool(hidden)
    assert hidden.shape == (3, 9, 32) and hidden.dtype == torch.float64
    torch.testing.assert_close(hidden, ref.last_hidden_state, **TOL)
    torch.testing.assert_close(pooled, ref.pooler_output, **TOL)


def test_matches_hf_without_optional_inputs_and_with_bool_mask(hf_bert, batch):
    ids, _, mask = batch
    ours = BERT.from_hf(hf_bert)
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf_bert(input_ids=ids).last_hidden_state, **TOL)
        ref = hf_bert(input_ids=ids, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(ours(ids, attention_mask=mask.bool()), ref, **TOL)


def test_padding_does_not_change_real_tokens_and_attention_is_bidirectional(hf_bert):
    ours = BERT.from_hf(hf_bert)
    ids = torch.tensor([[5, 17, 42, 8, 9]])
    padded = torch.cat([ids, torch.tensor([[1, 2, 3]])], dim=1)  # three padding positions with arbitrary ids
    mask = torch.tensor([[1] * 5 + [0] * 3])
    with torch.no_grad():
        alone = ours(ids)
        torch.testing.assert_close(ours(padded, attention_mask=mask)[:, :5], alone, **TOL)
        changed = ours(torch.tensor([[5, 17, 42, 8, 10]]))  # only the last token differs
    assert not torch.allclose(changed[:, 0], alone[:, 0])  # the first position sees the last: bidirectional


def test_from_hf_keeps_dtype_and_mode_and_copies_no_pooler():
    torch.manual_seed(3)
    ref = transformers.BertModel(transformers.BertConfig(**SMALL), add_pooling_layer=False)  # float32, train
    ours = BERT.from_hf(ref)
    assert ours.training and ours.tok_emb.weight.dtype == torch.float32
    assert ours.pooler is None and n_params(ours) == n_params(ref)
    with pytest.raises(ValueError, match="pooler"):
        ours.pool(torch.zeros(1, 2, 32))


def test_masked_lm_matches_hf():
    torch.manual_seed(4)
    ref = randomize_(transformers.BertForMaskedLM(transformers.BertConfig(**SMALL)).double().eval(), seed=5)
    ours = BERTForMaskedLM.from_hf(ref)
    assert ours.decoder.weight is ours.bert.tok_emb.weight  # tied
    assert ours.bert.pooler is None and n_params(ours) == n_params(ref)
    ids = torch.randint(0, 100, (2, 7), generator=torch.Generator().manual_seed(6))
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    with torch.no_grad():
        logits = ours(ids, attention_mask=mask)
        expected = ref(input_ids=ids, attention_mask=mask).logits
    assert logits.shape == (2, 7, 100)
    torch.testing.assert_close(logits, expected, **TOL)


FIELDS = ("vocab_size", "max_len", "type_vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "dropout", "eps",
          "activation")


@pytest.mark.parametrize("activation, dropout, eps", [
    ("gelu", 0.1, 1e-12), ("gelu_tanh", 0.0, 1e-5), ("relu", 0.2, 1e-6),
])
def test_config_to_hf_is_the_inverse_of_config_from_hf(activation, dropout, eps):
    ours = BERTConfig(vocab_size=77, max_len=20, type_vocab_size=3, d_model=24, n_layers=3, n_heads=6, d_ff=40,
                      dropout=dropout, eps=eps, activation=activation)
    hf = BERT.config_to_hf(ours)
    assert isinstance(hf, transformers.BertConfig)
    assert (hf.vocab_size, hf.max_position_embeddings, hf.type_vocab_size, hf.hidden_size, hf.num_hidden_layers,
            hf.num_attention_heads, hf.intermediate_size) == (77, 20, 3, 24, 3, 6, 40)
    assert hf.hidden_dropout_prob == hf.attention_probs_dropout_prob == dropout and hf.layer_norm_eps == eps
    back = BERT.config_from_hf(hf)
    assert all(getattr(back, f) == getattr(ours, f) for f in FIELDS)


def test_config_to_hf_of_the_default_is_bert_base_and_counts_match():
    hf = BERT.config_to_hf(BERTConfig())
    base = transformers.BertConfig()
    for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size", "hidden_act", "layer_norm_eps", "hidden_dropout_prob"):
        assert getattr(hf, name) == getattr(base, name), name
    with torch.device("meta"):
        assert n_params(transformers.BertForMaskedLM(hf)) == n_params(BERTForMaskedLM(BERTConfig())) == 109_514_298


def test_to_hf_copies_every_weight_of_bert(batch):
    ids, types, mask = batch
    torch.manual_seed(8)
    ours = randomize_(BERT(BERTConfig(**OURS_SMALL)).double().eval(), seed=9)
    hf = ours.to_hf()
    assert isinstance(hf, transformers.BertModel) and not hf.training
    assert hf.embeddings.word_embeddings.weight.dtype == torch.float64 and n_params(hf) == n_params(ours)
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask)
        hidden = ours(ids, token_type_ids=types, attention_mask=mask)
        torch.testing.assert_close(ref.last_hidden_state, hidden, **TOL)
        torch.testing.assert_close(ref.pooler_output, ours.pool(hidden), **TOL)
    back = BERT.from_hf(hf)
    for (name, a), b in zip(ours.state_dict().items(), back.state_dict().values()):
        assert torch.equal(a, b), name


def test_to_hf_keeps_train_mode_and_leaves_out_a_missing_pooler():
    torch.manual_seed(10)
    ours = BERT(BERTConfig(**OURS_SMALL, pooler=False))  # float32, train mode
    hf = ours.to_hf()
    assert hf.training and hf.pooler is None and n_params(hf) == n_params(ours)
    assert hf.embeddings.word_embeddings.weight.dtype == torch.float32


def test_masked_lm_to_hf_is_tied_and_gives_the_same_logits():
    torch.manual_seed(11)
    ours = randomize_(BERTForMaskedLM(BERTConfig(**OURS_SMALL)).double().eval(), seed=12)  # also the decoder bias
    hf = ours.to_hf()
    assert isinstance(hf, transformers.BertForMaskedLM) and not hf.training
    assert hf.cls.predictions.decoder.weight is hf.bert.embeddings.word_embeddings.weight  # tied, as ours
    assert n_params(hf) == n_params(ours)
    ids = torch.randint(0, 100, (2, 7), generator=torch.Generator().manual_seed(13))
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    with torch.no_grad():
        expected = ours(ids, attention_mask=mask)
        logits = hf(input_ids=ids, attention_mask=mask).logits
    assert logits.shape == expected.shape == (2, 7, 100)
    torch.testing.assert_close(logits, expected, **TOL)
    back = BERTForMaskedLM.from_hf(hf)
    for (name, a), b in zip(ours.state_dict().items(), back.state_dict().values()):
        assert torch.equal(a, b), name


def test_to_hf_rejects_what_is_not_a_config():
    with pytest.raises(TypeError, match="BERTConfig"):
        BERT.config_to_hf(dict(d_model=16))


def test_init_is_normal_002_with_zero_biases():
    torch.manual_seed(7)
    m = BERT(BERTConfig(vocab_size=2000, max_len=16, d_model=64, n_layers=1, n_heads=4, d_ff=128))
    w = m.tok_emb.weight
    assert abs(w.std().item() - 0.02) < 0.002 and abs(w.mean().item()) < 0.002
    assert abs(m.blocks[0].ffn.fc1.weight.std().item() - 0.02) < 0.002
    assert torch.all(m.blocks[0].self_attn.q_proj.bias == 0) and torch.all(m.pooler.bias == 0)
    assert torch.all(m.emb_norm.weight == 1) and torch.all(m.emb_norm.bias == 0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(d_model=30, n_heads=4), "n_heads"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(dropout=1.0), "dropout"),
    (dict(eps=0.0), "eps"),
    (dict(activation="swish"), "activation"),
])
def test_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BERTConfig(**kwargs)


def test_forward_rejects_bad_inputs():
    m = BERT(BERTConfig(vocab_size=50, max_len=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)).eval()
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="max_len"):
        m(torch.ones(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="vocab_size"):
        m(torch.tensor([[1, 50]]))
    with pytest.raises(TypeError, match="input_ids"):
        m(ids.float())
    with pytest.raises(ValueError, match="input_ids"):
        m(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="token_type_ids"):
        m(ids, token_type_ids=torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="type_vocab_size"):
        m(ids, token_type_ids=torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="attention_mask"):
        m(ids, attention_mask=torch.tensor([[1, 1, 2]]))
    with pytest.raises(ValueError, match="attention_mask"):
        m(ids, attention_mask=torch.tensor([[1, 1]]))
    with pytest.raises(ValueError, match="hidden"):
        m.pool(torch.zeros(1, 3, 8))
    with pytest.raises(TypeError, match="config"):
        BERT(dict(d_model=16))
    with pytest.raises(TypeError, match="BertModel"):
        BERT.from_hf(nn.Linear(2, 2))
