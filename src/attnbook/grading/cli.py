"""The attnbook-grade command line (also `python -m attnbook.grade` and `python -m attnbook.grading`)."""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..exercises.registry import REGISTRY
from ..exercises.results import FAILED, NOT_ATTEMPTED, PASSED
from ..i18n import LANGUAGES, get_language, set_language
from . import launch, sandbox, shards, similarity
from .gradebook import Gradebook, cell, printable, write_atomically, write_gradebook
from .submission import (DEFAULT_NOTEBOOK_TIMEOUT_S, DEFAULT_TIMEOUT_S, MAX_CHAPTER, SubmissionGrade,
                         grade_submission)

_ICONS = {PASSED: "✓", FAILED: "✗", NOT_ATTEMPTED: "○"}


def describe(grade: SubmissionGrade) -> str:
    """A few readable lines about one submission; what came from it (its name, messages, problems) is escaped
    (`printable`), so that none of it can make a line of its own."""
    head = f"{printable(grade.submission)}: "
    if grade.chapter is None:
        head += "not graded"
    else:
        head += f"chapter {grade.chapter}, {grade.total:g}/{grade.max_total:g} points"
    lines = [head + f" ({grade.seconds:.1f} s)"]
    for e in grade.exercises.values():
        message = "" if e.status == PASSED else f": {printable(e.message[:160])}"
        lines.append(f"  {_ICONS.get(e.status, '?')} {e.exercise_id} {e.status} "
                     f"[{e.points:g}/{e.max_points:g}]{message}")
    lines += [f"  problem: {printable(p)}" for p in grade.problems]
    return "\n".join(lines)


def distinct(paths: list[str]) -> list[str]:
    """`paths` without exact repeats, in order: two spellings are one path when os.path.normpath makes them equal
    (`a/./b.ipynb`, `a//b.ipynb`), except that a path with a `..` in it is kept as spelled (after a link, `..`
    does not mean what normpath assumes). Different paths to one file (links) each keep their own row."""
    seen, out = set(), []
    for p in paths:
        key = shards.identity(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def clobbers(output: Path, inputs: list[str]) -> str | None:
    """Why writing `output` could destroy a submission, or None: it ends in .ipynb, or it is one of `inputs`
    (the same path, the same real path, or the same file)."""
    if output.name.lower().endswith(".ipynb"):
        return "it ends in .ipynb, like a submission"
    target = os.path.realpath(output)
    for p in inputs:
        if target in (os.path.realpath(p), os.path.abspath(p)) or _same_file(output, p):
            return f"it is the submission {p}"
    return None


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def similarity_path(book: Path) -> Path:
    """Where --similarity writes its report beside the gradebook: `<stem>-similarity.csv`."""
    return book.with_name(f"{book.stem}-similarity.csv")


def report_similarity(grades: list[SubmissionGrade], book: Path | None) -> None:
    """Print the pairs of submissions with the same answer, and the answers equal to the published solutions
    (`similarity`), and write them to `similarity_path(book)` when there is a gradebook."""
    found = similarity.matches({g.submission: g.answers for g in grades if g.chapter},
                               {g.submission: g.chapter for g in grades if g.chapter},
                               {ex_id: ex.answer_name for ex_id, ex in REGISTRY.items()})
    print("\n".join(similarity.report_lines(found, printable)))
    if book is not None:
        write_atomically(similarity.render(found, cell), similarity_path(book))
        print(f"similarity report: {printable(similarity_path(book))}")


def grade_all(paths: list[str], *, jobs: int = 1, progress=None, **options) -> list[SubmissionGrade]:
    """Grade every submission, `jobs` at a time, in the order given; `progress(grade)` is called as each ends."""
    def one(path):
        grade = grade_submission(path, spares=spares, **options)
        if progress is not None:
            progress(grade)
        return grade

    with launch.Spares() as spares:  # each thread starts its next runner while a submission's checks run
        if jobs <= 1:
            return [one(p) for p in paths]
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="attnbook-grade") as pool:
            return list(pool.map(one, paths))


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0 or (kind is float and value == float("inf")):
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def _chapter(text: str) -> str:
    if not re.fullmatch(r"\d{1,3}", text) or not 0 < int(text) <= MAX_CHAPTER:
        raise argparse.ArgumentTypeError(f"expected a chapter number from 1 to {MAX_CHAPTER}, got {text[:20]!r}")
    return str(int(text))


def _shard(text: str) -> tuple[int, int]:
    try:
        return shards.parse_shard(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="attnbook-grade", allow_abbrev=False,
        usage="%(prog)s [options] -- SUBMISSION.ipynb ...",
        description="Grade returned exercise notebooks: each runs in a sandbox, and the grader runs its checks in "
                    "its own process. Put -- before the files, so that a file named like an option is read as "
                    "a file.")
    p.add_argument("submissions", nargs="+", help="returned .ipynb files (of any chapters); each path gets its "
                                                  "own row (a path repeated as spelled is graded once), and a "
                                                  "path through a symbolic link is refused")
    p.add_argument("--chapter", type=_chapter, metavar="N", help="grade every submission as chapter N (default: "
                   "the notebook's metadata, else recognised from its content)")
    p.add_argument("--csv", type=Path, help="the gradebook, rewritten (atomically) as each submission ends; never "
                                             "one of the submissions, nor a name ending in .ipynb")
    p.add_argument("--timeout", type=_positive(float), default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"limit per cell, and per exercise's check (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--notebook-timeout", type=_positive(float), default=DEFAULT_NOTEBOOK_TIMEOUT_S,
                   metavar="SECONDS", help=f"limit per submission, reruns included (default "
                                           f"{DEFAULT_NOTEBOOK_TIMEOUT_S:g})")
    p.add_argument("--jobs", type=_positive(int), default=1, metavar="N", help="submissions run at a time")
    p.add_argument("--lang", choices=LANGUAGES, default=None,
                   help="the language of the feedback: en or zh (default: ATTNBOOK_LANG, else en)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run submissions without the sandbox (only for trusted files; every row says so)")
    p.add_argument("--recorded", action="store_true",
                   help="read the check records in each file instead of running it (fast, UNTRUSTED: a learner "
                        "can edit them; for checking your own work, not for marks)")
    p.add_argument("--similarity", action="store_true",
                   help="after grading, list the pairs of submissions whose answer to an exercise is the same "
                        "program after renaming, and the answers equal to the published solution (evidence for "
                        "a person, not a verdict); also written to <csv stem>-similarity.csv beside --csv")
    p.add_argument("--shard", type=_shard, metavar="I/N",
                   help="grade only shard I of N (0-based: ${JOB_COMPLETION_INDEX}/N, ${SLURM_ARRAY_TASK_ID}/N "
                        "with --array=0-(N-1)): every shard is given the whole course; needs --csv, beside which "
                        "<csv stem>.shard.json records the shard for `attnbook-grade merge`")
    return p


def merge_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="attnbook-grade merge", allow_abbrev=False,
                description="Join the gradebooks of every shard (attnbook-grade --shard I/N) into the one a single "
                            "run would have written; refuses a shard missing or given twice, shards of another "
                            "course, checker or options, and a shard that did not grade its whole share.")
    p.add_argument("shards", nargs="+", type=Path, help="every shard's gradebook (its .shard.json beside it)")
    p.add_argument("-o", "--output", type=Path, required=True, help="the course's gradebook (CSV)")
    return p


def merge_main(argv: list[str]) -> int:
    """attnbook-grade merge: 0 when the gradebook was written, 1 when the shards cannot make it (one line why)."""
    args = merge_parser().parse_args(argv)
    inputs = [str(b) for b in args.shards] + [str(shards.manifest_path(b)) for b in args.shards]
    why = clobbers(args.output, inputs)
    if why:
        print(f"attnbook-grade merge: refusing to write {printable(args.output)}: {printable(why)}",
              file=sys.stderr)
        return 2
    try:
        text = shards.merge(args.shards)
    except shards.MergeError as e:
        print(f"attnbook-grade merge: {printable(e)}", file=sys.stderr)
        return 1
    write_atomically(text, args.output)
    print(f"gradebook: {printable(args.output)} ({len(args.shards)} shards)")
    return 0


def grading_options(args) -> dict:
    """The options that change a row, which every shard of a course must share."""
    return {"chapter": args.chapter, "timeout": args.timeout, "notebook_timeout": args.notebook_timeout,
            "lang": get_language(), "sandboxed": not args.no_sandbox, "recorded": args.recorded}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        if "unrecognized arguments" in message or "ignored explicit argument" in message:
            message += " (a file whose name starts with - is read as an option: put -- before the files)"
        super().error(printable(message))


def main(argv: list[str] | None = None) -> int:
    """The attnbook-grade command; exit status 0 when every submission was graded, 1 otherwise, 2 when the
    sandbox cannot run here (one line says why and how to allow it)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    p = parser()
    args = p.parse_args(argv)
    if args.shard and (args.csv is None or args.similarity):
        p.error("--shard needs --csv (each shard writes its own gradebook) and cannot take --similarity (a "
                "shard sees only its share of the answers)")
    course = distinct(args.submissions)
    paths = shards.share(course, *args.shard) if args.shard else course
    outputs = [args.csv, *([similarity_path(args.csv)] if args.csv and args.similarity else []),
               *([shards.manifest_path(args.csv)] if args.shard else [])]
    for output in outputs:
        why = clobbers(output, course) if output is not None else None
        if why:
            print(f"attnbook-grade: refusing to write {printable(output)}: {printable(why)}; nothing was graded "
                  "(name the gradebook with --csv FILE.csv, and put -- before the submissions)", file=sys.stderr)
            return 2
    if args.lang:
        set_language(args.lang)  # the checks run in this process; the kernels get it through ATTNBOOK_LANG
    start = time.monotonic()
    box = None
    if args.recorded:
        print("Grading from the check records in the files: UNTRUSTED, a learner can edit them, so this is for "
              "checking your own work, not for marks.")
    elif not args.no_sandbox:
        try:
            box = sandbox.Sandbox()
            launch.check_available(box)
        except sandbox.Unavailable as e:
            print(f"attnbook-grade: {printable(e)}", file=sys.stderr)
            return 2
    book = Gradebook(args.csv, paths)
    if args.shard:
        shards.write_manifest(args.csv, course, *args.shard, grading_options(args))
        write_gradebook([], args.csv)  # a shard with an empty share still leaves its gradebook

    def progress(grade: SubmissionGrade) -> None:
        book.add(grade)
        if not args.recorded:
            print(f"graded {printable(grade.submission)} in {grade.seconds:.1f} s", file=sys.stderr, flush=True)

    grades = grade_all(paths, jobs=args.jobs, progress=progress, timeout_s=args.timeout,
                       notebook_timeout_s=args.notebook_timeout, recorded=args.recorded, chapter=args.chapter,
                       sandboxed=not args.no_sandbox, box=box, similarity=args.similarity)
    for grade in grades:
        print(describe(grade))
    elapsed = time.monotonic() - start
    ungraded = sum(not g.graded for g in grades)
    flawed = sum(bool(g.problems) for g in grades)
    print(f"{len(grades)} submission(s) in {elapsed:.1f} s with --jobs {args.jobs} "
          f"({elapsed / max(1, len(grades)):.1f} s per submission); {flawed} with problems, {ungraded} not graded"
          + (f"; shard {args.shard[0]}/{args.shard[1]} of {len(course)}" if args.shard else ""))
    if args.csv:
        print(f"gradebook: {printable(args.csv)}")
    if args.similarity:
        report_similarity(grades, args.csv)
    return 1 if ungraded else 0
