"""Chapter 6 (decoder masking, cross-attention, greedy decoding): learner answers to exercises 6.1-6.4."""
from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn

from mutants import RIGHT, WRONG, fresh_import, function_copy, memoised, right, table, wrong

import attnbook.masks as _masks
import attnbook.models.transformer as _transformer

# ----------------------------------------------------------------------------------------------------------
# 6.1 causal_mask(n): bool (n, n), True on and below the diagonal
# ----------------------------------------------------------------------------------------------------------


def _ones(n):
    return torch.ones(n, n, dtype=torch.bool)


# A learner trial (F5): a mask made once at a fixed size and sliced to n; the largest n checked used to be 24
_BLOCK = {size: torch.tril(torch.ones(size, size, dtype=torch.bool)) for size in (32, 64, 128, 256)}
_KNOWN_SIZES = (4, 5, 2, 7, 1)  # the sizes an earlier run of 6.1's check showed

table("6.1", [
    ("compares column and row indices: arange(n)[None, :] <= arange(n)[:, None]", RIGHT,
     lambda n: torch.arange(n)[None, :] <= torch.arange(n)[:, None]),
    ("the complement of the strict upper triangle: ~triu(ones, 1)", RIGHT,
     lambda n: ~torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)),
    ("torch.tril(torch.ones(n, n)).bool()", RIGHT, lambda n: torch.tril(torch.ones(n, n)).bool()),
    ("np.tril in numpy, converted with torch.from_numpy", RIGHT,
     lambda n: torch.from_numpy(np.tril(np.ones((n, n), dtype=bool)))),
    ("an extra device keyword with a default", RIGHT,
     lambda n, device=None: torch.ones(n, n, dtype=torch.bool, device=device).tril()),
    # which triangle
    ("strictly below the diagonal: tril(-1), a query may not attend to itself", "diagonal",
     lambda n: _ones(n).tril(-1)),
    ("tril(1): each query also sees the next key", "off by one", lambda n: _ones(n).tril(1)),
    ("the upper triangle (triu): rows and columns swapped, each query sees the future", "upper triangle",
     lambda n: _ones(n).triu()),
    ("torch.triu(...) where torch.tril(...) was meant", "use tril, not triu", lambda n: torch.triu(_ones(n))),
    ("nn.MultiheadAttention's convention: True = blocked (above the diagonal)", "inverted", lambda n: _ones(n).triu(1)),
    ("every entry True: torch.ones(n, n, dtype=torch.bool) with the tril forgotten", "nothing is masked", _ones),
    ("hard-codes the n = 3 example of the task text", WRONG,
     lambda n: torch.tensor([[True, False, False], [True, True, False], [True, True, True]])),
    ("the masks of the sizes an earlier run of the check used, written out; all True for any other size", WRONG,
     lambda n: _ones(n).tril() if n in _KNOWN_SIZES else _ones(n)),
    # the dtype and the kind of mask
    ("float 0/1 mask: torch.ones(n, n).tril() without dtype=torch.bool", "bool", lambda n: torch.ones(n, n).tril()),
    ("torch.tril(torch.ones(n, n)) without .bool()", "call .bool()", lambda n: torch.tril(torch.ones(n, n))),
    ("integer 0/1 mask from torch.tril(torch.ones(..., dtype=torch.long))", "bool",
     lambda n: torch.tril(torch.ones(n, n, dtype=torch.long))),
    ("old-PyTorch style uint8 mask: torch.tril(torch.ones(n, n)).byte()", "bool",
     lambda n: torch.tril(torch.ones(n, n)).byte()),
    ("additive 0/-inf mask (what nn.Transformer.generate_square_subsequent_mask returns)", "additive",
     lambda n: torch.zeros(n, n).masked_fill(~_ones(n).tril(), float("-inf"))),
    ("an additive mask with -inf on and below the diagonal (the blocked and allowed parts swapped)", "additive",
     lambda n: torch.zeros(n, n).masked_fill(_ones(n).tril(), float("-inf"))),
    ("returns a numpy array (np.tril) instead of a tensor", "tensor", lambda n: np.tril(np.ones((n, n), dtype=bool))),
    ("returns nested Python lists", "tensor", lambda n: [[j <= i for j in range(n)] for i in range(n)]),
    # the shape
    ("(n + 1, n + 1): off by one in the size", "shape", lambda n: torch.ones(n + 1, n + 1, dtype=torch.bool).tril()),
    ("(n - 1, n - 1): one short in the size from the first n on", "one row per query",
     lambda n: torch.ones(n - 1, n - 1, dtype=torch.bool).tril()),
    ("(1, 1, n, n): already broadcast over batch and heads", "shape", lambda n: _ones(n).tril()[None, None]),
    ("two leading axes added with unsqueeze(0).unsqueeze(0)", "plain 2-D",
     lambda n: _ones(n).tril().unsqueeze(0).unsqueeze(0)),
    ("only the last row: arange(n) <= n - 1, a 1-D mask", "shape", lambda n: torch.arange(n) <= n - 1),
    ("a module-level 32 x 32 tril sliced to [:n, :n] (a cap: (32, 32) for every n > 32)",
     "a size is fixed in your code", lambda n: _BLOCK[32][:n, :n]),
    ("a cached 64 x 64 tril sliced to [:n, :n]", "a size is fixed in your code", lambda n: _BLOCK[64][:n, :n]),
    ("a 128 x 128 tril made once, sliced to [:n, :n]", "a size is fixed in your code", lambda n: _BLOCK[128][:n, :n]),
    ("nanoGPT's block_size 256: a 256 x 256 tril buffer sliced to [:n, :n]", "a size is fixed in your code",
     lambda n: _BLOCK[256][:n, :n]),
    ("a 64 x 64 tril made on every call from min(n, 64): torch.ones(m, m).tril() with m = min(n, 64)",
     "a size is fixed in your code", lambda n: torch.ones(min(n, 64), min(n, 64), dtype=torch.bool).tril()),
    # what the task forbids
    ("calls nn.Transformer.generate_square_subsequent_mask, which the task forbids, and converts it",
     "without torch.nn.Transformer.generate_square_subsequent_mask",
     lambda n: nn.Transformer.generate_square_subsequent_mask(n) == 0),
    ("attnbook.masks.causal_mask handed in as it is", "package's own", _masks.causal_mask),
    ("a lambda around attnbook.masks.causal_mask", "package's own", lambda n: _masks.causal_mask(n)),
])


@wrong("6.1", hint="package's own")
def causal_mask_attnbook(n):
    """calls attnbook.masks.causal_mask"""
    return _masks.causal_mask(n)


@right("6.1")
def causal_mask_loops(n):
    """two Python loops filling a zeros(bool) tensor"""
    m = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(i + 1):
            m[i, j] = True
    return m


@right("6.1")
def causal_mask_row_slices(n):
    """one Python loop setting each row's prefix m[i, :i + 1] = True in a zeros(bool) tensor"""
    m = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        m[i, : i + 1] = True
    return m


@wrong("6.1", hint="j > i")
def causal_mask_one_entry_wrong(n):
    """right except the last query may also see a key after it (no known mistake: the neutral message names the
    first wrong entry and the rule j <= i)"""
    m = _ones(n).tril()
    if n >= 4:
        m[1, 3] = True
    return m


@wrong("6.1", hint="j <= i")
def causal_mask_first_key_blocked(n):
    """right except that the last query may not see the first key (no known mistake: the message names the entry)"""
    m = _ones(n).tril()
    if n > 2:
        m[-1, 0] = False
    return m


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


# ----------------------------------------------------------------------------------------------------------
# 6.2 decoder_self_mask(lengths, n): bool (batch, 1, n, n), causal AND real keys
# ----------------------------------------------------------------------------------------------------------


def sm(*, causal=lambda j, i: j <= i, keys=lambda j, lengths: j[None, :] < lengths[:, None], padding_on="keys",
       combine="and", invert=False, longest=False, layout="heads"):
    """6.2's learner template, the chapter's way: arange comparisons for the causal part (key j, query i) and for
    the real keys of each sequence (batch, n), broadcast and combined with & into (batch, 1, n, n) (the defaults: a
    right answer). Each keyword switches one mistake on; `causal` or `keys` None leaves that part out, `longest`
    replaces n by the longest length."""
    def decoder_self_mask(lengths, n):
        if longest:
            n = int(lengths.max())
        j = torch.arange(n, device=lengths.device)
        allowed = torch.ones(n, n, dtype=torch.bool) if causal is None else causal(j[None, :], j[:, None])
        real = torch.ones(len(lengths), n, dtype=torch.bool) if keys is None else keys(j, lengths)  # (batch, n)
        if layout == "only keys":
            return real[:, None, None, :]
        if layout == "only causal":
            return allowed
        pad = {"keys": real[:, None, None, :], "queries": real[:, None, :, None],
               "both": real[:, None, None, :] & real[:, None, :, None]}[padding_on]
        if combine == "and":
            mask = allowed & pad
        elif combine == "or":
            mask = allowed | pad
        else:  # "float product"
            mask = allowed.float() * pad.float()
        mask = ~mask if invert else mask
        if layout == "no heads":
            return mask[:, 0]
        if layout == "heads first":
            return mask.transpose(0, 1)
        return mask.transpose(-2, -1) if layout == "transposed" else mask
    return decoder_self_mask


_KNOWN_BATCHES = {(3, 5, 1): 5, (2,): 4, (4, 0, 2): 4, (3, 3): 3, (1,): 1, (2, 6, 4): 6}

table("6.2", [
    ("arange comparisons and broadcasting, as in the chapter", RIGHT, sm()),
    # the causal part
    ("padding keys blocked but no causal mask", "causal part is missing", sm(causal=None)),
    ("strict causal mask j < i: no query may attend to itself", "keep the diagonal", sm(causal=lambda j, i: j < i)),
    ("tril(1) for the causal part: each query also sees the next key", "off by one",
     sm(causal=lambda j, i: j <= i + 1)),
    ("upper triangle (triu): keys after the query instead of before", "upper triangle", sm(causal=lambda j, i: j >= i)),
    ("uses nn.Transformer.generate_square_subsequent_mask for the causal part", "without",
     sm(causal=lambda j, i: nn.Transformer.generate_square_subsequent_mask(len(i)) == 0)),
    # the padding part
    ("causal only, the lengths ignored", "padding part is missing", sm(keys=None)),
    ("j <= lengths[b]: lets every query see the first padding key", WRONG,
     sm(keys=lambda j, lengths: j[None, :] <= lengths[:, None])),
    ("j <= lengths[b], one real key too many", "off by one",
     sm(keys=lambda j, lengths: j[None, :] <= lengths[:, None])),
    ("keeps the padding keys and blocks the real ones: j >= lengths[b]", "padding part is inverted",
     sm(keys=lambda j, lengths: j[None, :] >= lengths[:, None])),
    ("blocks only the first padding key of each sequence (no known mistake: the message names the entry and says",
     "padding", sm(keys=lambda j, lengths: j[None, :] != lengths[:, None])),
    ("right, except that the first key of every sequence is blocked (no known mistake: the message names the entry)",
     "entry [0, 0, 0, 0]", lambda lengths, n: sm()(lengths, n) & (torch.arange(n) > 0)),
    ("right, except that the last key of a full sequence is blocked (no known mistake: the message names the entry)",
     "real token", sm(keys=lambda j, lengths: j[None, :] < torch.clamp(lengths, max=len(j) - 1)[:, None])),
    ("uses lengths[0] for every sequence of the batch", WRONG,
     sm(keys=lambda j, lengths: (j < lengths[0]).expand(len(lengths), -1))),
    ("picks row lengths[b] - 1 of a tril as the key mask: an empty sequence (length 0) indexes row -1, all True", WRONG,
     sm(keys=lambda j, lengths: torch.ones(len(j), len(j), dtype=torch.bool).tril()[lengths - 1])),
    ("padding applied to the queries (rows) instead of the keys (columns)", "padding queries are not blocked",
     sm(padding_on="queries")),
    ("padding applied to both queries and keys (the task says padding queries are not blocked)", "both",
     sm(padding_on="both")),
    # how they are combined, and the layout
    ("causal OR padding instead of AND", "AND", sm(combine="or")),
    ("nn.MultiheadAttention's convention: True = blocked", "inverted", sm(invert=True)),
    ("float 0/1 mask: product of float masks, never converted to bool", "expected torch.bool",
     sm(combine="float product")),
    ("queries on the columns and keys on the rows", "transposed", sm(layout="transposed")),
    ("(batch, n, n): forgot the size-1 head axis", "add the head axis", sm(layout="no heads")),
    ("(1, batch, n, n): the head axis in front of the batch", "shape", sm(layout="heads first")),
    ("pads only to the longest length in the batch, ignoring n", "shape", sm(longest=True)),
    ("returns only the (batch, 1, 1, n) key padding mask, no causal part", "only the padding part",
     sm(layout="only keys")),
    ("returns only the (n, n) causal mask, the lengths ignored", "only the causal part", sm(layout="only causal")),
    # what the task forbids
    ("builds it from attnbook.masks.causal_mask and padding_mask, which the task forbids", "without attnbook.masks.",
     lambda lengths, n: _masks.causal_mask(n) & _masks.padding_mask(lengths, n)[:, None, None, :]),
    ("uses attnbook.masks.combine_masks to AND them", "without attnbook.masks.",
     lambda lengths, n: _masks.combine_masks(torch.arange(n)[None, :] <= torch.arange(n)[:, None],
                                             (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :])),
    ("computes the mask for the batches an earlier run of the check used, and only the causal part for others", WRONG,
     lambda lengths, n: sm()(lengths, n) if _KNOWN_BATCHES.get(tuple(lengths.tolist())) == n
     else sm(keys=None)(lengths, n)),
])


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


@wrong("6.2", hint="in place")
def decoder_self_mask_inplace(lengths, n):
    """shifts lengths in place (lengths.sub_(1)) and compares with <=: right mask, but the caller's lengths change"""
    last = lengths.sub_(1)
    return sm(keys=lambda j, _lengths: j[None, :] <= last[:, None])(lengths, n)


@wrong("6.2", hint="without")
def decoder_self_mask_hf_4d(lengths, n):
    """transformers' _prepare_4d_causal_attention_mask (an additive mask), turned into booleans"""
    from transformers.modeling_attn_mask_utils import _prepare_4d_causal_attention_mask

    padding = (torch.arange(n)[None, :] < lengths[:, None]).long()
    additive = _prepare_4d_causal_attention_mask(padding, (len(lengths), n), torch.zeros(1, n, 1), 0)
    return additive == 0


# ----------------------------------------------------------------------------------------------------------
# 6.3 greedy_decode(model, src, max_len, bos_id, eos_id)
# ----------------------------------------------------------------------------------------------------------


def greedy(*, eval_mode=True, bos=None, eos=None, steps=lambda max_len: max_len - 1, feed="prefix", position=-1,
           pick="argmax", src_mask="used", fill="pad", forget_done=False, stop="all", keep_bos=True,
           finish=lambda ys: ys):
    """6.3's learner template: encode once, decode the prefix each step, masked_fill the finished rows with PAD, stop
    once every row has produced EOS (the defaults: a right answer). Each keyword switches one mistake on: fixed `bos`
    or `eos` ids, `steps(max_len)`, what the decoder reads (`feed`), whose logits (`position`), how the token is
    chosen (`pick`: "sample" draws with a generator seeded 0 at every step, "sample once" once per call), which masks
    are passed (`src_mask`), what a finished row gets (`fill`, `forget_done`), when to stop (`stop`), `keep_bos`, and
    what is returned (`finish(ys)`)."""
    def greedy_decode(model, src, max_len, bos_id, eos_id):
        if eval_mode:
            model.eval()
        bos_id, eos_id = bos_id if bos is None else bos, eos_id if eos is None else eos
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            mask = model.make_src_mask(src)
            memory = model.encoder(src, None) if src_mask == "none" else model.encode(src, mask)
            decode_mask = mask if src_mask == "used" else None
            ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
            done = torch.zeros(src.size(0), dtype=torch.bool)
            for t in range(steps(max_len)):
                if feed == "prefix":
                    inp = ys
                elif feed == "bos":
                    inp = ys[:, :1]
                elif feed == "last":
                    inp = ys[:, -1:]
                else:  # "source": teacher forcing with the source tokens
                    inp = torch.cat([ys[:, :1], src[:, :t]], dim=1)
                logits = model.decode(inp, memory, decode_mask)  # (B, t, V)
                if pick == "argmax":
                    next_id = logits[:, position].argmax(dim=-1)
                elif pick == "positions":  # over the time axis (dim=1)
                    next_id = logits.argmax(dim=1)[:, -1] if logits.size(1) > 1 else logits[:, -1].argmax(dim=-1)
                    next_id = next_id.clamp(max=model.config.tgt_vocab_size - 1)
                elif pick == "second":
                    top = logits[:, -1].topk(2, dim=-1).indices
                    next_id = torch.where(top[:, 0] == eos_id, top[:, 0], top[:, 1])
                else:
                    g = torch.Generator().manual_seed(0) if pick == "sample" else g
                    probs = torch.softmax(logits[:, -1], dim=-1)
                    next_id = torch.multinomial(probs, 1, generator=None if pick == "sample global" else g)[:, 0]
                if fill == "overwrite":
                    done = done | (next_id == eos_id)
                if fill in ("pad", "overwrite"):
                    next_id = next_id.masked_fill(done, model.config.pad_id)
                elif fill == "eos":
                    next_id = next_id.masked_fill(done, eos_id)
                elif fill == "multiply":
                    next_id = next_id * (~done)
                ys = torch.cat([ys, next_id[:, None]], dim=1)
                done = (next_id == eos_id) if forget_done else done | (next_id == eos_id)
                if stop == "eos in ys" and (ys == eos_id).any(dim=1).all():
                    break
                if stop == "item" and next_id.item() == eos_id:
                    break
                if stop == "tensor" and next_id == eos_id:
                    break
                if (stop == "all" and done.all()) or (stop == "any" and done.any()) or (stop == "first" and done[0]):
                    break
        return finish(ys if keep_bos else ys[:, 1:])
    return greedy_decode


def _second_import_same_class():
    fn = fresh_import(_transformer, "transformer_same_class").greedy_decode
    fn.__globals__["Transformer"] = _transformer.Transformer  # so that its isinstance check accepts the model
    return fn


table("6.3", [
    ("encode once, decode the prefix each step, masked_fill the finished rows", RIGHT, greedy()),
    ("fills finished rows with a literal 0, as the task text says model.config.pad_id is (0)", RIGHT,
     greedy(fill="multiply")),
    # the ids
    ("hard-codes bos_id = 1 (the chapter's <bos>)", "bos_id argument", greedy(bos=1)),
    ("hard-codes eos_id = 2 (the chapter's <eos>)", "eos_id argument", greedy(eos=2)),
    ("hard-codes both bos 1 and eos 2", WRONG, greedy(bos=1, eos=2)),
    ("drops the leading <bos> from the result", "start with bos_id", greedy(keep_bos=False)),
    # what the decoder reads, and which token is taken
    ("decodes BOS alone every step (ys[:, :1]): the prediction is never fed back", "BOS alone", greedy(feed="bos")),
    ("feeds only the latest token (ys[:, -1:]) to the decoder", "not only the latest token", greedy(feed="last")),
    ("feeds the source tokens behind BOS (teacher forcing with src)", "not the source tokens", greedy(feed="source")),
    ("argmax of the FIRST position's logits instead of the last", "LAST position's logits", greedy(position=0)),
    ("argmax over the time axis (dim=1) of the (B, t, V) logits instead of the vocabulary (dim=-1)", "vocabulary",
     greedy(pick="positions")),
    ("appends the second most likely token when it is not EOS (no known mistake: the message names the first",
     "argmax", greedy(pick="second")),
    ("right, except that one token (row 0, position 1) is changed", "row 0, position 1",
     greedy(finish=lambda ys: ys.index_put((torch.tensor(0), torch.tensor(1)), (ys[0, 1] + 1) % 13))),
    ("samples from the softmax instead of the argmax", "argmax", greedy(pick="sample")),
    ("samples from the softmax with a generator of its own, seeded once per call", "argmax",
     greedy(pick="sample once")),
    ("samples from the softmax with the global random generator", "do not sample", greedy(pick="sample global")),
    ("never switches to eval mode (dropout stays on)", "eval", greedy(eval_mode=False)),
    ("encodes and decodes with src_mask=None: the source padding is attended to", "mask", greedy(src_mask="none")),
    ("decodes with src_mask=None (the encoder had the mask)", "source padding", greedy(src_mask="decoder none")),
    # the finished rows
    ("finished rows keep generating (no padding after <eos>)", "fill its remaining positions with PAD",
     greedy(fill="none")),
    ("finished rows get <eos> again instead of <pad>", "not EOS", greedy(fill="eos")),
    ("marks the row done before padding: its EOS itself becomes <pad>", "keep the EOS token itself",
     greedy(fill="overwrite")),
    ("done = (next_id == eos_id) instead of done | ...: a finished row gets one <pad>, then generates again", "pad",
     greedy(forget_done=True, stop="eos in ys")),
    # when to stop
    ("stops as soon as the FIRST row has produced <eos> (done.any())", "not as soon as one row has",
     greedy(stop="any")),
    ("stops when the FIRST row has ended (done[0]), not every row",
     "stop once EVERY row has produced EOS, not when the first row has", greedy(stop="first")),
    ("never stops early: always max_len tokens", "stop as soon as every row has produced EOS", greedy(stop="never")),
    ("never stops and never pads: max_len - 1 raw argmax tokens", "fill the finished rows",
     greedy(stop="never", fill="none")),
    ("the chapter's one-source loop copied: `if next_id.item() == eos_id: break`, no padding", WRONG,
     greedy(fill="none", stop="item")),
    ("one-row code on a whole batch: `if next_id == eos_id: break` on a tensor of ids, no padding",
     "one boolean per row", greedy(fill="none", stop="tensor")),
    # max_len
    ("range(max_len) steps: <bos> not counted, max_len + 1 tokens", "max_len", greedy(steps=lambda max_len: max_len)),
    ("max_len steps after BOS (one too many)", "generate at most max_len - 1 tokens",
     greedy(steps=lambda max_len: max_len)),
    ("range(max_len - 2) steps: one token short", "max_len", greedy(steps=lambda max_len: max_len - 2)),
    ("ignores max_len: a hard-coded limit of 10 tokens (the chapter's)", "max_len", greedy(steps=lambda max_len: 9)),
    ("checks the length only after appending (do-while): max_len = 1 still gets a second token", "max_len",
     greedy(steps=lambda max_len: max(max_len - 1, 1))),
    # what is returned
    ("returns a list of lists (ys.tolist())", "expected a (batch, length) tensor",
     greedy(finish=lambda ys: ys.tolist())),
    ("returns int32 ids", "long", greedy(finish=lambda ys: ys.int())),
    ("returns float ids", "expected torch.long", greedy(finish=lambda ys: ys.float())),
    # the package's own greedy_decode, handed in several ways
    ("attnbook.models.greedy_decode handed in as it is", "package's own", _transformer.greedy_decode),
    ("a lambda around attnbook.models.greedy_decode", "package's own",
     lambda model, src, max_len, bos_id, eos_id: _transformer.greedy_decode(model, src, max_len, bos_id, eos_id)),
    ("a types.FunctionType copy of attnbook.models.greedy_decode", "package's own",
     function_copy(_transformer.greedy_decode, "greedy_decode")),
    ("a FunctionType copy of greedy_decode.__wrapped__ (under the no_grad)", "package's own",
     function_copy(_transformer.greedy_decode.__wrapped__, "greedy_decode")),
    ("greedy_decode from a second, separate import of transformer.py", "package's own",
     fresh_import(_transformer, "transformer").greedy_decode),
    ("a second import of transformer.py whose Transformer name points at the first (isinstance passes)",
     "package's own", _second_import_same_class()),
    ("functools.partial(attnbook.models.greedy_decode)", "package's own",
     functools.partial(_transformer.greedy_decode)),
])


@wrong("6.3", hint="package's own")
def greedy_decode_wrapper(model, src, max_len, bos_id, eos_id):
    """a def wrapper that calls attnbook.models.greedy_decode"""
    from attnbook.models import greedy_decode as package_greedy

    return package_greedy(model, src, max_len=max_len, bos_id=bos_id, eos_id=eos_id)


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


def allow(*, boolean=lambda mask: ~mask, additive=lambda mask: mask > -1e4):
    """6.4's learner template: a branch on mask.dtype == torch.bool, `boolean(mask)` for the boolean masks and
    `additive(mask)` for the others (the defaults: a right answer, ~mask and mask > -1e4)."""
    def to_allow_mask(mask):
        if mask.dtype == torch.bool:
            return boolean(mask)
        return additive(mask)
    return to_allow_mask


table("6.4", [
    ("~mask for bool, mask > -1e4 for additive", RIGHT, allow()),
    ("mask == 0 for both kinds (False == 0 and 0.0 == 0 are the allowed entries)", RIGHT, lambda mask: mask == 0),
    ("~mask.bool(): nonzero (blocked or negative) becomes False", RIGHT, lambda mask: ~mask.bool()),
    ("additive: exp(mask) > 0.5 (exp(0) = 1, exp of a large negative number underflows to 0)", RIGHT,
     allow(boolean=lambda mask: mask == False, additive=lambda mask: torch.exp(mask) > 0.5)),  # noqa: E712
    ("torch.where on a float view, then compare with 0.5", RIGHT,
     lambda mask: torch.where(mask if mask.dtype == torch.bool else mask <= -1e4, 0.0, 1.0) > 0.5),
    ("logical_not for bool; additive: torch.where(mask < -1.0, False, True)", RIGHT,
     allow(boolean=lambda mask: mask.logical_not(), additive=lambda mask: torch.where(mask < -1.0, False, True))),
    # the boolean masks
    ("returns a boolean mask as it is (forgot that True means blocked there)", "invert",
     allow(boolean=lambda mask: mask)),
    ("mask > -1e4 for every mask: a boolean mask comes out all True", "treated it like an additive mask",
     lambda mask: mask > -1e4),
    ("returns 1 - mask.int() for boolean masks: an int tensor", "bool", allow(boolean=lambda mask: 1 - mask.int())),
    ("inverts the boolean mask in place (logical_not_), changing the caller's tensor", "in place",
     allow(boolean=lambda mask: mask.logical_not_())),
    # the additive masks
    ("additive: blocked only where the entry is -inf (misses -1e9 and -10000)", "-inf",
     allow(additive=lambda mask: mask != float("-inf"))),
    ("additive: torch.isfinite(mask), which lets -1e9 and -10000 through", "-inf",
     allow(additive=lambda mask: torch.isfinite(mask))),
    ("additive: mask.isfinite()", "-1e9 or -10000 blocks attention", allow(additive=lambda mask: mask.isfinite())),
    ("additive: threshold at -1e9 (misses BERT's -10000)", "-10000 blocks attention too",
     allow(additive=lambda mask: mask > -1e9)),
    ("additive: threshold at -1e5 (misses BERT's -10000)", "10000", allow(additive=lambda mask: mask > -1e5)),
    ("additive: mask >= -1e4, so BERT's -10000 counts as allowed", "10000", allow(additive=lambda mask: mask >= -1e4)),
    ("blocked where the entry equals the mask's minimum: a mask with nothing blocked comes out all False", WRONG,
     allow(additive=lambda mask: mask != mask.min())),
    ("additive: mask < 0, True where blocked", "invert", allow(additive=lambda mask: mask < 0)),
    ("additive: mask.bool() (nonzero -> True): the blocked entries come out True", "invert",
     allow(additive=lambda mask: mask.bool())),
    ("additive: mask != 0 (True where blocked)", "0 means 'allowed'", allow(additive=lambda mask: mask != 0)),
    ("additive: mask <= 0, which is True everywhere", "every entry came out True",
     allow(additive=lambda mask: mask <= 0)),
    ("additive: torch.ones_like(mask, dtype=torch.bool)", "every entry came out True",
     allow(additive=lambda mask: torch.ones_like(mask, dtype=torch.bool))),
    ("additive: mask > 0 (no entry is positive)", "every entry came out False", allow(additive=lambda mask: mask > 0)),
    ("additive: returned as it is", "returned the additive mask unchanged", allow(additive=lambda mask: mask)),
    ("~mask for every mask: an error on an additive mask", "compare its entries with a number instead",
     lambda mask: ~mask),
    ("returns a float 0/1 tensor for additive masks", "bool", allow(additive=lambda mask: (mask == 0).float())),
    ("turns an additive mask into 0/1 in place (mask.gt_(-1e4)) and returns it as booleans", "in place",
     allow(additive=lambda mask: mask.gt_(-1e4).bool())),
    ("tests dtype == torch.float32 for additive masks: a float64 / float16 mask falls into `~mask` and errors", WRONG,
     lambda mask: mask > -1e4 if mask.dtype == torch.float32 else ~mask),
    # the shape, the type, the package
    ("broadcasts a 2-D key_padding_mask to (batch, 1, 1, S): the shape changes", "keep the shape of the input",
     lambda mask: allow()(mask)[:, None, None, :] if mask.dim() == 2 else allow()(mask)),
    ("returns a numpy array", "tensor", lambda mask: allow()(mask).numpy()),
    ("remembers each converted mask by its shape and dtype (\"the same kind of mask converts the same way\")", WRONG,
     memoised(allow())),
])


@right("6.4")
def to_allow_mask_is_floating(mask):
    """is_floating_point() branch, logical_not and >= 0 (extra keyword with a default)"""
    def convert(m, threshold=0.0):
        return m >= threshold if m.is_floating_point() else torch.logical_not(m)
    return convert(mask)


@wrong("6.4")
def to_allow_mask_float_branch_negates(mask):
    """treats every mask with `~`: works for bool, TypeError on float masks, caught and inverted via mask < 0"""
    try:
        return ~mask
    except TypeError:
        return mask < 0


@wrong("6.4", hint="package's own")
def to_allow_mask_convert_mask(mask):
    """calls attnbook.masks.convert_mask, which the task forbids (the exercise's reference: "the package's own
    solution")"""
    return _masks.convert_mask(mask, "block" if mask.dtype == torch.bool else "additive", "allow")
