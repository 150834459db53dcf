"""Checkers for chapter 9, GPU timing I: attention kernels. One module per exercise; importing this package
registers them all.

    online_softmax   9.1  online softmax over blocks (running maximum and sum; no library softmax)
    cost             9.2  FLOPs and bytes of attention (exact counts, hints for the usual counting mistakes)
    timing           9.3  a timing function (warm-up, median, synchronisation), run on the check's clock
    clock            the check's clock for 9.3 (`CheckClock`): stand-ins for time.perf_counter and its kin, and
                     for torch.cuda.is_available and torch.cuda.synchronize
"""
# Importing registers the checkers, in the order of the exercises.
from . import online_softmax  # 9.1
from . import cost  # 9.2
from . import timing  # 9.3

__all__ = ["online_softmax", "cost", "timing"]
