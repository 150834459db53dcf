"""Time `attnbook-grade` on N copies of a solved chapter notebook: seconds per submission, the grader's peak memory.

    python tools/grading_benchmark.py --chapter 2 --copies 8 --jobs 1 2        # sandboxed, --jobs 1 then 2
    python tools/grading_benchmark.py --chapter 2 --copies 8 --no-sandbox      # the sandbox's overhead, by difference
    python tools/grading_benchmark.py --chapter 2 --copies 200 --jobs 4        # a class

Each copy is the chapter's exercise version with the reference answers filled in (tests/test_grade.py's `solved`,
whole, not trimmed), so every check runs and passes; the run fails if any row is short of full marks. Prints one
line per --jobs value with the machine's core count, so the numbers say where they were measured.
"""
from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chapter", type=int, default=2)
    p.add_argument("--copies", type=int, default=8)
    p.add_argument("--jobs", type=int, nargs="+", default=[1])
    p.add_argument("--no-sandbox", action="store_true")
    args = p.parse_args(argv)

    import nbformat
    from attnbook.grading.submission import UNSANDBOXED
    from test_grade import solved  # the crafted submissions of the grader's tests

    nb = solved(args.chapter, trim=False)
    with tempfile.TemporaryDirectory(prefix="attnbook-grade-bench-") as tmp:
        paths = []
        for i in range(args.copies):
            path = Path(tmp) / f"student_{i:03d}.ipynb"
            nbformat.write(nb, path)
            paths.append(str(path))
        for jobs in args.jobs:
            book = Path(tmp) / f"book_{jobs}.csv"
            cmd = [sys.executable, "-m", "attnbook.grade", *paths, "--jobs", str(jobs), "--csv", str(book)]
            cmd += ["--no-sandbox"] if args.no_sandbox else []
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            start = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True)
            elapsed = time.perf_counter() - start
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            rows = list(csv.DictReader(book.open(encoding="utf-8")))
            expected = UNSANDBOXED if args.no_sandbox else ""
            full = sum(r["total"] == r["max_total"] and r["problems"].strip() == expected for r in rows)
            print(f"chapter {args.chapter}, {args.copies} submissions, --jobs {jobs}"
                  f"{' --no-sandbox' if args.no_sandbox else ''}, {os.cpu_count()} cores: {elapsed:.1f} s, "
                  f"{elapsed / args.copies:.2f} s per submission; full marks {full}/{len(rows)}; largest process "
                  f"{max(before, peak) / 1024:.0f} MB; exit status {done.returncode}", flush=True)
            if full != len(rows) or done.returncode != 0:
                print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
