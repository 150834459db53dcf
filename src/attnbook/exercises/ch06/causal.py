"""Checker for exercise 6.1, a causal mask."""
from __future__ import annotations

import torch

from ..compare import generator
from ..ch05._shared import import_first
from ..guard import call
from ..registry import exercise
from ..runs import Run, collect, verdict
from ._shared import ONE_AHEAD, STRICT, UPPER, mask_type, tf
from ...i18n import N_, _


# torch's and transformers' ready-made causal masks, however they are reached: attnbook's own (the reference),
# nn.Transformer's square subsequent mask, torch.nn.attention.bias's CausalBias (materialised), and transformers'
# mask makers (masking_utils: causal_mask_function, sdpa_mask, create_causal_mask, ...; the older
# modeling_attn_mask_utils: AttentionMaskConverter, _prepare_4d_causal_attention_mask, ...)
# (torch.nn.attention.bias by pattern: its first import takes seconds, too long to make for every check)
CAUSAL_SHORTCUTS = ("torch.nn.Transformer.generate_square_subsequent_mask",
                    "torch.nn.modules.transformer._generate_square_subsequent_mask",
                    "attnbook.models.transformer.Transformer.make_tgt_mask", "torch.nn.attention.bias.*",
                    "transformers.masking_utils.*", "transformers.modeling_attn_mask_utils.*")
CAUSAL_FORBIDDEN = [
    (name, N_("build it from torch.ones(n, n, dtype=torch.bool) and torch.tril, or by comparing two aranges"))
    for name in ("attnbook.masks.causal_mask",) + CAUSAL_SHORTCUTS
]


def _causal_detail(index: tuple[int, ...]) -> str:
    i, j = index
    want = j <= i
    rule = (_("key j={j} is not after query i={i} (j <= i), so query i may attend to it", j=j, i=i) if want else
            _("key j={j} comes after query i={i} (j > i), and a query may attend only to the keys j <= i",
              j=j, i=i))
    return (_("entry [{i}, {j}] (row = query {i}, column = key {j}) is {tf_not_want}, expected {tf_want}: {rule}",
              i=i, j=j, tf_not_want=tf(not want), tf_want=tf(want), rule=rule))


def import_mask_makers_first(fn) -> None:
    """Import the modules of transformers and torch.nn.attention that `fn` imports in its body before it is called
    (their first import takes seconds, longer under the watch for forbidden patterns than the time limit)."""
    import_first(fn, ("transformers", "torch.nn.attention"))


LARGE = (257, 300)  # the range of the last size: above every cap of 256 or less (nanoGPT's block_size is 256)


def causal_sizes() -> list[int]:
    """The sizes n of every check: 4, 2, 7 and 1 (each known mistake differs from the right mask and from every
    other on them), and three drawn from the run's seed (`generator`), so that no answer knows every size in
    advance: one from 5 to 12, one from 13 to 24, and last one in LARGE, larger than any mask an answer may have
    made once at a fixed size (32, 64, ..., 256) and slices to [:n, :n]. The task says n >= 1, so n = 0 is not
    tried."""
    g = generator(610)
    return [4, int(torch.randint(5, 13, (), generator=g)), 2, 7, 1, int(torch.randint(13, 25, (), generator=g)),
            int(torch.randint(LARGE[0], LARGE[1] + 1, (), generator=g))]


def _capped_hint(got, n: int, smaller: list[int]) -> dict[tuple, str]:
    """{shape: hint} for a square mask smaller than n x n but larger than every smaller n the answer got right
    (`smaller`): a mask that stops growing at a size fixed in the code."""
    if not (isinstance(got, torch.Tensor) and got.dim() == 2 and got.size(0) == got.size(1)):
        return {}
    k = int(got.size(0))
    if not smaller or not max(smaller) < k < n:
        return {}
    return {(k, k): _("your mask stops at {k} x {k} although it had the right shape for every smaller n: a size is "
                      "fixed in your code (a mask made once at a fixed size and cut with [:n, :n] is never larger "
                      "than that size); build the mask for the n you are given", k=k)}


@exercise("6.1", "A causal mask", answer_name="causal_mask", section="The causal mask",
          references=("attnbook.masks.causal_mask",))
def check_causal_mask(causal_mask) -> str:
    """causal_mask(n) -> bool (n, n), True on and below the diagonal."""
    sizes = causal_sizes()

    def one(n: int, runs: list[Run]) -> Run:
        on = f"n={n}" + (_(" (a single position)") if n == 1 else "")
        got = call(causal_mask, n, what="causal_mask", on=on, forbid=CAUSAL_FORBIDDEN,
                   prepare=import_mask_makers_first)
        i = torch.arange(n)[:, None]  # (n, 1): query positions (rows)
        j = torch.arange(n)[None, :]  # (1, n): key positions (columns)
        ref = j <= i  # (n, n)
        mistakes = {
            _("your mask is inverted: True must mean 'may attend', so the diagonal and everything below it are "
              "True, and the future (above the diagonal) is False"): ~ref,
            STRICT: j < i,
            UPPER: j >= i,
            _("every entry is True, so nothing is masked: query i must not see the keys j > i"):
                torch.ones(n, n, dtype=torch.bool),
            ONE_AHEAD: j <= i + 1,
        }
        mask_type(got, ref, what=_("your mask"), on=on,  # every earlier run had the shape (its n, its n)
                  shape_hints={(1, 1, n, n): _("return a plain 2-D (n, n) mask; broadcasting adds the batch "
                                               "and head axes later"),
                               **_capped_hint(got, n, [r.ref.size(0) for r in runs])},
                  shape_hint=_("the mask is (n, n): one row per query and one column per key, n of each"))
        return Run(on, got, ref, mistakes, detail=_causal_detail)

    verdict(collect(sizes, one), what=_("your mask"), rule=None)
    return _("right for n = {join_map_str_sizes}", join_map_str_sizes=', '.join(map(str, sizes)))
