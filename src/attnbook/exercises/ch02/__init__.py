"""Checkers for chapter 2, scaled dot-product attention.

One module per exercise: `by_hand` (2.1, attention by hand), `attention` (2.2, scaled dot-product attention with a
mask), `padding` (2.3, a padding mask from sequence lengths) and `variance` (2.4, the variance of a dot product,
with its statistical check's parameters). Importing this package imports the four modules, which registers the
four checkers.
"""
# Importing registers the checkers, in the order of the exercises.
from . import by_hand  # 2.1
from . import attention  # 2.2
from . import padding  # 2.3
from . import variance  # 2.4

__all__ = ["by_hand", "attention", "padding", "variance"]
