"""Checker for exercise 9.3, a timing function: time_it runs on the check's clock (see `clock.CheckClock`), which
makes every measurement exact, and once more as if a GPU were present, to see where it synchronises."""
from __future__ import annotations

import inspect
import itertools
import math
import numbers
import re
import statistics

import torch
from torch import Tensor

from ..compare import generator
from ..guard import beside_answer, call
from ..hints import describe
from ..registry import exercise, Wrong
from .clock import CheckClock
from ...i18n import N_, _


# Every ready-made timing loop: the package's, PyTorch's benchmark Timer, and Python's timeit (whose default_timer,
# time.perf_counter itself, stays allowed: it is the clock, not a loop).
TIMING_FORBIDDEN = [
    (name, N_("write the loop yourself with time.perf_counter(): warm-up calls, then timed calls, then the median"))
    for name in ("attnbook.timing.benchmark", "torch.utils.benchmark.Timer", "torch.utils.benchmark.utils.timer.Timer",
                 "timeit.timeit", "timeit.repeat", "timeit.Timer")
]

# The clock the task names, and what the check says about the others that CheckClock moves too.
RIGHT_CLOCKS = ("perf_counter", "perf_counter_ns")
_DATE_CLOCK = (N_("time.time() is the system's date and time: it jumps when the clock is set (by hand, or by network "
                  "time synchronisation), and on some systems it moves in coarse steps. Time durations with "
                  "time.perf_counter(), the clock made for measuring them"))
_COARSE_CLOCK = (N_("time.monotonic() never goes back, but on some systems it moves in steps of about 15 ms, longer "
                    "than many of the calls you will time. Time durations with time.perf_counter(), the clock with "
                    "the highest resolution"))
_SYSTEM_CLOCK = (N_("time.clock_gettime() reads a clock of the system by its id, and which clocks there are differs "
                    "from system to system. Time durations with time.perf_counter(), the portable clock made for "
                    "measuring them"))
_CLOCK_HINTS = {"time": _DATE_CLOCK, "monotonic": _COARSE_CLOCK}  # by name without _ns; else _SYSTEM_CLOCK

# The cases: (the time of each call of the check's function in ms, in turn: the last one repeats; n_warmup, n_runs,
# or None for the defaults 3 and 10), drawn from the run's seed (new on the check's second pass), so that an answer
# cannot know the times in advance. The first case alone tells every known mistake apart (`separates`): its
# median lies between two different middle times, and differs from the lower and the upper middle time
# (sorted(times)[n // 2], statistics.median_low, torch.median, the median after dropping the slowest call), the
# mean, minimum, maximum, total, trimmed, geometric and harmonic means, from the median with the warm-up calls timed,
# from the median of the first n_runs calls, and each of those from the others; it is drawn again until it does.
# The second has n_warmup=9, n_runs=7, where fixed counts 3 and 10, a fixed n_warmup=3, a fixed n_runs=10, one call
# too many or too few, a single warm-up call, no warm-up and no timed calls all give different call counts.
CASE_COUNTS = [(None, None), (9, 7), (3, 3), (1, 5), (0, 3)]
# The GPU case: run once more as if a GPU were present (see clock.CheckClock), to see where time_it synchronises.
GPU_COUNTS = (2, 3)


def separates(d: list[float], w: int, r: int) -> bool:
    """Whether the times `d` (seconds) of w warm-up and r timed calls tell every known mistake apart: each mistake's
    value differs from the median by more than 10%, and from every other mistake's by more than 0.1 ms."""
    timed = d[w:w + r]
    if r % 2 == 0 and statistics.median_low(timed) == statistics.median_high(timed):
        return False
    median = statistics.median(timed)
    values = [value for _, value in _timing_mistakes(d, w, r)]
    return (all(abs(v - median) > 0.1 * median for v in values)
            and all(abs(a - b) > 1e-4 for i, a in enumerate(values) for b in values[i + 1:]))


def _schedule(g: torch.Generator, w: int, r: int, warm: tuple[int, int], timed: tuple[int, int],
              outlier: tuple[int, int] | None = None) -> list[int]:
    """Times in ms: w warm-up calls in `warm` (slow first calls, the slowest first), r timed ones in `timed`, one of
    them (at a random place) in `outlier`, a rare slow call."""
    first = sorted((int(t) for t in torch.randint(warm[0], warm[1] + 1, (w,), generator=g)), reverse=True)
    rest = [int(t) for t in torch.randint(timed[0], timed[1] + 1, (r,), generator=g)]
    if outlier is not None:
        rest[int(torch.randint(r, (), generator=g))] = int(torch.randint(outlier[0], outlier[1] + 1, (),
                                                                            generator=g))
    return first + rest


def _uniform(g: torch.Generator, low: float, high: float, n: int) -> list[float]:
    """n times in ms, uniform in [low, high], to 0.1 ms."""
    return [round(low + (high - low) * float(u), 1) for u in torch.rand(n, generator=g)]


def timing_cases() -> list[tuple[list[float], int | None, int | None]]:
    """(schedule in ms, n_warmup, n_runs) of 9.3's cases, from the run's seed (see CASE_COUNTS). The first case's
    timed calls are five fast ones (1 to 2.5 ms), a middle one (3.5 to 5 ms), three slow ones (8 to 15 ms) and a rare
    slow call (40 to 150 ms), in a random order, drawn again until they tell every known mistake apart."""
    g = generator(930)
    while True:
        timed = _uniform(g, 1, 2.5, 5) + _uniform(g, 3.5, 5, 1) + _uniform(g, 8, 15, 3) + _uniform(g, 40, 150, 1)
        first = sorted(_uniform(g, 20, 80, 3), reverse=True) + [timed[i] for i in torch.randperm(10, generator=g)]
        if separates([ms / 1e3 for ms in first], 3, 10):
            break
    return [(first, None, None),
            (_schedule(g, 9, 7, (3, 25), (2, 12), (60, 200)), 9, 7),
            (_schedule(g, 3, 3, (30, 50), (2, 9)), 3, 3),
            (_schedule(g, 1, 5, (20, 40), (2, 10)), 1, 5),
            (_schedule(g, 0, 3, (1, 1), (2, 8)), 0, 3)]


def gpu_case() -> tuple[list[int], int, int]:
    """(schedule in ms, n_warmup, n_runs) of the run as if on a GPU, from the run's seed."""
    w, r = GPU_COUNTS
    return _schedule(generator(931), w, r, (15, 35), (2, 6)), w, r


def _timing_error_hint(message: str) -> str | None:
    if re.search(r"dummy base class (Event|Stream)", message):
        return (_("CUDA events and streams exist only on a GPU, and this task times with time.perf_counter() on every "
                  "machine: on a GPU, call torch.cuda.synchronize() right before you start the clock and right before "
                  "you stop it"))
    if re.search(r"CUDA|cuda", message):
        return (_("torch.cuda.synchronize() fails on a machine without a GPU: call it only when "
                  "torch.cuda.is_available() is True"))
    if re.search(r"'function' object is not (iterable|subscriptable)|'function' object has no attribute", message):
        return (_("time_it's first argument is the function to time, fn, which takes no arguments: call it as fn(). "
                  "Is this the function for exercise 9.3, time_it(fn, n_warmup=3, n_runs=10)?"))
    if re.search(r"\bfn\(\) takes 0 positional arguments", message):
        return _("fn takes no arguments: call it as fn()")
    if "statistics" in message or "median" in message:
        return _("collect one time per timed call in a list, then take statistics.median of that list")
    return None


def _timing_value(got, r: int, on: str) -> tuple[float, bool]:
    """(the learner's result as a float, whether it was an int); Wrong for anything that is not one number."""
    if isinstance(got, Tensor):
        if got.numel() != 1 or got.dtype == torch.bool or got.is_complex():
            raise Wrong(_("time_it returned a tensor of shape {tuple_got_shape} {on}, expected one number",
                          tuple_got_shape=tuple(got.shape), on=on),
                        _("return the median of the timed calls, one number in seconds"))
        got = got.item()
    elif not isinstance(got, numbers.Real) and hasattr(got, "__array__") and getattr(got, "size", 0) == 1:
        got = got.item() if hasattr(got, "item") else float(got)  # a NumPy scalar or one-element array
    if got is None:
        raise Wrong(_("time_it returned None {on}", on=on), _("did you forget the `return` statement?"))
    if isinstance(got, (list, tuple)):
        hint = (_("return the median of the list of times (statistics.median(times)), not the list")
                if len(got) == r else _("return one number: the median time of one call, in seconds"))
        raise Wrong(_("time_it returned {describe_got} {on}, expected one number",
                      describe_got=describe(got), on=on), hint)
    if isinstance(got, str):
        raise Wrong(_("time_it returned the string {got!r} {on}, expected a float (seconds)", got=got, on=on),
                    _("return the number itself, not a formatted string"))
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        raise Wrong(_("time_it returned {describe_got} {on}, expected a float (seconds)",
                      describe_got=describe(got), on=on),
                    _("return the median time of one call, in seconds"))
    return float(got), isinstance(got, numbers.Integral)


def _count_hint(clock: CheckClock, w: int, r: int, defaults: bool) -> str:
    """Why time_it called fn the wrong number of times, from the calls and when it read the clock."""
    calls = clock.calls
    if defaults:
        try:
            params = inspect.signature(clock.answer).parameters
        except (TypeError, ValueError):
            params = {}
        given = tuple(params[name].default if name in params else None for name in ("n_warmup", "n_runs"))
        if given != (3, 10) and all(isinstance(g, int) for g in given):
            return (_("keep the defaults of the task, n_warmup=3 and n_runs=10 (yours are {given_0} and "
                      "{given_1}): the check calls time_it(fn) without them", given_0=given[0], given_1=given[1]))
    if calls == 0:
        return (_("call fn() inside time_it: n_warmup times to warm up, then n_runs times with the clock running "
                  "(fn without parentheses does not call it)"))
    shape = clock.structure()
    if shape is not None:
        groups = shape[3]
        if shape[1] == 0:
            return (_("no call of fn happened between your clock readings: call fn() (with parentheses) between the "
                      "reading before and the reading after"))
        if groups.count(2) >= 2 and max(groups) == 2:
            return _("each of your measurements covered 2 calls of fn: time one call per measurement, n_runs in all")
    # The cases are chosen so that these call counts differ from one another (and from n_warmup + n_runs) on
    # the first case where each mistake shows; where two still coincide, no specific hint is given.
    candidates = [
        (calls == r, _("warm up first: call fn() n_warmup times without timing it (fn without parentheses does not "
                       "call it), so that one-time costs (lazy imports, caches, CUDA initialisation) stay out of the "
                       "measurement")),
        (calls == w, _("after the warm-up, time n_runs calls of fn()")),
        ((w, r) != (3, 10) and calls == 3 + 10, _("you called fn 3 + 10 times, the default counts, although the check "
                                                  "passed other values: use the n_warmup and n_runs arguments instead "
                                                  "of fixed numbers")),
        (w != 3 and calls == 3 + r, _("use the n_warmup argument for the number of warm-up calls instead of a fixed "
                                      "number")),
        (r != 10 and calls == w + 10, _("use the n_runs argument for the number of timed calls instead of a fixed "
                                        "number")),
        (w != 1 and calls == 1 + r, _("warm up with n_warmup calls, not one")),
        (calls == w + r + 1, _("one call too many: call fn() exactly n_warmup + n_runs times (the check counts the "
                               "calls)")),
        (calls == w + r - 1, _("one call too few: range(n) runs n times, so the warm-up loop is range(n_warmup) and "
                               "the timed loop range(n_runs)")),
    ]
    matches = [hint for applies, hint in candidates if applies]
    if len(matches) == 1:
        return matches[0]
    return _("call fn() n_warmup times untimed, then n_runs times timed, and nothing more")


_MEAN_HINT = (N_("you returned the mean; a single slow call (another program, a page fault, a garbage collection) "
                 "pulls the mean up, while the median is the typical call: return statistics.median(times)"))


_MIDDLE = (N_("with an even number of times ({r} here) there are two middle ones, {low:g} and {high:g} ms: the median "
              "is their mean, as statistics.median computes it; you returned the {which}"))


def _timing_mistakes(d: list[float], w: int, r: int) -> list[tuple[str, float]]:
    """(hint, value) for what common mistakes return, from the times `d` of the w + r calls (in seconds)."""
    timed, first = d[w:w + r], d[:r]
    ordered = sorted(timed)
    median = statistics.median(timed)
    low, high = statistics.median_low(timed), statistics.median_high(timed)
    even = r % 2 == 0 and low != high

    def middle(which: str) -> str:
        return _(_MIDDLE).format(r=r, low=1e3 * low, high=1e3 * high, which=which)

    out = [
        (middle(_("lower one, which statistics.median_low, torch.median and sorted(times)[(n - 1) // 2] give, as "
                  "does dropping the slowest time first")), low if even else None),
        (middle(_("upper one, which sorted(times)[n // 2] gives")), high if even else None),
        (_("you returned milliseconds; return seconds (the difference of two time.perf_counter() readings)"),
         1e3 * median),
        (_("you returned microseconds; return seconds (the difference of two time.perf_counter() readings)"),
         1e6 * median),
        (_("you returned nanoseconds (time.perf_counter_ns() counts nanoseconds): return seconds, from "
           "time.perf_counter()"), 1e9 * median),
        (_("you divided by 1000: time.perf_counter() already counts seconds"), median / 1e3),
        (_("you returned the total time of the timed calls; return the median time of one call"), sum(timed)),
        (_MEAN_HINT, statistics.mean(timed)),
        (_("you returned the fastest call (the minimum); the minimum is what Python's timeit reports and a fine "
           "estimate of the best case, but this task asks for the typical call, the median, as this book's tables "
           "report"), min(timed)),
        (_("you returned the slowest call; return the median"), max(timed)),
        (_("the warm-up calls were timed too: start collecting times only after the n_warmup warm-up calls"),
         statistics.median(d)),
        (_("the warm-up calls were timed too, and averaged: time only the n_runs calls after the warm-up, and return "
           "their median"), statistics.mean(d)),
        (_("you timed the first n_runs calls, slow first calls included: make the n_warmup untimed calls first, then "
           "time the next n_runs"), statistics.median(first)),
        (_("you timed the first n_runs calls, slow first calls included, and averaged them: make the n_warmup untimed "
           "calls first, then return the median of the next n_runs"), statistics.mean(first)),
        (_("you left out the slowest call and averaged the rest; the median needs no outlier removal: return "
           "statistics.median(times)"), statistics.mean(ordered[:-1]) if r > 1 else None),
        (_("you left out the fastest and the slowest call and averaged the rest (a trimmed mean): return the median, "
           "statistics.median(times)"), statistics.mean(ordered[1:-1]) if r > 2 else None),
        (_("you returned the geometric mean: return the median, statistics.median(times)"),
         statistics.geometric_mean(timed)),
        (_("you returned the harmonic mean: return the median, statistics.median(times)"),
         statistics.harmonic_mean(timed)),
        (_("times[len(times) // 2] is the middle entry in the order the calls ran, not the median: sort the times "
           "first, or use statistics.median"), timed[r // 2]),
        (_("you returned the median of the times since the start of the timed loop (time stamps): read the clock "
           "right before each fn() and subtract that reading right after it"),
         statistics.median(itertools.accumulate(timed))),
        (_("each of your times covered two calls of fn: time one call per measurement"),
         statistics.median([(a + b) / 2 for a, b in zip(timed[::2], timed[1::2])]) if r > 1 else None),
    ]
    return [(hint, value) for hint, value in out if value is not None]


def _close(got: float, target: float) -> bool:
    """Equal up to float rounding: the check's clock makes every time exact (time.time() has ~0.2 µs steps)."""
    return abs(got - target) <= 1e-6 + 1e-6 * abs(target)


def _describe_case(schedule: list[float], w: int, r: int, defaults: bool) -> str:
    n = w + r
    times = [schedule[min(i, len(schedule) - 1)] for i in range(n)]
    listed = ", ".join(f"{t:g}" for t in times[:-1]) + _(" and {last:g}", last=times[-1]) if n > 1 else f"{times[0]:g}"
    rare = _(" (one rare slow call)") if max(times[w:]) >= 10 * statistics.median(times[w:]) else ""
    args = _("the default n_warmup and n_runs") if defaults else _("n_warmup={w}, n_runs={r}", w=w, r=r)
    return _("a function whose calls take {listed} ms in turn{rare}, with {args}",
             listed=listed, rare=rare, args=args)


def _gpu_error_hint(message: str) -> str | None:
    if re.search(r"CUDA|cuda|[Ss]tream|[Ee]vent", message):
        return (_("on this run the check pretends that a GPU is present: torch.cuda.is_available() returns True and "
                  "torch.cuda.synchronize() works, but nothing else of torch.cuda does; synchronise with "
                  "torch.cuda.synchronize() (no CUDA events or streams) and time with time.perf_counter()"))
    return _timing_error_hint(message)


@beside_answer  # the clock reaches into the answer's globals and closures: it runs where the answer does
def _timed(time_it, schedule: list[float], gpu: bool, desc: str, kwargs: dict) -> tuple[object, dict]:
    """(what time_it returned, the clock's log as plain data) for one run of time_it on the check's clock."""
    clock = CheckClock(schedule, time_it, gpu=gpu)
    with clock:
        got = call(time_it, clock.fn, what="time_it", on=desc, forbid=TIMING_FORBIDDEN, seed=None,
                   explain=_gpu_error_hint if gpu else _timing_error_hint, **kwargs)
    return got, clock.state()


def _run_case(time_it, schedule: list[float], n_warmup: int | None, n_runs: int | None, gpu: bool = False) -> CheckClock:
    """Run time_it on one case of the check's clock; Wrong unless it made the right calls and returned the median."""
    defaults = n_warmup is None
    w, r = (3, 10) if defaults else (n_warmup, n_runs)
    desc = _describe_case(schedule, w, r, defaults)
    if gpu:
        desc += _(", as if on a machine with a GPU (torch.cuda.is_available() returns True)")
    on = _("on {desc}", desc=desc)
    kwargs = {} if defaults else {"n_warmup": w, "n_runs": r}
    got, state = _timed(time_it, schedule, gpu, desc, kwargs)
    clock = CheckClock.from_state(state, schedule, time_it, gpu=gpu)
    value, was_int = _timing_value(got, r, on)
    if clock.calls != w + r:
        raise Wrong(_("time_it called fn {calls} times {on}; expected {w_r}: {w} warm-up calls, then {r} timed "
                      "calls", calls=clock.calls, on=on, w_r=w + r, w=w, r=r), _count_hint(clock, w, r, defaults))
    other = sorted(clock.clocks - set(RIGHT_CLOCKS))
    if other:
        raise Wrong(_("time_it read {clock} {on}; the task times each call with time.perf_counter()",
                      clock=f"time.{other[0]}()", on=on),  # the clocks CheckClock moves: all in `time`
                    _(_CLOCK_HINTS.get(other[0].removesuffix("_ns"), _SYSTEM_CLOCK)))
    d = clock.seconds()
    median = statistics.median(d[w:])
    if _close(value, median):
        return clock
    after = "" if not w else _(" after the 1 warm-up call") if w == 1 else _(" after the {w} warm-up calls", w=w)
    said = _("time_it returned {value:.6g} s {on}, but the median of the {r} timed calls{after} is {median:.6g} s",
             value=value, on=on, r=r, after=after, median=median)
    if value == 0:
        raise Wrong(said, _("int() (or //) cut a time of a few milliseconds down to 0: return the float") if was_int
                    else _("a time of a few milliseconds rounds to 0.0 (round(t, 2)): return the full float"))
    if not math.isfinite(value) or value < 0:
        raise Wrong(said, _("a time is time.perf_counter() after the call minus time.perf_counter() before it "
                            "(in that order), a positive number of seconds"))
    shape = clock.structure()
    if shape is None:
        raise Wrong(said, _("time.process_time() counts only the CPU time of this process, not time spent "
                            "waiting (for a GPU, a disk, a sleep): time with time.perf_counter()")
                    if clock.cpu_reads else
                    _("time_it never read time.perf_counter(), the clock that the check's function takes its "
                      "time on: time each call with time.perf_counter()"))
    hints = {hint for hint, v in _timing_mistakes(d, w, r) if _close(value, v) and not _close(v, median)}
    hint = hints.pop() if len(hints) == 1 else None
    before, between, after_calls, groups = shape
    if hint == _MEAN_HINT and groups == [r] and before == w:
        hint = (_("you timed the n_runs calls as one block and divided by n_runs: that is the mean, which a single "
                  "slow call pulls up; time each call on its own and return the median of those times"))
    raise Wrong(said, hint or _("time each of the n_runs calls separately with time.perf_counter() and return "
                                "the median of those times, in seconds"))


def _check_synchronisation(time_it) -> None:
    """Wrong unless time_it, on a (pretended) GPU machine, synchronises before every clock reading of the timed
    part that follows a call of fn: the start of each timed call and the stop after it."""
    schedule, w, r = gpu_case()
    clock = _run_case(time_it, schedule, w, r, gpu=True)
    on = _("on {describe_case_schedule_w}, as if on a machine with a GPU",
           describe_case_schedule_w=_describe_case(schedule, w, r, False))
    why = (_("GPU work runs asynchronously: fn() returns as soon as its kernels are queued, so a clock read without "
             "torch.cuda.synchronize() measures the launch, or includes work still running from before. "))
    if not clock.synced():
        raise Wrong(_("time_it never called torch.cuda.synchronize() {on} (torch.cuda.is_available() returned "
                      "True)", on=on),
                    why + _("When torch.cuda.is_available() is True, synchronise right before you start the clock and "
                            "right before you stop it; ask torch.cuda.is_available() inside time_it, when it runs")
                    + ("" if clock.cuda_queries else _(" (time_it never asked it)")))
    calls = clock.unsynchronised(w, r)
    if calls is None:
        return
    if calls == w:
        raise Wrong(_("time_it started the clock for the first timed call without torch.cuda.synchronize() after "
                      "the {w} warm-up calls {on}", w=w, on=on),
                    why + _("Synchronise right before you start the clock too, so that the warm-up's GPU work is not "
                            "counted in the first timed call"))
    raise Wrong(_("time_it read the clock after timed call {calls_w} of {r} without torch.cuda.synchronize() "
                  "between that call of fn and the reading {on}", calls_w=calls - w, r=r, on=on),
                why + _("Synchronise right before you stop the clock, after fn() returns"))


@exercise("9.3", "A timing function", answer_name="time_it", section="How to time honestly",
          references=("attnbook.timing.benchmark",))
def check_time_it(time_it) -> str:
    """time_it(fn, n_warmup=3, n_runs=10) -> median seconds of n_runs calls after n_warmup untimed calls, with
    torch.cuda.synchronize() before each start and stop of the clock when torch.cuda.is_available()."""
    cases = timing_cases()
    for schedule, n_warmup, n_runs in cases:
        _run_case(time_it, schedule, n_warmup, n_runs)
    _check_synchronisation(time_it)
    return (_("warm-up, call count and median right on {len_timing_cases} functions, including slow first calls "
              "and a rare outlier", len_timing_cases=len(cases)))
