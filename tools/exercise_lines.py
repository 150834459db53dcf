"""Hand-written lines per graded exercise: checker, test and mutant lines, per chapter and on average.

    python tools/exercise_lines.py            # the table, then the average per exercise
    python tools/exercise_lines.py --most 350 # exit status 1 if the average is above 350

A chapter's lines are those of its checker module or package (src/attnbook/exercises/chNN.py or chNN/), its checker
tests (tests/test_exercises_chNN.py) and its mutant catalogue (tests/mutants/chNN.py); every line counts, blank
lines and comments included, since someone wrote and must read them. A chapter's lines are shared evenly by its
exercises (the registry's count). The shared machinery (compare.py, guard.py, ...) is counted once, separately:
it is what makes an exercise cheap, not what one costs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "src" / "attnbook" / "exercises"


def lines(paths) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)


def chapter_files(chapter: int) -> dict[str, list[Path]]:
    name = f"ch{chapter:02d}"
    checker = [EXERCISES / f"{name}.py"] if (EXERCISES / f"{name}.py").exists() else \
        sorted((EXERCISES / name).glob("*.py"))
    return {"checker": checker,
            "tests": [p for p in [ROOT / "tests" / f"test_exercises_{name}.py"] if p.exists()],
            "mutants": [p for p in [ROOT / "tests" / "mutants" / f"{name}.py"] if p.exists()]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--most", type=float, help="fail (exit status 1) if the average per exercise is above this")
    args = p.parse_args(argv)

    sys.path.insert(0, str(ROOT / "src"))
    from attnbook.exercises import REGISTRY

    per_chapter: dict[int, int] = {}
    for ex in REGISTRY.values():
        per_chapter[int(ex.chapter)] = per_chapter.get(int(ex.chapter), 0) + 1
    totals = {"checker": 0, "tests": 0, "mutants": 0}
    print(f"{'chapter':>7} {'exercises':>9} {'checker':>8} {'tests':>6} {'mutants':>8} {'per exercise':>13}")
    for chapter in sorted(per_chapter):
        counts = {kind: lines(paths) for kind, paths in chapter_files(chapter).items()}
        for kind, n in counts.items():
            totals[kind] += n
        n_ex = per_chapter[chapter]
        print(f"{chapter:>7} {n_ex:>9} {counts['checker']:>8} {counts['tests']:>6} {counts['mutants']:>8} "
              f"{sum(counts.values()) / n_ex:>13.0f}")
    n = sum(per_chapter.values())
    average = sum(totals.values()) / n
    print(f"{'all':>7} {n:>9} {totals['checker']:>8} {totals['tests']:>6} {totals['mutants']:>8} {average:>13.0f}")
    print(f"per exercise: {totals['checker'] / n:.0f} checker + {totals['tests'] / n:.0f} tests + "
          f"{totals['mutants'] / n:.0f} mutants = {average:.0f} lines")
    shared = sorted(p for p in EXERCISES.glob("*.py") if not p.name.startswith("ch"))
    print(f"shared machinery, counted once: {lines(shared)} lines in {len(shared)} modules")
    if args.most is not None and average > args.most:
        print(f"above the most allowed, {args.most:g} lines per exercise")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
