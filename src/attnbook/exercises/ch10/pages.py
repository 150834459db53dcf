"""Checker for exercise 10.4, read a sequence from a paged cache: position t of the sequence sits in block
block_table[t // block_size] of the pool, at slot t % block_size; the result is the first `length` of them, in
order, exact."""
from __future__ import annotations

import re

import torch
from torch import Tensor

from ..compare import generator
from ..guard import call
from ..registry import exercise
from ..runs import Run, collect, expect_like, try_mistake, verdict
from ...i18n import N_, _


_GATHER_FORBIDDEN = [("attnbook.serving.PagedKVCache",
                      N_("index the pool yourself with the block table (indexing, reshape, torch.cat)"))]
_RULE = N_("position t of the sequence sits in block block_table[t // block_size] at slot t % block_size, where "
           "block_size is pool.shape[1]; keep the first length positions, in order")
_DTYPE_HINT = N_("gathering copies the pool's numbers: keep its dtype (no .float(), .double() or .half(), and "
                 "new tensors made with dtype=pool.dtype)")

# (description, (num_blocks, block_size, n_heads, d_head), length, dtype, block ids the table draws from (None:
# every block of the pool)). The first case has a table of ids below block_size, 4 blocks of 4 slots for 14
# tokens: there the mistakes that swap block and slot index the pool without an error, so they can be named; and
# no other axis of its pool is 5 or 6, which would read 3 blocks, the 12 rows of the full blocks alone.
_CASES = [
    (N_("14 tokens in blocks of 4 slots: a pool of 7 blocks, 3 heads of 2, a block table of 4 ids"),
     (7, 4, 3, 2), 14, torch.float32, 4),
    (N_("10 tokens in blocks of 4 slots, the last block half full: a pool of 7 blocks, 3 heads of 5, in float64"),
     (7, 4, 3, 5), 10, torch.float64, None),
    (N_("7 tokens in blocks of 2 slots: a pool of 9 blocks, one head of 6, in float16"),
     (9, 2, 1, 6), 7, torch.float16, None),
    (N_("6 tokens that fill 2 blocks of 3 slots exactly: a pool of 5 blocks, 2 heads of 4"),
     (5, 3, 2, 4), 6, torch.float32, None),
    (N_("blocks of a single slot: 4 tokens, a pool of 6 blocks, 2 heads of 3"), (6, 1, 2, 3), 4, torch.float32, None),
    (N_("5 tokens in one block of 8 slots: a pool of 4 blocks, 2 heads of 2"), (4, 8, 2, 2), 5, torch.float32, None),
    (N_("an empty sequence (length 0, an empty block table) in float64: a pool of 3 blocks of 4 slots, 2 heads of 3"),
     (3, 4, 2, 3), 0, torch.float64, None),
]


def _table(g: torch.Generator, num_blocks: int, n: int, ids: int | None) -> Tensor:
    """n distinct block ids from range(ids or num_blocks), in an order that is not sorted (n > 1), not block 0
    alone (n = 1): neither reading the blocks in order nor sorting the table gives the right sequence."""
    while True:
        table = torch.randperm(ids or num_blocks, generator=g)[:n]
        if n == 0 or (n == 1 and table[0] != 0) or (n > 1 and not bool((table[1:] > table[:-1]).all())):
            return table


def _case(desc, shape, length, dtype, ids, seed):
    g = generator(seed)
    # every slot filled (other sequences' entries), drawn in float64: a float64 pool holds numbers that a trip
    # through float32 would round
    pool = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
    return desc, pool, _table(g, shape[0], -(-length // shape[1]), ids), length


def _at(pool: Tensor, rows) -> Tensor:
    """The entries pool[b, s] for each (b, s) in rows, stacked: (len(rows), n_heads, d_head)."""
    return torch.stack([pool[b, s] for b, s in rows]) if rows else pool.new_zeros(0, *pool.shape[2:])


def _by_position(pool: Tensor, table: Tensor, length: int, block_size: int) -> Tensor:
    """Position t read from block table[t // block_size], slot t % block_size (IndexError when out of range)."""
    return _at(pool, [(int(table[t // block_size]), t % block_size) for t in range(length)])


def _forms_of(fn) -> list:
    """fn()'s output as a list of one form, or [] where that mistake raises (see runs.try_mistake)."""
    out = try_mistake(fn)
    return out if isinstance(out, list) else [out]


def _mistakes(pool: Tensor, table: Tensor, length: int) -> dict:
    num_blocks, bs, h, d = pool.shape
    n = table.numel()
    blocks = pool[table]  # (n, bs, h, d)
    out = {
        N_("you returned every slot of the last block: the sequence ends at position length - 1, so cut the "
           "result to its first length rows"): blocks.reshape(-1, h, d),
        N_("you read the blocks in the pool's order 0, 1, 2, ...; the block table says which block holds each "
           "part of the sequence: its j-th entry is the block of positions j * block_size and on"):
            pool[:n].reshape(-1, h, d)[:length],
        N_("you sorted the block table: its order is the order of the sequence, and the blocks were taken "
           "wherever the pool had room"): pool[table.sort().values].reshape(-1, h, d)[:length],
        N_("you took position t from entry t % block_size of the block table (or t % n_blocks, after a transpose) "
           "at slot t // block_size: block and slot are the other way round; position t is in block "
           "block_table[t // block_size] at slot t % block_size, so the slots of one block are consecutive "
           "positions"): [
            blocks.transpose(0, 1).reshape(-1, h, d)[:length],  # (bs, n, h, d) flattened: slot-major
            *_forms_of(lambda: _at(pool, [(int(table[t % bs]), t // bs) for t in range(length)]))],
        N_("you indexed the pool as pool[slot, block]; its first axis is the block, the second the slot: "
           "pool[block, slot]"): try_mistake(lambda: _at(pool, [(t % bs, int(table[t // bs]))
                                                                for t in range(length)])),
        N_("you returned one row too few: positions run from 0 to length - 1, all of them"):
            blocks.reshape(-1, h, d)[:length - 1] if length else None,
        N_("you returned the positions as (n_heads, length, d_head); return (length, n_heads, d_head), one row "
           "per position"): blocks.reshape(-1, h, d)[:length].transpose(0, 1),
        N_("you returned the gathered blocks, (n_blocks, block_size, n_heads, d_head): join them into one "
           "(length, n_heads, d_head) tensor of the sequence's positions"): blocks,
    }
    right = blocks.reshape(-1, h, d)[:length]
    full, rest = divmod(length, bs)
    out[N_("you left out the last block, which the sequence fills only in part: a sequence of length tokens "
           "uses ceil(length / block_size) blocks, and every one of its positions belongs in the result")] = (
        blocks[:full].reshape(-1, h, d) if rest else None)
    out[N_("when the sequence fills its last block exactly, length % block_size is 0: that block is full, not "
           "empty, and all its slots belong in the result")] = (
        blocks[:-1].reshape(-1, h, d) if length and not rest else None)
    out[N_("the positions are right but the numbers were rounded: somewhere they went through a smaller dtype "
           "(.half(), .bfloat16(), .float()); a gather only copies, so keep the pool's dtype throughout")] = [
        (right.to(low).to(pool.dtype), 0.0, 0.0) for low in (torch.float16, torch.bfloat16, torch.float32)]
    wrong_size = N_("block_size is pool.shape[1], the number of slots in a block; you took the size of another "
                    "axis of the pool")
    out[wrong_size] = [form for size in sorted({num_blocks, h, d} - {bs}) for form in (
        *_forms_of(lambda size=size: _by_position(pool, table, length, size)),
        pool[table[:-(-length // size)]].reshape(-1, h, d)[:length])]
    return out


def _gather_error_hint(message: str) -> str | None:
    if re.search(r"out of (bounds|range)", message):
        return _("position t sits in block block_table[t // block_size] at slot t % block_size, with block_size = "
                 "pool.shape[1]; an index out of range means one of: block and slot were swapped, block_size came "
                 "from another axis, or one block more than the table holds (a sequence uses ceil(length / "
                 "block_size) blocks; length // block_size + 1 is one too many when the last block is full)")
    return None


@exercise("10.4", "Read a sequence from a paged cache", answer_name="gather_pages",
          section="A paged KV cache", references=("attnbook.serving.gather_pages",))
def check_gather_pages(gather_pages) -> str:
    """gather_pages(pool, block_table, length) -> (length, n_heads, d_head): position t from
    pool[block_table[t // block_size], t % block_size], exactly."""
    cases = [_case(*case, seed=400 + i) for i, case in enumerate(_CASES)]

    def one(case, runs):
        desc, pool, table, length = case
        got = call(gather_pages, pool, table, length, what="gather_pages", on=desc, forbid=_GATHER_FORBIDDEN,
                   explain=_gather_error_hint, reload=True)
        ref = _by_position(pool, table, length, pool.size(1))  # (length, n_heads, d_head)
        mistakes = {_(hint): wrong for hint, wrong in _mistakes(pool, table, length).items()}
        got = expect_like(got, ref, mistakes, runs, what=_("your result"), on=_(desc), dtype=pool.dtype,
                          input_name="pool", dtype_hint=_DTYPE_HINT)
        return Run(_(desc), got, ref, mistakes, atol=0.0, rtol=0.0)

    verdict(collect(cases, one), what=_("your result"), rule=_(_RULE),
            nan_hint=_("a gather copies the pool's numbers and computes none: a NaN or inf that the pool does not "
                       "hold at that position came from arithmetic on the values"))
    return _("exact on {n} sequences, from a single block to a half-full last block, blocks of one slot and an "
             "empty sequence, in float16, float32 and float64", n=len(cases))
