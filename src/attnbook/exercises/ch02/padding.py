"""Checker for exercise 2.3, a padding mask from sequence lengths."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import expect_tensor, generator
from ..guard import call
from ..registry import exercise, Wrong
from ..runs import Run, collect, known_mistake
from ...i18n import N_, _


_MASK_RULE = (N_("row b is True at its first lengths[b] positions (positions 0 to lengths[b] - 1: the real tokens) "
                 "and False at the positions after them, up to max_len (the padding)"))


def _mask_mistakes(lengths: Tensor, max_len: int) -> dict[str, Tensor]:
    """{hint: the mask that mistake gives} on this input (bool, (batch, max_len))."""
    positions = torch.arange(max_len)
    ref = positions[None, :] < lengths[:, None]
    return {
        _("your mask is inverted: True must mark the real tokens (the first lengths[b] positions), "
          "False the padding"): ~ref,
        _("off by one: position p is a real token when p < length (positions count from 0), not p <= length"):
            positions[None, :] <= lengths[:, None],
        _("off by one: each row must have exactly lengths[b] True values; positions count from 0, so the real "
          "tokens are positions 0 to lengths[b] - 1"): positions[None, :] < lengths[:, None] - 1,
    }


def _padding_cases(g: torch.Generator) -> list[tuple]:
    """(lengths, max_len, description[, dtype]) for 2.3, drawn from `g` (new lengths on every run), each keeping the
    edge case it is there for: a sequence that fills every position, an empty one, a batch of one, every sequence
    padded, no padding at all, and int32 lengths with both an empty and a full sequence."""
    def draw(low: int, high: int, n: int) -> list[int]:  # n integers from low to high, both included
        return torch.randint(low, high + 1, (n,), generator=g).tolist()

    def put(values: list[int], value: int) -> list[int]:  # `value` at a random position of `values`
        values[int(torch.randint(len(values), (), generator=g))] = value
        return values

    full = put(draw(0, 4, 3), 4)
    empty = put(draw(1, 3, 2), 0)
    one = draw(1, 4, 1)
    padded = draw(1, 6, 5)
    m = draw(3, 6, 1)[0]
    both = [0, draw(1, 2, 1)[0], 3]
    both = [both[i] for i in torch.randperm(3, generator=g).tolist()]
    return [
        (full, 4, _("lengths {lengths} and max_len=4 (a sequence fills every position)", lengths=full)),
        (empty, 3, _("lengths {lengths} and max_len=3 (an empty sequence)", lengths=empty)),
        (one, 5, _("lengths {lengths} and max_len=5 (a batch of one)", lengths=one)),
        (padded, 7, _("lengths {lengths} and max_len=7 (every sequence is padded)", lengths=padded)),
        ([m, m], m, _("lengths {lengths} and max_len={m} (no padding at all)", lengths=[m, m], m=m)),
        (both, 3, _("int32 lengths {lengths} and max_len=3", lengths=both), torch.int32),
    ]


@exercise("2.3", "A padding mask from sequence lengths", answer_name="padding_mask",
          section="Masking: keep attention off the padding",
          references=("attnbook.masks.padding_mask",))
def check_padding_mask(padding_mask) -> str:
    """padding_mask(lengths, max_len) -> bool (batch, max_len), True at the first lengths[b] positions."""
    cases = _padding_cases(generator(23))

    def one(case, runs):
        values, max_len, desc, *dtype = case
        lengths = torch.tensor(values, dtype=dtype[0] if dtype else torch.int64)
        ref = torch.arange(max_len)[None, :] < lengths[:, None]  # (batch, max_len), True at real tokens
        got = call(padding_mask, lengths, max_len, what="padding_mask", on=desc)
        got = expect_tensor(got, what=_("your mask"), on=desc, finite=False)
        batch = len(values)
        if tuple(got.shape) != (batch, max_len):
            transposed = tuple(got.shape) == (max_len, batch) and got.dtype == torch.bool and torch.equal(got, ref.T)
            longest = tuple(got.shape) == (batch, max(values)) and max(values) != max_len
            raise Wrong(_("your mask has shape {tuple_got_shape} on {desc}, expected (batch, max_len) = "
                          "{batch_max_len}",
                          tuple_got_shape=tuple(got.shape), desc=desc, batch_max_len=(batch, max_len)),
                        _("your mask is transposed: one row per sequence, one column per position") if transposed
                        else _("your mask has one column per position up to the longest length; it must have "
                               "max_len columns, and max_len can be larger than every length") if longest else None)
        if got.dtype != torch.bool:
            zero_one = not got.is_complex() and bool(((got == 0) | (got == 1)).all())
            hint = (_("compare, don't cast: a comparison of the positions with the lengths already gives a bool "
                      "tensor (or finish with .bool())") if zero_one
                    else _("a mask holds True/False: build it with a comparison"))
            raise Wrong(_("your mask has dtype {dtype} on {desc}, expected torch.bool (masks are boolean, "
                          "True = real token)", dtype=got.dtype, desc=desc), hint)
        return Run(desc, got, ref, _mask_mistakes(lengths, max_len))

    runs = collect(cases, one)
    first = next((r for r in runs if not r.right), None)
    if first is None:
        return _("right on {len_cases} batches, including an empty sequence and one with no padding",
                 len_cases=len(cases))
    hint = known_mistake(runs)
    if hint is not None:
        raise Wrong(_("your mask has the wrong values on {desc}", desc=first.on), hint)
    got, ref = first.got, first.ref
    row, pos = (int(i) for i in (got != ref).nonzero()[0])
    raise Wrong(_("your mask has the wrong values on {desc}: row {row} (length {values_row}) is "
                  "{bool_got_row_pos} at position {pos}, expected {bool_ref_row_pos}",
                  desc=first.on, row=row, values_row=int(ref[row].sum()), bool_got_row_pos=bool(got[row, pos]),
                  pos=pos, bool_ref_row_pos=bool(ref[row, pos])), _MASK_RULE)  # (every length is at most max_len)
