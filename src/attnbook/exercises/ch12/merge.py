"""Checker for exercise 12.3, one byte-pair-encoding merge: every non-overlapping occurrence of `pair` in a list
of ids, from left to right, becomes new_id, in a new list. The reference is `attnbook.text.merge_pair`."""
from __future__ import annotations

import operator
import random
import re
from functools import partial

from ...text import merge_pair as _right
from ..compare import case_seed
from ..guard import call
from ..hints import describe
from ..observe import Observer
from ..registry import exercise, Wrong
from ._shared import judge
from ...i18n import N_, _

MERGE_FORBIDDEN = [
    (name, N_("walk through the list yourself, with an index that moves by 2 after a merge and by 1 otherwise"))
    for name in ("attnbook.text.train_bpe", "attnbook.text.BPE.encode", "attnbook.text.BPE")
]


class IdsKept(Observer):
    """(whether the list at `position` still equals `original` after the call (not changed in place), whether the
    output is that very list (not a new one))."""

    def __init__(self, position: int, original: list):
        self.params = {"position": position, "original": list(original)}

    def read(self, output, args, kwargs):
        given = args[self.params["position"]]
        return isinstance(given, list) and given == self.params["original"], output is given


# The ten cases as patterns over the symbols 0, 1, 2, 3 (ids, pair, what the case is for). Each run puts other ids
# in place of the symbols, drawn from its seed (compare.case_seed): distinct byte values 0..255 for the symbols and a
# new_id of 256 or more, as a merge makes, so that the same structure holds in every run. The first case has the pair
# at both ends; the runs of one id tell left to right from right to left and from overlapping merges; the last id
# outside a pair, an empty list and one id catch loops that stop early or start late. The case of ids of two digits
# (built apart, below) catches a merge done on text, and the 2,000 ids have runs of the pair and of single ids.
PATTERNS = [
    ([0, 1, 2, 0, 1], (0, 1), N_("the pair at the start and the end")),
    ([0, 0, 0], (0, 0), N_("three in a row")),
    ([0, 1, 2], (2, 3), N_("no occurrence")),
    ([1, 0, 1, 0], (0, 1), N_("the reversed pair is there too")),
    ([0, 0, 0, 0, 0], (0, 0), N_("five in a row")),
    None,  # ids of two digits
    ([3, 0, 1, 2], (0, 1), N_("one occurrence in the middle")),
    ([], (0, 1), N_("an empty list")),
    ([0], (0, 0), N_("one id")),
]
LONG = 2000  # ids in the last case


def cases() -> list[tuple[list[int], tuple[int, int], int, str]]:
    """[(ids, pair, new_id, description)] of this run."""
    rng = random.Random(case_seed(1203))
    out = []
    for pattern in PATTERNS:
        if pattern is None:
            # [10 r + a, b, a, 10 b + s, a, b] with pair (a, b) of one digit each: joined as text, "r a b" holds
            # "a b" (inside "10 r + a" followed by b) and so does "a b s" (a followed by 10 b + s)
            a, b = rng.sample(range(1, 10), 2)
            r, s = rng.randint(1, 9), rng.randint(0, 9)
            ids = [10 * r + a, b, a, 10 * b + s, a, b]
            new = rng.randint(256, 999)
            out.append((ids, (a, b), new, _("ids={ids}, pair={pair}, new_id={new_id}: ids of two digits",
                                             ids=ids, pair=(a, b), new_id=new)))
            continue
        ids, pair, what = pattern
        symbol = rng.sample(range(256), 4)
        new = rng.randint(256, 999)
        ids, pair = [symbol[i] for i in ids], (symbol[pair[0]], symbol[pair[1]])
        out.append((ids, pair, new, _("ids={ids}, pair={pair}, new_id={new_id}: {what}", ids=ids, pair=pair,
                                      new_id=new, what=_(what))))
    symbol = rng.sample(range(256), 3)
    ids = [symbol[rng.choice((0, 1, 1, 2))] for _unused in range(LONG)]
    new = rng.randint(256, 999)
    out.append((ids, (symbol[1], symbol[2]), new,
                _("{n:,} random ids from {{{x}, {y}, {z}}}, pair=({y}, {z}), new_id={new_id}", n=LONG, x=symbol[0],
                  y=symbol[1], z=symbol[2], new_id=new)))
    return out


def _right_to_left(ids, pair, new):
    return _right(ids[::-1], pair[::-1], new)[::-1]


def _merged(ids, pair, new, *, stop=0, either_order=False, step=2, overlap=False, write=True):
    """A merge from the left with one thing changed: the loop stops `stop` positions before the end, the reversed
    pair matches too, a merge moves on by `step`, or by 1 where the pair starts again (`overlap`), or the pair is
    dropped instead of replaced (not `write`)."""
    pairs = {tuple(pair), tuple(pair)[::-1]} if either_order else {tuple(pair)}
    out, i = [], 0
    while i < len(ids) - stop:
        if tuple(ids[i:i + 2]) in pairs:
            out += [new] if write else []
            i += 1 if overlap and tuple(ids[i + 1:i + 3]) in pairs else step
        else:
            out.append(ids[i])
            i += 1
    return out


def _first_only(ids, pair, new):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new] + ids[i + 2:]
    return list(ids)


def _as_text(ids, pair, new):
    text = " ".join(map(str, ids)).replace(f"{pair[0]} {pair[1]}", str(new))
    return [int(t) for t in text.split()]


def _as_padded_text(ids, pair, new):
    text = (" " + " ".join(map(str, ids)) + " ").replace(f" {pair[0]} {pair[1]} ", f" {new} ")
    return [int(t) for t in text.split()]


MISTAKES = {
    N_("merge from left to right: in [a, a, a] with pair (a, a), the first two ids merge and the third stays"):
        _right_to_left,
    N_("the occurrences must not overlap: once two ids are merged, the scan goes on after both of them"):
        partial(_merged, overlap=True),
    N_("the last id is lost when it is not the end of a merged pair: your loop stops one position before the end, "
       "so add the last id after it (or loop while i < len(ids) and test i + 1 < len(ids))"): partial(_merged, stop=1),
    N_("merge every occurrence of the pair, not only the first"): _first_only,
    N_("after writing new_id, skip both ids of the pair (move on by 2): the second id is part of the merged token"):
        partial(_merged, step=1),
    N_("the pair is ordered: (a, b) matches a followed by b, not b followed by a"): partial(_merged, either_order=True),
    N_("joining the ids into a string and replacing text also matches digits inside other ids ('1 2' inside "
       "'11 2' and '1 21'): compare ids, not text"): _as_text,
    N_("replacing the pair in the joined text, with a space on each side: a match uses up the space after it, so "
       "an occurrence that starts right after a merge is not found; compare ids, not text"): _as_padded_text,
    N_("put new_id where the pair was: the merged token replaces the two ids"): partial(_merged, write=False),
    N_("nothing was merged: is the comparison ever true? A list never equals a tuple ([1, 2] == (1, 2) is False): "
       "compare ids[i] == pair[0] and ids[i + 1] == pair[1]"): lambda ids, pair, new: list(ids),
}


def _merge_error_hint(message: str) -> str | None:
    if "list index out of range" in message:
        return (_("at the last position there is no next id: test i + 1 < len(ids) before reading ids[i + 1] (an "
                  "empty list and a pair at the very end must work)"))
    if "'tuple' object does not support item assignment" in message:
        return _("pair is a tuple, which cannot change: build a new list for the result")
    if re.search(r"bytes? must be in range\(0, 256\)", message):
        return (_("ids are token ids, not bytes: a merge makes ids of 256 and above (new_id is one), which bytes and "
                  "bytearray cannot hold; work on the list of ints itself"))
    return None


def _unmerged(got: list, pair, new) -> list:
    """The learner's list with the pair put back in place of every new_id."""
    return [x for y in got for x in (pair if y == new else (y,))]


def _merge_starts(got: list, new) -> list[int]:
    """Where, in ids, each merge of the learner's list starts (when `_unmerged` gives ids back)."""
    starts, position = [], 0
    for y in got:
        if y == new:
            starts.append(position)
        position += 2 if y == new else 1
    return starts


def _rule_broken(got: list, ids: list, pair, new) -> str:
    """A hint for a wrong list that no known mistake explains: the rule of a merge that it breaks on this case, found
    by reading it as ids with some pairs replaced. Either it is not that (ids lost, added or changed), or the first
    difference from the right merges is an occurrence of the pair that it leaves unmerged: merging from the left,
    the first position where two readings of ids differ is always one that the left-to-right reading merges."""
    if _unmerged(got, pair, new) != list(ids):
        return _("putting the pair back in place of every new_id in your list does not give ids again: ids were lost, "
                 "added or changed. A merge only replaces occurrences of the pair by new_id; every other id stays, in "
                 "order")
    mine, right = set(_merge_starts(got, new)), set(_merge_starts(_right(ids, pair, new), new))
    first = min(mine ^ right)  # in `right` only (see the docstring)
    return _("ids[{i}] and ids[{j}] are the pair and no earlier merge uses ids[{i}], but your list leaves them "
             "unmerged: every occurrence of the pair that does not overlap an earlier merge becomes new_id",
             i=first, j=first + 1)


def _merged_list(merge_pair, ids, pair, new, on) -> list:
    """The learner's result on one case, as a list of ints; Wrong for a change in place or another type."""
    got, (kept, same) = call(merge_pair, list(ids), pair, new, what="merge_pair", on=on, forbid=MERGE_FORBIDDEN,
                             explain=_merge_error_hint, observe=IdsKept(0, ids))
    if not kept:
        raise Wrong(_("merge_pair changed its input `ids` in place on {on}", on=on),
                    _("build and return a new list (out = [] then out.append(...)); leave ids as it came in"))
    if got is None:
        raise Wrong(_("merge_pair returned None on {on}, expected a list",
                      on=on), _("did you forget the `return` statement?"))
    if same:
        raise Wrong(_("merge_pair returned the list `ids` it was given on {on}, expected a new list", on=on),
                    _("build a new list every time, also when nothing is merged: code that later changes the result "
                      "would change the caller's ids too"))
    if type(got).__name__ in ("bytes", "bytearray"):  # by name: in the grader it comes back as a stand-in (codec)
        raise Wrong(_("merge_pair returned {describe_got} on {on}, expected a list of ints",
                      describe_got=describe(got), on=on),
                    _("return a list of ints, not bytes: the ids a merge makes are 256 and above, which bytes cannot "
                      "hold"))
    if not isinstance(got, list):
        raise Wrong(_("merge_pair returned {describe_got} on {on}, expected a list of ints",
                      describe_got=describe(got), on=on),
                    _("return a Python list, e.g. built with out = [] and out.append(...)"))
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in got):
        bad = next(x for x in got if not isinstance(x, int) or isinstance(x, bool))
        raise Wrong(_("merge_pair returned a list holding {describe_bad} on {on}, expected ints only",
                      describe_bad=describe(bad), on=on),
                    _("keep the ids as Python ints: copy them from ids and add new_id itself"))
    return got


@exercise("12.3", "One merge of byte-pair encoding", answer_name="merge_pair",
          section="Byte-pair encoding from scratch",
          references=("attnbook.text.merge_pair",))
def check_merge_pair(merge_pair) -> str:
    """merge_pair(ids, pair, new_id) -> a new list, every occurrence of pair (left to right) replaced by new_id."""
    all_cases = cases()
    inputs = [case[:3] for case in all_cases]
    found = judge(lambda i: _merged_list(merge_pair, *all_cases[i]), inputs, _right, MISTAKES, same=operator.eq)
    if found is None:
        return (_("right on {len_cases} lists, including runs of one id, a pair at either end, ids of two "
                  "digits, an empty list and 2,000 random ids", len_cases=len(all_cases)))
    i, got, hint = found
    ids, pair, new, on = all_cases[i]
    want = _right(ids, pair, new)
    where = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    if where != min(len(got), len(want)):
        detail = _("they first differ at index {where}", where=where)
    elif len(got) == 1:
        detail = _("your list has 1 id, the right one {len_want}", len_want=len(want))
    else:
        detail = _("your list has {len_got} ids, the right one {len_want}", len_got=len(got), len_want=len(want))
    raise Wrong(_("merge_pair is wrong on {on}: {detail}", on=on, detail=detail),
                hint or _rule_broken(got, ids, pair, new))
