"""What a timing depends on: the device (its name, compute capability, dtype, TF32 and thread settings, torch
version) and which of PyTorch's SDPA kernels run on it.

`device_report` gathers those facts as a dict, `format_device_report` writes them as the one-line caption of a
timing table, and `sdpa_backends` probes which `SDPBackend`s accept a tiny input here. Measuring itself is in
`timing`, which re-exports these three names (`attnbook.timing.device_report` and so on).
"""
from __future__ import annotations

import os
import platform
import warnings

import torch

from ._validate import require_int

__all__ = [
    "device_report",
    "format_device_report",
    "sdpa_backends",
]


def _default_device() -> torch.device:
    """CUDA when there is a GPU, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_report(device=None, dtype: torch.dtype | None = None) -> dict:
    """What a timing depends on: device and its name, capability, dtype, TF32 setting, torch version, threads."""
    device = _default_device() if device is None else torch.device(device)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        name = torch.cuda.get_device_name(index)
        capability = "{}.{}".format(*torch.cuda.get_device_capability(index))
        device = torch.device("cuda", index)
    else:
        name, capability = (_cpu_name(), None) if device.type == "cpu" else (device.type, None)
    return {
        "device": str(device),
        "device_name": name,
        "capability": capability,
        "dtype": str(dtype).removeprefix("torch."),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
    }


def format_device_report(report: dict | None = None) -> str:
    """One line for the caption of a timing table, from `device_report()` (called when `report` is None)."""
    r = device_report() if report is None else report
    if not isinstance(r, dict):
        raise TypeError(f"report must be a dict from device_report(), got {type(r).__name__}")
    where = f"{r['device']} ({r['device_name']}" + (f", sm {r['capability']})" if r["capability"] else ")")
    tf32 = "TF32 on" if r["tf32_matmul"] else "TF32 off"
    return f"{where}, {r['dtype']}, {tf32}, torch {r['torch']}, {r['threads']} thread{'s' if r['threads'] != 1 else ''}"


def sdpa_backends(device=None, dtype: torch.dtype = torch.float32, d_head: int = 64) -> list:
    """The `torch.nn.attention.SDPBackend`s that can run SDPA here, found by trying each on a tiny input.

    Use each with `torch.nn.attention.sdpa_kernel(backend)`. Which backends run depends on the device and
    also on dtype and head size (FlashAttention on CUDA needs float16/bfloat16), so probe with the ones you
    will time. On CPU this torch has MATH and a CPU FLASH_ATTENTION kernel.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = _default_device() if device is None else torch.device(device)
    require_int(d_head, "d_head", minimum=1)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    q = torch.zeros(1, 2, 16, d_head, device=device, dtype=dtype)  # (B, h, n, d_head)
    names = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    found = []
    for backend in (getattr(SDPBackend, n) for n in names if hasattr(SDPBackend, n)):
        try:
            with warnings.catch_warnings(), sdpa_kernel(backend):
                warnings.simplefilter("ignore")  # each refusal also warns why; the list is the answer
                torch.nn.functional.scaled_dot_product_attention(q, q, q)
        except RuntimeError:
            continue
        found.append(backend)
    return found
