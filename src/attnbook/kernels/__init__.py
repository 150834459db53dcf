"""Optional GPU kernels written in Triton; triton itself is imported only when a kernel is called.

`attnbook.kernels.triton_attention.triton_attention` is FlashAttention's forward pass as a Triton kernel.
On a CUDA GPU it compiles and runs natively; on a CPU it runs under Triton's interpreter when the environment
variable TRITON_INTERPRET=1 is set before triton is imported (slow: for checking correctness, not timing).
"""
from __future__ import annotations

import importlib.util

__all__ = ["triton_available"]


def triton_available() -> bool:
    """True when the `triton` package is installed (whether it can run here is checked when a kernel is called)."""
    return importlib.util.find_spec("triton") is not None
