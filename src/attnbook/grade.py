"""Grade returned exercise notebooks with the grader's own checks of each learner's final answers.

    attnbook-grade returned/*.ipynb --csv gradebook.csv     # re-run every submission, check its answers
    attnbook-grade returned/*.ipynb --jobs 4 --timeout 60    # 4 kernels at a time, 60 s per cell
    attnbook-grade --recorded my_chapter2.ipynb              # fast: read the check records in the file
    python -m attnbook.grade ...                             # the same

How a submission is graded: it runs from top to bottom in a fresh kernel ("python3"), in a temporary folder
that holds only a copy of it. Then the grader runs its own code in that kernel: for each exercise of the
chapter it loads the checkers afresh from the package's files (never the `attnbook.exercises` modules the
learner's cells may have changed), looks up the answer under the name the exercise registry gives
(`REGISTRY[id].answer_name`) in the learner's namespace, checks it, and publishes the result after a random
marker made for this kernel. Check records and check cells in the file play no part: deleted, edited or
forged ones change nothing, and neither does a `check` redefined or replaced in `attnbook.exercises`.

Limits: each cell has `--timeout` seconds (then it is interrupted and the next cell runs), each exercise's
check has `--timeout` seconds, and each submission `--notebook-timeout` seconds in all (then its kernel is
killed and what was not graded yet gets 0). A kernel that dies, or that ignores the interrupt, is replaced by
a fresh one that runs the notebook again without the cell responsible. Outputs are not kept; a cell that
prints more than OUTPUT_FLOOD_BYTES is reported. Every such event is listed in the submission's `problems`.

What this does not do: it is not a sandbox. The checks run in the learner's own process after the learner's
code, so a deliberate cheat that monkeypatches torch (or attnbook's reference functions, which the checkers
call) can still fool them, and the learner's code can touch the files and network of the grading machine.
Grade untrusted submissions in a container or virtual machine.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import exercises
from .exercises.registry import REGISTRY, Exercise, id_key
from .exercises.results import FAILED, METADATA_KEY, NOT_ATTEMPTED, PASSED

DEFAULT_TIMEOUT_S = 120.0  # per cell, and per exercise's check
DEFAULT_NOTEBOOK_TIMEOUT_S = 900.0  # per submission, restarts included
OUTPUT_FLOOD_BYTES = 10_000_000  # a cell that prints more is reported (its output is never kept)
MAX_NOTEBOOK_BYTES = 50_000_000  # bigger files are not read
MAX_KERNELS = 4  # kernels one submission may use: the first, then one per death or stuck cell
PROBE_TIMEOUT_S = 5.0  # after a cell timed out, how long the kernel has to answer a trivial cell
IOPUB_TIMEOUT_S = 4.0  # after a cell's reply, how long to wait for the rest of its output (nbclient's default)
CHECK_MARGIN_S = 30.0  # beyond the check's own limit, for loading the checkers, before nbclient interrupts
_TIMEOUT_ENAME = "attnbook-grade-timeout"  # not a Python name, so no learner exception can be mistaken for it
_PACKAGE_DIR = str(Path(exercises.__file__).resolve().parent)


@dataclass(frozen=True)
class ExerciseGrade:
    """The grade of one exercise of one submission."""

    exercise_id: str
    status: str  # "passed", "failed" or "not attempted"
    points: float
    max_points: float
    message: str


@dataclass
class SubmissionGrade:
    """One submission: its chapter, a grade per exercise of that chapter, and what went wrong on the way."""

    submission: str  # the path as given
    chapter: str | None = None
    exercises: dict[str, ExerciseGrade] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> float:
        return sum(g.points for g in self.exercises.values())

    @property
    def max_total(self) -> float:
        return sum(g.max_points for g in self.exercises.values())


class Unreadable(Exception):
    """The submission is not a notebook the grader can read; the message says why."""


# ---------------------------------------------------------------------------------------------------------
# Reading a submission and recognising its chapter
# ---------------------------------------------------------------------------------------------------------


def read_submission(path: Path) -> nbformat.NotebookNode:
    """The notebook in `path` (as version 4), or Unreadable saying plainly what the file is instead."""
    try:
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise Unreadable(f"not read: the file is {size / 1e6:.0f} MB (a notebook is at most "
                             f"{MAX_NOTEBOOK_BYTES / 1e6:.0f} MB)")
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise Unreadable(f"cannot read the file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise Unreadable("not a notebook: the file is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise Unreadable(f"not a notebook: invalid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, dict) or "nbformat" not in data:
        raise Unreadable(f"not a notebook: the JSON is {_json_kind(data)} without the notebook fields "
                         "(nbformat, cells)")
    try:
        nb = nbformat.reads(text, as_version=4, capture_validation_error={})
    except Exception as e:  # nbformat raises several kinds for damaged notebooks
        raise Unreadable(f"not a valid notebook: {str(e).splitlines()[0][:200]}") from None
    cells = nb.get("cells")
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and c.get("cell_type") in ("code", "markdown", "raw") and isinstance(c.get("source"), str)
            for c in cells):
        raise Unreadable("not a valid notebook: its cells are damaged (each needs a cell_type and a source)")
    return nb


def _json_kind(data) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(data), f"a {type(data).__name__}")


_EXERCISE_HEADING = re.compile(r"^#{1,6}\s*Exercise\s+(\d+)\.\d+\b", re.M)  # "### Exercise 2.1 · Title"
_EXERCISE_DIRECTIVE = re.compile(r"^:::\{exercise\}\s+(\d+)\.\d+\b", re.M)  # the chapter itself (with solutions)
_CHECK_CALL = re.compile(r"""\bcheck\(\s*["'](\d+)\.\d+["']""")  # check("2.1", ...)
_TITLE = re.compile(r"\A\s*#\s+(\d+)\.\s")  # "# 2. Scaled dot-product attention"


def recognise_chapter(nb: nbformat.NotebookNode) -> str | None:
    """The chapter a notebook belongs to, from its content: the chapter most of its exercise headings and
    check calls name (so deleting some of either changes nothing), else its "# N. Title" heading; None if
    nothing names one."""
    votes: Counter[str] = Counter()
    title = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            votes.update(str(int(n)) for n in _EXERCISE_HEADING.findall(cell.source))
            votes.update(str(int(n)) for n in _EXERCISE_DIRECTIVE.findall(cell.source))
            m = _TITLE.match(cell.source)
            if m and title is None:
                title = str(int(m.group(1)))
        elif cell.cell_type == "code":
            votes.update(str(int(n)) for n in _CHECK_CALL.findall(cell.source))
    if not votes:
        return title
    best = max(votes.values())
    tied = sorted((c for c, n in votes.items() if n == best), key=int)
    return title if title in tied else tied[0]


def chapter_exercises(chapter: str) -> list[Exercise]:
    """The registered exercises of `chapter` ("2"), in order."""
    return sorted((ex for ex in REGISTRY.values() if ex.chapter == chapter), key=lambda e: id_key(e.exercise_id))


def known_chapters() -> list[str]:
    return sorted({ex.chapter for ex in REGISTRY.values()}, key=int)


# ---------------------------------------------------------------------------------------------------------
# Grading from the records in the file (--recorded: fast, and only as honest as the file)
# ---------------------------------------------------------------------------------------------------------


def recorded_checks(nb: nbformat.NotebookNode) -> dict[str, dict]:
    """The last check record per exercise id found in `nb`'s outputs, in notebook order."""
    found: dict[str, dict] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            record = (out.get("metadata") or {}).get(METADATA_KEY, {})
            record = record.get("check") if isinstance(record, dict) else None
            if isinstance(record, dict) and "exercise_id" in record:
                found[str(record["exercise_id"])] = record
    return found


def _from_record(ex: Exercise, record: dict | None) -> ExerciseGrade:
    if record is None:
        return ExerciseGrade(ex.exercise_id, NOT_ATTEMPTED, 0.0, ex.points, "no check output in the file")
    status = str(record.get("status", NOT_ATTEMPTED))
    return ExerciseGrade(ex.exercise_id, status if status in (PASSED, FAILED, NOT_ATTEMPTED) else FAILED,
                         _clamp(record.get("points"), ex.points), ex.points, str(record.get("message", ""))[:1000])


def _clamp(points, most: float) -> float:
    """`points` as a float in [0, most]; anything that is not a finite number counts 0."""
    try:
        value = float(points)
    except (TypeError, ValueError):
        return 0.0
    return min(max(value, 0.0), most) if math.isfinite(value) else 0.0


# ---------------------------------------------------------------------------------------------------------
# Grading by running: the kernel, and the grader's code that runs in it
# ---------------------------------------------------------------------------------------------------------

# Runs in the learner's kernel after the learner's cells, once per exercise, in a private namespace. It loads
# the checkers afresh from the grader's files, checks the answer bound to `answer_name` with the learner's
# output silenced, stops a check that runs past `limit_s` (raising in the main thread again every second, in
# case the learner's code swallows it), and publishes one JSON line after the marker.
_CHECK_CODE = r'''
def _grade(marker, exercise_id, answer_name, package_dir, limit_s):
    import ctypes, importlib.util, json, os, sys, threading
    from IPython import get_ipython

    class TimeUp(BaseException):
        pass

    record = {"exercise_id": exercise_id, "status": "failed", "points": 0.0, "message": "", "timed_out": False}
    lock, done, main = threading.Lock(), threading.Event(), threading.get_ident()

    def stop_when_late():
        wait = limit_s
        while not done.wait(wait):
            with lock:
                if done.is_set():
                    return
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main), ctypes.py_object(TimeUp))
            wait = 1.0

    saved = sys.stdout, sys.stderr
    devnull = open(os.devnull, "w")
    error = None
    try:
        for name in [n for n in list(sys.modules) if n == "attnbook.exercises" or n.startswith("attnbook.exercises.")]:
            del sys.modules[name]
        spec = importlib.util.spec_from_file_location(
            "attnbook.exercises", os.path.join(package_dir, "__init__.py"), submodule_search_locations=[package_dir])
        package = importlib.util.module_from_spec(spec)
        sys.modules["attnbook.exercises"] = package
        spec.loader.exec_module(package)
        core = sys.modules["attnbook.exercises.results"]
        if os.path.dirname(os.path.realpath(core.__file__)) != package_dir:
            raise RuntimeError("the checkers did not load from the grader's files")
        namespace = get_ipython().user_ns
        if answer_name not in namespace:
            record.update(status="not attempted", message=f"no `{answer_name}` defined (the cell that defines it "
                          "was deleted, failed, or did not finish)")
        else:
            sys.stdout = sys.stderr = devnull
            threading.Thread(target=stop_when_late, daemon=True).start()
            result = core.check(exercise_id, namespace[answer_name])
            record.update(status=str(result.status), points=float(result.points), message=str(result.message))
    except BaseException as e:
        error = e
    while True:  # stop the watchdog; a TimeUp it raised just before stopping lands here
        try:
            with lock:
                done.set()
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main), None)
            break
        except TimeUp as e:
            error = error or e
    sys.stdout, sys.stderr = saved
    devnull.close()
    if isinstance(error, TimeUp):
        record.update(status="failed", points=0.0, timed_out=True,
                      message=f"the check took longer than {limit_s:g} s and was stopped")
    elif error is not None:
        record.update(status="failed", points=0.0, message=f"could not check: {type(error).__name__}: {error}")
    record["message"] = record["message"][:1000]
    # Through the kernel's display publisher, not sys.stdout: a learner's cell may have replaced sys.stdout.
    get_ipython().display_pub.publish(data={"text/plain": marker + json.dumps(record)}, metadata={})
'''


class _Restart(Exception):
    """This kernel can no longer be trusted to go on (stuck, or a check ran past its limit)."""


class _Client:
    """A kernel for one run of one submission: runs cells one at a time and keeps none of their outputs, only
    how many bytes each printed and the grader's result lines. Killed when the submission's deadline passes."""

    def __init__(self, workdir: str, marker: str, deadline: float):
        from nbclient import NotebookClient

        owner = self

        class Client(NotebookClient):
            def output(self, outs, msg, display_id, cell_index):  # keep nothing, count, find result lines
                owner._output(msg, cell_index)
                return None

        self.marker, self.deadline = marker, deadline
        self.nb = nbformat.v4.new_notebook()
        self.client = Client(self.nb, kernel_name="python3", allow_errors=True, interrupt_on_timeout=True,
                             error_on_timeout={"ename": _TIMEOUT_ENAME, "evalue": "", "traceback": []},
                             timeout_func=lambda cell: cell.metadata.get("attnbook_timeout"),
                             shutdown_kernel="immediate", record_timing=False, iopub_timeout=IOPUB_TIMEOUT_S,
                             resources={"metadata": {"path": workdir}},
                             on_cell_error=self._error)
        self.output_bytes: Counter[int] = Counter()
        self.result_lines: defaultdict[int, list[str]] = defaultdict(list)
        self.errors: dict[int, str] = {}
        self._partial: dict[int, str] = {}
        self.out_of_time = False
        self._stack = ExitStack()

    def __enter__(self):
        watchdog = threading.Timer(max(self.deadline - time.monotonic(), 0.0), self._kill_for_time)
        watchdog.daemon = True
        watchdog.start()
        self._stack.callback(watchdog.cancel)
        self._stack.enter_context(self.client.setup_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return self

    def __exit__(self, *exc):
        try:
            self._stack.close()
        except Exception:  # a kernel that is already gone cannot be shut down cleanly
            pass
        return False

    def run(self, source: str, timeout_s: float, store_history: bool = True) -> tuple[int, str | None]:
        """Run `source` as the next cell; return its index and the error name (None when it succeeded)."""
        if self.out_of_time or time.monotonic() >= self.deadline:  # the watchdog may have fired before the start
            self._kill_for_time()
            raise RuntimeError("the submission's time is up")
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["attnbook_timeout"] = max(1, math.ceil(timeout_s))
        self.nb.cells.append(cell)
        index = len(self.nb.cells) - 1
        self.client.execute_cell(cell, index, store_history=store_history)
        cell.outputs = []
        partial = self._partial.pop(index, "")
        if partial.startswith(self.marker):
            self.result_lines[index].append(partial[len(self.marker):])
        return index, self.errors.get(index)

    def responsive(self) -> bool:
        """Whether the kernel still runs a trivial cell (after a timeout: did it heed the interrupt?)."""
        return self.run("pass", PROBE_TIMEOUT_S, store_history=False)[1] != _TIMEOUT_ENAME

    def kill(self) -> None:
        """Kill the kernel process (and its process group, when it has its own)."""
        try:
            pid = self.client.km.provisioner.pid
        except AttributeError:
            return
        try:
            if hasattr(os, "killpg") and os.getpgid(pid) != os.getpgid(0):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
        except (OSError, TypeError):  # already gone
            pass

    def _kill_for_time(self) -> None:
        self.out_of_time = True
        self.kill()

    def _error(self, cell, cell_index, execute_reply) -> None:
        self.errors[cell_index] = str(execute_reply.get("content", {}).get("ename", "error"))

    def _output(self, msg: dict, cell_index: int) -> None:
        content = msg.get("content", {})
        if msg.get("msg_type") == "stream":
            text = str(content.get("text", ""))
            self.output_bytes[cell_index] += len(text)
            lines = (self._partial.get(cell_index, "") + text).split("\n")
            self._partial[cell_index] = lines.pop()[-100_000:]  # a result line is short: keep little of a long one
            self.result_lines[cell_index] += [line[len(self.marker):] for line in lines if line.startswith(self.marker)]
        elif isinstance(content.get("data"), dict):
            data = content["data"]
            self.output_bytes[cell_index] += sum(len(v) if isinstance(v, str) else len(json.dumps(v))
                                                 for v in data.values())
            text = data.get("text/plain")
            if isinstance(text, str) and text.startswith(self.marker):
                self.result_lines[cell_index].append(text[len(self.marker):])


def _cell_name(nb: nbformat.NotebookNode, index: int) -> str:
    """'cell 58 (`check("1.1", project_qkv)`)': its position among all cells, and its first line."""
    first = next((line.strip() for line in nb.cells[index].source.splitlines() if line.strip()), "")
    return f"cell {index + 1} (`{first[:50] + ('…' if len(first) > 50 else '')}`)"


def _add(problems: list[str], problem: str) -> None:
    if problem not in problems:
        problems.append(problem)


def _check_in_kernel(kernel: _Client, ex: Exercise, timeout_s: float) -> tuple[ExerciseGrade, bool]:
    """Run the grader's check of `ex` in `kernel`; return its grade and whether the check ran out of time."""
    code = _CHECK_CODE + f"\n_grade(*{(kernel.marker, ex.exercise_id, ex.answer_name, _PACKAGE_DIR, float(timeout_s))!r})\n"
    source = f"__import__('builtins').exec({code!r}, {{'__name__': '_attnbook_grade'}})"  # a private namespace
    index, error = kernel.run(source, timeout_s + CHECK_MARGIN_S, store_history=False)
    lines = kernel.result_lines.get(index, [])
    if len(lines) != 1:
        if error == _TIMEOUT_ENAME:
            return ExerciseGrade(ex.exercise_id, FAILED, 0.0, ex.points,
                                 f"the check did not finish within {timeout_s + CHECK_MARGIN_S:g} s"), True
        what = "no result" if not lines else f"{len(lines)} results (something printed copies)"
        return ExerciseGrade(ex.exercise_id, FAILED, 0.0, ex.points, f"the grader's check gave {what}"), False
    try:
        record = json.loads(lines[0])
    except ValueError:
        record = None
    if not isinstance(record, dict) or record.get("exercise_id") != ex.exercise_id:
        return ExerciseGrade(ex.exercise_id, FAILED, 0.0, ex.points, "the grader's check gave an unreadable result"), False
    status = record.get("status") if record.get("status") in (PASSED, FAILED, NOT_ATTEMPTED) else FAILED
    points = _clamp(record.get("points"), ex.points) if status == PASSED else 0.0
    return (ExerciseGrade(ex.exercise_id, status, points, ex.points, str(record.get("message", ""))),
            bool(record.get("timed_out")) or error == _TIMEOUT_ENAME)


def _run_and_check(nb: nbformat.NotebookNode, path: Path, todo: list[Exercise], timeout_s: float,
                   notebook_timeout_s: float, start: float, problems: list[str]) -> dict[str, ExerciseGrade]:
    """Run the learner's cells, then the grader's check of each exercise in `todo`, in as many kernels as
    deaths, stuck cells and late checks need (at most MAX_KERNELS); what was not graded gets 0."""
    from nbclient.exceptions import DeadKernelError

    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
    skip: set[int] = set()
    grades: dict[str, ExerciseGrade] = {}
    pending = list(todo)
    reason = "not graded"
    deadline = start + notebook_timeout_s
    for _ in range(MAX_KERNELS):
        if not pending:
            break
        if time.monotonic() >= deadline:
            reason = f"not graded: the notebook ran past its limit of {notebook_timeout_s:g} s"
            break
        marker = f"attnbook-grade-{secrets.token_hex(16)}:"  # unknown to the learner's code until it is printed
        where: int | Exercise | None = None
        with tempfile.TemporaryDirectory(prefix="attnbook-grade-", ignore_cleanup_errors=True) as workdir:
            shutil.copyfile(path, os.path.join(workdir, path.name))
            kernel = _Client(workdir, marker, deadline)
            try:
                with kernel:
                    for i in code:
                        if i in skip:
                            continue
                        where = i
                        index, error = kernel.run(nb.cells[i].source, timeout_s)
                        if kernel.output_bytes[index] > OUTPUT_FLOOD_BYTES:
                            _add(problems, f"{_cell_name(nb, i)} printed {kernel.output_bytes[index] / 1e6:.0f} MB "
                                           "of output (not kept)")
                        if error == _TIMEOUT_ENAME:
                            skip.add(i)  # a later run would only wait for it again
                            note = f"{_cell_name(nb, i)} ran longer than {timeout_s:g} s and was interrupted"
                            if not kernel.responsive():
                                _add(problems, note + "; the kernel ignored the interrupt, so the notebook ran "
                                                      "again without that cell")
                                kernel.kill()
                                raise _Restart
                            _add(problems, note)
                    for ex in list(pending):
                        where = ex
                        grade, late = _check_in_kernel(kernel, ex, timeout_s)
                        grades[ex.exercise_id] = grade
                        pending.remove(ex)
                        if late:
                            _add(problems, f"{ex.exercise_id}: {grade.message}" +
                                 ("; the other exercises were checked in a fresh kernel" if pending else ""))
                            if pending:
                                kernel.kill()
                                raise _Restart
                        elif grade.message.startswith("the grader's check gave"):
                            _add(problems, f"{ex.exercise_id}: {grade.message}")
            except _Restart:
                continue
            except Exception as e:  # nbclient's DeadKernelError, or a kernel that would not start
                if kernel.out_of_time:
                    reason = f"not graded: the notebook ran past its limit of {notebook_timeout_s:g} s"
                    break
                if not isinstance(e, DeadKernelError) or where is None:
                    reason = f"not graded: the kernel failed ({type(e).__name__}: {str(e)[:200]})"
                    _add(problems, reason)
                    break
                if isinstance(where, int):
                    skip.add(where)
                    _add(problems, f"the kernel died in {_cell_name(nb, where)}; the notebook ran again without "
                                   "that cell")
                else:
                    grades[where.exercise_id] = ExerciseGrade(where.exercise_id, FAILED, 0.0, where.points,
                                                              "the kernel died while this answer was checked")
                    pending.remove(where)
                    _add(problems, f"{where.exercise_id}: the kernel died while the answer was checked")
                continue
    else:
        if pending:
            reason = f"not graded: {MAX_KERNELS} kernels were used up"
    if pending:
        _add(problems, f"{reason} ({', '.join(ex.exercise_id for ex in pending)} got 0)"
             if "limit" in reason or "used up" in reason else reason)
    for ex in pending:
        grades[ex.exercise_id] = ExerciseGrade(ex.exercise_id, FAILED, 0.0, ex.points, reason)
    return grades


def grade_submission(path: Path | str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                     notebook_timeout_s: float = DEFAULT_NOTEBOOK_TIMEOUT_S, recorded: bool = False) -> SubmissionGrade:
    """Grade one submission; never raises for anything in the file: each problem is listed in the result."""
    start = time.monotonic()
    result = SubmissionGrade(str(path))
    try:
        nb = read_submission(Path(path))
    except Unreadable as e:
        result.problems.append(str(e))
        result.seconds = time.monotonic() - start
        return result
    chapter = recognise_chapter(nb)
    todo = chapter_exercises(chapter) if chapter is not None else []
    if chapter is None:
        result.problems.append("no chapter recognised: no exercise heading, check call or '# N. Title' heading")
    elif not todo:
        result.problems.append(f"chapter {chapter} is not one the grader knows (chapters with exercises: "
                               f"{', '.join(known_chapters())})")
    if not todo:
        result.seconds = time.monotonic() - start
        return result
    result.chapter = chapter
    if recorded:
        records = recorded_checks(nb)
        result.exercises = {ex.exercise_id: _from_record(ex, records.get(ex.exercise_id)) for ex in todo}
    else:
        unnamed = [ex for ex in todo if not ex.answer_name]
        for ex in unnamed:
            result.problems.append(f"{ex.exercise_id}: the exercise registry has no answer name for it (0)")
        try:
            grades = _run_and_check(nb, Path(path), [ex for ex in todo if ex.answer_name], timeout_s,
                                    notebook_timeout_s, start, result.problems)
        except Exception as e:  # a bug or an OS error here must not stop the other submissions
            result.problems.append(f"not graded: {type(e).__name__}: {str(e)[:200]}")
            grades = {}
        result.exercises = {ex.exercise_id: grades.get(ex.exercise_id) or
                            ExerciseGrade(ex.exercise_id, FAILED, 0.0, ex.points, "not graded") for ex in todo}
    result.seconds = time.monotonic() - start
    return result


def grade_all(paths: list[Path | str], *, jobs: int = 1, progress=None, **options) -> list[SubmissionGrade]:
    """Grade every submission, `jobs` at a time, in the order given; `progress(grade)` is called as each ends."""
    def one(path):
        grade = grade_submission(path, **options)
        if progress is not None:
            progress(grade)
        return grade

    if jobs <= 1:
        return [one(p) for p in paths]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="attnbook-grade") as pool:
        return list(pool.map(one, paths))


# ---------------------------------------------------------------------------------------------------------
# The gradebook and the command line
# ---------------------------------------------------------------------------------------------------------


def gradebook_columns(grades: list[SubmissionGrade]) -> list[str]:
    """submission, every exercise id seen (in numeric order: 9.3 before 10.1), total, max_total, problems."""
    seen = {ex_id for g in grades for ex_id in g.exercises}
    return ["submission", *sorted(seen, key=id_key), "total", "max_total", "problems"]


def gradebook_rows(grades: list[SubmissionGrade]) -> list[dict[str, str]]:
    """One row per submission: points per exercise (empty where its chapter has no such exercise)."""
    columns = gradebook_columns(grades)
    rows = []
    for g in grades:
        row = {c: "" for c in columns}
        row.update({ex_id: f"{e.points:g}" for ex_id, e in g.exercises.items()})
        row.update(submission=g.submission, total=f"{g.total:g}", max_total=f"{g.max_total:g}",
                   problems="; ".join(g.problems))
        rows.append(row)
    return rows


def write_gradebook(grades: list[SubmissionGrade], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=gradebook_columns(grades))
        writer.writeheader()
        writer.writerows(gradebook_rows(grades))


_ICONS = {PASSED: "✓", FAILED: "✗", NOT_ATTEMPTED: "○"}


def describe(grade: SubmissionGrade) -> str:
    """A few readable lines about one submission."""
    head = f"{grade.submission}: "
    if grade.chapter is None:
        head += "not graded"
    else:
        head += f"chapter {grade.chapter}, {grade.total:g}/{grade.max_total:g} points"
    lines = [head + f" ({grade.seconds:.1f} s)"]
    for e in grade.exercises.values():
        message = "" if e.status == PASSED else f": {e.message[:160]}"
        lines.append(f"  {_ICONS.get(e.status, '?')} {e.exercise_id} {e.status} "
                     f"[{e.points:g}/{e.max_points:g}]{message}")
    lines += [f"  problem: {p}" for p in grade.problems]
    return "\n".join(lines)


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def main(argv: list[str] | None = None) -> int:
    """The attnbook-grade command; exit status 0 when every submission was graded without problems."""
    parser = argparse.ArgumentParser(prog="attnbook-grade", description=__doc__.split("\n")[0])
    parser.add_argument("submissions", nargs="+", help="returned .ipynb files (of any chapters)")
    parser.add_argument("--csv", type=Path, help="write the gradebook, one row per submission, to this file")
    parser.add_argument("--timeout", type=_positive(float), default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"limit per cell, and per exercise's check (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--notebook-timeout", type=_positive(float), default=DEFAULT_NOTEBOOK_TIMEOUT_S,
                        metavar="SECONDS", help="limit per submission, restarts included "
                                                f"(default {DEFAULT_NOTEBOOK_TIMEOUT_S:g})")
    parser.add_argument("--jobs", type=_positive(int), default=1, metavar="N", help="kernels run at a time")
    parser.add_argument("--recorded", action="store_true",
                        help="read the check records in each file instead of running it (fast, not trustworthy)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    if args.recorded:
        print("Grading from the check records in the files: a learner can edit them, so this is for checking "
              "your own work, not for marks.")

    def progress(grade: SubmissionGrade) -> None:
        if not args.recorded:
            print(f"graded {grade.submission} in {grade.seconds:.1f} s", file=sys.stderr, flush=True)

    grades = grade_all(args.submissions, jobs=args.jobs, progress=progress, timeout_s=args.timeout,
                       notebook_timeout_s=args.notebook_timeout, recorded=args.recorded)
    for grade in grades:
        print(describe(grade))
    elapsed = time.monotonic() - start
    flawed = sum(bool(g.problems) for g in grades)
    print(f"{len(grades)} submission(s) in {elapsed:.1f} s with --jobs {args.jobs} "
          f"({elapsed / len(grades):.1f} s per submission); {flawed} with problems")
    if args.csv:
        write_gradebook(grades, args.csv)
        print(f"gradebook: {args.csv}")
    return 1 if flawed else 0


if __name__ == "__main__":
    sys.exit(main())
