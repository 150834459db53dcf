"""Checker for exercise 6.1, a causal mask."""
from __future__ import annotations

import torch

from ..guard import call
from ..registry import exercise
from ._shared import STRICT, UPPER, Case, mask_type, run_masks, tf
from ...i18n import N_, _


CAUSAL_FORBIDDEN = [
    (name, N_("build it from torch.ones(n, n, dtype=torch.bool) and torch.tril, or by comparing two aranges"))
    for name in ("attnbook.masks.causal_mask", "torch.nn.Transformer.generate_square_subsequent_mask",
                 "torch.nn.modules.transformer._generate_square_subsequent_mask",
                 "attnbook.models.transformer.Transformer.make_tgt_mask")
]


def _causal_detail(case: Case, index: tuple[int, ...]) -> str:
    i, j = index
    want = bool(case.ref[i, j])
    rule = (_("key j={j} is not after query i={i} (j <= i), so query i may attend to it", j=j, i=i) if want else
            _("key j={j} comes after query i={i} (j > i), and a query may attend only to the keys j <= i",
              j=j, i=i))
    return (_("entry [{i}, {j}] (row = query {i}, column = key {j}) is {tf_not_want}, expected {tf_want}: {rule}",
              i=i, j=j, tf_not_want=tf(not want), tf_want=tf(want), rule=rule))


@exercise("6.1", "A causal mask", section="The causal mask",
          references=("attnbook.masks.causal_mask",))
def check_causal_mask(causal_mask) -> str:
    """causal_mask(n) -> bool (n, n), True on and below the diagonal."""
    sizes = [4, 5, 2, 7, 1]

    def run(n: int) -> Case:
        on = f"n={n}" + (_(" (a single position)") if n == 1 else "")
        got = call(causal_mask, n, what="causal_mask", on=on, forbid=CAUSAL_FORBIDDEN)
        i = torch.arange(n)[:, None]  # (n, 1): query positions (rows)
        j = torch.arange(n)[None, :]  # (1, n): key positions (columns)
        ref = j <= i  # (n, n)
        mistakes = {
            "inverted": (_("your mask is inverted: True must mean 'may attend', so the diagonal and everything below "
                           "it are True, and the future (above the diagonal) is False"), ~ref),
            "strict": (STRICT, j < i),
            "upper": (UPPER, j >= i),
            "all": (_("every entry is True, so nothing is masked: query i must not see the keys j > i"),
                    torch.ones(n, n, dtype=torch.bool)),
            _("one ahead"): (_("off by one: query i may see the keys j <= i, not also key i + 1 (tril's diagonal is 0, "
                               "not 1)"), j <= i + 1),
        }
        mask_type(got, ref, what=_("your mask"), on=on,
                   shape_hints={(1, 1, n, n): _("return a plain 2-D (n, n) mask; broadcasting adds the batch "
                                                "and head axes later")})
        return Case(on, got, ref, mistakes)

    run_masks(sizes, run, what=_("your mask"), detail=_causal_detail)
    return _("right for n = {join_map_str_sizes}", join_map_str_sizes=', '.join(map(str, sizes)))
