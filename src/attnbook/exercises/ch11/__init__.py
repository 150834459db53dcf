"""Checkers for chapter 11, the modern block. One module per exercise; importing this package registers them all.

    rms_norm   11.1  RMSNorm from scratch (no mean, no bias; eps inside the square root)
    swiglu     11.2  the SwiGLU feed-forward network (gate, up, down; weights given as (in, out))
    block      11.3  a Llama-style pre-norm block assembled from the learner's own earlier answers (RMSNorm,
                     SwiGLU, split/merge heads, RoPE, repeat_kv, attention), checked against the package's
                     LlamaBlock holding the same weights

`_shared` holds what the three use: float64 random inputs, tolerances, the dtype check.
"""
# Importing registers the checkers, in the order of the exercises.
from . import rms_norm  # 11.1
from . import swiglu  # 11.2
from . import block  # 11.3

__all__ = ["rms_norm", "swiglu", "block"]
