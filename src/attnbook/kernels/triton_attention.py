"""FlashAttention's forward pass as a Triton kernel: the "write the real kernel" step of chapter 9.

One program computes one block of BLOCK_M query rows of one (batch, head): it loads its queries once, then
streams over the keys and values in blocks of BLOCK_N, keeping the online-softmax state (running maximum m,
running sum l, running output acc) in registers, exactly as `attnbook.attention.tiled_attention` does in
plain PyTorch. The (L, S) score matrix never exists in memory; the grid runs all query blocks of all heads
in parallel.

Triton is imported on the first call, not when this module is imported. It runs natively on a CUDA GPU, and
on a CPU under Triton's interpreter when TRITON_INTERPRET=1 is set before triton is imported.
"""
from __future__ import annotations  # keeps `tl.constexpr` annotations as strings until triton is imported

import os

import torch
from torch import Tensor

from .._validate import attention_scale, require_int, require_tensor

__all__ = ["triton_attention"]

NEEDS = "needs a CUDA GPU, or Triton's interpreter (set TRITON_INTERPRET=1 before importing triton)"

triton = None  # the modules, filled in by _import_triton() on the first call
tl = None
_KERNELS: dict = {}  # (interpreter mode, autotuned) -> the jitted kernel
# The configurations `triton.autotune` times on a GPU, once per (L, S, D, DV, IS_CAUSAL) and dtype, keeping the
# fastest: (BLOCK_M, BLOCK_N, num_warps, num_stages). Larger blocks re-read K and V fewer times but need more
# registers and shared memory; a configuration that does not fit the GPU is skipped by the autotuner.
AUTOTUNE_CONFIGS = ((64, 64, 4, 3), (128, 64, 8, 3), (64, 32, 4, 2), (128, 128, 8, 2))
DEFAULT_BLOCK = 64  # for a block size not given when the other one is


def _attention_fwd(
    Q, K, V, Out, sm_scale,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    H, L, S, D, DV,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    IS_CAUSAL: tl.constexpr, FP32_IEEE: tl.constexpr,
):
    """Out[b, h, rows] = softmax(Q K^T * sm_scale) V for one block of query rows (online softmax over key blocks)."""
    start_m = tl.program_id(0)  # which block of query rows
    bh = tl.program_id(1)  # which (batch, head)
    b = bh // H
    h = bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
    offs_n = tl.arange(0, BLOCK_N)  # (BLOCK_N,) key positions within a block
    offs_d = tl.arange(0, BLOCK_D)  # (BLOCK_D,) feature index of q and k (padded to a power of 2)
    offs_dv = tl.arange(0, BLOCK_DV)  # (BLOCK_DV,) feature index of v and out

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < L) & (offs_d[None, :] < D), other=0.0)  # (BLOCK_M, BLOCK_D)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max of each row (scores in base 2)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp2(score - m_i)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)  # running sum of exp2(score - m_i) * v

    hi = S
    if IS_CAUSAL:  # top-left aligned: row i sees keys 0..i, so later key blocks are skipped entirely
        hi = tl.minimum(S, (start_m + 1) * BLOCK_M)
    # Key blocks before `full` are whole (no padding past S) and, with a causal mask, lie left of the diagonal
    # for every row of this query block: they need no mask. Only the blocks from `full` on, the diagonal ones and
    # the last partial one, pay for the comparisons.
    full = (S // BLOCK_N) * BLOCK_N
    if IS_CAUSAL:
        full = tl.minimum(full, (start_m * BLOCK_M) // BLOCK_N * BLOCK_N)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e) folded in: exp(x) = exp2(x * log2(e)), the GPU's instruction
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n  # (BLOCK_N,)
        k_ptrs = k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd
        k = tl.load(k_ptrs, mask=(cols[None, :] < S) & (offs_d[:, None] < D), other=0.0)  # (BLOCK_D, BLOCK_N): K^T
        if FP32_IEEE:  # float32 inputs with TF32 off: full-precision products
            qk = tl.dot(q, k, input_precision="ieee")  # (BLOCK_M, BLOCK_N), accumulated in float32
        else:
            qk = tl.dot(q, k)
        qk = qk * qk_scale  # scores in base 2: the running maximum and sum are of exp2(qk - m)
        if start_n >= full:  # a diagonal or partial block: mask the keys past S, and past the row with a causal mask
            allowed = cols[None, :] < S  # (1, BLOCK_N): padding past the last key
            if IS_CAUSAL:
                allowed = allowed & (cols[None, :] <= offs_m[:, None])  # (BLOCK_M, BLOCK_N)
            qk = tl.where(allowed, qk, float("-inf"))
        # the first block always holds key 0, which every row may see, so m_new is finite from then on
        m_new = tl.maximum(m_i, tl.max(qk, 1))  # (BLOCK_M,)
        p = tl.exp2(qk - m_new[:, None])  # (BLOCK_M, BLOCK_N)
        alpha = tl.exp2(m_i - m_new)  # (BLOCK_M,): rescales what was accumulated under the old maximum
        l_i = l_i * alpha + tl.sum(p, 1)
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_dv[None, :] * stride_vd
        v = tl.load(v_ptrs, mask=(cols[:, None] < S) & (offs_dv[None, :] < DV), other=0.0)  # (BLOCK_N, BLOCK_DV)
        if FP32_IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")  # (BLOCK_M, BLOCK_DV)
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]  # (BLOCK_M, BLOCK_DV)
    o_ptrs = Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_dv[None, :] * stride_od
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=(offs_m[:, None] < L) & (offs_dv[None, :] < DV))


def _interpreting() -> bool:
    """True when TRITON_INTERPRET asks for Triton's CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def _import_triton():
    """Import triton into this module's globals (the kernel's body resolves `tl` there) and return it."""
    global triton, tl
    if triton is None:
        try:
            import triton as _triton
            import triton.language as _tl
        except ImportError as e:
            raise RuntimeError(
                f"triton_attention {NEEDS}, and the `triton` package is not installed (pip install triton): {e}"
            ) from None
        triton, tl = _triton, _tl
    return triton


def _kernel(tuned: bool):
    """The jitted kernel for the current mode; `triton.jit` decides between compiling and interpreting.

    `tuned`: wrapped in `triton.autotune` over AUTOTUNE_CONFIGS, keyed on the sizes. Triton's interpreter times
    nothing meaningful, so there the autotuner gets the first configuration only, which it runs without timing.
    """
    interpret = _interpreting()
    if (interpret, tuned) not in _KERNELS:
        triton = _import_triton()
        kernel = triton.jit(_attention_fwd)
        if tuned:
            configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=st)
                       for m, n, w, st in AUTOTUNE_CONFIGS]
            kernel = triton.autotune(configs[:1] if interpret else configs,
                                     key=["L", "S", "D", "DV", "IS_CAUSAL"])(kernel)
        _KERNELS[interpret, tuned] = kernel
    return _KERNELS[interpret, tuned]


def _check(q, k, v) -> None:
    """Validate (B, H, N, d) tensors that agree in batch, heads, dtype and device."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_tensor(t, name, floating=True)
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq, d_head), got shape {tuple(t.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"q, k and v must be float16, bfloat16 or float32, got {q.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device} and {v.device}")
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(
            f"q, k and v must have the same batch and heads (dims 0 and 1), got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q and k must have the same d_head (dim -1), got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.size(-2) != v.size(-2):
        raise ValueError(f"k and v must have the same seq (dim -2), got k {tuple(k.shape)} and v {tuple(v.shape)}")


def triton_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    block_m: int | None = None,
    block_n: int | None = None,
) -> Tensor:
    """SDPA's output, softmax(q k^T * scale) v, computed by a FlashAttention-style Triton kernel (forward only).

    q (B, H, L, d), k (B, H, S, d), v (B, H, S, dv) -> (B, H, L, dv), float16/bfloat16/float32, any strides.
    `is_causal` is top-left aligned like SDPA's. float32 products use TF32 only when
    `torch.backends.cuda.matmul.allow_tf32` is on, as torch's own matmul does. Without `block_m` and `block_n`
    the block sizes and launch settings are autotuned (AUTOTUNE_CONFIGS; the first one under the interpreter);
    with one of them, the other is 64.
    """
    _check(q, k, v)
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    scale = attention_scale(scale, q.size(-1))
    tuned = block_m is None and block_n is None
    block_m = DEFAULT_BLOCK if block_m is None else block_m
    block_n = DEFAULT_BLOCK if block_n is None else block_n
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        require_int(value, name, minimum=16)
        if value & (value - 1):
            raise ValueError(f"{name} must be a power of 2, got {value}")
    interpret = _interpreting()
    if not (q.is_cuda or interpret):
        raise RuntimeError(f"triton_attention {NEEDS}; got tensors on {q.device} and TRITON_INTERPRET unset")
    if interpret and q.dtype == torch.bfloat16:
        raise TypeError(
            "q, k and v are bfloat16, which Triton's interpreter cannot multiply (its tl.dot multiplies the raw "
            "bit patterns, triton-lang/triton#11584): use float16 or float32 under the interpreter"
        )
    kernel = _kernel(tuned)

    B, H, L, D = q.shape
    S, DV = k.size(2), v.size(-1)
    out = torch.empty(B, H, L, DV, device=q.device, dtype=q.dtype)  # (B, H, L, dv)
    if L == 0:
        return out
    if S == 0:  # no key to attend to: zeros, like the package's other attention functions
        return out.zero_()
    blocks = {} if tuned else {"BLOCK_M": block_m, "BLOCK_N": block_n}  # else the autotuner's configuration

    def grid(meta):  # one program per (query block, batch * head)
        return (triton.cdiv(L, meta["BLOCK_M"]), B * H)

    kernel[grid](
        q, k, v, out, float(scale),
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        H, L, S, D, DV,
        **blocks,
        BLOCK_D=max(16, triton.next_power_of_2(D)), BLOCK_DV=max(16, triton.next_power_of_2(DV)),
        IS_CAUSAL=is_causal, FP32_IEEE=q.dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32,
        enable_fp_fusion=True,  # fused multiply-adds, triton's default; saying so silences triton 3.9's warning
    )
    return out
