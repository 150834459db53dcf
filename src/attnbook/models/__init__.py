"""Complete models, one module each, with small config dataclasses.

- `transformer`: encoder, decoder and encoder–decoder Transformer (chapter 6), greedy decoding
- `params`: parameter counts by formula (chapter 4) and of a module
- `vit`: a Vision Transformer (chapter 7)
- `bert`, `gpt`: encoder-only and decoder-only language models (chapters 8–10)
- `llama`: the modern decoder-only block, RMSNorm, SwiGLU, rotary positions, grouped-query attention (chapter 11)
  with the later options: QK-norm, sliding window, scaled RoPE (`rope_scaling`), mixture of experts (`moe`)

Names are loaded on first use (`from attnbook.models import GPT`), so importing one model does not import the rest.
"""
from __future__ import annotations

import importlib

_EXPORTS: dict[str, str] = {  # public name -> submodule that defines it
    "count_parameters": "params",
    "mha_param_count": "params",
    "ffn_param_count": "params",
    "layer_norm_param_count": "params",
    "encoder_block_param_count": "params",
    "encoder_param_count": "params",
    "bert_param_count": "params",
    "gpt_param_count": "params",
    "BERTConfig": "bert",
    "BERT": "bert",
    "BERTForMaskedLM": "bert",
    "GPTConfig": "gpt",
    "GPT": "gpt",
    "sample_next": "gpt",
    "top_p_filter": "gpt",
    "ViTConfig": "vit",
    "ViT": "vit",
    "TransformerConfig": "transformer",
    "Encoder": "transformer",
    "Decoder": "transformer",
    "Transformer": "transformer",
    "EncoderDecoder": "transformer",
    "greedy_decode": "transformer",
    **{name: "llama" for name in ("LlamaConfig", "Llama", "load_hf_weights", "block_costs")},  # ch. 11
    **{name: "moe" for name in ("SparseMoE", "load_balancing_loss")},
    **{name: "rope_scaling" for name in ("rope_frequencies", "apply_scaled_rope")},
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
