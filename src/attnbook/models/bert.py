"""BERT: an encoder-only Transformer (post-norm blocks, bidirectional attention) and its masked-LM head.

Parameter for parameter the same model as Hugging Face's `BertModel` / `BertForMaskedLM` (`from_hf` copies one
in; `to_hf` builds one from `config_to_hf(config)` and copies the weights out), built from the package's own
blocks: `attnbook.layers.EncoderBlock(norm_first=False)` with exact GELU.

Masks: `attention_mask` follows Hugging Face (1 = real token, 0 = padding, shape (B, n)); it is turned into the
package's boolean convention (True = may attend) of shape (B, 1, 1, n), so every query may see every real key.
Padding positions still get hidden states (as in Hugging Face); ignore them.

Dropout: `BERTConfig.dropout` defaults to 0.1, BERT-base's value (Hugging Face's hidden and attention dropout);
call `.eval()` for deterministic outputs. Our FeedForward also drops out after the GELU, which BERT does not:
a training-time difference only.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validate import require_int, require_tensor
from ..layers import ACTIVATIONS, EncoderBlock, LayerNorm

__all__ = ["BERTConfig", "BERT", "BERTForMaskedLM"]


@dataclass
class BERTConfig:
    """Sizes of a BERT; the defaults are BERT-base (109,482,240 parameters)."""

    vocab_size: int = 30522
    max_len: int = 512  # learned positions
    type_vocab_size: int = 2  # token types (segment A / B)
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    d_ff: int = 3072
    dropout: float = 0.1
    eps: float = 1e-12  # LayerNorm epsilon
    activation: str = "gelu"  # exact (erf) GELU, as BERT
    pooler: bool = True  # the Linear + tanh on [CLS]; BERTForMaskedLM has none, as Hugging Face's

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "type_vocab_size", "d_model", "n_layers", "n_heads", "d_ff"):
            require_int(getattr(self, name), name, minimum=1)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        d = self.dropout
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d < 1.0:
            raise ValueError(f"dropout must be a float in [0, 1), got {d!r}")
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)) or not self.eps > 0:
            raise ValueError(f"eps must be a positive float, got {self.eps!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if not isinstance(self.pooler, bool):
            raise TypeError(f"pooler must be a bool, got {type(self.pooler).__name__}")


def _check_ids(x, name: str, shape, high: int, high_name: str) -> Tensor:
    """Return `x` if it is an integer tensor of `shape` (or any (B, n) when None) with values in [0, high)."""
    require_tensor(x, name)
    if x.dtype == torch.bool or x.is_floating_point() or x.is_complex():
        raise TypeError(f"{name} must be an integer tensor, got dtype {x.dtype}")
    if shape is None and (x.dim() != 2 or x.size(1) == 0):
        raise ValueError(f"{name} must have shape (batch, seq) with seq >= 1, got {tuple(x.shape)}")
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have the shape of input_ids {tuple(shape)}, got {tuple(x.shape)}")
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= high):
        raise ValueError(f"{name} must lie in [0, {high_name}={high}), got values in [{int(x.min())}, {int(x.max())}]")
    return x


class BERT(nn.Module):
    """Token + position + token-type embeddings, LayerNorm, post-norm encoder blocks, and a [CLS] pooler."""

    def __init__(self, config: BERTConfig):
        super().__init__()
        if not isinstance(config, BERTConfig):
            raise TypeError(f"config must be a BERTConfig, got {type(config).__name__}")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model)
        self.type_emb = nn.Embedding(c.type_vocab_size, c.d_model)
        self.emb_norm = LayerNorm(c.d_model, c.eps)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, c.activation, norm_first=False, eps=c.eps)
            for _ in range(c.n_layers)
        )
        self.pooler = nn.Linear(c.d_model, c.d_model) if c.pooler else None
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """BERT's initialisation: normal(0, 0.02) weights, zero biases (LayerNorms stay ones and zeros)."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                attention_mask: Tensor | None = None) -> Tensor:
        """input_ids (B, n) -> last hidden states (B, n, d_model).

        `token_type_ids` (B, n) default to zeros; `attention_mask` (B, n) is 1 (or True) for real tokens and
        0 for padding, as in Hugging Face.
        """
        c = self.config
        _check_ids(input_ids, "input_ids", None, c.vocab_size, "vocab_size")
        B, n = input_ids.shape
        if n > c.max_len:
            raise ValueError(f"input_ids has length {n}, longer than max_len={c.max_len}")
        if token_type_ids is not None:
            _check_ids(token_type_ids, "token_type_ids", (B, n), c.type_vocab_size, "type_vocab_size")
        mask = None
        if attention_mask is not None:
            require_tensor(attention_mask, "attention_mask")
            if tuple(attention_mask.shape) != (B, n):
                raise ValueError(f"attention_mask must have the shape of input_ids {(B, n)}, "
                                 f"got {tuple(attention_mask.shape)}")
            if not ((attention_mask == 0) | (attention_mask == 1)).all():
                raise ValueError("attention_mask must hold only 1 (real token) and 0 (padding)")
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, n): True = this key may be attended to
        positions = torch.arange(n, device=input_ids.device)  # (n,)
        x = self.tok_emb(input_ids) + self.pos_emb(positions)  # (B, n, d_model)
        if token_type_ids is None:
            x = x + self.type_emb.weight[0]  # type 0 everywhere
        else:
            x = x + self.type_emb(token_type_ids)  # (B, n, d_model)
        x = self.drop(self.emb_norm(x))
        for block in self.blocks:
            x = block(x, mask)  # (B, n, d_model)
        return x

    def pool(self, hidden: Tensor) -> Tensor:
        """Hidden states (B, n, d_model) -> tanh(Linear(hidden at [CLS], position 0)), (B, d_model)."""
        if self.pooler is None:
            raise ValueError("this BERT was built with pooler=False, so it has no pooler")
        require_tensor(hidden, "hidden", floating=True)
        if hidden.dim() != 3 or hidden.size(-1) != self.config.d_model:
            raise ValueError(f"hidden must have shape (batch, seq, d_model={self.config.d_model}), "
                             f"got {tuple(hidden.shape)}")
        return torch.tanh(self.pooler(hidden[:, 0]))  # (B, d_model)

    @staticmethod
    def config_from_hf(hf_config) -> BERTConfig:
        """The BERTConfig equal to a `transformers.BertConfig` (ValueError for what we do not model)."""
        if hf_config.hidden_act not in ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu"):
            raise ValueError(f"hidden_act={hf_config.hidden_act!r} is not supported (gelu, gelu_new, relu)")
        if getattr(hf_config, "position_embedding_type", "absolute") != "absolute":
            raise ValueError("only position_embedding_type='absolute' is supported")
        if getattr(hf_config, "is_decoder", False) or getattr(hf_config, "add_cross_attention", False):
            raise ValueError("a BERT configured as a decoder (is_decoder / add_cross_attention) is not supported")
        if hf_config.hidden_dropout_prob != hf_config.attention_probs_dropout_prob:
            raise ValueError(
                f"hidden_dropout_prob={hf_config.hidden_dropout_prob} and attention_probs_dropout_prob="
                f"{hf_config.attention_probs_dropout_prob} differ; BERTConfig has one dropout"
            )
        act = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
        return BERTConfig(
            vocab_size=hf_config.vocab_size, max_len=hf_config.max_position_embeddings,
            type_vocab_size=hf_config.type_vocab_size, d_model=hf_config.hidden_size,
            n_layers=hf_config.num_hidden_layers, n_heads=hf_config.num_attention_heads,
            d_ff=hf_config.intermediate_size, dropout=hf_config.hidden_dropout_prob,
            eps=hf_config.layer_norm_eps, activation=act[hf_config.hidden_act],
        )

    @staticmethod
    def config_to_hf(config: BERTConfig):
        """The `transformers.BertConfig` with the sizes of `config`: the inverse of `config_from_hf`.

        Both dropouts of Hugging Face (hidden and attention) get `config.dropout`; the pooler is not part of a
        BertConfig (`BertModel(..., add_pooling_layer=...)` decides it).
        """
        if not isinstance(config, BERTConfig):
            raise TypeError(f"config must be a BERTConfig, got {type(config).__name__}")
        act = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu"}
        c = config
        return _transformers().BertConfig(
            vocab_size=c.vocab_size, hidden_size=c.d_model, num_hidden_layers=c.n_layers,
            num_attention_heads=c.n_heads, intermediate_size=c.d_ff, hidden_act=act[c.activation],
            hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.dropout,
            max_position_embeddings=c.max_len, type_vocab_size=c.type_vocab_size, layer_norm_eps=c.eps,
        )

    def to_hf(self):
        """A `transformers.BertModel` with this BERT's weights (same dtype, device and train/eval mode)."""
        w = self.tok_emb.weight
        model = _transformers().BertModel(self.config_to_hf(self.config), add_pooling_layer=self.pooler is not None)
        model = model.to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            for ours, theirs in _bert_pairs(self, model):
                theirs.copy_(ours)
        return model.train(self.training)

    @classmethod
    def from_hf(cls, model) -> "BERT":
        """A BERT with the weights of a `transformers.BertModel` (same dtype, device and train/eval mode)."""
        BertModel = _transformers().BertModel
        if not isinstance(model, BertModel):
            raise TypeError(f"model must be a transformers.BertModel, got {type(model).__name__}")
        config = replace(cls.config_from_hf(model.config), pooler=model.pooler is not None)
        w = model.embeddings.word_embeddings.weight
        new = cls(config).to(device=w.device, dtype=w.dtype)
        _copy_bert(new, model)
        return new.train(model.training)


class BERTForMaskedLM(nn.Module):
    """BERT (without pooler) + the MLM head: Linear, GELU, LayerNorm, then a decoder tied to the token embedding."""

    def __init__(self, config: BERTConfig):
        super().__init__()
        if not isinstance(config, BERTConfig):
            raise TypeError(f"config must be a BERTConfig, got {type(config).__name__}")
        self.bert = BERT(replace(config, pooler=False))
        self.config = self.bert.config
        c = self.config
        self.transform = nn.Linear(c.d_model, c.d_model)
        self.norm = LayerNorm(c.d_model, c.eps)
        self.decoder = nn.Linear(c.d_model, c.vocab_size)
        self.decoder.weight = self.bert.tok_emb.weight  # tied: one (vocab_size, d_model) matrix
        BERT._init_weights(self.transform)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                attention_mask: Tensor | None = None) -> Tensor:
        """input_ids (B, n) -> logits over the vocabulary (B, n, vocab_size) at every position."""
        h = self.bert(input_ids, token_type_ids, attention_mask)  # (B, n, d_model)
        h = _activate(self.transform(h), self.config.activation)  # (B, n, d_model)
        return self.decoder(self.norm(h))  # (B, n, vocab_size)

    @classmethod
    def from_hf(cls, model) -> "BERTForMaskedLM":
        """A BERTForMaskedLM with the weights of a `transformers.BertForMaskedLM`."""
        BertForMaskedLM = _transformers().BertForMaskedLM
        if not isinstance(model, BertForMaskedLM):
            raise TypeError(f"model must be a transformers.BertForMaskedLM, got {type(model).__name__}")
        head = model.cls.predictions
        if head.decoder.weight is not model.bert.embeddings.word_embeddings.weight:
            raise ValueError("model's decoder is not tied to its word embeddings, which ours always is")
        w = head.decoder.weight
        new = cls(BERT.config_from_hf(model.config)).to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            for ours, theirs in _mlm_pairs(new, model):
                ours.copy_(theirs)
        return new.train(model.training)

    def to_hf(self):
        """A `transformers.BertForMaskedLM` with this model's weights (same dtype, device and train/eval mode).

        Its decoder is tied to its word embeddings, as ours is, so the count of parameters is the same.
        """
        w = self.decoder.weight
        model = _transformers().BertForMaskedLM(BERT.config_to_hf(self.config)).to(device=w.device, dtype=w.dtype)
        if model.cls.predictions.decoder.weight is not model.bert.embeddings.word_embeddings.weight:
            raise RuntimeError("transformers built a BertForMaskedLM whose decoder is not tied")  # pragma: no cover
        with torch.no_grad():
            for ours, theirs in _mlm_pairs(self, model):
                theirs.copy_(ours)
        return model.train(self.training)


def _transformers():
    """Import `transformers` lazily (it is an optional extra, only needed to copy weights)."""
    try:
        import transformers
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("copying Hugging Face weights needs `transformers`: pip install transformers") from e
    return transformers


def _activate(x: Tensor, activation: str) -> Tensor:
    """The config's activation (the MLM head uses the same one as the blocks, as Hugging Face's)."""
    if activation == "relu":
        return F.relu(x)
    return F.gelu(x, approximate="tanh" if activation == "gelu_tanh" else "none")


def _linear_pair(ours: nn.Module, theirs: nn.Module) -> list[tuple[Tensor, Tensor]]:
    """(ours, theirs) for the weight and the bias of two Linear layers, or of two LayerNorms."""
    return [(ours.weight, theirs.weight), (ours.bias, theirs.bias)]


def _bert_pairs(ours: BERT, model) -> list[tuple[Tensor, Tensor]]:
    """(our parameter, Hugging Face's) for every parameter of a BERT and a transformers.BertModel of its sizes."""
    emb = model.embeddings
    pairs = [(ours.tok_emb.weight, emb.word_embeddings.weight), (ours.pos_emb.weight, emb.position_embeddings.weight),
             (ours.type_emb.weight, emb.token_type_embeddings.weight), *_linear_pair(ours.emb_norm, emb.LayerNorm)]
    for block, layer in zip(ours.blocks, model.encoder.layer):
        att = layer.attention
        pairs += [*_linear_pair(block.self_attn.q_proj, att.self.query),
                  *_linear_pair(block.self_attn.k_proj, att.self.key),
                  *_linear_pair(block.self_attn.v_proj, att.self.value),
                  *_linear_pair(block.self_attn.out_proj, att.output.dense),
                  *_linear_pair(block.norm1, att.output.LayerNorm),  # post-norm: after attention + residual
                  *_linear_pair(block.ffn.fc1, layer.intermediate.dense),
                  *_linear_pair(block.ffn.fc2, layer.output.dense),
                  *_linear_pair(block.norm2, layer.output.LayerNorm)]  # after feed-forward + residual
    if ours.pooler is not None:
        pairs += _linear_pair(ours.pooler, model.pooler.dense)
    return pairs


def _mlm_pairs(ours: BERTForMaskedLM, model) -> list[tuple[Tensor, Tensor]]:
    """(our parameter, Hugging Face's) for a BERTForMaskedLM and a transformers.BertForMaskedLM (the tied decoder
    weight is the word embedding, paired once)."""
    head = model.cls.predictions
    return [*_bert_pairs(ours.bert, model.bert), *_linear_pair(ours.transform, head.transform.dense),
            *_linear_pair(ours.norm, head.transform.LayerNorm), (ours.decoder.bias, head.decoder.bias)]


def _copy_bert(new: BERT, model) -> None:
    """Copy a transformers.BertModel's weights into `new` (same sizes)."""
    with torch.no_grad():
        for ours, theirs in _bert_pairs(new, model):
            ours.copy_(theirs)
