"""Checkers for chapter 3, multi-head attention: one module per exercise, `split` (3.1), `forward` (3.2),
`param_count` (3.3) and `merge` (3.4); `_shared` holds what they share. Importing this package imports them,
which registers the four checkers.

The references are written out here from the definitions, independently of `attnbook.multihead`: a head is a
block of d_head consecutive features (sliced out one head at a time), multi-head attention is a loop over
heads followed by a concatenation and W_O, and the parameter count is the formula 4 d^2 + 4 d.

Every case is run before a verdict (`collect`), and a mistake is named only when it explains the learner's
result on every case run (`verdict`); chapter 4's checkers use the same helpers.
"""
# Importing registers the checkers, in the order of the exercises.
from . import split  # 3.1
from . import forward  # 3.2
from . import param_count  # 3.3
from . import merge  # 3.4
from .param_count import mha_count_cases

__all__ = ["split", "forward", "param_count", "merge", "mha_count_cases"]
