"""One submission's life: read it safely, recognise its chapter, run it in the sandbox, judge its checks.

Nothing in the file, and nothing its code does, can make `grade_submission` raise: every failure becomes an
entry in the row's problems (a catch-all around the whole life says why if something unforeseen happens).
"""
from __future__ import annotations

import math
import re
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..exercises.registry import REGISTRY, Exercise, id_key
from ..exercises.results import FAILED, METADATA_KEY, NOT_ATTEMPTED, PASSED
from . import launch, protocol, sandbox

DEFAULT_TIMEOUT_S = 60.0  # per cell, and per exercise's check
DEFAULT_NOTEBOOK_TIMEOUT_S = 300.0  # per submission, reruns included
MAX_NOTEBOOK_BYTES = 20_000_000
MAX_RUNS = 3  # the first run, then one per cell that hangs or kills the process
MAX_CHAPTER = 99
POLL_S = 0.05
UNSANDBOXED = "graded unsandboxed (--no-sandbox): the submission's code ran with the grader's rights"


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
    graded: bool = False  # its notebook was run (or its records read) and its exercises given points
    answers: dict = field(default_factory=dict)  # {exercise id: similarity.Fingerprint}, with --similarity only

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


def read_submission(path: Path | str):
    """The notebook in `path` (as version 4), or Unreadable saying plainly what the file is instead."""
    return load_submission(path)[1]


def load_submission(path: Path | str):
    """(the file's bytes, the notebook as version 4), or Unreadable saying plainly what the file is instead.
    Only a regular file is opened for reading (a FIFO or a folder is refused first, and so is a path with a
    symbolic link anywhere in it: the file itself or a folder on the way); its size and JSON nesting are bounded
    before parsing."""
    import nbformat

    try:
        data = protocol.read_regular(str(path), MAX_NOTEBOOK_BYTES, what="the file", whole_path=True)
        raw = protocol.loads_bounded(data, what="the file")
    except protocol.BadFile as e:
        message = str(e).replace("the file is not UTF-8", "not a notebook: the file is not UTF-8") \
            .replace("the file is not valid JSON", "not a notebook: invalid JSON")
        if message == "the file is missing":
            message = "cannot read the file: no such file"
        raise Unreadable(message if message.startswith(("not ", "cannot ")) else f"not read: {message}") from None
    if not isinstance(raw, dict) or "nbformat" not in raw:
        raise Unreadable(f"not a notebook: the JSON is {_json_kind(raw)} without the notebook fields "
                         "(nbformat, cells)")
    try:
        nb = nbformat.from_dict(raw)
        nb = nbformat.convert(nb, 4) if nb.get("nbformat") != 4 else nb
    except Exception as e:  # nbformat raises several kinds for damaged notebooks
        raise Unreadable(f"not a valid notebook: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}") from None
    cells = nb.get("cells")
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and c.get("cell_type") in ("code", "markdown", "raw")
            and isinstance(c.get("source"), (str, list)) for c in cells):
        raise Unreadable("not a valid notebook: its cells are damaged (each needs a cell_type and a source)")
    for c in cells:
        if isinstance(c["source"], list):
            if not all(isinstance(s, str) for s in c["source"]):
                raise Unreadable("not a valid notebook: a cell's source is not text")
            c["source"] = "".join(c["source"])
    return data, nb


def _json_kind(data) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(data), f"a {type(data).__name__}")


_EXERCISE_HEADING = re.compile(r"^#{1,6}\s*Exercise\s+(\d{1,3})\.\d+\b", re.M)  # "### Exercise 2.1 · Title"
_EXERCISE_DIRECTIVE = re.compile(r"^:::\{exercise\}\s+(\d{1,3})\.\d+\b", re.M)  # the chapter itself
_CHECK_CALL = re.compile(r"""\bcheck\(\s*["'](\d{1,3})\.\d+["']""")  # check("2.1", ...)
_TITLE = re.compile(r"\A\s*#\s+(\d{1,3})\.\s")  # "# 2. Scaled dot-product attention"


def recognise_chapter(nb) -> str | None:
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


def metadata_chapter(nb) -> tuple[str | None, str | None]:
    """(chapter, problem) from the notebook's `metadata.attnbook.chapter`: a small integer (or its digits)."""
    meta = nb.get("metadata", {})
    meta = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or "chapter" not in meta:
        return None, None
    value = meta["chapter"]
    if isinstance(value, bool) or not isinstance(value, (int, str)) or \
            (isinstance(value, str) and not re.fullmatch(r"\d{1,3}", value.strip())) or \
            not 0 < int(value if isinstance(value, int) else value.strip()) <= MAX_CHAPTER:
        shown = repr(value)[:30] + ("…" if len(repr(value)) > 30 else "") if isinstance(value, (int, str)) \
            else f"a {type(value).__name__}"
        return None, f"the notebook's metadata names chapter {shown}, not a chapter number: ignored"
    return str(int(value if isinstance(value, int) else value.strip())), None


def chapter_exercises(chapter: str) -> list[Exercise]:
    """The registered exercises of `chapter` ("2"), in order."""
    return sorted((ex for ex in REGISTRY.values() if ex.chapter == chapter), key=lambda e: id_key(e.exercise_id))


def known_chapters() -> list[str]:
    return sorted({ex.chapter for ex in REGISTRY.values()}, key=int)


# ---------------------------------------------------------------------------------------------------------
# Grading from the records in the file (--recorded: fast, and only as honest as the file)
# ---------------------------------------------------------------------------------------------------------


def recorded_checks(nb) -> dict[str, dict]:
    """The last check record per exercise id found in `nb`'s outputs, in notebook order."""
    found: dict[str, dict] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []) if isinstance(cell.get("outputs"), list) else []:
            record = (out.get("metadata") or {}).get(METADATA_KEY, {}) if isinstance(out, dict) else {}
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
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return min(max(value, 0.0), most) if math.isfinite(value) else 0.0


# ---------------------------------------------------------------------------------------------------------
# Running in the sandbox, and judging the checks
# ---------------------------------------------------------------------------------------------------------

def judge(link, exercise_id: str, run_seed: int) -> ExerciseGrade:
    """The grader's verdict on one exercise, its answer running at the other end of `link` (the seam:
    `remote.judge_exercise`, which runs the checker in this process). Raises remote.LinkBroken."""
    from ..exercises import remote

    result = remote.judge_exercise(link, exercise_id, run_seed)
    ex = REGISTRY[exercise_id]
    return ExerciseGrade(exercise_id, result.status, _clamp(result.points, ex.points), ex.points, result.message)


def _cell_name(nb, index: int) -> str:
    """'cell 58 (`check("1.1", project_qkv)`)': its position among all cells, and its first line."""
    first = next((line.strip() for line in nb.cells[index].source.splitlines() if line.strip()), "")
    return f"cell {index + 1} (`{first[:50] + ('…' if len(first) > 50 else '')}`)"


def _add(problems: list[str], problem: str) -> None:
    if problem not in problems:
        problems.append(problem)


@dataclass
class Options:
    timeout_s: float = DEFAULT_TIMEOUT_S
    notebook_timeout_s: float = DEFAULT_NOTEBOOK_TIMEOUT_S
    sandboxed: bool = True
    run_seed: int | None = None
    similarity: bool = False
    spares: launch.Spares | None = None  # runners started ahead (grade_all makes one for a batch)


def _run_once(data: bytes, request: protocol.Request, run_seed: int, todo: list[str], options: Options,
              deadline: float, box):
    """One run of the runner in a fresh folder (one started ahead by `options.spares` when there is one): its
    cells, then the checks of the exercises in `todo`, in order, over the link, with the inputs of `run_seed`
    (which stays in the grader: the request does not carry it). Returns (how it ended, the last progress step,
    the grades made, problems). How it ended: "done", "stalled" (no progress for timeout_s), "died", "deadline",
    or ("check", id, why) when the link failed while exercise id was checked (why: "stalled" or "died"). The
    runner's stderr is read through a pipe, only its tail kept."""
    cpu_s = int(options.notebook_timeout_s) + sandbox.CPU_MARGIN_S
    runner = options.spares.take(cpu_s, box) if options.spares is not None else launch.launch(cpu_s, box)
    grades: dict[str, ExerciseGrade] = {}
    try:
        try:
            runner.go(request.notebook, data, request)
            if options.spares is not None:  # the next runner starts (imports, then waits) while this one runs
                options.spares.prepare(cpu_s, box)
            ended, progress = _watch(runner.proc, runner.folder, options.timeout_s, deadline)
            if ended == "serving":
                ended = _serve_checks(runner.proc, run_seed, todo, options.timeout_s, deadline, grades)
        finally:
            tail = runner.end()
        problems = [progress.problem] if progress.problem else []
        stopped = sandbox.why_stopped(runner.proc)
        if stopped:
            problems.append(stopped)
        if progress.last in ((), ("ready",)) and ended != "deadline" and tail:
            problems.append(f"the run did not start: {tail[-1][:200]}")
        return ended, progress, grades, problems
    finally:
        runner.remove()


def _serve_checks(proc, run_seed: int, todo: list[str], timeout_s: float, deadline: float,
                  grades: dict[str, ExerciseGrade]):
    """Judge each exercise in `todo` over the link to the runner, each within timeout_s (and the deadline)."""
    from ..exercises.remote import LinkBroken

    link = protocol.PipeLink(proc.stdin.fileno(), proc.stdout.fileno())
    for exercise_id in todo:
        link.deadline = min(deadline, time.monotonic() + timeout_s)
        try:
            grades[exercise_id] = judge(link, exercise_id, run_seed)
        except LinkBroken as e:
            return ("check", exercise_id, "deadline" if time.monotonic() >= deadline else str(e))
    return "done"


def _watch(proc, folder: str, timeout_s: float, deadline: float):
    """Wait for the runner to have run the cells ("serving"), to end, to stall (no new progress line within
    timeout_s) or to pass the deadline."""
    lines, since = -1, time.monotonic()
    while True:
        done = sandbox.exited(proc)
        progress = protocol.read_progress(folder)
        now = time.monotonic()
        if progress.lines != lines:
            lines, since = progress.lines, now
        if progress.last == ("serving",) and not done:
            return "serving", progress
        if done:
            return "died", progress
        if progress.problem:
            return "died", progress
        if now >= deadline:
            return "deadline", progress
        if now - since > timeout_s:
            return "stalled", progress
        time.sleep(POLL_S)


def run_and_judge(data: bytes, nb, path: Path, todo: list[Exercise], options: Options, start: float,
                  problems: list[str], box) -> tuple[dict[str, ExerciseGrade], bool]:
    """Run the submission (again without a cell that hangs or kills it, at most MAX_RUNS times) and judge each
    exercise over the link once its cells have run; what could not be judged gets 0 and a problem entry. Also
    says whether the runner started at all (if not, the submission counts as not graded)."""
    code = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
    name = path.name if path.name not in protocol.RESERVED_NAMES and not path.name.startswith(".") else "submission.ipynb"
    run_seed = options.run_seed if options.run_seed is not None else secrets.randbelow(2**31)
    skip: set[int] = set()
    grades: dict[str, ExerciseGrade] = {}
    deadline = start + options.notebook_timeout_s
    reason = "not graded"
    started = False
    for _ in range(MAX_RUNS):
        pending = [ex.exercise_id for ex in todo if ex.exercise_id not in grades]
        if not pending:
            break
        request = protocol.Request(chapter=todo[0].chapter, exercises=[(e.exercise_id, e.answer_name) for e in todo],
                                   cell_timeout_s=options.timeout_s,
                                   cells=[(i, s) for i, s in code if i not in skip], notebook=name)
        ended, progress, found, run_problems = _run_once(data, request, run_seed, pending, options, deadline,
                                                         box)
        started = started or progress.last != ()
        grades.update(found)
        for p in run_problems:
            _add(problems, p)
        for cell, size in progress.floods.items():
            if 0 <= cell < len(nb.cells):
                _add(problems, f"{_cell_name(nb, cell)} printed {size / 1e6:.0f} MB of output (not kept)")
        if ended == "done":
            break
        if ended == "deadline" or isinstance(ended, tuple) and ended[2] == "deadline":
            reason = f"not graded: the notebook ran past its limit of {options.notebook_timeout_s:g} s"
            break
        if isinstance(ended, tuple):  # the link failed while this exercise was checked: it gets 0, the others go on
            ex = REGISTRY[ended[1]]
            why = (f"the check took longer than {options.timeout_s:g} s and was stopped" if ended[2] == "stalled"
                   else "the process died while this answer was checked")
            grades[ex.exercise_id] = ExerciseGrade(ex.exercise_id, FAILED, 0.0, ex.points, why)
            _add(problems, f"{ex.exercise_id}: {why}")
            continue
        where = progress.last
        if where and where[0] == "start" and 0 <= where[1] < len(nb.cells) and where[1] not in skip:
            skip.add(where[1])
            what = (f"ran longer than {options.timeout_s:g} s and was stopped" if ended == "stalled"
                    else "ended the process")
            _add(problems, f"{_cell_name(nb, where[1])} {what}; the notebook ran again without that cell")
        else:
            reason = ("not graded: the run stopped reporting its progress" if ended == "stalled"
                      else "not graded: the run ended before it finished")
            _add(problems, reason)
            break
    else:
        if any(ex.exercise_id not in grades for ex in todo):
            reason = f"not graded: {MAX_RUNS} runs were used up"
    missing = [ex for ex in todo if ex.exercise_id not in grades]
    if missing:
        _add(problems, f"{reason} ({', '.join(ex.exercise_id for ex in missing)} got 0)")
        for ex in missing:
            grades[ex.exercise_id] = ExerciseGrade(ex.exercise_id, FAILED, 0.0, ex.points, reason)
    return grades, started


def grade_submission(path: Path | str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                     notebook_timeout_s: float = DEFAULT_NOTEBOOK_TIMEOUT_S, recorded: bool = False,
                     chapter: str | None = None, sandboxed: bool = True, run_seed: int | None = None,
                     box=None, similarity: bool = False, spares: launch.Spares | None = None) -> SubmissionGrade:
    """Grade one submission; never raises for anything in the file: each problem is listed in the result. With
    `similarity`, its answers' normalised programs are kept too (`result.answers`, read statically). With
    `spares` (one per batch: `with launch.Spares() as spares`), its runner may have been started ahead, and the
    next one starts while its checks run."""
    start = time.monotonic()
    result = SubmissionGrade(str(path))
    if not sandboxed and not recorded:
        result.problems.append(UNSANDBOXED)
    try:
        _grade(Path(path), result, Options(timeout_s, notebook_timeout_s, sandboxed, run_seed, similarity, spares), recorded,
               chapter, start, box if box is not None or not sandboxed else sandbox.Sandbox())
    except Exception as e:  # a bug or an OS error here must not stop the other submissions
        _add(result.problems, f"not graded: {type(e).__name__}: {str(e)[:200]}")
        result.graded = False
    result.seconds = time.monotonic() - start
    return result


def _answers(nb, todo: list[Exercise]) -> dict:
    """The normalised programs of the submission's answers, read statically; none if they cannot be read."""
    from . import similarity

    try:
        return similarity.fingerprints(nb, [(ex.exercise_id, ex.answer_name) for ex in todo])
    except Exception:  # noqa: BLE001 - a report for people: an answer it cannot read is left out of it
        return {}


def _grade(path: Path, result: SubmissionGrade, options: Options, recorded: bool, chapter: str | None,
           start: float, box) -> None:
    try:
        data, nb = load_submission(path)
    except Unreadable as e:
        result.problems.append(str(e))
        return
    if chapter is None:
        chapter, problem = metadata_chapter(nb)
        if problem:
            result.problems.append(problem)
    chapter = chapter or recognise_chapter(nb)
    todo = chapter_exercises(chapter) if chapter is not None else []
    if chapter is None:
        result.problems.append("no chapter recognised: no exercise heading, check call or '# N. Title' heading")
        return
    if not todo:
        result.problems.append(f"chapter {chapter} is not one the grader knows (chapters with exercises: "
                               f"{', '.join(known_chapters())})")
        return
    result.chapter = chapter
    if options.similarity:
        result.answers = _answers(nb, todo)
    if recorded:
        records = recorded_checks(nb)
        result.exercises = {ex.exercise_id: _from_record(ex, records.get(ex.exercise_id)) for ex in todo}
        result.graded = True
        return
    for ex in todo:
        if not ex.answer_name:
            result.problems.append(f"{ex.exercise_id}: the exercise registry has no answer name for it (0)")
    named = [ex for ex in todo if ex.answer_name]
    grades, started = run_and_judge(data, nb, path, named, options, start, result.problems,
                                    box if options.sandboxed else None) if named else ({}, True)
    result.exercises = {ex.exercise_id: grades.get(ex.exercise_id) or
                        ExerciseGrade(ex.exercise_id, FAILED, 0.0, ex.points, "not graded") for ex in todo}
    result.graded = started
