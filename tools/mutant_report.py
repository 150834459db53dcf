"""Print the mutant catalogue's score: per exercise and in total, how many wrong answers are rejected (with
their promised message) and how many right answers are accepted. Exit status 1 below 100% or when an exercise
has fewer than 6 wrong or 3 right answers.

    python tools/mutant_report.py [-v] [--chapter N | --exercise N.k] [--seeds 0,1,2] [--save FILE] [--against FILE]
        -v: also list every entry that did not do what it should; --chapter N: only chapter N's exercises;
        --exercise N.k: only that exercise's entries (a few seconds while you write one);
        --seeds: check every entry under each of these run seeds (each must give its verdict; Chinese under the
        first); --save FILE: write every entry's (exercise, name, right, hint) as JSON; --against FILE: list
        the entries of such a file that the catalogue no longer has, and fail if there are any. Before a
        checker or catalogue refactor: --save; after it: --seeds 0,1,2 --against, which says whether every
        fact the catalogue held still holds
    python tools/mutant_report.py --recorded DIR
        the score of the verdicts that tests/test_remote.py recorded in DIR (ATTNBOOK_CATALOGUE_RECORD=DIR, as
        `make test` sets it): graded under run seeds 0, 1 and 2, and in Chinese, instead of running the
        catalogue again; every entry of the catalogue must be there, once

Every entry is checked twice, with feedback in English and in Chinese (set_language("zh")): the verdict must be
the same, and a Chinese message must be Chinese: no run of English prose left in it (code, shapes, the learner's
own error text and names excepted). A translation must never change what a check decides.
"""
from __future__ import annotations

import contextlib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

MIN_WRONG, MIN_RIGHT = 6, 3
CJK = re.compile(r"[\u4e00-\u9fff]")
# What may stay English inside a Chinese message: code in backticks or quotes, the learner's exception and its text,
# identifiers and expressions (anything with _ . ( ) [ ] = * / digits), then runs of three or more plain words left.
NOT_PROSE = re.compile(r"`[^`]*`|'[^']*'|\"[^\"]*\"|\b\w*(Error|Exception|Warning)\b:?[^。；！？]*|"
                       r"\S*[_.()\[\]=*/<>0-9]\S*")
# three or more lower-case words: names such as NumPy or Python int are fine
ENGLISH_RUN = re.compile(r"\b[a-z]{2,}(?:[ ,]+[a-z]{2,}){2,}\b")


def english_left(message: str) -> str | None:
    """A run of English prose in a Chinese message, or None."""
    run = ENGLISH_RUN.search(NOT_PROSE.sub(" ", message))
    return run.group(0) if run else None


def chinese_problem(mutant, english, chinese) -> str | None:
    """What is wrong with the Chinese verdict on `mutant`, given the English one (None: nothing)."""
    if chinese.status != english.status or chinese.points != english.points:
        return f"verdict {chinese.status} in Chinese, {english.status} in English"
    if not CJK.search(chinese.message):
        return f"no Chinese in the message: {chinese.message[:200]}"
    left = english_left(chinese.message)
    return f"English left in the message: {left!r} in {chinese.message[:300]}" if left else None


def recorded(folder: Path, catalogue) -> dict[str, list] | None:
    """The rows of the report from tests/test_remote.py's records in `folder` (None, said, when an entry of the
    catalogue is missing or recorded twice)."""
    import json

    seen: dict[tuple[str, str, bool], dict] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            key = (r["exercise_id"], r["name"], r["right"])
            if key in seen:
                print(f"recorded twice: {key}")
                return None
            seen[key] = r
    rows: dict[str, list] = defaultdict(list)
    for m in catalogue:
        r = seen.pop((m.exercise_id, m.name, m.right), None)
        if r is None:
            print(f"not recorded (was tests/test_remote.py run whole?): {m.exercise_id} {m.name}")
            return None
        rows[m.exercise_id].append((m, r["ok"], r["message"], r["zh_problem"]))
    if seen:
        print(f"recorded but not in the catalogue: {sorted(seen)[:5]}")
        return None
    return rows


FLAGS = {"-v": 0, "--chapter": 1, "--exercise": 1, "--seeds": 1, "--save": 1, "--against": 1, "--recorded": 1}


def _usage_error(argv: list[str]) -> str | None:
    """What is wrong with the command line (an unknown flag, a flag without its value), or None."""
    i = 0
    while i < len(argv):
        if argv[i] not in FLAGS:
            return f"unknown argument {argv[i]!r}; expected one of {', '.join(FLAGS)}"
        if i + FLAGS[argv[i]] >= len(argv):
            return f"{argv[i]} needs a value"
        i += 1 + FLAGS[argv[i]]
    return None


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if (error := _usage_error(argv)) is not None:
        print(f"mutant_report: {error}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import torch

    torch.set_num_threads(1)
    import mutants
    from attnbook.exercises import REGISTRY

    verbose = "-v" in argv
    chapter = argv[argv.index("--chapter") + 1] if "--chapter" in argv else None
    exercise = argv[argv.index("--exercise") + 1] if "--exercise" in argv else None
    if exercise is not None:
        chapter = exercise.split(".")[0]

    def chosen(exercise_id: str) -> bool:
        return (chapter is None or exercise_id.split(".")[0] == chapter) and exercise in (None, exercise_id)
    rows: dict[str, list] = defaultdict(list)
    if "--recorded" in argv:
        rows = recorded(Path(argv[argv.index("--recorded") + 1]), mutants.load())
        if rows is None:
            return 1
    else:
        from attnbook.exercises import remote

        seeds = [int(x) for x in argv[argv.index("--seeds") + 1].split(",")] if "--seeds" in argv else [None]
        for m in mutants.load(chapter):
            if not chosen(m.exercise_id):
                continue
            for seed in seeds:
                with remote.seeding(seed) if seed is not None else contextlib.nullcontext():
                    ok, result = mutants.run(m)
                    if seed == seeds[0]:
                        problem = chinese_problem(m, result, mutants.run_in(m, "zh"))
                if not ok:
                    break
            rows[m.exercise_id].append((m, ok, result, problem))
    entries = [(m.exercise_id, m.name, m.right, m.hint) for m in mutants.load(chapter) if chosen(m.exercise_id)]
    if "--save" in argv:
        Path(argv[argv.index("--save") + 1]).write_text(json.dumps(entries, indent=0, ensure_ascii=False))
    if "--against" in argv:
        now = {tuple(e) for e in entries}
        gone = [tuple(e) for e in json.loads(Path(argv[argv.index("--against") + 1]).read_text())
                if chosen(e[0]) and tuple(e) not in now]
        for e in gone:
            print(f"no longer in the catalogue: {e}")
    bad_before = "--against" in argv and bool(gone)
    ids = sorted({i for i in set(REGISTRY) | set(rows) if chosen(i)},
                 key=lambda i: tuple(int(p) for p in i.split(".")))
    totals = [0, 0, 0, 0, 0]
    bad = bad_before
    for ex in ids:
        entries = rows.get(ex, [])
        w = [ok for m, ok, _, _ in entries if not m.right]
        r = [ok for m, ok, _, _ in entries if m.right]
        zh = [p for _, _, _, p in entries if p]
        line = (f"{ex:>5}: {sum(w)}/{len(w)} wrong answers rejected, {sum(r)}/{len(r)} right answers accepted")
        short = len(w) < MIN_WRONG or len(r) < MIN_RIGHT
        if short:
            line += f"  (needs at least {MIN_WRONG} wrong and {MIN_RIGHT} right)"
        if zh:
            line += f"  ({len(zh)} Chinese verdicts wrong)"
        print(line)
        bad |= short or not all(w) or not all(r) or bool(zh)
        totals = [totals[0] + sum(w), totals[1] + len(w), totals[2] + sum(r), totals[3] + len(r), totals[4] + len(zh)]
        for m, ok, result, problem in entries:
            if problem:  # always listed: a Chinese verdict that differs is a bug in a translation or its marking
                print(f"        in Chinese: {m.name}: {problem}")
            if verbose and not ok:
                want = "pass" if m.right else f"fail with {m.hint!r}" if m.hint else "fail"
                print(f"        should {want}: {m.name}\n          got: {result}")
    print(f"total: {totals[0]}/{totals[1]} wrong answers rejected, {totals[2]}/{totals[3]} right answers accepted "
          f"({len(ids)} exercises); in Chinese: {totals[1] + totals[3] - totals[4]}/{totals[1] + totals[3]} the same "
          "verdict, in Chinese")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
