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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from attnbook.grading.sandbox import MEMORY_BYTES  # noqa: E402  (the sandbox's memory budget per submission)

MEASURED = {  # python tools/grading_benchmark.py; chapter 2, complete solved notebooks, every check passed
    "machine": "a 2-core machine (load average below 1 at the start), sandboxed, --jobs 1",
    "cores": 2,
    "seconds": {2: 93 / 40},  # chapter: 40 submissions in 93 s, the grader's start and the first one included
    "grader_bytes": 271e6,  # the grader's most over the last 20 of 200 submissions (--memory)
    "largest_run_bytes": 1.1e9,  # a solved chapter's run in the sandbox: 0.35 to 1.1 GB (chapter 10 the most)
}


def shard_plan(seconds: float, submissions: int, hours: float = 1.0, cores: int = MEASURED["cores"]) -> dict:
    """Shards (each a `cores`-core job grading one submission at a time) that finish `submissions` of
    `seconds` each within `hours`, and what they cost."""
    if not seconds > 0 or not hours > 0:
        raise ValueError(f"seconds and hours must be positive, got {seconds!r}, {hours!r}")
    if not isinstance(submissions, int) or submissions < 1:
        raise ValueError(f"submissions must be a positive int, got {submissions!r}")
    shards = math.ceil(submissions * seconds / (hours * 3600))
    longest = math.ceil(submissions / shards) * seconds  # the shares differ by at most one submission
    return {"shards": shards, "longest_s": longest, "core_hours": submissions * seconds * cores / 3600}


def shard_memory(jobs: int = 1) -> tuple[float, float]:
    """(what to request, the limit) in bytes for a shard: the grader, plus per grading thread the running
    submission and the runner started ahead, each at the largest measured run (request) or at what the sandbox
    lets it hold (limit). The limit is what the sandbox lets each run hold
    (MEMORY_BYTES): set the job's limit to it, so that the sandbox, not the batch system's out-of-memory
    killer, stops a greedy submission (which then costs only its own row)."""
    typical = MEASURED["grader_bytes"] + jobs * 2 * MEASURED["largest_run_bytes"]
    return typical, MEASURED["grader_bytes"] + jobs * 2 * MEMORY_BYTES


def table(submissions: int = 10_000, hours: float = 1.0) -> str:
    """The README's table: per chapter measured, the plan for `submissions` within `hours`."""
    request, limit = shard_memory()
    lines = [f"{submissions:,} submissions within {hours:g} h; measured on {MEASURED['machine']}", "",
             f"| chapter | s per submission | core-hours | shards of {MEASURED['cores']} cores | longest shard "
             "| memory per shard: request, limit |", "|---|---|---|---|---|---|"]
    for chapter, seconds in sorted(MEASURED["seconds"].items()):
        plan = shard_plan(seconds, submissions, hours)
        lines.append(f"| {chapter} | {seconds:.2f} | {plan['core_hours']:.1f} | {plan['shards']} | "
                     f"{plan['longest_s'] / 60:.0f} min | {request / 1e9:.1f} GB, {limit / 1e9:.1f} GB |")
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
