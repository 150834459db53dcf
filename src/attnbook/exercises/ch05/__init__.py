"""Checkers for chapter 5, positional encoding, one module per exercise: `table` (5.1, the sinusoidal table),
`equivariance` (5.2, how far from permutation-equivariant), `rope` (5.3, rotary position embedding) and `shift` (5.4,
the shift matrix of one frequency); `_shared` holds what several of them use. Importing the package registers them.

The references are written out here from the formulas, independently of `attnbook.positional`: the table column by
column, RoPE as an explicit 2x2 rotation of each pair (x_i, x_{i+d/2}), the shift matrix by solving
R [v(p0) v(p1)] = [v(p0+k) v(p1+k)]. A hint names a mistake only when it explains every case (`runs.verdict`; 5.2,
whose answer is one number, and 5.4, a matrix whose wrong entries are named but never their numbers, judge their
own way).
"""
from . import table, equivariance, rope, shift  # noqa: F401  (in exercise order: importing registers 5.1 to 5.4)

__all__ = ["table", "equivariance", "rope", "shift"]
