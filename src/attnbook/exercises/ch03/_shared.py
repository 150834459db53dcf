"""What chapter 3's checkers share: the heads and the concatenation written out from the definitions, the
hint for a rearrangement that changed the dtype, and the hint for view() on memory out of order."""
from __future__ import annotations

import torch
from torch import Tensor

from ...i18n import N_, _


def heads_ref(x: Tensor, n_heads: int) -> Tensor:
    """(B, n, d) -> (B, h, n, d_head) by slicing: head i holds features i*d_head .. (i+1)*d_head - 1."""
    d_head = x.size(-1) // n_heads
    return torch.stack([x[..., i * d_head:(i + 1) * d_head] for i in range(n_heads)], dim=1)


def concat_ref(x: Tensor) -> Tensor:
    """(B, h, n, d_head) -> (B, n, h*d_head): the heads' features one after the other."""
    return torch.cat([x[:, i] for i in range(x.size(1))], dim=-1)


REARRANGE_DTYPE_HINT = N_("only rearrange the input (view/reshape, transpose): do not build a new tensor of another "
                          "dtype")


def merge_error_hint(message: str) -> str | None:
    """The hint for `view` on a tensor that is not contiguous in memory, named for this chapter."""
    if "view size is not compatible" in message:
        return (_("view() needs numbers that sit next to each other in memory; after .transpose(1, 2), or on an "
                  "input that is itself a transposed split, they do not: use .reshape(), which copies when it has "
                  "to, or call .contiguous() before .view()"))
    return None


MERGE_RULE = N_("each position's vector is head 0's d_head features, then head 1's, and so on")
VIEW_WITHOUT_TRANSPOSE = (
    N_("{who} (B, n, d_model) straight to (B, n_heads, n, d_head). The shape is right, but view/reshape "
       "reads the numbers in memory order, so each head gets whole tokens' features and the positions are mixed "
       "across heads. Cut each position's features into n_heads blocks first; only then transpose the head axis "
       "in front of the position axis")
)
SPLIT_INTERLEAVED = (
    N_("each head must take a block of d_head consecutive features (head 0: features 0 .. d_head-1); you gave "
       "head i every n_heads-th feature, as if the features came in d_head groups of n_heads")
)
SPLIT_RULE = (N_("head i holds features i * d_head to (i + 1) * d_head - 1 of every position, and each head's "
                 "matrix has one row per position, in order"))
