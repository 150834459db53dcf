"""Helpers that chapter 11's checkers share: float64 random inputs, the accuracy each dtype is checked to (and the
hint for a result that is close but not that close), and the ready-made
pieces of `transformers` that the three exercises forbid."""
from __future__ import annotations

import functools
import re
import sys

import torch
from torch import Tensor

from ..compare import randn
from ...i18n import N_

F64 = torch.float64
# The accuracy the task texts promise. A float64 result is checked to a relative 1e-12 (|got - want| <= 1e-12 +
# 1e-12 |want| entry by entry): float64 arithmetic in any order lands within about 1e-15, while one step in float32
# (a .float() detour, a float32 constant, RoPE angles computed in float32) leaves errors near 1e-7, and a constant
# off by 1e-5 leaves 1e-5. A float32 result is checked to 1e-4 (|got - want| <= 1e-4 + 1e-4 |want|).
ATOL64, RTOL64 = 1e-12, 1e-12
ATOL32, RTOL32 = 1e-4, 1e-4

randn64 = functools.partial(randn, dtype=F64)

PRECISION_HINT = (N_("your result is close to the right one, but float64 inputs are checked to a relative 1e-12: "
                     "compute in x's dtype all the way (no .float() detour, no tensor made without dtype=x.dtype, "
                     "which is float32) and write constants with all their digits"))


def tolerance(x: Tensor) -> tuple[float, float]:
    """(atol, rtol) for a result in x's dtype."""
    return (ATOL64, RTOL64) if x.dtype == F64 else (ATOL32, RTOL32)


def near(ref: Tensor):
    """The "mistake" of a result right only to float32's accuracy, for a `Run`'s table: (ref, atol, rtol) on every
    case, so that on a float32 case it is the right result (an answer wrong there is not making it; told as None, it
    was named for an error that only a float32 input showed)."""
    return ref, ATOL32, RTOL32


# transformers' ready-made pieces by kind, as the names of the classes and functions of its model modules
# (transformers.models.<model>.modeling_<model>): every model keeps its own copy (LlamaRMSNorm, MistralRMSNorm, ...).
HF_NORMS = r"(RMSNorm|RmsNorm|T5LayerNorm)$"
HF_MLPS = r"MLP$"
HF_BLOCK = (r"(RMSNorm|RmsNorm|T5LayerNorm|MLP|RotaryEmbedding|Attention|DecoderLayer)$|^(rotate_half|apply_rotary"
            r"|repeat_kv$|eager_attention_forward$)|rotary_pos_emb")


def transformers_pieces(kinds: str) -> list[str]:
    """The public dotted names ("transformers.models.llama.modeling_llama.LlamaRMSNorm") of the classes and
    functions of every loaded transformers model module whose name matches the regular expression `kinds`.

    Only modules already loaded count (importing every model would take minutes); `prepare=import_transformers_first`
    loads the ones the answer imports in its own body first, and a module-level import of the notebook is loaded."""
    pattern = re.compile(kinds)
    paths = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("transformers.models.") or ".modeling_" not in name:
            continue
        for attr, value in list(vars(module).items()):  # vars(): no lazy import triggered
            if pattern.search(attr) and callable(value) and getattr(value, "__module__", None) == name:
                paths.append(f"{name}.{attr}")
    return paths
