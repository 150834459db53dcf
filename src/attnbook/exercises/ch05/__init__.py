"""Checkers for chapter 5, positional encoding.

The references are written out here from the formulas, independently of `attnbook.positional`: the sinusoidal
table column by column from PE[pos, 2i] = sin(pos / 10000^(2i/d)), RoPE as an explicit 2x2 rotation of each pair
(x_i, x_{i+d/2}), and the shift matrix by solving R [v(p0) v(p1)] = [v(p0+k) v(p1+k)] for two positions.

A hint names a mistake only when that mistake explains every case: `runs.collect` and `runs.verdict` (5.1, 5.3),
or `runs.known_mistake` before `expect_value` (5.4, a small matrix whose wrong entries are named, never their
numbers); 5.2, whose answer is one number, keeps its own run over the cases. Otherwise 5.1 and 5.3 show the first
wrong entry, with enough digits that the two numbers differ.

One module per exercise: `table` (5.1, the sinusoidal table), `equivariance` (5.2, how far from
permutation-equivariant), `rope` (5.3, rotary position embedding) and `shift` (5.4, the shift matrix of one
frequency); `_shared` holds what several of them use (the float64 sinusoidal table, the type and dtype checks).
Importing this package imports the four modules, which registers the four checkers.
"""
from . import table, equivariance, rope, shift  # noqa: F401  (in exercise order: importing registers 5.1 to 5.4)

__all__ = ["table", "equivariance", "rope", "shift"]
