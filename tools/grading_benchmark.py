"""Time `attnbook-grade` on N copies of a solved chapter notebook: seconds per submission, the grader's peak memory.

    python tools/grading_benchmark.py --chapter 2 --copies 8 --jobs 1 2        # sandboxed, --jobs 1 then 2
    python tools/grading_benchmark.py --chapter 2 --copies 8 --no-sandbox      # the sandbox's overhead, by difference
    python tools/grading_benchmark.py --chapter 2 --copies 200 --jobs 4        # a class
    python tools/grading_benchmark.py --chapter 2 --copies 200 --memory        # the grader's memory over the run

Each copy is the chapter's exercise version with the reference answers filled in (tests/test_grade.py's `solved`,
whole, not trimmed), so every check runs and passes; the run fails if any row is short of full marks. Prints one
line per --jobs value with the machine's core count, so the numbers say where they were measured, and the CPU
time of the grader and every process under it, the sandboxes included (`TreeCPU`): in all, and per submission
after the first row (the steady cost, without the grader's start), which other work on the machine changes much
less than the wall-clock time (tools/grading_cost.py reads it).

--memory samples the grader's own resident memory (/proc/PID/status, every 0.2 s) while it grades, with how many
rows the gradebook has, and prints its peak, what it held once a tenth of the submissions (at least 5) were
graded, and the most it held over the last tenth: a grader that keeps something of each submission grows between
the two. It also prints the machine's load average at the start and the end, since other work on the machine
slows the runs.
"""
from __future__ import annotations

import argparse
import csv
import os
import resource
import subprocess
import sys
import tempfile
import threading
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
    p.add_argument("--memory", action="store_true", help="sample the grader's resident memory as it grades")
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
            load = os.getloadavg()[0]
            start = time.perf_counter()
            with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
                grader = subprocess.Popen(cmd, stdout=out, stderr=err)
                cpu = TreeCPU(grader.pid, book)
                samples = sample_memory(grader, book) if args.memory else None
                grader.wait()
                cpu_s, steady = cpu.stop(args.copies)
                out.seek(0)
                err.seek(0)
                done = subprocess.CompletedProcess(cmd, grader.returncode, out.read().decode(), err.read().decode())
            elapsed = time.perf_counter() - start
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            rows = list(csv.DictReader(book.open(encoding="utf-8")))
            expected = UNSANDBOXED if args.no_sandbox else ""
            full = sum(r["total"] == r["max_total"] and r["problems"].strip() == expected for r in rows)
            print(f"chapter {args.chapter}, {args.copies} submissions, --jobs {jobs}"
                  f"{' --no-sandbox' if args.no_sandbox else ''}, {os.cpu_count()} cores: {elapsed:.1f} s, "
                  f"{elapsed / args.copies:.2f} s per submission; CPU (the grader and every process under it) "
                  f"{cpu_s:.1f} s in all, {'-' if steady is None else f'{steady:.2f}'} s per submission after the "
                  f"first; full marks {full}/{len(rows)}; largest process "
                  f"{max(before, peak) / 1024:.0f} MB; exit status {done.returncode}", flush=True)
            if samples is not None:
                print(memory_report(samples, args.copies, load, os.getloadavg()[0]), flush=True)
            if full != len(rows) or done.returncode != 0:
                print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
                return 1
    return 0


class TreeCPU:
    """The CPU time (user + system) of a process and every process under it (the sandbox's too, which the
    grader kills rather than waits for, so getrusage never sees them), from /proc every `interval` s: each
    process counts with its last sample, so each undercounts by at most `interval` of CPU. `first` is (rows,
    CPU so far) when the gradebook first had a row: what comes after is the steady cost, without the start."""

    def __init__(self, pid: int, book: Path, interval: float = 0.05):
        self.root, self.book, self.interval, self.seen, self.first = pid, book, interval, {}, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.is_set():
            stats = {}
            for name in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                # fields[1]: ppid, [11]/[12]: utime/stime, [19]: start time (a pid reused is another process)
                stats[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, fields[19])
            tree, grew = {self.root}, True
            while grew:
                below = {pid for pid, (ppid, _, _) in stats.items() if ppid in tree} - tree
                tree, grew = tree | below, bool(below)
            for pid in tree & stats.keys():
                self.seen[(pid, stats[pid][2])] = stats[pid][1]
            if self.first is None and _rows(self.book):
                self.first = (_rows(self.book), sum(self.seen.values()))
            self._stop.wait(self.interval)

    def stop(self, copies: int) -> tuple[float, float | None]:
        """(CPU-s of the whole run, CPU-s per submission after the first row; None without two rows)."""
        self._stop.set()
        self._thread.join()
        total = sum(self.seen.values())
        if self.first is None or self.first[0] >= copies:
            return total, None
        return total, (total - self.first[1]) / (copies - self.first[0])


def _rows(book: Path) -> int:
    try:
        with book.open(encoding="utf-8", newline="") as f:
            return sum(1 for _ in csv.DictReader(f))
    except (OSError, csv.Error):
        return 0


def _resident(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of `pid` in bytes; (0, 0) once it has gone."""
    found = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    found[line.split(":")[0]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return found.get("VmRSS", 0), found.get("VmHWM", 0)


def sample_memory(grader: subprocess.Popen, book: Path, interval: float = 0.2) -> list[tuple[int, int, int]]:
    """(rows in the gradebook, the grader's resident bytes, its peak so far) every `interval` s until it ends."""
    samples: list[tuple[int, int, int]] = []
    stop = threading.Event()

    def watch():
        while not stop.wait(interval):
            rss, hwm = _resident(grader.pid)
            if rss:
                samples.append((_rows(book), rss, hwm))

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    grader.wait()
    stop.set()
    thread.join()
    return samples


def memory_report(samples: list[tuple[int, int, int]], copies: int, load_before: float, load_after: float) -> str:
    if not samples:
        return "grader memory: no samples"
    mb = 1e6
    peak = max(max(rss, hwm) for _, rss, hwm in samples)
    warm = max(5, copies // 10)
    after_warm = [rss for rows, rss, _ in samples if rows >= min(warm, copies)]
    last = [rss for rows, rss, _ in samples if rows >= copies - max(1, copies // 10)]
    held = after_warm[0] if after_warm else samples[-1][1]
    end = max(last) if last else samples[-1][1]
    return (f"grader memory: peak {peak / mb:.0f} MB; {held / mb:.0f} MB after {min(warm, copies)} submissions, "
            f"at most {end / mb:.0f} MB over the last {max(1, copies // 10)} (growth {(end - held) / mb:+.0f} MB); "
            f"load average {load_before:.1f} at the start, {load_after:.1f} at the end")


if __name__ == "__main__":
    sys.exit(main())
