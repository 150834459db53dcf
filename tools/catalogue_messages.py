"""Every catalogue entry's verdict and message, in English and Chinese, as JSON: what a checker refactor must keep.

    python tools/catalogue_messages.py --chapter 4 > before.json   # before the refactor
    python tools/catalogue_messages.py --chapter 4 --against before.json
        # after it: lists every entry that is new, gone, or whose status, points or message changed (exit status 1
        # if any is gone or changed)

`tools/mutant_report.py --save/--against` says whether every entry still gets its verdict; this says whether the
learner still reads the same words (a changed English message also loses its Chinese translation, and may change a
committed notebook output). Run seed 0, as a learner's notebook runs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def snapshot(chapter: str | None) -> dict[str, list]:
    sys.path.insert(0, str(ROOT / "tests"))
    import mutants

    seen: dict[str, int] = {}
    out: dict[str, list] = {}
    for m in mutants.load(chapter):
        if chapter is not None and m.exercise_id.split(".")[0] != str(int(chapter)):
            continue
        key = f"{m.exercise_id} {m.name}"
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key += f" #{seen[key]}"
        en, zh = mutants.run_in(m, "en"), mutants.run_in(m, "zh")
        out[key] = [en.status, en.points, en.message, zh.message]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chapter", help="only this chapter's entries")
    p.add_argument("--against", type=Path, help="compare with a snapshot written before")
    args = p.parse_args(argv)
    now = snapshot(args.chapter)
    if args.against is None:
        json.dump(now, sys.stdout, ensure_ascii=False, indent=1)
        return 0
    before = json.loads(args.against.read_text(encoding="utf-8"))
    bad = 0
    for key in sorted(set(before) | set(now)):
        if key not in now:
            print(f"GONE     {key}")
            bad += 1
        elif key not in before:
            print(f"NEW      {key}: {now[key][0]} {now[key][2][:200]!r}")
        elif before[key] != now[key]:
            bad += 1
            for label, b, a in zip(("status", "points", "english", "chinese"), before[key], now[key]):
                if b != a:
                    print(f"CHANGED  {key} ({label}):\n   before {b!r}\n   after  {a!r}")
    print(f"{len(now)} entries, {bad} gone or changed", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
