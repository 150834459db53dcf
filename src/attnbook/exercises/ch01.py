"""Checkers for chapter 1, queries, keys and values."""
from __future__ import annotations

import torch

from ..attention import softmax
from ._core import call, exercise, expect_close


@exercise("1.3", "A numerically stable softmax")
def check_stable_softmax(stable_softmax) -> str:
    """stable_softmax(x, dim=-1) must match softmax on ordinary, huge and one-hot logits, along any dim."""
    g = torch.Generator().manual_seed(13)
    cases = [
        ("random logits of shape (2, 5)", torch.randn(2, 5, generator=g), -1),
        ("logits [[1000, 999, -1000]]", torch.tensor([[1000.0, 999.0, -1000.0]]), -1),
        ("logits [[-1000, -1000, -1000]]", torch.tensor([[-1000.0, -1000.0, -1000.0]]), -1),
        ("logits [[1000, 999], [-1000, -1001]]", torch.tensor([[1000.0, 999.0], [-1000.0, -1001.0]]), -1),
        ("random logits of shape (3, 4, 6) with dim=1", 5 * torch.randn(3, 4, 6, generator=g), 1),
        ("a single logit [[7.]]", torch.tensor([[7.0]]), -1),
    ]
    for desc, x, dim in cases:
        got = call(stable_softmax, x, dim=dim, what="stable_softmax", on=desc)
        naive = torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True)
        other = -1 if dim != -1 else 0
        expect_close(
            got, softmax(x, dim=dim), what="the result", on=desc, atol=1e-6,
            mistakes={
                f"you normalised over dim={other}; normalise over the `dim` you were given": softmax(x, dim=other),
                "subtract the row maximum before exp": naive,
                "subtract the maximum over the same dim you sum over (keepdim=True), not the global maximum":
                    torch.exp(x - x.max()) / torch.exp(x - x.max()).sum(dim=dim, keepdim=True),
            },
        )
    return "matches softmax on 6 inputs, including logits of +-1000"
