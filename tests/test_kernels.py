"""Tests of the Triton attention kernel (attnbook.kernels.triton_attention).

Without a GPU the kernel runs under Triton's interpreter, which must be switched on (TRITON_INTERPRET=1)
before triton is imported. So those cases run in one fresh Python subprocess with that variable set, and
the rest of the test suite never sees it. The subprocess first runs a trivial kernel: if even that fails,
the interpreter cannot run on this machine and the tests are skipped with its exact error; if only our
kernel fails, the tests fail. Argument checks and the "needs a GPU or the interpreter" error need no triton.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from attnbook.kernels import triton_available
from attnbook.kernels import triton_attention as module
from attnbook.kernels.triton_attention import triton_attention

# (B, H, L, S, d, dv, is_causal, dtype, block_m, block_n, q_multiplier); outputs compared with SDPA in float64
CASES = {
    "square": (2, 3, 50, 50, 16, 16, False, "float32", 16, 16, 1.0),
    "square causal": (2, 3, 50, 50, 16, 16, True, "float32", 16, 16, 1.0),
    "L < S causal": (1, 2, 37, 91, 24, 40, True, "float32", 16, 32, 1.0),
    "L > S causal": (1, 2, 91, 37, 24, 8, True, "float32", 32, 16, 1.0),
    "L > S": (1, 2, 40, 23, 8, 8, False, "float32", 16, 16, 1.0),
    "one query": (1, 1, 1, 30, 16, 16, True, "float32", 16, 16, 1.0),
    "large logits": (1, 2, 64, 64, 32, 32, False, "float32", 32, 32, 30.0),
    "large logits causal": (1, 2, 64, 64, 32, 32, True, "float32", 32, 32, 30.0),
    "float16": (1, 2, 70, 70, 64, 64, True, "float16", 64, 64, 1.0),
    "blocks bigger than N": (1, 2, 9, 9, 8, 8, False, "float32", 64, 64, 1.0),
    "many unmasked blocks causal": (1, 2, 150, 150, 16, 16, True, "float32", 64, 16, 1.0),
    "many unmasked blocks": (1, 1, 20, 150, 16, 16, False, "float32", 16, 32, 1.0),
    "autotuned causal": (1, 2, 150, 150, 16, 16, True, "float32", None, None, 1.0),  # no block sizes given
    "one block size given": (1, 1, 40, 90, 16, 16, False, "float32", 16, None, 1.0),
}
TOL = {"float32": 1e-4, "float16": 2e-3}

SCRIPT = textwrap.dedent(
    """
    import json, sys, torch, torch.nn.functional as F
    result = {}
    try:  # can the interpreter run at all?
        import triton, triton.language as tl

        @triton.jit
        def _add(x, y, out, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out + offs, tl.load(x + offs, mask=offs < n) + tl.load(y + offs, mask=offs < n), mask=offs < n)

        a = torch.arange(40.0)
        c = torch.empty(40)
        _add[(3,)](a, a, c, 40, BLOCK=16)
        assert torch.equal(c, 2 * a), "the interpreter added two vectors wrongly"
        result["triton"] = triton.__version__
    except Exception as e:
        result["interpreter_error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(result)); sys.exit(0)

    from attnbook.kernels.triton_attention import triton_attention
    cases = json.loads(sys.argv[1])
    for name, (B, H, L, S, d, dv, causal, dtype, bm, bn, mult) in cases.items():
        g = torch.Generator().manual_seed(len(name))
        dt = getattr(torch, dtype)
        q = (torch.randn(B, H, L, d, generator=g) * mult).to(dt)
        k = torch.randn(B, H, S, d, generator=g).to(dt)
        v = torch.randn(B, H, S, dv, generator=g).to(dt)
        out = triton_attention(q, k, v, is_causal=causal, block_m=bm, block_n=bn)
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
        result[name] = {"shape": list(out.shape), "dtype": str(out.dtype), "finite": bool(torch.isfinite(out).all()),
                        "err": (out.double() - ref).abs().max().item()}

    from attnbook.kernels import triton_attention as module
    result["configs timed"] = len(module._KERNELS[True, True].configs)  # the autotuner under the interpreter

    # non-contiguous inputs: (B, N, H, d) storage viewed as (B, H, N, d), and a custom scale
    x = torch.randn(2, 33, 3, 16, generator=torch.Generator().manual_seed(1)).transpose(1, 2)
    out = triton_attention(x, x, x, scale=0.3, block_m=16, block_n=16)
    ref = F.scaled_dot_product_attention(x.double(), x.double(), x.double(), scale=0.3)
    result["strided, scale"] = {"shape": list(out.shape), "dtype": str(out.dtype), "finite": True,
                                "err": (out.double() - ref).abs().max().item()}
    # no keys at all: zeros, as SDPA gives
    out = triton_attention(x, x[:, :, :0], x[:, :, :0])
    result["no keys"] = {"zeros": bool((out == 0).all()), "shape": list(out.shape)}
    try:
        triton_attention(x.bfloat16(), x.bfloat16(), x.bfloat16())
        result["bfloat16"] = "no error"
    except TypeError as e:
        result["bfloat16"] = str(e)
    print(json.dumps(result))
    """
)


@pytest.fixture(scope="module")
def interpreted():
    """Run every case once under TRITON_INTERPRET=1 in a fresh process; return its results by case name."""
    if not triton_available():
        pytest.skip("triton is not installed (pip install triton)")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(CASES)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"the kernel failed under Triton's interpreter:\n{proc.stderr[-3000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "interpreter_error" in result:
        pytest.skip(f"Triton's interpreter cannot run on this machine: {result['interpreter_error']}")
    return result


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_sdpa_under_the_interpreter(interpreted, name):
    B, H, L, S, d, dv, causal, dtype, *_ = CASES[name]
    r = interpreted[name]
    assert r["shape"] == [B, H, L, dv]
    assert r["dtype"] == f"torch.{dtype}"
    assert r["finite"]
    assert r["err"] < TOL[dtype], f"{name}: max |triton - SDPA| = {r['err']:.3g}"


def test_the_interpreter_autotunes_nothing(interpreted):
    """Without block sizes the kernel is autotuned; the interpreter gets one configuration, so no timing runs."""
    assert interpreted["configs timed"] == 1
    assert 2 <= len(module.AUTOTUNE_CONFIGS) <= 4
    for block_m, block_n, num_warps, num_stages in module.AUTOTUNE_CONFIGS:
        assert all(x >= 16 and x & (x - 1) == 0 for x in (block_m, block_n)) and num_warps in (1, 2, 4, 8)


def test_kernel_handles_strides_scale_and_no_keys(interpreted):
    assert interpreted["strided, scale"]["shape"] == [2, 3, 33, 16]
    assert interpreted["strided, scale"]["err"] < 1e-4
    assert interpreted["no keys"] == {"zeros": True, "shape": [2, 3, 33, 16]}


def test_kernel_refuses_bfloat16_under_the_interpreter(interpreted):
    assert "bfloat16" in interpreted["bfloat16"] and "interpreter" in interpreted["bfloat16"]


def test_needs_a_gpu_or_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    q = torch.zeros(1, 1, 4, 16)
    with pytest.raises(RuntimeError, match=r"needs a CUDA GPU, or Triton's interpreter \(set TRITON_INTERPRET=1"):
        triton_attention(q, q, q)


def test_says_when_triton_is_missing(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` raise ImportError
    monkeypatch.setattr(module, "triton", None)
    monkeypatch.setattr(module, "_KERNELS", {})
    q = torch.zeros(1, 1, 4, 16)
    with pytest.raises(RuntimeError, match="not installed"):
        triton_attention(q, q, q)


@pytest.mark.skipif(not (torch.cuda.is_available() and triton_available()), reason="needs a CUDA GPU and triton")
@pytest.mark.parametrize("dtype, tol", [(torch.float16, 2e-3), (torch.float32, 1e-4)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_kernel_matches_sdpa_on_cuda(dtype, tol, is_causal):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 4, 300, 64, generator=g, device="cuda", dtype=dtype) for _ in range(3))
    out = triton_attention(q, k, v, is_causal=is_causal)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=is_causal)
    torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)


Q = torch.zeros(1, 2, 4, 16)


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        (([[0.0]], Q, Q), {}, TypeError, "q"),
        ((Q, Q.long(), Q), {}, TypeError, "k"),
        ((Q, Q, Q[0]), {}, ValueError, "v must be 4-D"),
        ((Q, Q.double(), Q), {}, TypeError, "dtype"),
        ((Q.double(), Q.double(), Q.double()), {}, TypeError, "float16, bfloat16 or float32"),
        ((Q, torch.zeros(1, 3, 4, 16), Q), {}, ValueError, "batch and heads"),
        ((Q, torch.zeros(1, 2, 4, 8), Q), {}, ValueError, "d_head"),
        ((Q, Q, torch.zeros(1, 2, 5, 16)), {}, ValueError, "k and v"),
        ((Q, Q, Q), {"is_causal": 1}, TypeError, "is_causal"),
        ((Q, Q, Q), {"scale": "1"}, TypeError, "scale"),
        ((Q, Q, Q), {"block_m": 8}, ValueError, "block_m"),
        ((Q, Q, Q), {"block_n": 48}, ValueError, "block_n"),
        ((Q, Q, Q), {"block_n": 64.0}, TypeError, "block_n"),
    ],
)
def test_argument_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        triton_attention(*args, **kwargs)
