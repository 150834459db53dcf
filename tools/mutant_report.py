"""Print the mutant catalogue's score: per exercise and in total, how many wrong answers are rejected (with
their promised message) and how many right answers are accepted. Exit status 1 below 100% or when an exercise
has fewer than 6 wrong or 3 right answers.

    python tools/mutant_report.py [-v] [--chapter N]
        -v: also list every entry that did not do what it should; --chapter N: only chapter N's exercises
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

MIN_WRONG, MIN_RIGHT = 6, 3


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import torch

    torch.set_num_threads(1)
    import mutants
    from attnbook.exercises import REGISTRY

    verbose = "-v" in argv
    chapter = argv[argv.index("--chapter") + 1] if "--chapter" in argv else None
    rows: dict[str, list] = defaultdict(list)
    for m in mutants.load(chapter):
        if chapter is not None and m.exercise_id.split(".")[0] != chapter:
            continue
        ok, result = mutants.run(m)
        rows[m.exercise_id].append((m, ok, result))
    ids = sorted({i for i in set(REGISTRY) | set(rows) if chapter is None or i.split(".")[0] == chapter},
                 key=lambda i: tuple(int(p) for p in i.split(".")))
    totals = [0, 0, 0, 0]
    bad = False
    for ex in ids:
        entries = rows.get(ex, [])
        w = [ok for m, ok, _ in entries if not m.right]
        r = [ok for m, ok, _ in entries if m.right]
        line = (f"{ex:>5}: {sum(w)}/{len(w)} wrong answers rejected, {sum(r)}/{len(r)} right answers accepted")
        short = len(w) < MIN_WRONG or len(r) < MIN_RIGHT
        if short:
            line += f"  (needs at least {MIN_WRONG} wrong and {MIN_RIGHT} right)"
        print(line)
        bad |= short or not all(w) or not all(r)
        totals = [totals[0] + sum(w), totals[1] + len(w), totals[2] + sum(r), totals[3] + len(r)]
        if verbose:
            for m, ok, result in entries:
                if not ok:
                    want = "pass" if m.right else f"fail with {m.hint!r}" if m.hint else "fail"
                    print(f"        should {want}: {m.name}\n          got: {result}")
    print(f"total: {totals[0]}/{totals[1]} wrong answers rejected, {totals[2]}/{totals[3]} right answers accepted "
          f"({len(ids)} exercises)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
