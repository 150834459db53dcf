"""Checker for exercise 6.2, padding and causal masks combined."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import generator
from ..guard import call
from .causal import CAUSAL_SHORTCUTS, import_mask_makers_first
from ..registry import exercise
from ..runs import Run, collect, verdict
from ._shared import ONE_AHEAD, STRICT, UPPER, mask_type, tf
from ...i18n import N_, _


MASK_FORBIDDEN = [
    (name, N_("write it with torch.arange comparisons (or torch.tril) and &"))
    for name in ("attnbook.masks.causal_mask", "attnbook.masks.padding_mask", "attnbook.masks.combine_masks",
                 "attnbook.masks.convert_mask") + CAUSAL_SHORTCUTS
]


def _self_mask_detail(lengths: list[int], ref: Tensor, index: tuple[int, ...]) -> str:
    b, _unused, i, j = index
    length = lengths[b]
    want = bool(ref[index])
    if want:
        rule = (_("key j={j} is a real token (j < lengths[b] = {length}) and not after query i={i} (j <= i), so "
                  "query i may attend to it",
                  j=j, length=length, i=i) + (_(" (padding queries are not blocked)") if i >= length else ""))
    elif j > i:
        rule = _("key j={j} comes after query i={i} (j > i), so the causal part blocks it", j=j, i=i)
    else:
        rule = _("key j={j} is padding (j >= lengths[b] = {length}), so it is blocked", j=j, length=length)
    return (_("for sequence {b} (length {length}), entry [{b}, 0, {i}, {j}] (query {i}, key {j}) is "
              "{tf_not_want}, expected {tf_want}: {rule}",
              b=b, length=length, i=i, j=j, tf_not_want=tf(not want), tf_want=tf(want), rule=rule))


def _shuffled(values: list[int], g: torch.Generator) -> list[int]:
    return [values[i] for i in torch.randperm(len(values), generator=g).tolist()]


def self_mask_batches() -> list[tuple[list[int], int, torch.dtype, str]]:
    """(lengths, n, dtype of lengths, description) of every case. The lengths come from the run's seed
    (`generator`), so that no answer knows them in advance, in shapes that keep what each case is for: three
    different lengths, one of them n (no padding in that row); a batch of one with padding; an empty sequence
    beside a full one; no padding at all; n = 1; int32 lengths."""
    g = generator(620)
    draw = lambda low, high: int(torch.randint(low, high + 1, (), generator=g))  # noqa: E731
    first = draw(2, 4)
    mixed = _shuffled([first, 5, draw(1, first - 1)], g)  # three lengths, one of them n = 5
    one = draw(1, 3)
    empty = _shuffled([4, 0, draw(1, 3)], g)
    int32 = _shuffled(torch.randperm(6, generator=g)[:3].add(1).tolist(), g)  # three different lengths in 1 .. 6
    return [
        (mixed, 5, torch.int64, _("lengths {lengths} and n=5", lengths=mixed)),
        ([one], 4, torch.int64, _("a batch of one: lengths {lengths} and n=4", lengths=[one])),
        (empty, 4, torch.int64, _("lengths {lengths} and n=4 (an empty sequence)", lengths=empty)),
        ([3, 3], 3, torch.int64, _("lengths [3, 3] and n=3 (no padding)")),
        ([1], 1, torch.int64, _("lengths [1] and n=1")),
        (int32, 6, torch.int32, _("int32 lengths {lengths} and n=6", lengths=int32)),
    ]


def self_mask_and_mistakes(values: list[int], n: int) -> tuple[Tensor, dict[str, Tensor]]:
    """The right (batch, 1, n, n) mask for these lengths, and {hint: the mask that mistake gives}."""
    B = len(values)
    lengths = torch.tensor(values)
    i = torch.arange(n)[:, None]  # (n, 1) queries
    j = torch.arange(n)[None, :]  # (1, n) keys
    length = lengths.long()[:, None, None, None]  # (B, 1, 1, 1)
    causal = (j <= i).expand(B, 1, n, n)  # (B, 1, n, n)
    key_ok = (j < length).expand(B, 1, n, n)  # keys beyond the length are padding
    query_ok = (i < length).expand(B, 1, n, n)  # the real queries
    ref = causal & key_ok
    mistakes = {
        _("your mask is inverted: True must mean 'may attend'"): ~ref,
        _("padding queries are not blocked: your mask blocks every key for the padding queries (the rows i >= "
          "lengths[b]), as if the padding were on the query axis or on both axes. Block only the padding KEYS (the "
          "columns j >= lengths[b]): a padding query still attends to the real tokens before it, and the loss "
          "ignores its output"): causal & query_ok,
        _("combine the two masks with AND (&): a key must be allowed by both, not by either (|)"): causal | key_ok,
        _("the causal part is missing: query i must not see the keys j > i"): key_ok,
        _("the padding part is missing: keys at positions >= lengths[b] are padding and must be blocked"):
            causal.clone(),
        _("off by one: key j is a real token when j < length (positions count from 0), not j <= length"):
            causal & (j <= length),
        _("queries are the rows (axis -2) and keys the columns (axis -1): your mask is transposed"):
            ref.transpose(-2, -1),
        STRICT: (j < i) & key_ok,
        UPPER: (j >= i) & key_ok,
        ONE_AHEAD: (j <= i + 1) & key_ok,
        _("the padding part is inverted: key j is a real token when j < lengths[b], and the keys j >= lengths[b] "
          "are the ones to block"): causal & ~key_ok,
    }
    return ref, mistakes


@exercise("6.2", "Padding and causal masks combined", answer_name="decoder_self_mask",
          section="Padding and causal together",
          references=("attnbook.models.transformer.Transformer.make_tgt_mask",))
def check_decoder_self_mask(decoder_self_mask) -> str:
    """decoder_self_mask(lengths, n) -> bool (batch, 1, n, n): query i may attend to key j when j <= i and
    j < lengths[b]."""
    inputs = self_mask_batches()

    def one(item, runs: list[Run]) -> Run:
        values, n, dtype, on = item
        lengths = torch.tensor(values, dtype=dtype)
        got = call(decoder_self_mask, lengths, n, what="decoder_self_mask", on=on, forbid=MASK_FORBIDDEN,
                   prepare=import_mask_makers_first)
        B = len(values)
        ref, mistakes = self_mask_and_mistakes(values, n)
        shape_hints = {
            (B, n, n): _("add the head axis: the result must be (batch, 1, n, n), so that it broadcasts over the "
                         "heads of (batch, heads, n, n) scores"),
            (B, 1, 1, n): _("that is only the padding part, (batch, 1, 1, n); AND it with the (n, n) causal mask, "
                            "which broadcasts it to (batch, 1, n, n)"),
            (n, n): _("that is only the causal part, (n, n); AND it with the padding mask of shape (batch, 1, 1, n)"),
            (B, 1, n): _("the padding mask needs two size-1 axes, for heads and queries: (batch, 1, 1, n)"),
        }
        shape_hints.setdefault((1, B, n, n), _("the batch axis comes first: (batch, 1, n, n)"))
        mask_type(got, ref, what=_("your mask"), on=on, shape_hints=shape_hints,
                  shape_hint=_("the mask is (batch, 1, n, n): for each sequence, one row per query and one column "
                               "per key, with a size-1 axis for the heads"))
        return Run(on, got, ref, mistakes, detail=lambda index: _self_mask_detail(values, ref, index))

    verdict(collect(inputs, one), what=_("your mask"), rule=None)
    return _("right on {len_inputs} batches, including an empty sequence, no padding and a batch of one",
             len_inputs=len(inputs))
