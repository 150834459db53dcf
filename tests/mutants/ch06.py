"""Chapter 6 (decoder masking, cross-attention, greedy decoding): learner answers to exercises 6.1-6.4."""
from __future__ import annotations

import functools
import importlib.util
import sys
import types

import numpy as np
import torch
from torch import nn

from mutants import right, wrong

import attnbook.masks as _masks
import attnbook.models.transformer as _transformer

# ----------------------------------------------------------------------------------------------------------
# 6.1 causal_mask(n): bool (n, n), True on and below the diagonal
# ----------------------------------------------------------------------------------------------------------


@wrong("6.1", hint="diagonal")
def causal_mask_strict(n):
    """strictly below the diagonal: tril(-1), a query may not attend to itself"""
    return torch.ones(n, n, dtype=torch.bool).tril(-1)


@wrong("6.1", hint="upper triangle")
def causal_mask_upper(n):
    """the upper triangle (triu): rows and columns swapped, each query sees the future"""
    return torch.ones(n, n, dtype=torch.bool).triu()


@wrong("6.1", hint="inverted")
def causal_mask_blocked_convention(n):
    """nn.MultiheadAttention's convention: True = blocked (above the diagonal)"""
    return torch.ones(n, n, dtype=torch.bool).triu(1)


@wrong("6.1", hint="bool")
def causal_mask_float(n):
    """float 0/1 mask: torch.ones(n, n).tril() without dtype=torch.bool"""
    return torch.ones(n, n).tril()


@wrong("6.1", hint="bool")
def causal_mask_long(n):
    """integer 0/1 mask from torch.tril(torch.ones(..., dtype=torch.long))"""
    return torch.tril(torch.ones(n, n, dtype=torch.long))


@wrong("6.1", hint="bool")
def causal_mask_uint8(n):
    """old-PyTorch style uint8 mask: torch.tril(torch.ones(n, n)).byte()"""
    return torch.tril(torch.ones(n, n)).byte()


@wrong("6.1", hint="additive")
def causal_mask_additive(n):
    """additive 0/-inf mask (what nn.Transformer.generate_square_subsequent_mask returns)"""
    return torch.zeros(n, n).masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))


@wrong("6.1", hint="without torch.nn.Transformer.generate_square_subsequent_mask")
def causal_mask_generate_square(n):
    """calls nn.Transformer.generate_square_subsequent_mask, which the task forbids, and converts it"""
    return nn.Transformer.generate_square_subsequent_mask(n) == 0


@wrong("6.1", hint="package's own")
def causal_mask_attnbook(n):
    """calls attnbook.masks.causal_mask"""
    return _masks.causal_mask(n)


wrong("6.1", hint="package's own", name="attnbook.masks.causal_mask handed in as it is")(_masks.causal_mask)
wrong("6.1", hint="package's own", name="a lambda around attnbook.masks.causal_mask")(lambda n: _masks.causal_mask(n))


@wrong("6.1", hint="shape")
def causal_mask_off_by_one(n):
    """(n + 1, n + 1): off by one in the size"""
    return torch.ones(n + 1, n + 1, dtype=torch.bool).tril()


@wrong("6.1", hint="shape")
def causal_mask_4d(n):
    """(1, 1, n, n): already broadcast over batch and heads"""
    return torch.ones(n, n, dtype=torch.bool).tril()[None, None]


@wrong("6.1")
def causal_mask_hard_coded(n):
    """hard-codes the n = 3 example of the task text"""
    return torch.tensor([[True, False, False], [True, True, False], [True, True, True]])


@wrong("6.1", hint="tensor")
def causal_mask_numpy(n):
    """returns a numpy array (np.tril) instead of a tensor"""
    return np.tril(np.ones((n, n), dtype=bool))


@wrong("6.1", hint="tensor")
def causal_mask_list(n):
    """returns nested Python lists"""
    return [[j <= i for j in range(n)] for i in range(n)]


@wrong("6.1", hint="shape")
def causal_mask_row(n):
    """only the last row: arange(n) <= n - 1, a 1-D mask"""
    return torch.arange(n) <= n - 1


@right("6.1")
def causal_mask_arange(n):
    """compares column and row indices: arange(n)[None, :] <= arange(n)[:, None]"""
    i = torch.arange(n)
    return i[None, :] <= i[:, None]


@right("6.1")
def causal_mask_loops(n):
    """two Python loops filling a zeros(bool) tensor"""
    m = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(i + 1):
            m[i, j] = True
    return m


@right("6.1")
def causal_mask_not_triu(n):
    """the complement of the strict upper triangle: ~triu(ones, 1)"""
    return ~torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


@right("6.1")
def causal_mask_float_then_bool(n):
    """torch.tril(torch.ones(n, n)).bool()"""
    return torch.tril(torch.ones(n, n)).bool()


@right("6.1")
def causal_mask_from_numpy(n):
    """np.tril in numpy, converted with torch.from_numpy"""
    return torch.from_numpy(np.tril(np.ones((n, n), dtype=bool)))


@right("6.1")
def causal_mask_with_device(n, device=None):
    """an extra device keyword with a default"""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


@right("6.1")
def causal_mask_row_slices(n):
    """one Python loop setting each row's prefix m[i, :i + 1] = True in a zeros(bool) tensor"""
    m = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        m[i, : i + 1] = True
    return m


# A learner trial (F5): a mask made once at a fixed size and sliced to n; the largest n checked used to be 24
_BLOCK_32 = torch.tril(torch.ones(32, 32, dtype=torch.bool))
_BLOCK_64 = torch.tril(torch.ones(64, 64, dtype=torch.bool))
_BLOCK_256 = torch.tril(torch.ones(256, 256, dtype=torch.bool))


@wrong("6.1", hint="a size is fixed in your code")
def causal_mask_block_32(n):
    """a module-level 32 x 32 tril sliced to [:n, :n] (a cap: (32, 32) for every n > 32)"""
    return _BLOCK_32[:n, :n]


@wrong("6.1", hint="a size is fixed in your code")
def causal_mask_block_64(n):
    """a cached 64 x 64 tril sliced to [:n, :n]"""
    return _BLOCK_64[:n, :n]


@wrong("6.1", hint="a size is fixed in your code")
def causal_mask_block_256(n):
    """nanoGPT's block_size 256: a 256 x 256 tril buffer sliced to [:n, :n]"""
    return _BLOCK_256[:n, :n]


@wrong("6.1", hint="a size is fixed in your code")
def causal_mask_block_64_clamped(n):
    """a 64 x 64 tril made on every call from min(n, 64): torch.ones(m, m).tril() with m = min(n, 64)"""
    m = min(n, 64)
    return torch.ones(m, m, dtype=torch.bool).tril()


# ----------------------------------------------------------------------------------------------------------
# 6.2 decoder_self_mask(lengths, n): bool (batch, 1, n, n), causal AND real keys
# ----------------------------------------------------------------------------------------------------------


def _causal(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def _real(lengths, n):
    return torch.arange(n, device=lengths.device)[None, :] < lengths[:, None]  # (batch, n)


@wrong("6.2", hint="causal")
def decoder_self_mask_no_causal(lengths, n):
    """padding keys blocked but no causal mask"""
    return _real(lengths, n)[:, None, None, :].expand(-1, 1, n, n)


@wrong("6.2", hint="padding")
def decoder_self_mask_no_padding(lengths, n):
    """causal only, the lengths ignored"""
    return _causal(n)[None, None].expand(lengths.size(0), 1, n, n)


@wrong("6.2", hint="quer")
def decoder_self_mask_pad_queries(lengths, n):
    """padding applied to the queries (rows) instead of the keys (columns)"""
    return _causal(n) & _real(lengths, n)[:, None, :, None]


@wrong("6.2", hint="both")
def decoder_self_mask_pad_both(lengths, n):
    """padding applied to both queries and keys (the task says padding queries are not blocked)"""
    real = _real(lengths, n)
    return _causal(n) & real[:, None, None, :] & real[:, None, :, None]


@wrong("6.2", hint="shape")
def decoder_self_mask_no_head_axis(lengths, n):
    """(batch, n, n): forgot the size-1 head axis"""
    return _causal(n) & _real(lengths, n)[:, None, :]


@wrong("6.2", hint="shape")
def decoder_self_mask_head_axis_first(lengths, n):
    """(1, batch, n, n): the head axis in front of the batch"""
    return (_causal(n) & _real(lengths, n)[:, None, None, :]).transpose(0, 1)


@wrong("6.2")
def decoder_self_mask_length_off_by_one(lengths, n):
    """j <= lengths[b]: lets every query see the first padding key"""
    real = torch.arange(n)[None, :] <= lengths[:, None]
    return _causal(n) & real[:, None, None, :]


@wrong("6.2", hint="keep the diagonal")
def decoder_self_mask_strict(lengths, n):
    """strict causal mask j < i: no query may attend to itself"""
    return torch.ones(n, n, dtype=torch.bool).tril(-1) & _real(lengths, n)[:, None, None, :]


@wrong("6.2", hint="inverted")
def decoder_self_mask_blocked(lengths, n):
    """nn.MultiheadAttention's convention: True = blocked"""
    return ~(_causal(n) & _real(lengths, n)[:, None, None, :])


@wrong("6.2", hint="expected torch.bool")
def decoder_self_mask_float(lengths, n):
    """float 0/1 mask: product of float masks, never converted to bool"""
    return torch.ones(n, n).tril() * _real(lengths, n).float()[:, None, None, :]


@wrong("6.2", hint="upper triangle")
def decoder_self_mask_upper(lengths, n):
    """upper triangle (triu): keys after the query instead of before"""
    return torch.ones(n, n, dtype=torch.bool).triu() & _real(lengths, n)[:, None, None, :]


@wrong("6.2", hint="without attnbook.masks.")
def decoder_self_mask_attnbook_masks(lengths, n):
    """builds it from attnbook.masks.causal_mask and padding_mask, which the task forbids"""
    return _masks.causal_mask(n) & _masks.padding_mask(lengths, n)[:, None, None, :]


@wrong("6.2", hint="without attnbook.masks.")
def decoder_self_mask_combine_masks(lengths, n):
    """uses attnbook.masks.combine_masks to AND them"""
    i = torch.arange(n)
    return _masks.combine_masks(i[None, :] <= i[:, None], (i[None, :] < lengths[:, None])[:, None, None, :])


@wrong("6.2", hint="without")
def decoder_self_mask_generate_square(lengths, n):
    """uses nn.Transformer.generate_square_subsequent_mask for the causal part"""
    causal = nn.Transformer.generate_square_subsequent_mask(n) == 0
    return causal & _real(lengths, n)[:, None, None, :]


@wrong("6.2", hint="shape")
def decoder_self_mask_ignores_n(lengths, n):
    """pads only to the longest length in the batch, ignoring n"""
    m = int(lengths.max())
    return _causal(m) & _real(lengths, m)[:, None, None, :]


@wrong("6.2", hint="in place")
def decoder_self_mask_inplace(lengths, n):
    """shifts lengths in place (lengths.sub_(1)) and compares with <=: right mask, but the caller's lengths change"""
    last = lengths.sub_(1)
    real = torch.arange(n)[None, :] <= last[:, None]
    return _causal(n) & real[:, None, None, :]


@wrong("6.2")
def decoder_self_mask_first_length(lengths, n):
    """uses lengths[0] for every sequence of the batch"""
    real = torch.arange(n) < lengths[0]
    return (_causal(n) & real)[None, None].expand(lengths.size(0), 1, n, n)


@wrong("6.2")
def decoder_self_mask_tril_rows(lengths, n):
    """picks row lengths[b] - 1 of a tril as the key mask: an empty sequence (length 0) indexes row -1, all True"""
    real = torch.ones(n, n, dtype=torch.bool).tril()[lengths - 1]  # (batch, n)
    return torch.ones(n, n, dtype=torch.bool).tril() & real[:, None, None, :]


@wrong("6.2", hint="only the padding part")
def decoder_self_mask_only_padding(lengths, n):
    """returns only the (batch, 1, 1, n) key padding mask, no causal part"""
    return _real(lengths, n)[:, None, None, :]


@wrong("6.2", hint="only the causal part")
def decoder_self_mask_only_causal(lengths, n):
    """returns only the (n, n) causal mask, the lengths ignored"""
    return _causal(n)


@right("6.2")
def decoder_self_mask_reference_style(lengths, n):
    """arange comparisons and broadcasting, as in the chapter"""
    positions = torch.arange(n, device=lengths.device)
    causal = positions[None, :] <= positions[:, None]
    real_key = positions[None, :] < lengths[:, None]
    return causal & real_key[:, None, None, :]


@right("6.2")
def decoder_self_mask_loops(lengths, n):
    """Python loops over batch, queries and keys"""
    out = torch.zeros(len(lengths), 1, n, n, dtype=torch.bool)
    for b, length in enumerate(lengths.tolist()):
        for i in range(n):
            for j in range(min(i + 1, length)):
                out[b, 0, i, j] = True
    return out


@right("6.2")
def decoder_self_mask_slice_columns(lengths, n):
    """tril per sequence, then zero the padding columns by slicing"""
    out = torch.ones(len(lengths), 1, n, n, dtype=torch.bool).tril()
    for b in range(len(lengths)):
        out[b, :, :, int(lengths[b]):] = False
    return out


@right("6.2")
def decoder_self_mask_expanded(lengths, n):
    """logical_and of explicitly expanded masks, with unsqueeze"""
    causal = torch.tril(torch.ones(n, n)).bool().unsqueeze(0).unsqueeze(0)  # (1, 1, n, n)
    keys = (torch.arange(n).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, n)
    return torch.logical_and(causal.expand(len(lengths), 1, n, n), keys.expand(len(lengths), 1, n, n))


@right("6.2")
def decoder_self_mask_einsum(lengths, n, device=None):
    """float masks multiplied with einsum, then > 0; an extra device keyword"""
    causal = torch.ones(n, n, device=device).tril()
    keys = (torch.arange(n, device=device)[None, :] < lengths[:, None]).float()
    return (torch.einsum("ij,bj->bij", causal, keys) > 0)[:, None]


@right("6.2")
def decoder_self_mask_expand_keys(lengths, n):
    """float tril turned .bool(), the key mask expanded over the queries, AND, then the head axis with [:, None]"""
    tri = torch.tril(torch.ones(n, n)).bool()
    real = torch.arange(n)[None, :] < lengths[:, None]  # (batch, n)
    return (tri & real[:, None, :].expand(-1, n, -1))[:, None]


# ----------------------------------------------------------------------------------------------------------
# 6.3 greedy_decode(model, src, max_len, bos_id, eos_id)
# ----------------------------------------------------------------------------------------------------------


def _make_greedy(*, eval_mode=True, bos=None, eos=None, stop="all", fill="pad", steps=lambda m: m - 1,
                 position=-1, keep_bos=True, out=None, sample=False):
    """A greedy decoder with one knob turned (for the wrong answers below)."""

    def greedy_decode(model, src, max_len, bos_id, eos_id):
        if eval_mode:
            model.eval()
        b_id = bos_id if bos is None else bos
        e_id = eos_id if eos is None else eos
        with torch.no_grad():
            src_mask = model.make_src_mask(src)
            memory = model.encode(src, src_mask)
            ys = torch.full((src.size(0), 1), b_id, dtype=torch.long)
            done = torch.zeros(src.size(0), dtype=torch.bool)
            for _ in range(steps(max_len)):
                logits = model.decode(ys, memory, src_mask)[:, position]
                if sample:
                    g = torch.Generator().manual_seed(0)
                    next_id = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=g)[:, 0]
                else:
                    next_id = logits.argmax(dim=-1)
                if fill == "pad":
                    next_id = next_id.masked_fill(done, model.config.pad_id)
                elif fill == "eos":
                    next_id = next_id.masked_fill(done, e_id)
                ys = torch.cat([ys, next_id[:, None]], dim=1)
                done = done | (next_id == e_id)
                if stop == "all" and done.all():
                    break
                if stop == "any" and done.any():
                    break
        result = ys if keep_bos else ys[:, 1:]
        return result if out is None else out(result)

    return greedy_decode


wrong("6.3", hint="bos_id argument", name="hard-codes bos_id = 1 (the chapter's <bos>)")(_make_greedy(bos=1))
wrong("6.3", hint="eos_id argument", name="hard-codes eos_id = 2 (the chapter's <eos>)")(_make_greedy(eos=2))
wrong("6.3", name="hard-codes both bos 1 and eos 2")(_make_greedy(bos=1, eos=2))
wrong("6.3", hint="every row", name="stops as soon as the FIRST row has produced <eos> (done.any())")(
    _make_greedy(stop="any"))
wrong("6.3", hint="stop", name="never stops early: always max_len tokens")(_make_greedy(stop="never"))
wrong("6.3", hint="pad", name="finished rows keep generating (no padding after <eos>)")(_make_greedy(fill="none"))
wrong("6.3", hint="pad", name="finished rows get <eos> again instead of <pad>")(_make_greedy(fill="eos"))
wrong("6.3", hint="max_len", name="range(max_len) steps: <bos> not counted, max_len + 1 tokens")(
    _make_greedy(steps=lambda m: m))
wrong("6.3", hint="max_len", name="range(max_len - 2) steps: one token short")(_make_greedy(steps=lambda m: m - 2))
wrong("6.3", hint="eval", name="never switches to eval mode (dropout stays on)")(_make_greedy(eval_mode=False))
wrong("6.3", hint="LAST position's logits", name="argmax of the FIRST position's logits instead of the last")(
    _make_greedy(position=0))
wrong("6.3", hint="bos", name="drops the leading <bos> from the result")(_make_greedy(keep_bos=False))
wrong("6.3", hint="expected a (batch, length) tensor", name="returns a list of lists (ys.tolist())")(
    _make_greedy(out=lambda ys: ys.tolist()))
wrong("6.3", hint="long", name="returns int32 ids")(_make_greedy(out=lambda ys: ys.int()))
wrong("6.3", hint="expected torch.long", name="returns float ids")(_make_greedy(out=lambda ys: ys.float()))
wrong("6.3", hint="argmax", name="samples from the softmax instead of the argmax")(_make_greedy(sample=True))


@wrong("6.3", hint="vocabulary")
def greedy_decode_argmax_time_axis(model, src, max_len, bos_id, eos_id):
    """argmax over the time axis (dim=1) of the (B, t, V) logits instead of the vocabulary (dim=-1)"""
    model.eval()
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_len - 1):
            logits = model.decode(ys, memory, src_mask)  # (B, t, V)
            next_id = logits.argmax(dim=1)[:, -1] if logits.size(1) > 1 else logits[:, -1].argmax(dim=-1)
            next_id = next_id.clamp(max=model.config.tgt_vocab_size - 1).masked_fill(done, model.config.pad_id)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = done | (next_id == eos_id)
            if done.all():
                break
    return ys


@wrong("6.3", hint="mask")
def greedy_decode_no_src_mask(model, src, max_len, bos_id, eos_id):
    """encodes and decodes with src_mask=None: the source padding is attended to"""
    model.eval()
    with torch.no_grad():
        memory = model.encoder(src, None)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_len - 1):
            next_id = model.decode(ys, memory, None)[:, -1].argmax(dim=-1).masked_fill(done, model.config.pad_id)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = done | (next_id == eos_id)
            if done.all():
                break
    return ys


@wrong("6.3")
def greedy_decode_notebook_loop(model, src, max_len, bos_id, eos_id):
    """the chapter's one-source loop copied: `if next_id.item() == eos_id: break`, no padding"""
    model.eval()
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        for _ in range(max_len - 1):
            next_id = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            if next_id.item() == eos_id:
                break
    return ys


@wrong("6.3", hint="one boolean per row")
def greedy_decode_one_row_at_a_time(model, src, max_len, bos_id, eos_id):
    """one-row code on a whole batch: `if next_id == eos_id: break` on a tensor of ids, no padding"""
    model.eval()
    ys = torch.full((src.size(0), 1), bos_id)
    for _ in range(max_len - 1):
        next_id = model(src, ys)[:, -1].argmax(dim=-1)
        ys = torch.cat([ys, next_id[:, None]], dim=1)
        if next_id == eos_id:
            break
    return ys


@wrong("6.3", hint="pad")
def greedy_decode_done_not_accumulated(model, src, max_len, bos_id, eos_id):
    """done = (next_id == eos_id) instead of done | ...: a finished row gets one <pad>, then generates again"""
    model.eval()
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_len - 1):
            next_id = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1).masked_fill(done, model.config.pad_id)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = next_id == eos_id
            if (ys == eos_id).any(dim=1).all():
                break
    return ys


wrong("6.3", hint="max_len", name="ignores max_len: a hard-coded limit of 10 tokens (the chapter's)")(
    _make_greedy(steps=lambda m: 9))


@wrong("6.3", hint="max_len")
def greedy_decode_at_least_one_step(model, src, max_len, bos_id, eos_id):
    """checks the length only after appending (do-while): max_len = 1 still gets a second token"""
    model.eval()
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        while True:
            next_id = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1).masked_fill(done, model.config.pad_id)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = done | (next_id == eos_id)
            if done.all() or ys.size(1) >= max_len:
                break
    return ys


# the package's own greedy_decode, handed in several ways
wrong("6.3", hint="package's own", name="attnbook.models.greedy_decode handed in as it is")(_transformer.greedy_decode)
wrong("6.3", hint="package's own", name="a lambda around attnbook.models.greedy_decode")(
    lambda model, src, max_len, bos_id, eos_id: _transformer.greedy_decode(model, src, max_len, bos_id, eos_id))


@wrong("6.3", hint="package's own")
def greedy_decode_wrapper(model, src, max_len, bos_id, eos_id):
    """a def wrapper that calls attnbook.models.greedy_decode"""
    from attnbook.models import greedy_decode as package_greedy

    return package_greedy(model, src, max_len=max_len, bos_id=bos_id, eos_id=eos_id)


def _function_copy(f):
    return types.FunctionType(f.__code__, f.__globals__, "greedy_decode", f.__defaults__, f.__closure__)


wrong("6.3", hint="package's own", name="a types.FunctionType copy of attnbook.models.greedy_decode")(
    _function_copy(_transformer.greedy_decode))
wrong("6.3", hint="package's own", name="a FunctionType copy of greedy_decode.__wrapped__ (under the no_grad)")(
    _function_copy(getattr(_transformer.greedy_decode, "__wrapped__", _transformer.greedy_decode)))


def _second_import():
    spec = importlib.util.spec_from_file_location("attnbook.models._transformer_second_copy", _transformer.__file__)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there while it executes
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module.greedy_decode


wrong("6.3", hint="package's own", name="greedy_decode from a second, separate import of transformer.py")(
    _second_import())


def _second_import_same_class():
    fn = _second_import()
    fn.__globals__["Transformer"] = _transformer.Transformer  # so that its isinstance check accepts the model
    return fn


wrong("6.3", hint="package's own",
      name="a second import of transformer.py whose Transformer name points at the first (isinstance passes)")(
    _second_import_same_class())
wrong("6.3", hint="package's own", name="functools.partial(attnbook.models.greedy_decode)")(
    functools.partial(_transformer.greedy_decode))


@right("6.3")
def greedy_decode_reference_style(model, src, max_len, bos_id, eos_id):
    """encode once, decode the prefix each step, masked_fill the finished rows"""
    model.eval()
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(max_len - 1):
            next_id = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1)
            next_id = next_id.masked_fill(done, model.config.pad_id)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = done | (next_id == eos_id)
            if done.all():
                break
    return ys


@right("6.3")
def greedy_decode_full_forward(model, src, max_len, bos_id, eos_id):
    """calls model(src, ys) every step (re-encodes), torch.where for the padding, a while loop"""
    model.eval()
    pad = model.config.pad_id
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    with torch.no_grad():
        while ys.size(1) < max_len and not finished.all():
            nxt = model(src, ys)[:, -1, :].argmax(-1)
            nxt = torch.where(finished, torch.full_like(nxt, pad), nxt)
            finished |= nxt == eos_id
            ys = torch.cat((ys, nxt.unsqueeze(1)), dim=1)
    return ys


@right("6.3")
def greedy_decode_preallocated(model, src, max_len, bos_id, eos_id):
    """preallocates a (B, max_len) buffer of <pad>, fills columns, truncates; no torch.no_grad"""
    model.eval()
    batch = src.size(0)
    src_mask = model.make_src_mask(src)
    memory = model.encode(src, src_mask).detach()
    out = torch.full((batch, max_len), model.config.pad_id, dtype=torch.long)
    out[:, 0] = bos_id
    alive = torch.ones(batch, dtype=torch.bool)
    length = 1
    for t in range(1, max_len):
        logits = model.decode(out[:, :t], memory, src_mask).detach()
        token = logits[:, t - 1].argmax(dim=-1)
        out[alive, t] = token[alive]
        alive = alive & (token != eos_id)
        length = t + 1
        if not alive.any():
            break
    return out[:, :length].clone()


@right("6.3")
def greedy_decode_restores_mode(model, src, max_len, bos_id, eos_id, *, verbose=False):
    """restores the training mode afterwards; an extra harmless keyword; lists of tokens per step"""
    was_training = model.training
    model.train(False)
    try:
        with torch.inference_mode():
            src_mask = model.make_src_mask(src)
            memory = model.encode(src, src_mask)
            columns = [torch.full((src.size(0),), bos_id, dtype=torch.long)]
            ended = torch.zeros(src.size(0), dtype=torch.bool)
            while len(columns) < max_len and not bool(ended.all()):
                ys = torch.stack(columns, dim=1)
                token = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1)
                token[ended] = model.config.pad_id
                ended = ended | token.eq(eos_id)
                columns.append(token)
                if verbose:
                    print(ys.shape)
        result = torch.stack(columns, dim=1)
    finally:
        model.train(was_training)
    return result.clone()


@right("6.3")
def greedy_decode_softmax_argmax(model, src, max_len, bos_id, eos_id):
    """argmax of the softmax probabilities (same order as the logits), a list of columns stacked at the end"""
    model.eval()
    cols = [torch.full((src.size(0),), bos_id, dtype=torch.long)]
    done = torch.zeros(src.size(0), dtype=torch.bool)
    with torch.no_grad():
        for _ in range(1, max_len):
            probs = torch.softmax(model(src, torch.stack(cols, dim=1))[:, -1], dim=-1)
            tok = torch.where(done, torch.tensor(model.config.pad_id), probs.argmax(dim=-1))
            cols.append(tok)
            done = done | (tok == eos_id)
            if done.all():
                break
    return torch.stack(cols, dim=1)


@right("6.3")
def greedy_decode_pad_zero(model, src, max_len, bos_id, eos_id):
    """fills finished rows with a literal 0, as the task text says model.config.pad_id is (0)"""
    model.eval()
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_len - 1):
            next_id = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1) * (~done)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = done | (next_id == eos_id)
            if done.all():
                break
    return ys


@right("6.3")
def greedy_decode_row_by_row(model, src, max_len, bos_id, eos_id):
    """decodes each source row on its own (batch of 1), then pads the rows to a common length"""
    model.eval()
    pad = model.config.pad_id
    rows = []
    with torch.no_grad():
        for b in range(src.size(0)):
            one = src[b:b + 1]
            mask = model.make_src_mask(one)
            memory = model.encode(one, mask)
            ys = [bos_id]
            while len(ys) < max_len:
                token = int(model.decode(torch.tensor([ys]), memory, mask)[0, -1].argmax())
                ys.append(token)
                if token == eos_id:
                    break
            rows.append(ys)
    length = max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (length - len(r)) for r in rows], dtype=torch.long)


@right("6.3")
def greedy_decode_while_decode(model, src, max_len, bos_id, eos_id):
    """encode once, a while loop on ys.size(1) < max_len, torch.where(done, 0, nxt) before marking rows done"""
    model.eval()
    m = model.make_src_mask(src)
    mem = model.encode(src, m)
    ys = torch.full((src.size(0), 1), bos_id)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    with torch.no_grad():
        while ys.size(1) < max_len and not done.all():
            nxt = model.decode(ys, mem, m)[:, -1].argmax(-1)
            nxt = torch.where(done, 0, nxt)
            done |= nxt == eos_id
            ys = torch.cat([ys, nxt[:, None]], 1)
    return ys


# ----------------------------------------------------------------------------------------------------------
# 6.4 to_allow_mask(mask): nn.MultiheadAttention's bool (True = blocked) or additive float -> True = may attend
# ----------------------------------------------------------------------------------------------------------


@wrong("6.4", hint="invert")
def to_allow_mask_bool_unchanged(mask):
    """returns a boolean mask as it is (forgot that True means blocked there)"""
    if mask.dtype == torch.bool:
        return mask
    return mask > -1e4


@wrong("6.4", hint="-inf")
def to_allow_mask_only_inf(mask):
    """additive: blocked only where the entry is -inf (misses -1e9 and -10000)"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask != float("-inf")


@wrong("6.4", hint="-inf")
def to_allow_mask_isfinite(mask):
    """additive: torch.isfinite(mask), which lets -1e9 and -10000 through"""
    if mask.dtype == torch.bool:
        return ~mask
    return torch.isfinite(mask)


@wrong("6.4", hint="10000")
def to_allow_mask_threshold_too_low(mask):
    """additive: threshold at -1e5 (misses BERT's -10000)"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask > -1e5


@wrong("6.4", hint="10000")
def to_allow_mask_threshold_inclusive(mask):
    """additive: mask >= -1e4, so BERT's -10000 counts as allowed"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask >= -1e4


@wrong("6.4")
def to_allow_mask_not_minimum(mask):
    """blocked where the entry equals the mask's minimum: a mask with nothing blocked comes out all False"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask != mask.min()


@wrong("6.4", hint="invert")
def to_allow_mask_additive_inverted(mask):
    """additive: mask < 0, True where blocked"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask < 0


@wrong("6.4", hint="invert")
def to_allow_mask_additive_bool(mask):
    """additive: mask.bool() (nonzero -> True): the blocked entries come out True"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask.bool()


@wrong("6.4", hint="bool")
def to_allow_mask_float_result(mask):
    """returns a float 0/1 tensor for additive masks"""
    if mask.dtype == torch.bool:
        return ~mask
    return (mask == 0).float()


@wrong("6.4", hint="bool")
def to_allow_mask_int_result(mask):
    """returns 1 - mask.int() for boolean masks: an int tensor"""
    if mask.dtype == torch.bool:
        return 1 - mask.int()
    return mask > -1e4


@wrong("6.4", hint="package's own")
def to_allow_mask_convert_mask(mask):
    """calls attnbook.masks.convert_mask, which the task forbids (the exercise's reference: "the package's own
    solution")"""
    src = "block" if mask.dtype == torch.bool else "additive"
    return _masks.convert_mask(mask, src, "allow")


@wrong("6.4", hint="keep the shape of the input")
def to_allow_mask_key_padding_4d(mask):
    """broadcasts a 2-D key_padding_mask to (batch, 1, 1, S): the shape changes"""
    allow = ~mask if mask.dtype == torch.bool else mask > -1e4
    return allow[:, None, None, :] if allow.dim() == 2 else allow


@wrong("6.4", hint="in place")
def to_allow_mask_in_place(mask):
    """inverts the boolean mask in place (logical_not_), changing the caller's tensor"""
    if mask.dtype == torch.bool:
        return mask.logical_not_()
    return mask > -1e4


@wrong("6.4")
def to_allow_mask_float32_only(mask):
    """tests dtype == torch.float32 for additive masks: a float64 / float16 mask falls into `~mask` and errors"""
    if mask.dtype == torch.float32:
        return mask > -1e4
    return ~mask


@wrong("6.4", hint="tensor")
def to_allow_mask_numpy(mask):
    """returns a numpy array"""
    return (~mask if mask.dtype == torch.bool else mask > -1e4).numpy()


@wrong("6.4")
def to_allow_mask_float_branch_negates(mask):
    """treats every mask with `~`: works for bool, TypeError on float masks, caught and inverted via mask < 0"""
    try:
        return ~mask
    except TypeError:
        return mask < 0


@right("6.4")
def to_allow_mask_reference(mask):
    """~mask for bool, mask > -1e4 for additive"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask > -1e4


@right("6.4")
def to_allow_mask_equals_zero(mask):
    """mask == 0 for both kinds (False == 0 and 0.0 == 0 are the allowed entries)"""
    return mask == 0


@right("6.4")
def to_allow_mask_not_bool(mask):
    """~mask.bool(): nonzero (blocked or negative) becomes False"""
    return ~mask.bool()


@right("6.4")
def to_allow_mask_is_floating(mask):
    """is_floating_point() branch, logical_not and >= 0 (extra keyword with a default)"""
    def convert(m, threshold=0.0):
        return m >= threshold if m.is_floating_point() else torch.logical_not(m)
    return convert(mask)


@right("6.4")
def to_allow_mask_exp(mask):
    """additive: exp(mask) > 0.5 (exp(0) = 1, exp of a large negative number underflows to 0)"""
    if mask.dtype == torch.bool:
        return mask == False  # noqa: E712
    return torch.exp(mask) > 0.5


@right("6.4")
def to_allow_mask_where(mask):
    """torch.where on a float view, then compare with 0.5"""
    blocked = mask if mask.dtype == torch.bool else mask <= -1e4
    return torch.where(blocked, torch.zeros_like(mask, dtype=torch.float), torch.ones_like(mask, dtype=torch.float)) > 0.5


@right("6.4")
def to_allow_mask_where_threshold(mask):
    """logical_not for bool; additive: torch.where(mask < -1.0, False, True)"""
    if mask.dtype == torch.bool:
        return mask.logical_not()
    return torch.where(mask < -1.0, False, True)


# ----------------------------------------------------------------------------------------------------------
# Added with the checker fixes: one wrong answer for each hinted mistake that no entry above covered
# ----------------------------------------------------------------------------------------------------------


@wrong("6.1", hint="nothing is masked")
def causal_mask_all_true(n):
    """every entry True: torch.ones(n, n, dtype=torch.bool) with the tril forgotten"""
    return torch.ones(n, n, dtype=torch.bool)


@wrong("6.1", hint="off by one")
def causal_mask_one_ahead(n):
    """tril(1): each query also sees the next key"""
    return torch.ones(n, n, dtype=torch.bool).tril(1)


@wrong("6.1", hint="j > i")
def causal_mask_one_entry_wrong(n):
    """right except the last query may also see a key after it (no known mistake: the neutral message names the
    first wrong entry and the rule j <= i)"""
    m = torch.ones(n, n, dtype=torch.bool).tril()
    if n >= 4:
        m[1, 3] = True
    return m


@wrong("6.2", hint="AND")
def decoder_self_mask_or(lengths, n):
    """causal OR padding instead of AND"""
    return _causal(n) | _real(lengths, n)[:, None, None, :]


@wrong("6.2", hint="transposed")
def decoder_self_mask_transposed(lengths, n):
    """queries on the columns and keys on the rows"""
    return (_causal(n) & _real(lengths, n)[:, None, None, :]).transpose(-2, -1)


@wrong("6.2", hint="padding")
def decoder_self_mask_last_key_missed(lengths, n):
    """blocks only the first padding key of each sequence (no known mistake: the message names the entry and says
    the key is padding)"""
    real = torch.arange(n)[None, :] != lengths[:, None]
    return _causal(n) & real[:, None, None, :]


def _loop(*, feed="prefix", overwrite=False, stop="all", fill=True, decode_mask=True):
    """A batch loop written against the model's public API, with one knob turned."""

    def greedy_decode(model, src, max_len, bos_id, eos_id):
        model.eval()
        with torch.no_grad():
            src_mask = model.make_src_mask(src)
            memory = model.encode(src, src_mask)
            ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
            done = torch.zeros(src.size(0), dtype=torch.bool)
            for t in range(max_len - 1):
                if feed == "prefix":
                    inp = ys
                elif feed == "bos":
                    inp = ys[:, :1]
                elif feed == "last":
                    inp = ys[:, -1:]
                else:  # the source tokens, shifted right behind BOS (teacher forcing with src)
                    inp = torch.cat([ys[:, :1], src[:, :t]], dim=1)
                next_id = model.decode(inp, memory, src_mask if decode_mask else None)[:, -1].argmax(dim=-1)
                if overwrite:
                    done = done | (next_id == eos_id)
                    next_id = next_id.masked_fill(done, model.config.pad_id)
                elif fill:
                    next_id = next_id.masked_fill(done, model.config.pad_id)
                ys = torch.cat([ys, next_id[:, None]], dim=1)
                done = done | (next_id == eos_id)
                if (stop == "all" and done.all()) or (stop == "first" and done[0]):
                    break
        return ys

    return greedy_decode


wrong("6.3", hint="BOS alone", name="decodes BOS alone every step (ys[:, :1]): the prediction is never fed back")(
    _loop(feed="bos"))
wrong("6.3", hint="not only the latest token", name="feeds only the latest token (ys[:, -1:]) to the decoder")(
    _loop(feed="last"))
wrong("6.3", hint="not the source tokens", name="feeds the source tokens behind BOS (teacher forcing with src)")(
    _loop(feed="source"))
wrong("6.3", hint="keep the EOS token itself", name="marks the row done before padding: its EOS itself becomes <pad>")(
    _loop(overwrite=True))
wrong("6.3", hint="stop once EVERY row has produced EOS, not when the first row has",
      name="stops when the FIRST row has ended (done[0]), not every row")(_loop(stop="first"))
wrong("6.3", hint="fill the finished rows", name="never stops and never pads: max_len - 1 raw argmax tokens")(
    _loop(stop="never", fill=False))
wrong("6.3", hint="source padding", name="decodes with src_mask=None (the encoder had the mask)")(
    _loop(decode_mask=False))


@wrong("6.3", hint="argmax")
def greedy_decode_second_best(model, src, max_len, bos_id, eos_id):
    """appends the second most likely token when it is not EOS (no known mistake: the message names the first
    token that is not the argmax)"""
    model.eval()
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_len - 1):
            top = model.decode(ys, memory, src_mask)[:, -1].topk(2, dim=-1).indices
            next_id = torch.where(top[:, 0] == eos_id, top[:, 0], top[:, 1]).masked_fill(done, model.config.pad_id)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = done | (next_id == eos_id)
            if done.all():
                break
    return ys


@wrong("6.4", hint="treated it like an additive mask")
def to_allow_mask_threshold_for_both(mask):
    """mask > -1e4 for every mask: a boolean mask comes out all True"""
    return mask > -1e4


@wrong("6.4", hint="every entry came out True")
def to_allow_mask_not_positive(mask):
    """additive: mask <= 0, which is True everywhere"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask <= 0


@wrong("6.4", hint="every entry came out False")
def to_allow_mask_positive(mask):
    """additive: mask > 0 (no entry is positive)"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask > 0


# ----------------------------------------------------------------------------------------------------------
# Issue 23: inputs remembered or known in advance, mask conventions, hard-coded sizes
# ----------------------------------------------------------------------------------------------------------

_KNOWN_SIZES = (4, 5, 2, 7, 1)  # the sizes an earlier run of 6.1's check showed


@wrong("6.1")
def causal_mask_known_sizes(n):
    """the masks of the sizes an earlier run of the check used, written out; all True for any other size"""
    if n in _KNOWN_SIZES:
        return torch.ones(n, n, dtype=torch.bool).tril()
    return torch.ones(n, n, dtype=torch.bool)


@wrong("6.1", hint="additive")
def causal_mask_additive_inverted(n):
    """an additive mask with -inf on and below the diagonal (the blocked and allowed parts swapped)"""
    return torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))


@wrong("6.1", hint="without")
def causal_mask_torch_causal_bias(n):
    """torch.nn.attention.bias.causal_upper_left(n, n), materialised"""
    from torch.nn.attention.bias import causal_upper_left

    return causal_upper_left(n, n)._materialize()


@wrong("6.1", hint="without")
def causal_mask_hf_causal_mask_function(n):
    """transformers' masking_utils.causal_mask_function on two aranges"""
    from transformers.masking_utils import causal_mask_function

    i = torch.arange(n)
    return causal_mask_function(0, 0, i[:, None], i[None, :])


_KNOWN_BATCHES = {(3, 5, 1): 5, (2,): 4, (4, 0, 2): 4, (3, 3): 3, (1,): 1, (2, 6, 4): 6}


@wrong("6.2")
def decoder_self_mask_known_batches(lengths, n):
    """computes the mask for the batches an earlier run of the check used, and only the causal part for others"""
    i = torch.arange(n)
    causal = (i[None, :] <= i[:, None]).expand(len(lengths), 1, n, n)
    if _KNOWN_BATCHES.get(tuple(lengths.tolist())) == n:
        return causal & (i < lengths[:, None])[:, None, None, :]
    return causal.clone()


@wrong("6.2", hint="without")
def decoder_self_mask_hf_4d(lengths, n):
    """transformers' _prepare_4d_causal_attention_mask (an additive mask), turned into booleans"""
    from transformers.modeling_attn_mask_utils import _prepare_4d_causal_attention_mask

    padding = (torch.arange(n)[None, :] < lengths[:, None]).long()
    additive = _prepare_4d_causal_attention_mask(padding, (len(lengths), n), torch.zeros(1, n, 1), 0)
    return additive == 0


_MEMORY: dict = {}


@wrong("6.3", hint="memory")
def greedy_decode_memory_kept(model, src, max_len, bos_id, eos_id):
    """keeps the encoder's output from the first call and reuses it whenever src has the same shape ("encode once")"""
    model.eval()
    with torch.no_grad():
        src_mask = model.make_src_mask(src)
        if tuple(src.shape) not in _MEMORY:
            _MEMORY[tuple(src.shape)] = model.encode(src, src_mask)
        memory = _MEMORY[tuple(src.shape)]
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_len - 1):
            next_id = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1).masked_fill(done, 0)
            ys = torch.cat([ys, next_id[:, None]], dim=1)
            done = done | (next_id == eos_id)
            if done.all():
                break
    return ys


_CONVERTED: dict = {}


@wrong("6.4")
def to_allow_mask_remembered(mask):
    """remembers each converted mask by its shape and dtype ("the same kind of mask converts the same way")"""
    key = (tuple(mask.shape), mask.dtype)
    if key not in _CONVERTED:
        _CONVERTED[key] = ~mask if mask.dtype == torch.bool else mask > -1e4
    return _CONVERTED[key]


@wrong("6.4", hint="in place")
def to_allow_mask_in_place_additive(mask):
    """turns an additive mask into 0/1 in place (mask.gt_(-1e4)) and returns it as booleans"""
    if mask.dtype == torch.bool:
        return ~mask
    return mask.gt_(-1e4).bool()


@wrong("6.2", hint="off by one")
def decoder_self_mask_one_ahead(lengths, n):
    """tril(1) for the causal part: each query also sees the next key"""
    i = torch.arange(n)
    causal = torch.ones(n, n, dtype=torch.bool).tril(1)
    return causal & (i[None, :] < lengths[:, None])[:, None, None, :]


@wrong("6.2", hint="padding part is inverted")
def decoder_self_mask_padding_inverted(lengths, n):
    """keeps the padding keys and blocks the real ones: j >= lengths[b]"""
    i = torch.arange(n)
    return (i[None, :] <= i[:, None]) & (i[None, :] >= lengths[:, None])[:, None, None, :]
