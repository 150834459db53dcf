"""The cost of grading a course on a batch system, on paper, from the grading benchmark's measured figures.

    python tools/grading_cost.py                      # the README's table: 10,000 submissions, one hour
    python tools/grading_cost.py --submissions 2500 --hours 0.5

Each shard is one batch job like the machine the benchmark ran on (2 cores, `--jobs 1`), so a shard grades at the
measured rate and holds those 2 cores for its whole run. The measured figures (`MEASURED`) are the README's
"Time per submission" and memory paragraphs (`python tools/grading_benchmark.py`); a test checks that the README
states the same ones and shows this script's table.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from attnbook.grading.sandbox import MEMORY_BYTES  # noqa: E402  (the sandbox's memory budget per submission)

MEASURED = {  # python tools/grading_benchmark.py; chapter 2, complete solved notebooks, every check passed
    "machine": "a 2-core machine (load average below 1 at the start), sandboxed, --jobs 1",
    "cores": 2,
    "seconds": 93 / 40,  # chapter 2: 40 submissions in 93 s, the grader's start and the first one included
    "grader_bytes": 271e6,  # the grader's most over the last 20 of 200 submissions (--memory)
    "largest_run_bytes": 1.1e9,  # a solved chapter's run in the sandbox: 0.35 to 1.1 GB (chapter 10 the most)
}
CPU = {  # python tools/grading_benchmark.py --chapter N --copies 4: CPU-s per submission after the first, per run
    "machine": "this project's shared 2-core build machine (load average 2 to 3.6 from other work, the benchmark at "
               "nice 19), one run of 4 copies per chapter, two for chapter 2 (their spread is that load's); chapters 10 "
               "(with 10.4 and 10.5) and 11 measured later at load about 2, not niced",
    "runs": {1: [2.09], 2: [3.66, 4.71], 3: [4.50], 4: [6.50], 5: [8.40], 6: [38.59], 7: [19.07], 8: [44.44],
             9: [15.13], 10: [37.96], 11: [11.85], 12: [69.78]},
    "not_measured": {},
}


def cpu_seconds(chapter: int) -> float:
    """A submission's CPU time: the mean of the chapter's runs."""
    return statistics.mean(CPU["runs"][chapter])


def chapter_seconds(chapter: int) -> float:
    """A submission's wall-clock time on the measured machine: chapter 2's measured time, scaled for another
    chapter by its CPU time against chapter 2's (both measured in one session)."""
    return MEASURED["seconds"] * cpu_seconds(chapter) / cpu_seconds(2)


def shard_plan(seconds: float, submissions: int, hours: float = 1.0) -> dict:
    """Shards, each a job like the measured machine grading a submission every `seconds`, that finish
    `submissions` within `hours`: how many, and the longest one's time (shares differ by at most one)."""
    if not seconds > 0 or not hours > 0:
        raise ValueError(f"seconds and hours must be positive, got {seconds!r}, {hours!r}")
    if not isinstance(submissions, int) or submissions < 1:
        raise ValueError(f"submissions must be a positive int, got {submissions!r}")
    shards = math.ceil(submissions * seconds / (hours * 3600))
    return {"shards": shards, "longest_s": math.ceil(submissions / shards) * seconds}


def shard_memory(jobs: int = 1) -> tuple[float, float]:
    """(request, limit) in bytes for a shard: the grader, plus per grading thread the running submission and
    the runner started ahead, at the largest measured run (request) or at the sandbox's budget per run,
    MEMORY_BYTES (limit). Set the job's limit to it, so that the sandbox's own watch, not the batch system's
    out-of-memory killer, stops a greedy submission (which then costs only its own row)."""
    runs = jobs * 2
    return (MEASURED["grader_bytes"] + runs * MEASURED["largest_run_bytes"],
            MEASURED["grader_bytes"] + runs * MEMORY_BYTES)


def table(submissions: int = 10_000, hours: float = 1.0) -> str:
    """The README's table: per chapter, the CPU a course costs and the shards that grade it within `hours`."""
    request, limit = shard_memory()
    lines = [f"| chapter | CPU-s per submission | CPU-hours for {submissions:,} | s per submission | shards "
             f"within {hours:g} h | longest shard |", "|---|---|---|---|---|---|"]
    rows = {chapter: f"| {chapter} | not measured: {why} | | | | |" for chapter, why in CPU["not_measured"].items()}
    for chapter in CPU["runs"]:
        cpu, seconds = cpu_seconds(chapter), chapter_seconds(chapter)
        plan = shard_plan(seconds, submissions, hours)
        rows[chapter] = (f"| {chapter} | {cpu:.1f} | {submissions * cpu / 3600:.1f} | {seconds:.1f} | "
                         f"{plan['shards']} | {plan['longest_s'] / 60:.0f} min |")
    lines += [rows[chapter] for chapter in sorted(rows)]
    lines += ["", f"Each shard: {MEASURED['cores']} cores, `--jobs 1`, memory request {request / 1e9:.1f} GB, "
              f"limit {limit / 1e9:.1f} GB. Wall-clock time: chapter 2's, {MEASURED['seconds']:.2f} s, measured on "
              f"{MEASURED['machine']}; another chapter's scaled by its CPU time. CPU time measured on "
              f"{CPU['machine']}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--submissions", type=int, default=10_000)
    p.add_argument("--hours", type=float, default=1.0)
    args = p.parse_args(argv)
    print(table(args.submissions, args.hours))
    return 0


if __name__ == "__main__":
    sys.exit(main())
