"""attnbook.grade: reading check results from returned notebooks, and re-running them to trust them."""
import csv

import nbformat
import pytest

from attnbook.exercises import REGISTRY
from attnbook.grade import grade, main

from conftest import BOOK, chapter_path

CHAPTER_1_IDS = sorted(e for e in REGISTRY if e.startswith("1."))


def test_solution_version_records_every_check_as_passed():
    graded = grade(chapter_path(1))
    assert [g.exercise_id for g in graded] == CHAPTER_1_IDS
    assert all(g.status == "passed" and g.points == g.max_points > 0 for g in graded)


def test_unrun_exercise_version_has_nothing_to_grade():
    assert grade(BOOK / "exercises" / chapter_path(1).name) == []


def _returned_notebook(tmp_path):
    """Chapter 1's exercise version as a learner might return it: 1.3 solved, 1.1 'passed' by editing JSON."""
    nb = nbformat.read(BOOK / "exercises" / chapter_path(1).name, as_version=4)
    solved = nbformat.read(chapter_path(1), as_version=4)
    reference = {c.source.split("(")[0]: c.source for c in solved.cells if "solution" in c.metadata.get("tags", [])}
    for cell in nb.cells:
        if "solution" in cell.metadata.get("tags", []) and cell.source.startswith("def stable_softmax"):
            cell.source = reference["def stable_softmax"]
        if cell.cell_type == "code" and 'check("1.1"' in cell.source:
            forged = {"exercise_id": "1.1", "status": "passed", "points": 1.0, "max_points": 1.0,
                      "message": "forged", "passed": True}
            cell.outputs = [nbformat.v4.new_output("display_data", {"text/plain": "✓"},
                                                   metadata={"attnbook": {"check": forged}})]
    path = tmp_path / "returned.ipynb"
    nbformat.write(nb, path)
    return path


def test_execute_grades_what_the_code_does_not_what_the_file_claims(tmp_path):
    path = _returned_notebook(tmp_path)
    claimed = {g.exercise_id: g.status for g in grade(path)}
    assert claimed == {"1.1": "passed"}  # reading the file trusts whatever it says
    rerun = {g.exercise_id: g.status for g in grade(path, run=True)}
    assert rerun == {"1.1": "not attempted", "1.2": "not attempted", "1.3": "passed"}


def test_command_line_prints_totals_and_writes_csv(tmp_path, capsys):
    out_csv = tmp_path / "grades.csv"
    assert main([str(chapter_path(1)), "--csv", str(out_csv)]) == 0
    assert f"{len(CHAPTER_1_IDS)}/{len(CHAPTER_1_IDS)} points" in capsys.readouterr().out
    rows = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    assert [r["exercise_id"] for r in rows] == CHAPTER_1_IDS and {r["status"] for r in rows} == {"passed"}


def test_command_line_rejects_missing_files(tmp_path):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nope.ipynb")])
