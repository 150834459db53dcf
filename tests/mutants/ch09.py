"""Chapter 9 (GPU timing I: attention kernels): learner answers to exercises 9.1-9.3."""
from __future__ import annotations

import math
import statistics
import time
import timeit
from time import perf_counter as _bound_perf_counter  # bound at import time, before any check patches `time`

import numpy as np
import torch
import torch.nn.functional as F

import attnbook
import attnbook.attention
import attnbook.cost
import attnbook.timing
from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong

INF = math.inf


# ----------------------------------------------------------------------------------------------------------------
# 9.1 · Online softmax over blocks
# ----------------------------------------------------------------------------------------------------------------

_SKIPS = {  # which blocks online(skip=...) leaves out of the pass, from (index, block, number of blocks)
    "empty": lambda i, b, n: b.numel() == 0,
    "nothing": lambda i, b, n: False,
    "masked": lambda i, b, n: b.numel() == 0 or bool(torch.isinf(b).any()),
    "size 1": lambda i, b, n: b.numel() <= 1,
    "first": lambda i, b, n: i == 0 or b.numel() == 0,
    "last": lambda i, b, n: i == n - 1 or b.numel() == 0,
}
_RESCALES = {  # what online(rescale=...) multiplies the running sum by when the maximum goes from m to m_new
    "exp": lambda m, m_new: math.exp(m - m_new),
    None: lambda m, m_new: 1.0,
    "inverted": lambda m, m_new: math.exp(m_new - m),
    "ratio": lambda m, m_new: m / m_new if m_new != 0 else 0.0,
}


def _block_softmax(b):
    """One block's own softmax (an empty block stays empty, an all--inf block gets zeros)."""
    if b.numel() == 0:
        return b.clone()
    if b.max() == -INF:
        return torch.zeros_like(b)
    e = torch.exp(b - b.max())
    return e / e.sum()


def online(*, two_pass=False, start=-INF, new_max="running", rescale="exp", m_first=False, add_to="new max",
           skip="empty", guard=True, empty_max=None, dtype=None, weights="final"):
    """9.1's learner template: a pass over the blocks keeping the running maximum m and the running sum l of
    exp(x - m) as Python floats, then the weights exp(x - m) / l (the defaults: the chapter's recipe). Knobs:
    two_pass: m is the maximum of all the blocks before the pass; start: m before the first block;
    new_max: "running" max(m, b.max()), "block" b.max() alone, "first" set by the first block counted, never updated;
    rescale: what l is multiplied by when m grows (_RESCALES: "exp", None, "inverted", "ratio");
    m_first: m is updated before the rescaling; add_to: "new max" or "old max", what a block's exp is relative to;
    skip: which blocks the pass leaves out (_SKIPS; "last" uses all blocks where none came before the last);
    guard: skip a block while m is -inf; empty_max: the maximum an empty block counts with (None: none);
    dtype: the dtype computed in (the weights cast back to the blocks' dtype);
    weights: "final" exp(x - m) / l, "undivided" exp(x - m), "as they come" each block's exp / l with its time's m
    and l, "unrescaled" each block's exp with its time's m / the final l, "rescaled" those rescaled to the final m
    (FlashAttention), "own max" each block shifted by its own maximum, one common sum, "per block" a softmax per
    block, "in place" the blocks shifted and exponentiated in place (b.sub_(m).exp_())."""
    def online_softmax(blocks):
        work = [b.to(dtype) for b in blocks] if dtype else list(blocks)
        m, l, seen = start, 0.0, False
        kept = []  # per block: (its exp with the m of its time, that m, that l)
        if two_pass:
            m = max((b.max().item() for b in work if b.numel()), default=-INF)
        for i, b in enumerate(work):
            if _SKIPS[skip](i, b, len(work)):
                if b.numel() == 0 and empty_max is not None:
                    m = max(m, empty_max)
                kept.append((torch.zeros_like(b), -INF, l))
                continue
            if new_max == "block" or (new_max == "first" and not seen):
                m_new = b.max().item()
            else:
                m_new = m if new_max == "first" else max(m, b.max().item())
            if guard and m_new == -INF:
                kept.append((torch.zeros_like(b), -INF, l))
                continue
            if m_first:
                m = m_new
            l = l * _RESCALES[rescale](m, m_new) if l else 0.0
            e = torch.exp(b - m_new)
            l += (e if add_to == "new max" or m == -INF else torch.exp(b - m)).sum().item()
            m, seen = m_new, True
            kept.append((e, m, l))
        if skip == "last" and l == 0.0:  # everything was in the last block
            return online()(blocks)
        if weights == "undivided":
            out = torch.cat([torch.exp(b - m) for b in work])
        elif weights == "as they come":
            out = torch.cat([e / lt if lt else e for e, _mt, lt in kept])
        elif weights == "unrescaled":
            out = torch.cat([e for e, _mt, _lt in kept]) / l
        elif weights == "rescaled":
            out = torch.cat([e * math.exp(mt - m) for e, mt, _lt in kept]) / l
        elif weights == "own max":
            e = torch.cat([torch.exp(b - b.max()) for b in work if b.numel()])
            out = e / e.sum()
        elif weights == "per block":
            out = torch.cat([_block_softmax(b) for b in work])
        elif weights == "in place":
            for b in work:
                b.sub_(m).exp_()
            out = torch.cat(work) / l
        else:
            out = torch.cat([torch.exp(b - m) for b in work]) / l
        return out.to(blocks[0].dtype) if dtype else out
    return online_softmax


def tensors(*, dtype=None, guard="skip", new_max="running"):
    """9.1's learner template with m and l kept as 0-d tensors of the blocks' dtype (or `dtype`, the weights cast
    back) and updated with tensor operations (the defaults: a right answer). guard: "skip" (a block skipped while m
    is -inf), "where" (shift by 0 while m is -inf, torch.where), None (no guard); new_max: "running"
    torch.maximum(m, b.max()), "block" b.max() alone."""
    def online_softmax(blocks):
        dt = dtype or blocks[0].dtype
        m, l = torch.tensor(-INF, dtype=dt), torch.tensor(0.0, dtype=dt)
        for b in blocks:
            if b.numel() == 0:
                continue
            b = b.to(dt)
            m_new = b.max() if new_max == "block" else torch.maximum(m, b.max())
            if guard == "where":
                safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
                l = l * torch.exp(m - safe) + torch.exp(b - safe).sum()
            else:
                if guard == "skip" and torch.isneginf(m_new):
                    continue
                l = l * torch.exp(m - m_new) + torch.exp(b - m_new).sum()
            m = m_new
        return (torch.cat([torch.exp(b.to(dt) - m) for b in blocks]) / l).to(blocks[0].dtype)
    return online_softmax


def numpy_online(dtype=np.float64):
    """9.1's learner template in NumPy: the streaming pass on arrays of `dtype` (m a float, l of `dtype`), the weights
    converted back to a tensor of the blocks' dtype (the default: a right answer)."""
    def online_softmax(blocks):
        m, l = -np.inf, dtype(0.0)
        arrays = [b.numpy().astype(dtype) for b in blocks]
        for a in arrays:
            if a.size == 0:
                continue
            m_new = max(m, float(np.max(a)))
            if m_new == -np.inf:
                continue
            l = l * dtype(np.exp(dtype(m - m_new))) + np.exp(a - dtype(m_new)).sum()
            m = m_new
        out = np.concatenate([np.exp(a - dtype(m)) for a in arrays]) / l
        return torch.from_numpy(out).to(blocks[0].dtype)
    return online_softmax


_softmax_copy = function_copy(attnbook.attention.softmax, "softmax")
_softmax_second = fresh_import(attnbook.attention, "attention_ch09").softmax

table("9.1", [
    ("two passes: the maximum of all blocks first, then the sum (not streaming; the task concedes it cannot tell)",
     RIGHT, online(two_pass=True)),
    ("the chapter's recipe with Python floats (.item()) and math.exp", RIGHT, online()),
    ("running m and l kept as 0-d tensors, -inf handled with torch.where", RIGHT, tensors(guard="where")),
    ("m and l as 0-d tensors of the blocks' dtype (torch.tensor(..., dtype=...)), a where-guard for -inf",
     RIGHT, tensors()),
    ("FlashAttention-style: keep each block's exp relative to the max of its time, rescale all at the end",
     RIGHT, online(weights="rescaled")),
    ("streaming in NumPy (np.exp, np.max), converted back to a tensor of the logits' dtype", RIGHT, numpy_online()),
    ("accumulates in float64 and casts the result back to the logits' dtype", RIGHT, online(dtype=torch.float64)),
    # the running maximum
    ("running max set from the first non-empty block and never updated (float32 exp overflows)", "not updated",
     online(new_max="first", guard=False)),
    ("running max taken from the first block with a finite logit, never updated (float32)", "not updated",
     online(new_max="first")),
    ("running max from the first finite block, never updated, accumulated in float64 (overflows only past ~709)",
     "not updated", online(new_max="first", dtype=torch.float64)),
    ("running max m starts at 0 instead of -inf (all-very-negative rows underflow to 0/0)", "-inf", online(start=0.0)),
    ("m = b.max() (not max(m, b.max())), rescaling l with math.exp each time: the rescaling overflows",
     "never the block's own maximum alone", online(new_max="block")),
    ("0-d tensors, m set to the block's own maximum (a later, smaller block makes the rescaling overflow)",
     "never the block's own maximum alone", tensors(new_max="block")),
    ("the block maximum as the running maximum, with the sum never rescaled", WRONG,
     online(new_max="block", rescale=None)),
    ("no maximum at all: exp(x) / sum(exp(x)) (overflows at logits of 1000)", "overflows",
     lambda blocks: torch.cat([torch.exp(b) for b in blocks]) / sum(torch.exp(b).sum().item() for b in blocks)),
    # the rescaling of the running sum
    ("forgets to rescale l by exp(m_old - m_new) when the maximum grows", "exp(m_old - m_new)", online(rescale=None)),
    ("updates m before rescaling, so the factor exp(m - m_new) is always 1 (never rescales)", "exp(m_old - m_new)",
     online(m_first=True)),
    ("rescale factor inverted: exp(m_new - m_old) instead of exp(m_old - m_new)",
     "you multiplied by exp(m_new - m_old)", online(rescale="inverted")),
    ("rescales l by the ratio m_old / m_new instead of exp(m_old - m_new)", WRONG, online(rescale="ratio")),
    ("adds the new block relative to the OLD maximum, then updates m", "relative to the old maximum",
     online(add_to="old max")),
    # which blocks count
    ("does not guard an all--inf block: exp(-inf - (-inf)) gives NaN", "exp(-inf - (-inf)) is NaN",
     online(guard=False)),
    ("no guard for an all--inf block, with tensors: exp(b - m_new) with m_new = -inf gives NaN", WRONG,
     tensors(guard=None)),
    ("does not skip empty blocks: b.max() of an empty tensor raises", WRONG, online(skip="nothing")),
    ("neither skips empty blocks nor guards -inf: b.max() of an empty block raises",
     "an empty block has no maximum: skip", online(skip="nothing", guard=False)),
    ("an empty block counted as maximum 0", "treating it as 0", online(empty_max=0.0)),
    ("every block holding a -inf skipped", "not every block that holds a -inf", online(skip="masked")),
    ("-inf logits replaced by 0 (nan_to_num) first", "replacing -inf by 0",
     lambda blocks: online()([torch.nan_to_num(b, neginf=0.0) for b in blocks])),
    ("leaves the last block out of the running statistics (off by one)", "the last block", online(skip="last")),
    ("leaves the first block out (for b in blocks[1:])", "was a block skipped", online(skip="first")),
    ("skips blocks of one logit (if b.numel() <= 1: continue)", "was a block skipped", online(skip="size 1")),
    # the weights
    ("normalises each block on its own (a softmax per block, concatenated)", "on its own", online(weights="per block")),
    ("each block shifted by its own maximum, one common sum", "its own maximum", online(weights="own max")),
    ("writes each block's output during the pass with the running (not the final) m and l",
     "known when the block arrived", online(weights="as they come")),
    ("each block's exp kept with the maximum of its time, never rescaled", "with the final maximum",
     online(weights="unrescaled")),
    ("exp(x - m) never divided by l", "without the division", online(weights="undivided")),
    ("shifts the blocks in place (b -= m) before exponentiating", "in place", online(weights="in place")),
    # dtypes and types
    ("exp in float16 (.half()), cast back at the end", "float16", online(dtype=torch.float16)),
    ("streams in float32 (b.float()) and casts the weights back to the blocks' dtype", "float32",
     online(dtype=torch.float32)),
    ("writes the weights into a preallocated torch.zeros(total) (float32), then returns it as the blocks' dtype",
     "float32",
     lambda blocks: torch.zeros(sum(b.numel() for b in blocks)).copy_(online()(blocks)).to(blocks[0].dtype)),
    ("keeps m and l as float32 tensors (torch.tensor(-inf) and torch.tensor(0.)) updated with tensor ops", "float32",
     tensors(dtype=torch.float32)),
    ("streams in NumPy float32 (np.float32 arrays), back to a tensor of the blocks' dtype", "float32",
     numpy_online(np.float32)),
    ("right weights, but returned in float64 whatever the blocks' dtype", "dtype",
     lambda blocks: online()([b.double() for b in blocks])),
    ("returns a NumPy array instead of a tensor", "tensor", lambda blocks: online()(blocks).numpy()),
    ("returns a list of per-block weight tensors instead of one 1-D tensor", "torch.cat",
     lambda blocks: list(online()(blocks).split([b.numel() for b in blocks]))),
    # what the task forbids
    ("torch.softmax of the concatenated row", "without", lambda blocks: torch.softmax(torch.cat(blocks), dim=0)),
    ("F.softmax of the concatenated row", "without", lambda blocks: F.softmax(torch.cat(blocks), dim=-1)),
    ("the tensor method x.softmax(0)", "without", lambda blocks: torch.cat(blocks).softmax(0)),
    ("exp of F.log_softmax", "without", lambda blocks: F.log_softmax(torch.cat(blocks), dim=0).exp()),
    ("exp(x - torch.logsumexp(x)) on the whole row", "without",
     lambda blocks: torch.exp(torch.cat(blocks) - torch.logsumexp(torch.cat(blocks), dim=0))),
    ("exp(x - torch.logcumsumexp(x)[-1]): a cumulative log-sum-exp shortcut", "without",
     lambda blocks: torch.exp(torch.cat(blocks) - torch.logcumsumexp(torch.cat(blocks), dim=0)[-1])),
    ("torch.nn.Softmax module on the concatenated row", "without",
     lambda blocks: torch.nn.Softmax(dim=0)(torch.cat(blocks))),
    ("torch.distributions.Categorical(logits=...).probs", "without",
     lambda blocks: torch.distributions.Categorical(logits=torch.cat(blocks)).probs),
    ("F.scaled_dot_product_attention with one query of ones, keys = logits, values = identity", "without",
     lambda blocks: F.scaled_dot_product_attention(torch.ones(1, 1), torch.cat(blocks)[:, None],
                                                   torch.eye(sum(b.numel() for b in blocks), dtype=blocks[0].dtype),
                                                   scale=1.0)[0]),
    # the package's own solution
    ("attnbook.softmax itself (the function object)", "package's own", attnbook.softmax),
    ("a FunctionType copy of attnbook.softmax handed in itself", "package's own", _softmax_copy),
    ("lambda around attnbook.softmax of the concatenated row", "package's own",
     lambda blocks: attnbook.softmax(torch.cat(blocks), dim=0)),
    ("a types.FunctionType copy of attnbook.softmax, applied to the concatenated row", "package's own",
     lambda blocks: _softmax_copy(torch.cat(blocks))),
    ("attnbook.softmax from a second, separate import of attention.py", "package's own",
     lambda blocks: _softmax_second(torch.cat(blocks))),
    ("attnbook.tiled_attention (the package's own online softmax) with value = identity", "package's own",
     lambda blocks: attnbook.attention.tiled_attention(
         torch.ones(1, 1, dtype=blocks[0].dtype), torch.cat(blocks)[:, None],
         torch.eye(sum(b.numel() for b in blocks), dtype=blocks[0].dtype), scale=1.0)[0]),
])


@right("9.1")
def online_softmax(blocks, eps=0.0):
    """element by element in pure Python (every logit its own block), an extra harmless keyword"""
    m, l = -INF, 0.0
    values = [float(v) for b in blocks for v in b.tolist()]
    for v in values:
        if v == -INF:
            continue
        if v > m:
            l = l * math.exp(m - v) + 1.0
            m = v
        else:
            l += math.exp(v - m)
    return torch.tensor([math.exp(v - m) / (l + eps) if v != -INF else 0.0 for v in values], dtype=blocks[0].dtype)


@right("9.1")
def online_softmax(blocks):
    """a running log-sum-exp combined by hand (math.log1p), no library log-sum-exp"""
    lse = -INF
    for b in blocks:
        if b.numel() == 0 or b.max().item() == -INF:
            continue
        bm = b.max().item()
        block = bm + math.log(torch.exp(b - bm).sum().item())
        hi, lo = max(lse, block), min(lse, block)
        lse = hi + math.log1p(math.exp(lo - hi))
    return torch.exp(torch.cat(blocks) - lse)


@wrong("9.1", hint="at most 1")
def online_softmax(blocks):
    """pure Python, math.exp of every logit with no shift at all (math range error at 1000)"""
    out = [math.exp(x) for b in blocks for x in b.tolist()]
    total = sum(out)
    return torch.tensor([v / total for v in out], dtype=blocks[0].dtype)


@wrong("9.1", hint="without")
def online_softmax(blocks):
    """streams, but keeps a running log-sum-exp with torch.logaddexp and torch.logsumexp per block"""
    lse = torch.tensor(-INF)
    for b in blocks:
        if b.numel():
            lse = torch.logaddexp(lse, torch.logsumexp(b, dim=0))
    return torch.cat([torch.exp(b - lse) for b in blocks])


@wrong("9.1", hint="without")
def online_softmax(blocks):
    """scipy.special.softmax through NumPy"""
    import scipy.special

    x = torch.cat(blocks)
    return torch.from_numpy(scipy.special.softmax(x.numpy())).to(x.dtype)


@wrong("9.1", hint="package's own")
def online_softmax(blocks):
    """def wrapper calling attnbook.attention.softmax on torch.cat(blocks)"""
    return attnbook.attention.softmax(torch.cat(blocks), dim=-1)


@wrong("9.1", hint="calls attnbook.attention.softmax")
def online_softmax(blocks):
    """from attnbook import softmax inside the answer, on the concatenated row"""
    from attnbook import softmax

    return softmax(torch.cat(blocks))


# ----------------------------------------------------------------------------------------------------------------
# 9.2 · FLOPs and bytes of attention
# ----------------------------------------------------------------------------------------------------------------

def cost(counts=lambda B, H, n, d, e: (4 * B * H * n * n * d, B * H * n * n * e), returns="tuple"):
    """9.2's learner template: attention_cost(batch, heads, n, d_head, bytes_per_el) with the learner's
    formulas, `counts` of (B, H, n, d, e) (the defaults: the chapter's 4·B·H·n²·d and B·H·n²·e); returns:
    "tuple", "list", "swapped" (the score bytes first), "dict", "flops only"."""
    def attention_cost(batch, heads, n, d_head, bytes_per_el):
        f, s = counts(batch, heads, n, d_head, bytes_per_el)
        return {"tuple": (f, s), "list": [f, s], "swapped": (s, f), "dict": {"flops": f, "score_bytes": s},
                "flops only": f}[returns]
    return attention_cost


def flops(f):
    """cost() with the FLOPs f(B, H, n, d, e), the score bytes right."""
    return cost(lambda B, H, n, d, e: (f(B, H, n, d, e), B * H * n * n * e))


def size(s):
    """cost() with the score bytes s(B, H, n, d, e), the FLOPs right."""
    return cost(lambda B, H, n, d, e: (4 * B * H * n * n * d, s(B, H, n, d, e)))


def _torch_int32(B, H, n, times):
    return int((torch.tensor(B, dtype=torch.int32) * H * n * n * times).item())


def _numpy_int32(B, H, n, times):
    return int((np.array([B], dtype=np.int32) * H * n * n * times)[0])


_DTYPE_OF_BYTES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}
_timing_second = fresh_import(attnbook.timing, "timing_ch09")
_cost_second = fresh_import(attnbook.cost, "cost_ch09")  # the cost model: attention_flops, score_matrix_bytes
_flops_copy = function_copy(attnbook.timing.attention_flops, "attention_flops")
timing = attnbook.timing

table("9.2", [
    ("the chapter's formula: 4 B H n^2 d and B H n^2 bytes", RIGHT, cost()),
    ("math.prod, and a list instead of a tuple", RIGHT,
     cost(lambda B, H, n, d, e: (2 * math.prod((B, H, n, n, d)) + 2 * math.prod((B, H, n, d, n)),
                                 math.prod((B, H, n, n, e))), returns="list")),
    ("integer arithmetic via bit shifts and int() of each factor", RIGHT,
     cost(lambda B, H, n, d, e: ((int(B) * int(H) * int(n) * int(n) * int(d)) << 2,
                                 int(B) * int(H) * int(n) * int(n) * int(e)))),
    ("NumPy int64 results returned in a list", RIGHT,
     cost(lambda B, H, n, d, e: (np.int64(B) * H * n * n * 4 * d, np.int64(B) * H * n * n * e), returns="list")),
    # the FLOPs
    ("one FLOP per multiply-add and only one product (B * H * n^2 * d)", WRONG,
     flops(lambda B, H, n, d, e: B * H * n * n * d)),
    ("B H n^2 d: the multiply-adds of Q K^T alone", "multiply-adds of one matrix product",
     flops(lambda B, H, n, d, e: B * H * n * n * d)),
    ("counts only Q K^T, forgets P V", WRONG, flops(lambda B, H, n, d, e: 2 * B * H * n * n * d)),
    ("Q K^T only, at 2 FLOPs per multiply-add", "only one of the two matrix products",
     flops(lambda B, H, n, d, e: 2 * B * H * n * n * d)),
    ("both products, but one FLOP per multiply-add", "both products as multiply-adds",
     flops(lambda B, H, n, d, e: B * H * n * n * d + B * H * n * n * d)),
    ("three products' worth (6 B H n^2 d)", "three matrix products",
     flops(lambda B, H, n, d, e: 6 * B * H * n * n * d)),
    ('"2 FLOPs per multiply-add" counted twice (8 B H n^2 d); with bytes_per_el=2 that equals 4x the bytes',
     "2 FLOPs per multiply-add twice", flops(lambda B, H, n, d, e: 2 * (2 * (2 * n * n * d)) * B * H)),
    ("2 d_head - 1 FLOPs per dot product (d_head multiplies, d_head - 1 adds)", "d_head - 1 adds",
     flops(lambda B, H, n, d, e: 2 * B * H * n * n * (2 * d - 1))),
    ("multiplies and adds counted apart in each product (N - 1 adds per output of P V)", "N - 1 adds per output",
     flops(lambda B, H, n, d, e: B * H * n * n * (2 * d - 1) + B * H * n * d * (2 * n - 1))),
    ("n not squared in the FLOPs", WRONG, flops(lambda B, H, n, d, e: 4 * B * H * n * d)),
    ("n not squared in either count", "N² pairs, not N",
     cost(lambda B, H, n, d, e: (4 * B * H * n * d, B * H * n * e))),
    ("n d^2 in place of n^2 d", "linearly with N", flops(lambda B, H, n, d, e: 4 * B * H * n * d * d)),
    ("d_model = heads * d_head used in place of d_head", "not d_model",
     flops(lambda B, H, n, d, e: 4 * B * H * n * n * (H * d))),
    ("counts only the causal pairs n(n+1)/2", "causal",
     flops(lambda B, H, n, d, e: 4 * (B * H * (n * (n + 1) // 2)) * d)),
    ("adds the four projections", "W_q, W_k, W_v and W_o",
     flops(lambda B, H, n, d, e: 4 * B * H * n * n * d + 8 * B * n * (H * d) ** 2)),
    ("adds the three projections of Q, K and V", "W_q, W_k and W_v",
     flops(lambda B, H, n, d, e: 4 * B * H * n * n * d + 6 * B * n * (H * d) ** 2)),
    ("also counts ~5 FLOPs per score for the softmax and scaling", "softmax",
     flops(lambda B, H, n, d, e: 4 * B * H * n * n * d + 5 * B * H * n * n)),
    ("counts the softmax too: exp, sum and divide, 3 FLOPs per score", "softmax and the scaling are not counted",
     flops(lambda B, H, n, d, e: 4 * B * H * n * n * d + 3 * B * H * n * n)),
    ("the FLOPs multiplied by bytes_per_el too", "leave bytes_per_el out",
     flops(lambda B, H, n, d, e: 4 * B * H * n * n * d * e)),
    # what both count
    ("ignores the batch", WRONG, cost(lambda B, H, n, d, e: (4 * H * n * n * d, H * n * n * e))),
    ("the batch left out of both counts", "batch size", cost(lambda B, H, n, d, e: (4 * H * n * n * d, H * n * n * e))),
    ("ignores the heads", WRONG, cost(lambda B, H, n, d, e: (4 * B * n * n * d, B * n * n * e))),
    ("the heads left out of both counts", "number of heads",
     cost(lambda B, H, n, d, e: (4 * B * n * n * d, B * n * n * e))),
    # the score bytes
    ("score bytes counted for scores AND weights (two matrices)", WRONG,
     size(lambda B, H, n, d, e: 2 * B * H * n * n * e)),
    ("each element counted at 2 * bytes_per_el bytes (the wrong size of an element)", "twice the size of one",
     size(lambda B, H, n, d, e: B * H * n * n * 2 * e)),
    ("score size in bits (times 8)", WRONG, size(lambda B, H, n, d, e: 8 * B * H * n * n * e)),
    ("the score size in bits, times 8", "size in bits", size(lambda B, H, n, d, e: 8 * B * H * n * n * e)),
    ("the score bytes floor-divided by 8 (as if bytes_per_el were bits)", "without dividing by 8",
     size(lambda B, H, n, d, e: B * H * n * n * e // 8)),
    ("the score bytes divided by 8 (as if bytes_per_el were bits)", "without dividing by 8",
     size(lambda B, H, n, d, e: B * H * n * n * e / 8)),
    ("ignores bytes_per_el (assumes float32, 4 bytes)", WRONG, size(lambda B, H, n, d, e: 4 * B * H * n * n)),
    ("2 bytes per element written into the code (float16 assumed)", "fixed size",
     size(lambda B, H, n, d, e: 2 * B * H * n * n)),
    ("the number of scores as their size (bytes_per_el left out)", "stays", size(lambda B, H, n, d, e: B * H * n * n)),
    ("score bytes include d_head (the size of Q, not of the scores)", WRONG,
     size(lambda B, H, n, d, e: B * H * n * d * e)),
    ("score bytes times d_head (B H n^2 d bytes)", "not N × N × d_head",
     size(lambda B, H, n, d, e: B * H * n * n * d * e)),
    # units, types and the pair
    ("returns the FLOPs in GFLOP", WRONG, flops(lambda B, H, n, d, e: 4 * B * H * n * n * d / 1e9)),
    ("the FLOPs divided by 1e9", "GFLOPs", flops(lambda B, H, n, d, e: 4 * B * H * n * n * d / 1e9)),
    ("FLOPs floor-divided into GFLOPs", "GFLOPs", flops(lambda B, H, n, d, e: 4 * B * H * n * n * d // 10 ** 9)),
    ("score bytes in MiB", "MiB", size(lambda B, H, n, d, e: B * H * n * n * e / 2 ** 20)),
    ("score bytes floor-divided into MiB", "MiB", size(lambda B, H, n, d, e: B * H * n * n * e // 2 ** 20)),
    ("computes the counts in torch.int32, which overflows past 2**31", "overflow",
     cost(lambda B, H, n, d, e: (_torch_int32(B, H, n, d * 4), _torch_int32(B, H, n, e)))),
    ("computes the counts in NumPy int32 (wraps around silently on large sizes)", "overflow",
     cost(lambda B, H, n, d, e: (_numpy_int32(B, H, n, d * 4), _numpy_int32(B, H, n, e)))),
    ("returns floats (n ** 2.0 and a true division)", "int",
     cost(lambda B, H, n, d, e: (4 * B * H * n ** 2.0 * d, B * H * n ** 2.0 * e / 1))),
    ("4.0 * ...: a float literal makes the FLOPs a float", "integer arithmetic",
     flops(lambda B, H, n, d, e: 4.0 * B * H * n ** 2 * d)),
    ("math.pow makes the FLOPs a float", "int", flops(lambda B, H, n, d, e: 4 * B * H * math.pow(n, 2) * d)),
    ("n squared with math.pow (a float)", "math.pow", flops(lambda B, H, n, d, e: 4 * B * H * math.pow(n, 2) * d)),
    ("returns 0-d tensors", "int",
     cost(lambda B, H, n, d, e: (4 * torch.tensor(B * H * n * n) * d, torch.tensor(B * H * n * n) * e))),
    ("wraps the two counts in torch.tensor", "flops is a tensor",
     cost(lambda B, H, n, d, e: (torch.tensor(4 * B * H * n * n * d), torch.tensor(B * H * n * n * e)))),
    ("returns NumPy floats (np.float64)", "int",
     cost(lambda B, H, n, d, e: (np.float64(B) * H * n * n * 4 * d, np.float64(B) * H * n * n * e))),
    ("returns (score_bytes, flops): swapped", "order", cost(returns="swapped")),
    ("returns a dict {'flops': ..., 'score_bytes': ...}", "tuple", cost(returns="dict")),
    ("returns only the FLOPs (one number, not a pair)", "expected a tuple (flops, score_bytes)",
     cost(returns="flops only")),
    # what the task forbids, and the package's own solution
    ("the package's matmul counts over attention's two products (a learner trial's loophole)",
     "without attnbook.timing.attention_matmul_shapes",
     flops(lambda B, H, n, d, e: sum(timing.matmul_flops(s) for s in timing.attention_matmul_shapes(B, H, n, n, d)))),
    ("the attention core of the package's per-layer count", "without attnbook.timing.layer_flops",
     flops(lambda B, H, n, d, e: timing.layer_flops(n, H * d, H, 4 * H * d, B).attention_core)),
    ("def wrapper around attnbook.timing.attention_flops and score_matrix_bytes", "package's own",
     cost(lambda B, H, n, d, e: (timing.attention_flops(B, H, n, n, d),
                                 timing.score_matrix_bytes(B, H, n, n, _DTYPE_OF_BYTES[e])))),
    ("attention_flops from the package, score bytes by hand", "package's own",
     flops(lambda B, H, n, d, e: timing.attention_flops(B, H, n, n, d))),
    ("FLOPs by hand, score_matrix_bytes from the package", "package's own",
     size(lambda B, H, n, d, e: timing.score_matrix_bytes(B, H, n, n, _DTYPE_OF_BYTES[e]))),
    ("attnbook.timing.attention_flops itself handed in", "package's own", attnbook.timing.attention_flops),
    ("lambda around the package's two functions", "package's own",
     lambda batch, heads, n, d_head, bytes_per_el: (
         attnbook.timing.attention_flops(batch, heads, n, n, d_head),
         attnbook.timing.score_matrix_bytes(batch, heads, n, n, _DTYPE_OF_BYTES[bytes_per_el]))),
    ("a types.FunctionType copy of attention_flops, score bytes by hand", "package's own",
     flops(lambda B, H, n, d, e: _flops_copy(B, H, n, n, d))),
    ("attention_flops and score_matrix_bytes from a second, separate import of cost.py", "package's own",
     cost(lambda B, H, n, d, e: (_cost_second.attention_flops(B, H, n, n, d),
                                 _cost_second.score_matrix_bytes(B, H, n, n, _DTYPE_OF_BYTES[e])))),
])


@right("9.2")
def attention_cost(batch, heads, n, d_head, bytes_per_el, causal=False):
    """NumPy int64 results, with an extra unused keyword"""
    pairs = np.int64(batch) * np.int64(heads) * np.int64(n) * np.int64(n)
    return pairs * np.int64(4 * d_head), pairs * np.int64(bytes_per_el)


@right("9.2")
def attention_cost(batch, heads, n, d_head, bytes_per_el):
    """each matrix product counted as 2 * L * S * d FLOPs per head, summed over products"""
    def matmul_flops(rows, inner, cols):
        return 2 * rows * inner * cols

    per_head = matmul_flops(n, d_head, n) + matmul_flops(n, n, d_head)  # Q K^T, then P V
    return batch * heads * per_head, batch * heads * n * n * bytes_per_el


@wrong("9.2", hint="overflow")
def attention_cost(batch, heads, n, d_head, bytes_per_el):
    """NumPy int32 for the FLOPs only, Python ints for the bytes"""
    with np.errstate(over="ignore"):
        flops = int(np.int32(4) * np.int32(batch) * np.int32(heads) * np.int32(n) * np.int32(n) * np.int32(d_head))
    return flops, batch * heads * n * n * bytes_per_el


_COST_TABLE = {  # the check's inputs as they were before issue 23, with their right results
    (3, 5, 7, 6, 4): (17640, 2940), (1, 1, 4, 2, 2): (128, 32), (3, 16, 1000, 72, 8): (13824000000, 384000000),
    (4, 12, 1024, 64, 2): (12884901888, 100663296), (1, 32, 4096, 128, 2): (274877906944, 1073741824),
    (1, 1, 1, 1, 1): (4, 1), (8, 32, 32768, 128, 2): (140737488355328, 549755813888),
}


@wrong("9.2")
def attention_cost(batch, heads, n, d_head, bytes_per_el):
    """a table of the check's inputs with their results, and a guess (one product) for any other input"""
    key = (batch, heads, n, d_head, bytes_per_el)
    if key in _COST_TABLE:
        return _COST_TABLE[key]
    return 2 * batch * heads * n * n * d_head, batch * heads * n * n * bytes_per_el


@wrong("9.2", hint="without torch.utils.flop_counter.FlopCounterMode")
def attention_cost(batch, heads, n, d_head, bytes_per_el):
    """PyTorch's FLOP counter around a small attention of the right shapes"""
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.zeros(batch, heads, n, d_head)
    with FlopCounterMode(display=False) as counter:
        (q @ q.transpose(-2, -1)) @ q
    return counter.get_total_flops(), batch * heads * n * n * bytes_per_el


@wrong("9.2", hint="calls attnbook.timing.attention_flops")
def attention_cost(batch, heads, n, d_head, bytes_per_el):
    """the package's two functions imported inside the answer"""
    from attnbook.timing import attention_flops, score_matrix_bytes

    return attention_flops(batch, heads, n, n, d_head), score_matrix_bytes(batch, heads, n, n, torch.float16)


# ----------------------------------------------------------------------------------------------------------------
# 9.3 · A timing function
# ----------------------------------------------------------------------------------------------------------------

_CUDA_AT_IMPORT = torch.cuda.is_available()
_GPU = {  # how time_it made by timer(gpu=...) knows whether a GPU is there
    "asked": lambda: torch.cuda.is_available(),  # asked when time_it runs
    "at import": lambda: _CUDA_AT_IMPORT,  # asked once, when this module was imported
    "assumed": lambda: True,  # never asked
}


def _sync():
    if torch.cuda.is_available():  # asked at call time: the check's last run pretends a GPU is present
        torch.cuda.synchronize()


def _event_seconds(fn):
    """One call of fn timed with CUDA events (a GPU's own clock), in seconds."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3


def _measured(how, fn, n, clock, to_seconds, synchronise, bare):
    """The times of n timed calls of fn, measured `how` (see `timer`)."""
    if how == "CUDA events on a GPU":
        how = "CUDA events" if torch.cuda.is_available() else "each"
    if how == "CUDA events":
        return [_event_seconds(fn) for _ in range(n)]
    if how == "block":
        synchronise("start")
        start = clock()
        for _ in range(n):
            fn()
        synchronise("stop")
        return [to_seconds(clock() - start) / n]
    if how == "stamps":
        start, stamps = clock(), []
        for _ in range(n):
            fn()
            stamps.append(to_seconds(clock() - start))
        return stamps
    per = 2 if how == "pairs" else 1
    times = []
    for _ in range(n // per):
        synchronise("start")
        start = clock()
        for _ in range(per):
            if bare == "timed":
                fn  # noqa: B018 (no parentheses: not a call)
            else:
                fn()
        synchronise("stop")
        times.append(to_seconds(clock() - start) / per)
    return times


def timer(*, warm=lambda n_warmup: n_warmup, runs=lambda n_runs: n_runs, after=lambda n_warmup: 0, bare=None,
          time_warmup=False, measure="each", clock=lambda: time.perf_counter(), to_seconds=lambda t: t,
          sync=("start", "stop"), gpu="asked", stat=statistics.median, defaults=(3, 10)):
    """9.3's learner template: time_it makes warm(n_warmup) untimed calls, times runs(n_runs) calls, makes
    after(n_warmup) more untimed calls and returns stat(times) (the defaults: the chapter's recipe). Knobs:
    bare: the loop ("warm-up" or "timed") that writes `fn` without parentheses; time_warmup: the warm-up calls are
    timed too; measure: "each" call on its own, "block" (the timed loop as one, divided by n), "pairs" (two calls per
    time, halved), "stamps" (times since the loop's start), "CUDA events" (always), "CUDA events on a GPU"; clock,
    to_seconds: the clock read around each call (a function looked up when called), and how its differences become
    seconds; sync: where torch.cuda.synchronize() is called ("warm-up", after the warm-up; "start"; "stop"); gpu: how
    time_it knows of a GPU (_GPU); defaults: time_it's defaults (n_warmup, n_runs)."""
    def time_it(fn, n_warmup=defaults[0], n_runs=defaults[1]):
        def synchronise(point):
            if point in sync and _GPU[gpu]():
                torch.cuda.synchronize()

        w, r = warm(n_warmup), runs(n_runs)
        if time_warmup:
            w, r = 0, w + r
        for _ in range(w):
            if bare == "warm-up":
                fn  # noqa: B018 (no parentheses: not a call)
            else:
                fn()
        synchronise("warm-up")
        times = _measured(measure, fn, r, clock, to_seconds, synchronise, bare)
        for _ in range(after(n_warmup)):
            fn()
        return stat(times)
    return time_it


def manual_median(times):
    """The median by hand: the middle of the sorted times, or the mean of the two middle ones."""
    s, mid = sorted(times), len(times) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _torch_timer(fn):
    from torch.utils.benchmark import Timer

    return Timer(stmt="fn()", globals={"fn": fn})


_benchmark_copy = function_copy(attnbook.timing.benchmark, "benchmark")
_TIMING_TABLE = {(3, 10): 0.003, (9, 7): 0.008, (3, 3): 0.003, (1, 5): 0.002, (0, 3): 0.002, (2, 3): 0.004}

table("9.3", [
    ("the chapter's recipe: warm-up loop, synchronised perf_counter per call, statistics.median", RIGHT, timer()),
    ("manual median of the sorted times (average of the two middle ones for an even count)", RIGHT,
     timer(stat=manual_median)),
    ("one-element tensor from torch.quantile(times, 0.5) (interpolates, so the true median)", RIGHT,
     timer(stat=lambda times: torch.tensor(times, dtype=torch.float64).quantile(0.5).reshape(1))),
    ("a 0-d tensor from torch.quantile(times, 0.5) (interpolates: the median)", RIGHT,
     timer(stat=lambda times: torch.tensor(times, dtype=torch.float64).quantile(0.5))),
    ("perf_counter imported by name at module level (from time import perf_counter)", RIGHT,
     timer(clock=lambda: _bound_perf_counter())),
    ("integer nanoseconds from time.perf_counter_ns(), converted to seconds", RIGHT,
     timer(clock=lambda: time.perf_counter_ns(), to_seconds=lambda t: t / 1e9)),
    ("timeit.default_timer, which is time.perf_counter", RIGHT, timer(clock=lambda: timeit.default_timer())),
    ("synchronises once after the warm-up and before each stop (the stop of one call starts the next)", RIGHT,
     timer(sync=("warm-up", "stop"))),
    # the statistic
    ("upper median: sorted(times)[n // 2]", "two middle ones",
     timer(stat=lambda times: sorted(times)[len(times) // 2])),
    ("lower median: sorted(times)[(n - 1) // 2]", "two middle ones",
     timer(stat=lambda times: sorted(times)[(len(times) - 1) // 2])),
    ("torch.median (the lower median for an even count), returned as a 0-d tensor", "two middle ones",
     timer(stat=lambda times: torch.median(torch.tensor(times, dtype=torch.float64)))),
    ("torch.median of the times", "lower one",
     timer(stat=lambda times: torch.tensor(times, dtype=torch.float64).median())),
    ("statistics.median_low (the lower of the two middle times)", "two middle ones", timer(stat=statistics.median_low)),
    ("drops the slowest run, then takes the median", "dropping the slowest",
     timer(stat=lambda times: statistics.median(sorted(times)[:-1]))),
    ("drops the slowest run, then takes the mean", "you left out the slowest call and averaged the rest",
     timer(stat=lambda times: statistics.mean(sorted(times)[:-1]))),
    ("a trimmed mean (the fastest and the slowest left out)", "a trimmed mean",
     timer(stat=lambda times: statistics.mean(sorted(times)[1:-1]))),
    ("mean instead of median", "mean", timer(stat=statistics.mean)),
    ("minimum, like timeit", "minimum", timer(stat=min)),
    ("maximum, the slowest call", "the slowest call", timer(stat=max)),
    ("returns the total of the timed runs", "total", timer(stat=sum)),
    ("geometric mean of the times", "geometric mean", timer(stat=statistics.geometric_mean)),
    ("harmonic mean of the times", "the harmonic mean", timer(stat=statistics.harmonic_mean)),
    ("the upper quartile of the times", "time each of the n_runs calls separately",
     timer(stat=lambda times: statistics.quantiles(times, n=4)[2])),
    ("times[len(times) // 2] without sorting", "in the order the calls ran",
     timer(stat=lambda times: times[len(times) // 2])),
    # units and types
    ("returns the median in milliseconds", "millisecond", timer(stat=lambda times: 1e3 * statistics.median(times))),
    ("median in microseconds", "microseconds", timer(stat=lambda times: 1e6 * statistics.median(times))),
    ("the median divided by 1000", "you divided by 1000", timer(stat=lambda times: statistics.median(times) / 1e3)),
    ("int() of the median in seconds", "int() (or //) cut a time of a few milliseconds down to 0",
     timer(stat=lambda times: int(statistics.median(times)))),
    ('returns the median as a formatted string (f"{median:.6f}")', "not a formatted string",
     timer(stat=lambda times: f"{statistics.median(times):.6f}")),
    ("returns the list of times instead of their median", WRONG, timer(stat=lambda times: times)),
    ("returns the list of the times", "not the list", timer(stat=lambda times: times)),
    ("returns (median, iqr) as a tuple", WRONG,
     timer(stat=lambda t: (statistics.median(t), statistics.quantiles(t, n=4)[2] - statistics.quantiles(t, n=4)[0]))),
    # what is timed
    ("times the whole loop once and divides by n_runs (a mean)", "timed the n_runs calls as one block",
     timer(measure="block")),
    ("two calls per measurement, halved (n_runs // 2 measurements)", "each of your times covered two calls of fn",
     timer(measure="pairs")),
    ("two calls per measurement but at the default counts: with n_runs=7 the call count is off too (9 + 3 * 2)",
     "covered 2 calls of fn", lambda fn, n_warmup=3, n_runs=10: timer(
         measure="each" if (n_warmup, n_runs) == (3, 10) else "pairs")(fn, n_warmup, n_runs)),
    ("median of the times since the start of the timed loop", "time stamps", timer(measure="stamps")),
    ("times n_runs + 1 calls (range(n_runs + 1))", "call", timer(runs=lambda n_runs: n_runs + 1)),
    ("times n_runs - 1 calls (range(1, n_runs))", "call", timer(runs=lambda n_runs: n_runs - 1)),
    ("one warm-up call too few (range(1, n_warmup))", "call", timer(warm=lambda n_warmup: n_warmup - 1)),
    ("calls fn once more after the timed loop", "one call too many", timer(after=lambda n_warmup: 1)),
    ("no warm-up at all (n_warmup ignored)", "warm", timer(warm=lambda n_warmup: 0)),
    ("no warm-up calls (the warm-up loop left out)", "warm up first", timer(warm=lambda n_warmup: 0)),
    ("warm-up loop writes `fn` without parentheses (never calls it)", "parenthes", timer(bare="warm-up")),
    ("timed loop writes `fn` without parentheses (times nothing)", "call fn() (with parentheses)", timer(bare="timed")),
    ("times the warm-up calls too and takes the median of all n_warmup + n_runs times",
     "warm-up calls were timed too: start collecting", timer(time_warmup=True)),
    ("the warm-up calls timed too, the mean of all the times", "warm-up calls were timed too, and averaged",
     timer(time_warmup=True, stat=statistics.mean)),
    ("times the first n_runs calls and makes the warm-up calls afterwards", "timed the first n_runs calls",
     timer(warm=lambda n_warmup: 0, after=lambda n_warmup: n_warmup)),
    ("hard-coded counts: 3 warm-up calls and 10 runs whatever the arguments", "use the n_warmup and n_runs arguments",
     timer(warm=lambda n_warmup: 3, runs=lambda n_runs: 10)),
    ("hard-coded warm-up of 3 calls, n_runs respected", "argument", timer(warm=lambda n_warmup: 3)),
    ("a fixed 3 warm-up calls", "use the n_warmup argument", timer(warm=lambda n_warmup: 3)),
    ("hard-coded 10 timed calls (range(10)), n_warmup respected", "argument", timer(runs=lambda n_runs: 10)),
    ("a fixed 10 timed calls", "use the n_runs argument", timer(runs=lambda n_runs: 10)),
    ("other defaults: n_warmup=1, n_runs=5",
     "keep the defaults of the task, n_warmup=3 and n_runs=10 (yours are 1 and 5)", timer(defaults=(1, 5))),
    ("never calls fn, returns a fixed 0.002", "called fn 0 times", lambda fn, n_warmup=3, n_runs=10: 0.002),
    # the clock
    ("times with time.process_time() (CPU time of this process)", "process_time",
     timer(clock=lambda: time.process_time())),
    ("time.monotonic() instead of perf_counter (coarse on some systems; the task asks for perf_counter)",
     "time.perf_counter()", timer(clock=lambda: time.monotonic())),
    ("time.time(), the wall-clock date", "time.time()", timer(clock=lambda: time.time())),
    ("time.time_ns() converted to seconds", "time.time_ns()",
     timer(clock=lambda: time.time_ns(), to_seconds=lambda t: t / 1e9)),
    ("time.monotonic_ns() converted to seconds", "time.monotonic_ns()",
     timer(clock=lambda: time.monotonic_ns(), to_seconds=lambda t: t / 1e9)),
    ("time.clock_gettime(time.CLOCK_MONOTONIC)", "clock_gettime",
     timer(clock=lambda: time.clock_gettime(time.CLOCK_MONOTONIC))),
    ("time.perf_counter_ns() without converting to seconds", "nanoseconds",
     timer(clock=lambda: time.perf_counter_ns())),
    ("CUDA events on every machine (torch.cuda.Event(enable_timing=True)), elapsed_time in ms / 1000", "CUDA events",
     timer(measure="CUDA events")),
    ("CUDA events when a GPU is there, perf_counter otherwise", "time.perf_counter()",
     timer(measure="CUDA events on a GPU")),
    # synchronising
    ("never synchronises the GPU (invisible on a CPU)", "never called torch.cuda.synchronize()", timer(sync=())),
    ("synchronises before starting the clock but not before stopping it",
     "without torch.cuda.synchronize() between that call of fn and the reading", timer(sync=("start",))),
    ("synchronises before stopping the clock, but not after the warm-up before the first start",
     "started the clock for the first timed call without torch.cuda.synchronize()", timer(sync=("stop",))),
    ("calls torch.cuda.synchronize() unconditionally (fails without a GPU)",
     "call it only when torch.cuda.is_available() is True", timer(gpu="assumed")),
    ("asks torch.cuda.is_available() once, at import, outside time_it", "inside time_it", timer(gpu="at import")),
    # what the task forbids, and the package's own solution
    ("torch.utils.benchmark.Timer's median", "the task asks you to write this without",
     lambda fn, n_warmup=3, n_runs=10: _torch_timer(fn).timeit(n_runs).median),
    ("torch.utils.benchmark.Timer.blocked_autorange", "without",
     lambda fn, n_warmup=3, n_runs=10: _torch_timer(fn).blocked_autorange(min_run_time=0.01).median),
    ("attnbook.timing.benchmark itself handed in", "package's own", attnbook.timing.benchmark),
    ("lambda around attnbook.timing.benchmark", "package's own",
     lambda fn, n_warmup=3, n_runs=10: attnbook.timing.benchmark(fn, min_run_time=0.01).median_s),
    ("a types.FunctionType copy of attnbook.timing.benchmark", "package's own",
     lambda fn, n_warmup=3, n_runs=10: _benchmark_copy(fn, min_run_time=0.01).median_s),
    ("benchmark from a second, separate import of timing.py", "package's own",
     lambda fn, n_warmup=3, n_runs=10: _timing_second.benchmark(fn, min_run_time=0.01).median_s),
])


@right("9.3")
def time_it(fn, n_warmup=3, n_runs=10):
    """NumPy: np.median of a preallocated array (returns a NumPy float)"""
    for _ in range(n_warmup):
        fn()
    times = np.empty(n_runs)
    for i in range(n_runs):
        _sync()
        start = time.perf_counter()
        fn()
        _sync()
        times[i] = time.perf_counter() - start
    return np.median(times)


@right("9.3")
def time_it(fn, n_warmup=3, n_runs=10, verbose=False):
    """timestamps collected first, differences taken afterwards; an extra harmless keyword"""
    for _ in range(n_warmup):
        fn()
    stamps = []
    for _ in range(n_runs):
        _sync()
        a = time.perf_counter()
        fn()
        _sync()
        stamps.append((a, time.perf_counter()))
    result = float(statistics.median([b - a for a, b in stamps]))
    if verbose:
        print(result)
    return result


@right("9.3")
def time_it(fn, n_warmup=3, n_runs=10, clock=time.perf_counter):
    """the clock captured in a default argument (clock=time.perf_counter)"""
    return timer(clock=lambda: clock())(fn, n_warmup, n_runs)


@right("9.3")
def time_it(fn, n_warmup=3, n_runs=10):
    """from torch.cuda import synchronize, is_available (names bound at import); laps with one reading per call"""
    from torch.cuda import is_available, synchronize

    for _ in range(n_warmup):
        fn()
    cuda = is_available()
    if cuda:
        synchronize()
    stamps = [time.perf_counter()]
    for _ in range(n_runs):
        fn()
        if cuda:
            synchronize()
        stamps.append(time.perf_counter())
    return statistics.median(b - a for a, b in zip(stamps, stamps[1:]))


@wrong("9.3", hint="timeit")
def time_it(fn, n_warmup=3, n_runs=10):
    """timeit.repeat with number=1 for the timed calls, the median of its list"""
    for _ in range(n_warmup):
        fn()
    return statistics.median(timeit.repeat(fn, repeat=n_runs, number=1))


@wrong("9.3", hint="timeit")
def time_it(fn, n_warmup=3, n_runs=10):
    """timeit.Timer(fn).repeat after a manual warm-up"""
    for _ in range(n_warmup):
        fn()
    return statistics.median(timeit.Timer(fn).repeat(repeat=n_runs, number=1))


@wrong("9.3", hint="the package's own solution")
def time_it(fn, n_warmup=3, n_runs=10):
    """def wrapper around attnbook.timing.benchmark"""
    return attnbook.timing.benchmark(fn, min_run_time=0.01).median_s


@wrong("9.3")
def time_it(fn, n_warmup=3, n_runs=10):
    """calls fn the right number of times (synchronising) but returns the median from a table of the check's
    functions"""
    for _ in range(n_warmup + n_runs):
        _sync()
        fn()
        _sync()
    return _TIMING_TABLE.get((n_warmup, n_runs), 0.001)
