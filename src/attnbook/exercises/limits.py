"""The conditions `guard.call` runs an answer under: one PyTorch thread, seeded generators, a time limit."""
from __future__ import annotations

import random
import signal
import threading

import torch


class TimeUp(BaseException):
    """Raised inside the learner's code by the alarm in `call`; a BaseException so `except Exception` misses it."""


class one_thread:
    """Run a block with one PyTorch thread: checks use tiny tensors, for which threads cost more than they give
    (and on a busy machine a 2-thread kernel can stall for milliseconds)."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)
        return False


class seeded:
    """Seed Python's, NumPy's and PyTorch's CPU generators for a block and restore their states after it."""

    def __init__(self, seed: int | None):
        self.seed = seed

    def __enter__(self):
        if self.seed is None:
            return self
        import numpy as np

        self.states = (random.getstate(), np.random.get_state(), torch.random.get_rng_state())
        random.seed(self.seed)
        np.random.seed(self.seed)
        # The CPU generator only, the one whose state is restored below: torch.manual_seed also queues a seed for
        # every accelerator, and while CUDA is not initialised each queued call formats the whole stack (about
        # 0.8 ms, most of a small check's time). Seeded alike: torch.manual_seed seeds this same generator.
        torch.random.default_generator.manual_seed(self.seed)
        return self

    def __exit__(self, *exc):
        if self.seed is not None:
            import numpy as np

            py, npy, pt = self.states
            random.setstate(py)
            np.random.set_state(npy)
            torch.random.set_rng_state(pt)
        return False


class time_limit:
    """Context manager: raise TimeUp in the main thread after `seconds` (no-op where SIGALRM is missing)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.active = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()

    def __enter__(self):
        if self.active:
            self.previous = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False

    @staticmethod
    def _fire(signum, frame):
        raise TimeUp()


class warn_always:
    """PyTorch's once-per-process warnings (`.T` on a batch) shown on every call, so a hint that reads them does not
    depend on which check ran first in the process."""

    def __enter__(self):
        self.before = torch.is_warn_always_enabled()
        torch.set_warn_always(True)
        return self

    def __exit__(self, *exc):
        torch.set_warn_always(self.before)
        return False
