"""Grading a course in shards (attnbook.grading.shards): the assignment, the merge's refusals, and three shards
run as separate processes whose merge is, byte for byte, the gradebook of one run over the whole course.

Merge refusals are tested on --recorded runs (nothing runs: the rows come from forged check records, as in
tests/test_grade_integrity.py); the end-to-end test grades for real, in the sandbox where this machine allows it.
"""
from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.grading.cli import main, merge_parser, parser
from attnbook import i18n
from attnbook.grading.shards import MergeError, assignment, manifest_path, merge, parse_shard, share

from conftest import ROOT
from test_grade import MODE, ids, solved
from test_grade_integrity import forged, rows_of, write
from tools import grading_cost


@pytest.mark.parametrize("bad", ["3/2", "0/0", "a/b", "-1/2", "1/", "2/2", "1 / 2", "0/3/1", ""])
def test_a_shard_must_be_i_of_n_0_based(bad, capsys):
    with pytest.raises(ValueError, match="shard"):
        parse_shard(bad)
    with pytest.raises(SystemExit):
        main(["--recorded", "--csv", "x.csv", "--shard", bad, "--", "a.ipynb"])
    assert "--shard" in capsys.readouterr().err


def test_shard_parses_and_needs_a_gradebook(capsys):
    assert parse_shard("0/1") == (0, 1) and parse_shard("2/3") == (2, 3) and parse_shard("19/20") == (19, 20)
    with pytest.raises(TypeError):
        parse_shard(3)
    for extra in ([], ["--csv", "x.csv", "--similarity"]):
        with pytest.raises(SystemExit):
            main(["--recorded", "--shard", "0/2", *extra, "--", "a.ipynb"])
        assert "--shard needs --csv" in capsys.readouterr().err


def test_the_shares_partition_the_course_evenly_whatever_the_order():
    course = [f"returned/student_{k:03d}.ipynb" for k in range(50)] + ["a/../b.ipynb", "x y/ü.ipynb"]
    shuffled = random.Random(0).sample(course, len(course))
    for n in (1, 2, 3, 7, 60):
        parts = [share(course, i, n) for i in range(n)]
        assert sorted(p for part in parts for p in part) == sorted(course)  # every one once, none twice
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
        assert assignment(shuffled, n) == assignment(course, n)
        for part in parts:  # each share keeps the order given
            assert part == [p for p in course if p in part]
    # two spellings that name the same path (as the grader compares paths) go to the same shard
    respelled = [p.replace("returned/", "returned/./") for p in course]
    assert [assignment(respelled, 3)[q] for q in respelled] == [assignment(course, 3)[p] for p in course]


def test_the_assignment_does_not_depend_on_the_process_hash_seed():
    """Another interpreter, whose `hash()` of a str differs from this one's (PYTHONHASHSEED), agrees."""
    course = [f"s{k}.ipynb" for k in range(40)]
    code = ("import json, sys; from attnbook.grading.shards import assignment; "
            "print(json.dumps([hash('s1.ipynb'), assignment(json.loads(sys.argv[1]), 4)]))")
    seed = "1" if os.environ.get("PYTHONHASHSEED") == "0" else "0"
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code, json.dumps(course)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    other_hash, other = json.loads(done.stdout)
    assert other_hash != hash("s1.ipynb")  # the premise: the two processes hash strings differently
    assert other == assignment(course, 4) and sorted(set(other.values())) == [0, 1, 2, 3]


def _recorded_course(tmp_path: Path) -> list[str]:
    """Six submissions of chapters 1 and 2 with forged records, a broken file and a link (each its own row)."""
    paths = []
    for k in range(4):
        paths.append(str(write(tmp_path / f"s{k}.ipynb", forged(1 + k % 2))))
    (tmp_path / "broken.ipynb").write_text("{not json")
    os.symlink(tmp_path / "s0.ipynb", tmp_path / "link.ipynb")
    return paths + [str(tmp_path / "broken.ipynb"), str(tmp_path / "link.ipynb")]


def _run(tmp_path: Path, course: list[str], name: str, *options: str) -> Path:
    book = tmp_path / f"{name}.csv"
    main(["--recorded", "--csv", str(book), *options, "--", *course])
    return book


def test_merge_equals_one_run_and_refuses_what_is_missing_repeated_or_foreign(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(i18n, "_language", i18n._language)  # restored afterwards: --lang zh sets it below
    course = _recorded_course(tmp_path)
    single = _run(tmp_path, course, "single")
    books = [_run(tmp_path, course, f"shard{i}", "--shard", f"{i}/3") for i in range(3)]
    assert {r["submission"] for r in rows_of(single)} == set(course) and len(rows_of(single)) == len(course)
    assert merge(books) == single.read_bytes().decode()
    assert merge(books[::-1]) == single.read_bytes().decode()
    assert main(["merge", *map(str, books), "-o", str(tmp_path / "merged.csv")]) == 0
    assert (tmp_path / "merged.csv").read_bytes() == single.read_bytes()
    more = [_run(tmp_path, course, f"of8-{i}", "--shard", f"{i}/8") for i in range(8)]  # 2 shards get nothing
    assert sum(len(rows_of(b)) == 0 for b in more) == 2 and merge(more) == single.read_bytes().decode()

    def refused(shards, *words):
        with pytest.raises(MergeError) as e:
            merge(shards)
        assert all(w in str(e.value) for w in words), str(e.value)

    refused(books[:2], "shard 2/3 is missing")
    refused([books[0], books[1], books[0]], "shard 0/3 given twice", str(books[0]))
    refused([single], "no readable shard manifest")
    shard_of = assignment(course, 3)
    extra = str(write(tmp_path / "late.ipynb", forged(2)))
    other = _run(tmp_path, course + [extra], "other", "--shard", "1/3")
    refused([books[0], other, books[2]], "different submission list", "late.ipynb")
    refused([_run(tmp_path, course[::-1], "reordered", "--shard", "1/3"), books[1]], "another order")
    refused([books[0], _run(tmp_path, course, "zh", "--lang", "zh", "--shard", "1/3"), books[2]], "grading options")
    i18n.set_language("en")
    refused([books[0], _run(tmp_path, course, "four", "--shard", "1/4"), books[2]], "counts 4 shards")
    record = json.loads(manifest_path(books[2]).read_text())
    record["checker"]["source_sha256"] = "0" * 64
    manifest_path(books[2]).write_text(json.dumps(record))
    refused(books, "shard 2/3", "checker version")
    # a row twice, another shard's row, and a shard that ended early (its last row missing): each named
    books[2] = _run(tmp_path, course, "shard2", "--shard", "2/3")
    lines = books[2].read_bytes().decode().splitlines(keepends=True)
    books[2].write_text("".join(lines + lines[-1:]), encoding="utf-8", newline="")
    last = [p for p in course if shard_of[p] == 2][-1]
    refused(books, "shard 2/3", f"submission {last!r} has two rows")
    stranger = books[0].read_bytes().decode().splitlines(keepends=True)[1]
    books[2].write_text("".join(lines + [stranger]), encoding="utf-8", newline="")
    refused(books, "shard 2/3", f"a row for submission {stranger.split(',')[0]!r}, which is not in its share")
    books[2].write_text("".join(lines[:-1]), encoding="utf-8", newline="")
    refused(books, "shard 2/3", f"no row for submission {last!r}")
    assert main(["merge", *map(str, books), "-o", str(tmp_path / "bad.csv")]) == 1
    assert "no row for submission" in capsys.readouterr().err and not (tmp_path / "bad.csv").exists()
    assert main(["merge", *map(str, books), "-o", str(books[0])]) == 2  # never over a shard's own gradebook


def test_three_shards_as_processes_merge_to_one_runs_gradebook(tmp_path):
    """Real grading (sandboxed where possible): two chapters' submissions (different columns), a broken file and
    a link; three `attnbook-grade --shard i/3` processes at once, then `attnbook-grade merge`, byte for byte."""
    course = [str(write(tmp_path / "ch1.ipynb", solved(1, only=(ids(1)[0],)))),
              str(write(tmp_path / "ch2.ipynb", solved(2, only=(ids(2)[0],))))]
    (tmp_path / "broken.ipynb").write_text("{not json")
    os.symlink(tmp_path / "ch1.ipynb", tmp_path / "link.ipynb")
    course += [str(tmp_path / "broken.ipynb"), str(tmp_path / "link.ipynb")]
    grade = [sys.executable, "-m", "attnbook.grade", "--timeout", "30", *MODE]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    procs = [subprocess.Popen([*grade, "--shard", f"{i}/3", "--csv", str(tmp_path / f"shard{i}.csv"), "--",
                               *course], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for i in range(3)]
    assert main(["--timeout", "30", *MODE, "--csv", str(tmp_path / "single.csv"), "--", *course]) == 1  # 2 ungraded
    outputs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert all(p.returncode in (0, 1) for p in procs), outputs
    done = subprocess.run([sys.executable, "-m", "attnbook.grade", "merge", *(str(tmp_path / f"shard{i}.csv")
                                                                              for i in range(3)),
                           "-o", str(tmp_path / "merged.csv")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    single = rows_of(tmp_path / "single.csv")
    assert [r["submission"] for r in single] == course and single[0]["1.1"] == single[1]["2.1"] != "0"
    assert (tmp_path / "merged.csv").read_bytes() == (tmp_path / "single.csv").read_bytes()


# ---------------------------------------------------------------------------------------------------------
# The README's recipes and cost table
# ---------------------------------------------------------------------------------------------------------

SECTION = (ROOT / "README.md").read_text(encoding="utf-8").split("### Grading a large course")[1].split("\n## ")[0]
VALUES = {"SLURM_ARRAY_TASK_ID": "0", "JOB_COMPLETION_INDEX": "0", "N": "7"}  # what the scripts' variables hold


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", SECTION, flags=re.S)


def grade_commands(script: str) -> list[list[str]]:
    """The words of every attnbook-grade command in `script`, its variables filled in (VALUES)."""
    script = re.sub(r"\$\{?(\w+)\}?", lambda m: VALUES.get(m[1], m[0]), script.replace("\\\n", " "))
    found = []
    for line in script.splitlines():
        command = re.search(r"(?:^|[\s/])attnbook-grade\s+(.*)", line)  # the program, not a job's name
        if command:
            found.append(shlex.split(command[1].split("||")[0].split(";")[0], comments=True))
    return found


def test_the_readme_scripts_are_valid_and_use_the_graders_own_flags():
    scripts = blocks("bash")
    slurm = next(s for s in scripts if "#SBATCH --array" in s)
    for script in scripts:
        done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
    yaml = pytest.importorskip("yaml")
    manifest = yaml.safe_load(blocks("yaml")[0])
    assert manifest["spec"]["completionMode"] == "Indexed"
    pod = manifest["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["securityContext"]["procMount"] == "Unmasked" and pod["hostUsers"] is False
    commands = [c for s in scripts for c in grade_commands(s)] + grade_commands(" ".join(container["args"]))
    shards, merges = [c for c in commands if c[0] != "merge"], [c for c in commands if c[0] == "merge"]
    assert len(shards) == 2 and merges
    for words in shards:  # the grader's own parser accepts them, and each names shard 0 of 7
        args = parser().parse_args(words)
        assert args.shard == (0, 7) and args.csv and args.submissions
    for words in merges:
        assert merge_parser().parse_args(words[1:]).output
    n = grading_cost.shard_plan(grading_cost.chapter_seconds(2), 10_000)["shards"]  # chapter 2's row: 7
    assert f"--array=0-{n - 1}" in slurm and manifest["spec"]["completions"] == n == int(VALUES["N"])
    _, limit = grading_cost.shard_memory()
    assert float(re.search(r"--mem=(\d+)G", slurm)[1]) * 1e9 >= limit
    assert container["resources"]["limits"]["memory"] == f"{limit / 1e9:.1f}G"


def test_the_readme_cost_table_is_the_scripts_from_the_readmes_measured_figures():
    assert grading_cost.table() in SECTION
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())  # lines joined
    measured = grading_cost.MEASURED
    assert f"{measured['seconds']:.2f} s one at a time" in readme  # the benchmark's paragraph
    assert f"(40 submissions at `--jobs 1`: {measured['seconds'] * 40:.0f} s" in readme
    assert f"at most {measured['grader_bytes'] / 1e6:.0f} MB over the last 20" in readme
    assert measured["cores"] == 2 and "measured on a 2-core machine" in readme
    source = " ".join((ROOT / "src/attnbook/grading/sandbox.py").read_text(encoding="utf-8").split())
    assert f"holds 0.35 to {measured['largest_run_bytes'] / 1e9:.1f} GB (chapter 10 the most)" in source


def test_the_shard_plan_by_hand():
    """100 submissions of 36 s are an hour of work: within half an hour, 2 shards of 50 (30 min each)."""
    assert grading_cost.shard_plan(36.0, 100, hours=0.5) == {"shards": 2, "longest_s": 1800.0}
    assert grading_cost.shard_plan(36.0, 101, hours=0.5) == {"shards": 3, "longest_s": 34 * 36.0}
    with pytest.raises(ValueError, match="submissions"):
        grading_cost.shard_plan(1.0, 0)
    assert grading_cost.chapter_seconds(2) == grading_cost.MEASURED["seconds"]  # measured, not scaled
