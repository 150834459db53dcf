"""Checkers for chapter 11, the modern block: one module per exercise, `rms_norm` (11.1), `swiglu` (11.2) and
`block` (11.3, a Llama-style block from the learner's own earlier answers); `_shared` holds what the three use."""
# Importing registers the checkers, in the order of the exercises.
from . import rms_norm  # 11.1
from . import swiglu  # 11.2
from . import block  # 11.3

__all__ = ["rms_norm", "swiglu", "block"]
