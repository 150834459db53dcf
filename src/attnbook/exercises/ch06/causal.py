"""Checker for exercise 6.1, a causal mask."""
from __future__ import annotations

import torch

from ..guard import call
from ..registry import exercise
from ._shared import STRICT, UPPER, Case, mask_type, run_masks, tf


CAUSAL_FORBIDDEN = [
    (name, "build it from torch.ones(n, n, dtype=torch.bool) and torch.tril, or by comparing two aranges")
    for name in ("attnbook.masks.causal_mask", "torch.nn.Transformer.generate_square_subsequent_mask",
                 "torch.nn.modules.transformer._generate_square_subsequent_mask",
                 "attnbook.models.transformer.Transformer.make_tgt_mask")
]


def _causal_detail(case: Case, index: tuple[int, ...]) -> str:
    i, j = index
    want = bool(case.ref[i, j])
    rule = (f"key j={j} is not after query i={i} (j <= i), so query i may attend to it" if want else
            f"key j={j} comes after query i={i} (j > i), and a query may attend only to the keys j <= i")
    return (f"entry [{i}, {j}] (row = query {i}, column = key {j}) is {tf(not want)}, expected {tf(want)}: "
            f"{rule}")


@exercise("6.1", "A causal mask", section="The causal mask",
          references=("attnbook.masks.causal_mask",))
def check_causal_mask(causal_mask) -> str:
    """causal_mask(n) -> bool (n, n), True on and below the diagonal."""
    sizes = [4, 5, 2, 7, 1]

    def run(n: int) -> Case:
        on = f"n={n}" + (" (a single position)" if n == 1 else "")
        got = call(causal_mask, n, what="causal_mask", on=on, forbid=CAUSAL_FORBIDDEN)
        i = torch.arange(n)[:, None]  # (n, 1): query positions (rows)
        j = torch.arange(n)[None, :]  # (1, n): key positions (columns)
        ref = j <= i  # (n, n)
        mistakes = {
            "inverted": ("your mask is inverted: True must mean 'may attend', so the diagonal and everything below "
                         "it are True, and the future (above the diagonal) is False", ~ref),
            "strict": (STRICT, j < i),
            "upper": (UPPER, j >= i),
            "all": ("every entry is True, so nothing is masked: query i must not see the keys j > i",
                    torch.ones(n, n, dtype=torch.bool)),
            "one ahead": ("off by one: query i may see the keys j <= i, not also key i + 1 (tril's diagonal is 0, "
                          "not 1)", j <= i + 1),
        }
        mask_type(got, ref, what="your mask", on=on,
                   shape_hints={(1, 1, n, n): "return a plain 2-D (n, n) mask; broadcasting adds the batch "
                                              "and head axes later"})
        return Case(on, got, ref, mistakes)

    run_masks(sizes, run, what="your mask", detail=_causal_detail)
    return f"right for n = {', '.join(map(str, sizes))}"
