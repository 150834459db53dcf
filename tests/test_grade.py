"""attnbook.grade: every way a returned notebook can go wrong becomes an entry in its row, graded in one run.

The submissions are crafted from the committed exercise versions, with answers taken from the chapters'
solution cells. Most keep only the set-up cell and the exercises section (a learner may delete cells, and it
keeps this file fast); one is the whole chapter.
"""
from __future__ import annotations

import copy
import csv
import json
import re
import tomllib

import nbformat
import pytest

from attnbook import grade as grading
from attnbook.exercises import REGISTRY
from attnbook.grade import Unreadable, grade_submission, gradebook_columns, main, read_submission, recognise_chapter

from conftest import BOOK, ROOT, chapter_path

CELL_TIMEOUT = 15  # s: the infinite loop costs this much; generous for the set-up cell on a busy machine


def ids(chapter: int) -> list[str]:
    return sorted((e for e in REGISTRY if e.split(".")[0] == str(chapter)), key=lambda e: int(e.split(".")[1]))


def points(exercise_id: str) -> str:
    return f"{REGISTRY[exercise_id].points:g}"


def exercise_version(chapter: int) -> nbformat.NotebookNode:
    return nbformat.read(BOOK / "exercises" / chapter_path(chapter).name, as_version=4)


def answer_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    """{exercise id: its answer cell}: the solution-tagged cell under each "### Exercise N.k" heading."""
    found, current = {}, None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("### Exercise "):
            current = cell.source.split()[2]
        elif current and "solution" in cell.metadata.get("tags", []):
            found[current] = cell
    return found


def solved(chapter: int, only: tuple[str, ...] | None = None, trim: bool = True) -> nbformat.NotebookNode:
    """Chapter `chapter`'s exercise version with the reference answers filled in (all, or `only` these);
    trimmed to the title, the set-up cell and the exercises section."""
    nb = exercise_version(chapter)
    reference = [c.source for c in nbformat.read(chapter_path(chapter), as_version=4).cells
                 if "solution" in c.metadata.get("tags", [])]
    for (ex_id, cell), source in zip(answer_cells(nb).items(), reference, strict=True):
        if only is None or ex_id in only:
            cell.source = source
    if trim:
        setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        start = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## Exercises"))
        nb.cells = [nb.cells[0], nb.cells[setup], *nb.cells[start:]]
    return nb


def forge_records(nb: nbformat.NotebookNode) -> None:
    """Give every check cell an output claiming full points, as a learner editing the JSON would."""
    for cell in nb.cells:
        found = re.search(r'^check\("(\d+\.\d+)"', cell.source, re.M)
        if cell.cell_type == "code" and found:
            ex_id = found.group(1)
            most = REGISTRY[ex_id].points
            forged = {"exercise_id": ex_id, "status": "passed", "points": most, "max_points": most,
                      "message": "all tests passed", "passed": True}
            cell.outputs = [nbformat.v4.new_output("display_data", {"text/plain": f"✓ Exercise {ex_id} passed"},
                                                   metadata={"attnbook": {"check": forged}})]


def crafted(tmp_path) -> dict[str, tuple]:
    """Write every crafted submission; return {file name: (expected points per exercise, expected problem)}."""
    subs: dict[str, tuple] = {}
    ch1, ch2 = ids(1), ids(2)
    full1, full2 = {e: points(e) for e in ch1}, {e: points(e) for e in ch2}

    def write(name, nb, expected, problem=None):
        nbformat.write(nb, tmp_path / name)
        subs[name] = (expected, problem)

    nb = solved(1)  # the slowest two first, so that --jobs 2 overlaps them with the rest
    answer_cells(nb)[ch1[1]].source = "while True:\n    pass\n\n" + answer_cells(nb)[ch1[1]].source
    write("infinite_loop.ipynb", nb, {**full1, ch1[1]: "0"}, f"ran longer than {CELL_TIMEOUT} s and was interrupted")

    nb = solved(1)
    answer_cells(nb)[ch1[2]].source = "import os\nos._exit(1)\n" + answer_cells(nb)[ch1[2]].source
    write("kernel_death.ipynb", nb, {**full1, ch1[2]: "0"}, "the kernel died in cell")

    write("full_chapter_1.ipynb", solved(1, trim=False), full1)
    write("chapter_2.ipynb", solved(2), full2)
    write("partial.ipynb", solved(1, only=(ch1[0], ch1[2])), {**full1, ch1[1]: "0"})

    (tmp_path / "not_a_notebook.ipynb").write_text('{"name": "my homework", "answers": [1, 2, 3]}')
    subs["not_a_notebook.ipynb"] = ({}, "not a notebook")
    (tmp_path / "invalid_json.ipynb").write_text('{"cells": [ this is not JSON')
    subs["invalid_json.ipynb"] = ({}, "invalid JSON")

    nb = solved(1)
    for cell in nb.cells:
        cell.source = cell.source.replace("# 1.", "# 42.").replace("Exercise 1.", "Exercise 42.") \
            .replace('check("1.', 'check("42.')
    write("unknown_chapter.ipynb", nb, {}, "chapter 42 is not one the grader knows")

    nb = solved(1)
    nb.cells.insert(3, nbformat.v4.new_code_cell('for _ in range(30):\n    print("x" * 1_000_000)'))
    write("output_flood.ipynb", nb, full1, "MB of output")

    nb = solved(1)
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and ("check(" in c.source or "summary(" in c.source))]
    write("check_cells_deleted.ipynb", nb, full1)

    nb = solved(1, only=())  # nothing solved, but check always "passes" and the records say so
    fake = ("from attnbook.exercises.results import CheckResult\n\n"
            "def check(exercise_id, answer):\n"
            "    return CheckResult(exercise_id, 'passed', 1.0, 1.0, 'all tests passed')")
    nb.cells.insert(3, nbformat.v4.new_code_cell(fake))
    for cell in nb.cells:
        if cell.source.startswith("from attnbook.exercises import check"):
            cell.source = cell.source.replace("from attnbook.exercises import check, summary\n\n", "")
    forge_records(nb)
    nbformat.write(nb, tmp_path / "forged.ipynb")
    subs["forged.ipynb"] = ({e: "0" for e in ch1}, None)

    nb = solved(1, only=())  # nothing solved, but the package's check and checkers are replaced
    patch = ("import dataclasses\nimport attnbook.exercises as exercises\nimport attnbook.exercises.results as core\n"
             "import attnbook.exercises.registry as registry\n\n"
             "def check(exercise_id, answer):\n"
             "    return core.CheckResult(exercise_id, 'passed', 1.0, 1.0, 'all tests passed')\n\n"
             "exercises.check = core.check = check\n"
             "for key, ex in list(registry.REGISTRY.items()):\n"
             "    registry.REGISTRY[key] = dataclasses.replace(ex, checker=lambda answer: 'all tests passed')")
    nb.cells.insert(3, nbformat.v4.new_code_cell(patch))
    nb.cells.append(nbformat.v4.new_code_cell("import os, sys\nsys.stdout = open(os.devnull, 'w')  # hide the rest"))
    write("check_patched.ipynb", nb, {e: "0" for e in ch1})
    return subs


def test_every_crafted_submission_graded_together(tmp_path, capsys):
    subs = crafted(tmp_path)
    gradebook = tmp_path / "gradebook.csv"
    paths = [str(tmp_path / name) for name in subs]
    status = main([*paths, "--jobs", "2", "--csv", str(gradebook), "--timeout", str(CELL_TIMEOUT),
                   "--notebook-timeout", "240"])
    out = capsys.readouterr().out
    assert status == 1  # some submissions have problems
    with gradebook.open(encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames
        rows = {row["submission"]: row for row in reader}
    assert columns == ["submission", *ids(1), *ids(2), "total", "max_total", "problems"]
    assert list(rows) == paths  # one row per submission, the path as given, in order
    failures = []
    for name, (expected, problem) in subs.items():
        row = rows[str(tmp_path / name)]
        got = {e: row[e] for e in [*ids(1), *ids(2)] if row[e] != ""}
        if got != expected:
            failures.append(f"{name}: points {got}, expected {expected} ({row['problems']})")
        if float(row["total"]) != sum(float(v) for v in expected.values()):
            failures.append(f"{name}: total {row['total']}")
        chapter = {e.split(".")[0] for e in expected}
        most = sum(REGISTRY[e].points for e in REGISTRY if e.split(".")[0] in chapter)
        if float(row["max_total"]) != most:
            failures.append(f"{name}: max_total {row['max_total']}, expected {most:g}")
        if problem is None and row["problems"]:
            failures.append(f"{name}: unexpected problems {row['problems']!r}")
        if problem is not None and problem not in row["problems"]:
            failures.append(f"{name}: problems {row['problems']!r} do not mention {problem!r}")
    assert not failures, "\n".join(failures)
    for name in subs:  # the readable summary names every submission
        assert str(tmp_path / name) in out
    assert "s per submission" in out


def test_recorded_mode_reads_the_records_and_so_believes_forgeries(tmp_path, capsys):
    nb = solved(1, only=())
    forge_records(nb)
    path = tmp_path / "forged.ipynb"
    nbformat.write(nb, path)
    assert main([str(path), "--recorded"]) == 0
    most = sum(REGISTRY[e].points for e in ids(1))
    assert f"chapter 1, {most:g}/{most:g} points" in capsys.readouterr().out
    graded = grade_submission(path, recorded=True)
    assert {e: g.status for e, g in graded.exercises.items()} == {e: "passed" for e in ids(1)}


def test_recorded_mode_reads_the_committed_chapters_and_unrun_exercise_versions():
    most = sum(REGISTRY[e].points for e in ids(2))
    chapter = grade_submission(chapter_path(2), recorded=True)  # committed with its outputs: every check passed
    assert chapter.chapter == "2" and chapter.total == chapter.max_total == most and not chapter.problems
    unrun = grade_submission(BOOK / "exercises" / chapter_path(2).name, recorded=True)
    assert unrun.chapter == "2" and unrun.total == 0 and unrun.max_total == most and not unrun.problems


def test_a_kernel_that_ignores_the_interrupt_is_replaced(tmp_path, monkeypatch):
    """A cell that ignores SIGINT: the probe times out too, so the notebook runs again without that cell."""
    monkeypatch.setattr(grading, "PROBE_TIMEOUT_S", 1.0)
    monkeypatch.setattr(grading, "IOPUB_TIMEOUT_S", 1.0)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 1. Queries, keys and values"),
                nbformat.v4.new_code_cell("def project_qkv(X, W_q, W_k, W_v):\n    return X @ W_q, X @ W_k, X @ W_v"),
                nbformat.v4.new_code_cell("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                          "time.sleep(600)"),
                nbformat.v4.new_code_cell("def stable_softmax(x, dim=-1):\n    return x")]
    path = tmp_path / "stuck.ipynb"
    nbformat.write(nb, path)
    graded = grade_submission(path, timeout_s=2, notebook_timeout_s=90)
    assert graded.chapter == "1"
    assert {e: g.points for e, g in graded.exercises.items()} == {"1.1": 1.0, "1.2": 0.0, "1.3": 0.0}
    assert graded.exercises["1.2"].status == "not attempted" and "soft_lookup" in graded.exercises["1.2"].message
    assert graded.exercises["1.3"].status == "failed"  # defined after the stuck cell, checked, and wrong
    assert len(graded.problems) == 1 and "ignored the interrupt" in graded.problems[0], graded.problems


def test_notebook_limit_kills_the_kernel_and_grades_nothing_more(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 2. Scaled dot-product attention"),
                nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, path)
    graded = grade_submission(path, timeout_s=300, notebook_timeout_s=4)
    assert graded.seconds < 30
    assert graded.total == 0 and set(graded.exercises) == set(ids(2))
    assert any("ran past its limit of 4 s" in p for p in graded.problems), graded.problems


@pytest.mark.parametrize("path", sorted((BOOK / "exercises").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.name)
def test_every_exercise_version_is_recognised_as_its_chapter(path):
    nb = read_submission(path)
    chapter = str(int(path.name[:2]))
    assert recognise_chapter(nb) == chapter
    broken = copy.deepcopy(nb)  # without its title, and with every check cell deleted: still recognised
    broken.cells = [c for c in broken.cells[1:] if "check(" not in c.source]
    assert recognise_chapter(broken) == chapter


def test_unreadable_files_say_why(tmp_path):
    cases = {"binary.ipynb": (b"\x89PNG\r\n\x1a\n\xff", "not UTF-8"), "list.ipynb": (b"[1, 2]", "a list without"),
             "bad_cells.ipynb": (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                             "cells": "none"}).encode(), "not a valid notebook")}
    for name, (data, why) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(Unreadable, match=why):
            read_submission(tmp_path / name)
    missing = grade_submission(tmp_path / "missing.ipynb")
    assert missing.exercises == {} and "cannot read the file" in missing.problems[0]


def test_gradebook_columns_are_in_numeric_order():
    rows = [grading.SubmissionGrade("a", "10", {e: grading.ExerciseGrade(e, "passed", 1, 1, "") for e in ("10.1", "2.3")}),
            grading.SubmissionGrade("b", "9", {"9.3": grading.ExerciseGrade("9.3", "failed", 0, 1, "")})]
    assert gradebook_columns(rows) == ["submission", "2.3", "9.3", "10.1", "total", "max_total", "problems"]
    assert [r["9.3"] for r in grading.gradebook_rows(rows)] == ["", "0"]


@pytest.mark.parametrize("bad", [["--jobs", "0"], ["--timeout", "-1"], ["--notebook-timeout", "soon"]])
def test_command_line_rejects_bad_limits(bad, capsys):
    with pytest.raises(SystemExit):
        main(["x.ipynb", *bad])
    assert bad[0] in capsys.readouterr().err


def test_console_script_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["attnbook-grade"] == "attnbook.grade:main"
