"""The check's clock for exercise 9.3 (a timing function), `CheckClock`: while the check runs the learner's
time_it, the wall clocks move only when the check's function is called, and with `gpu=True` a GPU is pretended."""
from __future__ import annotations

import sys
import threading
import time
import types

import torch

from .. import execute
from ..forbid import Patches

_CORE = execute.__name__  # run_here reads the clock for its time limit


class CheckClock:
    """The clock that time.perf_counter() reads while the check runs the learner's time_it.

    The check's function `fn` does not sleep: each call moves this clock on by a set number of milliseconds, so
    what time_it measures is exact, however busy the machine is. time.perf_counter, time.monotonic, time.time,
    their _ns forms, time.clock_gettime on those clocks and timeit's default timer all read it, on the thread
    that runs the check (other threads, and the CPU-time clocks such as time.process_time, see the real ones).
    It also notes after how many calls of fn each reading happened, so that a hint can say what was timed, and
    which clocks were read (`clocks`: the task times with time.perf_counter, and the check says so when time_it reads
    another one).

    With `gpu=True`, torch.cuda.is_available() returns True and torch.cuda.synchronize() only notes when it was
    called (however the answer reached them: the module attributes, names imported into the notebook, closures),
    so that `unsynchronised()` can say which clock reading had no synchronisation after the last call of fn.
    """

    _WALL = ("perf_counter", "monotonic", "time")
    _CPU = ("process_time", "process_time_ns", "thread_time", "thread_time_ns")
    _WALL_IDS = ("CLOCK_REALTIME", "CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW", "CLOCK_BOOTTIME", "CLOCK_TAI")

    def __init__(self, schedule_ms: list[float], answer, gpu: bool = False):
        self.schedule_ns = [round(ms * 1_000_000) for ms in schedule_ms]
        self.answer = answer
        self.elapsed_ns = 0
        self.durations_ns: list[int] = []  # one per call of fn
        self.cpu_reads = 0
        self.gpu = gpu
        # (the wall clock read, "perf_counter", "time", ..., or "sync", calls of fn so far), in the order they happened
        self.log: list[tuple[str, int]] = []
        self.cuda_queries = 0
        self.thread = threading.get_ident()
        self.patches = Patches()

        def fn():
            """The function that the check times: each call takes a set time on the check's clock."""
            i = len(self.durations_ns)
            step = self.schedule_ns[min(i, len(self.schedule_ns) - 1)]
            self.elapsed_ns += step
            self.durations_ns.append(step)

        fn.__qualname__ = "fn"
        self.fn = fn

    def state(self) -> dict:
        """What the clock saw, as plain data (to send back to the grader; see `from_state`)."""
        return {"durations_ns": list(self.durations_ns), "cpu_reads": self.cpu_reads,
                "log": [[kind, calls] for kind, calls in self.log], "cuda_queries": self.cuda_queries}

    @classmethod
    def from_state(cls, state: dict, schedule_ms: list[float], answer, gpu: bool = False) -> "CheckClock":
        """A clock that saw `state` (never entered: it patches nothing)."""
        clock = cls(schedule_ms, answer, gpu=gpu)
        clock.durations_ns = [int(d) for d in state["durations_ns"]]
        clock.cpu_reads, clock.cuda_queries = int(state["cpu_reads"]), int(state["cuda_queries"])
        clock.log = [(str(kind), int(calls)) for kind, calls in state["log"]]
        return clock

    @property
    def calls(self) -> int:
        return len(self.durations_ns)

    @property
    def clocks(self) -> set[str]:
        """The names of the wall clocks time_it read ("perf_counter", "time", ...)."""
        return {kind for kind, _calls in self.log if kind != "sync"}

    def seconds(self) -> list[float]:
        """The time of each call made so far, in seconds."""
        return [ns / 1e9 for ns in self.durations_ns]

    def structure(self) -> tuple[int, int, int, list[int]] | None:
        """(calls before the first clock reading, calls between the first and the last reading, calls after the
        last, the number of calls between each two consecutive readings), or None if time_it never read it."""
        gaps = sorted({calls for kind, calls in self.log if kind != "sync"})  # k: a reading after k calls of fn
        if not gaps:
            return None
        return gaps[0], gaps[-1] - gaps[0], self.calls - gaps[-1], [b - a for a, b in zip(gaps, gaps[1:])]

    # -- the stand-ins for the clocks ---------------------------------------------------------------------

    def _mine(self) -> bool:
        return threading.get_ident() == self.thread

    def _note(self, frame, name: str) -> None:
        if frame.f_globals.get("__name__") != _CORE:  # the core's own time limit is not the learner's reading
            self.log.append((name, self.calls))

    def synced(self) -> bool:
        return any(kind == "sync" for kind, _ in self.log)

    def unsynchronised(self, w: int, r: int) -> int | None:
        """The calls of fn before the first reading of the clock in the timed part (after w warm-up calls, up to
        the reading after the last of the r timed calls) that no torch.cuda.synchronize() since the last call of
        fn preceded; None when every such reading was synchronised."""
        synced_at = -1
        for kind, calls in self.log:
            if kind == "sync":
                synced_at = calls
            elif w <= calls <= w + r and synced_at != calls:
                return calls
        return None

    def _is_available(self, real):
        def is_available(*args, **kwargs):
            if not self._mine():
                return real(*args, **kwargs)
            self.cuda_queries += 1
            return True

        is_available.__name__ = is_available.__qualname__ = "is_available"
        return is_available

    def _synchronize(self, real):
        def synchronize(*args, **kwargs):
            if not self._mine():
                return real(*args, **kwargs)
            self.log.append(("sync", self.calls))

        synchronize.__name__ = synchronize.__qualname__ = "synchronize"
        return synchronize

    def _wall(self, real, base_ns: int, as_float: bool):
        def clock():
            if not self._mine():
                return real()
            self._note(sys._getframe(1), real.__name__)
            ns = base_ns + self.elapsed_ns
            return ns / 1e9 if as_float else ns

        clock.__name__ = clock.__qualname__ = real.__name__
        return clock

    def _cpu(self, real):
        def clock(*args):
            if self._mine():
                self.cpu_reads += 1
            return real(*args)

        clock.__name__ = clock.__qualname__ = real.__name__
        return clock

    def _clock_gettime(self, real, real_ns, as_float: bool):
        bases = {getattr(time, name): real_ns(getattr(time, name)) for name in self._WALL_IDS if hasattr(time, name)}

        def clock_gettime(clk_id):
            if not self._mine():
                return real(clk_id)
            if clk_id not in bases:
                self.cpu_reads += 1
                return real(clk_id)
            self._note(sys._getframe(1), real.__name__)
            ns = bases[clk_id] + self.elapsed_ns
            return ns / 1e9 if as_float else ns

        clock_gettime.__name__ = clock_gettime.__qualname__ = real.__name__
        return clock_gettime

    # -- putting them in place ------------------------------------------------------------------------------

    def __enter__(self):
        import timeit

        stand_ins = {}
        for name in self._WALL:
            real, real_ns = getattr(time, name), getattr(time, name + "_ns")
            base = real_ns()
            stand_ins[real] = self._wall(real, base, as_float=True)
            stand_ins[real_ns] = self._wall(real_ns, base, as_float=False)
        for name in self._CPU:
            if hasattr(time, name):
                stand_ins[getattr(time, name)] = self._cpu(getattr(time, name))
        if hasattr(time, "clock_gettime_ns"):
            stand_ins[time.clock_gettime] = self._clock_gettime(time.clock_gettime, time.clock_gettime_ns, True)
            stand_ins[time.clock_gettime_ns] = self._clock_gettime(time.clock_gettime_ns, time.clock_gettime_ns,
                                                                   False)
        owners = {real: time for real in stand_ins}
        if self.gpu:
            for name, make in (("is_available", self._is_available), ("synchronize", self._synchronize)):
                real = getattr(torch.cuda, name)
                stand_ins[real] = make(real)
                owners[real] = torch.cuda
        by_id = {id(real): (real, fake) for real, fake in stand_ins.items()}

        def fake_for(value):
            """The stand-in for `value` if it is one of the real clocks (by identity: values may be unhashable)."""
            hit = by_id.get(id(value))
            return hit[1] if hit is not None and hit[0] is value else None

        def swap(values: tuple) -> tuple:
            return tuple(fake_for(v) or v for v in values)

        try:
            for real, fake in stand_ins.items():
                self.patches.set(owners[real], real.__name__, fake)
            # The same clocks reached another way: timeit.default_timer, `from time import perf_counter` in the
            # notebook, a closure, a default argument (def time_it(fn, n_warmup=3, n_runs=10, clock=time.perf_counter)).
            namespace = getattr(self.answer, "__globals__", None)
            namespace = namespace if isinstance(namespace, dict) else {}
            for space in (vars(timeit), namespace):
                for key, value in list(space.items()):
                    if fake_for(value):
                        self.patches.set(space, key, fake_for(value))
            # Closures and default arguments of the answer, of timeit's functions (timer=default_timer, bound
            # early), of the helpers defined next to the answer (def timed(fn, clock=time.perf_counter)) and of the
            # functions these hold, a few levels down.
            todo = [self.answer, timeit.timeit, timeit.repeat, timeit.Timer.__init__]
            todo += [v for v in namespace.values() if isinstance(v, types.FunctionType)]
            seen: set[int] = set()
            for _ in range(4):
                found = []
                for func in todo:
                    if id(func) in seen or not isinstance(func, types.FunctionType):
                        continue
                    seen.add(id(func))
                    for cell in func.__closure__ or ():
                        try:
                            contents = cell.cell_contents
                        except ValueError:  # an empty cell
                            continue
                        if fake_for(contents):
                            self.patches.set(cell, "cell_contents", fake_for(contents))
                        elif isinstance(contents, types.FunctionType):
                            found.append(contents)
                    for attr in ("__defaults__", "__kwdefaults__"):
                        defaults = getattr(func, attr, None)
                        if isinstance(defaults, tuple) and any(fake_for(d) for d in defaults):
                            self.patches.set(func, attr, swap(defaults))
                        elif isinstance(defaults, dict) and any(fake_for(d) for d in defaults.values()):
                            self.patches.set(func, attr, {k: fake_for(v) or v for k, v in defaults.items()})
                todo = found
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.patches.restore()
        return False
