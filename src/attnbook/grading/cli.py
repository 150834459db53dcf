"""The attnbook-grade command line (also `python -m attnbook.grade` and `python -m attnbook.grading`)."""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..exercises.results import FAILED, NOT_ATTEMPTED, PASSED
from ..i18n import LANGUAGES, set_language
from . import sandbox
from .gradebook import Gradebook
from .submission import (DEFAULT_NOTEBOOK_TIMEOUT_S, DEFAULT_TIMEOUT_S, MAX_CHAPTER, SubmissionGrade,
                         grade_submission)

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


def distinct(paths: list[str]) -> list[str]:
    """`paths` without repeats of the same file (same real path), first spelling kept, in order."""
    seen, out = set(), []
    for p in paths:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def grade_all(paths: list[str], *, jobs: int = 1, progress=None, **options) -> list[SubmissionGrade]:
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="attnbook-grade", description="Grade returned exercise notebooks: each runs in a sandbox, and the "
                                           "grader runs its checks in its own process.")
    p.add_argument("submissions", nargs="+", help="returned .ipynb files (of any chapters); a file named twice "
                                                  "is graded once")
    p.add_argument("--chapter", type=_chapter, metavar="N", help="grade every submission as chapter N (default: "
                   "the notebook's metadata, else recognised from its content)")
    p.add_argument("--csv", type=Path, help="the gradebook, rewritten (atomically) as each submission ends")
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
    return p


def main(argv: list[str] | None = None) -> int:
    """The attnbook-grade command; exit status 0 when every submission was graded, 1 otherwise, 2 when the
    sandbox cannot run here (one line says why and how to allow it)."""
    args = parser().parse_args(argv)
    if args.lang:
        set_language(args.lang)  # the checks run in this process; the kernels get it through ATTNBOOK_LANG
    start = time.monotonic()
    paths = distinct(args.submissions)
    box = None
    if args.recorded:
        print("Grading from the check records in the files: UNTRUSTED, a learner can edit them, so this is for "
              "checking your own work, not for marks.")
    elif not args.no_sandbox:
        try:
            box = sandbox.Sandbox()
            sandbox.check_available(box)
        except sandbox.Unavailable as e:
            print(f"attnbook-grade: {e}", file=sys.stderr)
            return 2
    book = Gradebook(args.csv, paths)

    def progress(grade: SubmissionGrade) -> None:
        book.add(grade)
        if not args.recorded:
            print(f"graded {grade.submission} in {grade.seconds:.1f} s", file=sys.stderr, flush=True)

    grades = grade_all(paths, jobs=args.jobs, progress=progress, timeout_s=args.timeout,
                       notebook_timeout_s=args.notebook_timeout, recorded=args.recorded, chapter=args.chapter,
                       sandboxed=not args.no_sandbox, box=box)
    for grade in grades:
        print(describe(grade))
    elapsed = time.monotonic() - start
    ungraded = sum(not g.graded for g in grades)
    flawed = sum(bool(g.problems) for g in grades)
    print(f"{len(grades)} submission(s) in {elapsed:.1f} s with --jobs {args.jobs} "
          f"({elapsed / len(grades):.1f} s per submission); {flawed} with problems, {ungraded} not graded")
    if args.csv:
        print(f"gradebook: {args.csv}")
    return 1 if ungraded else 0
