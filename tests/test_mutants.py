"""The mutant catalogue's shape (tests/mutants/): every exercise has at least 6 wrong and 3 right answers, and
every entry names a known exercise.

Each entry's verdict is tested once, in tests/test_remote.py (graded over the link under run seeds 0, 1 and 2 in
turn: the verdict the catalogue promises; the same verdict in Chinese; at seed 0 the notebook's message too), which
records it for tools/mutant_report.py --recorded, the score `make test` prints. The report finds each entry by
(exercise, name, right or wrong), so those are unique."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import mutants
from attnbook.exercises import REGISTRY

CATALOGUE = mutants.load()


@pytest.mark.parametrize("exercise_id", sorted(REGISTRY))
def test_every_exercise_has_enough_mutants(exercise_id):
    entries = [m for m in CATALOGUE if m.exercise_id == exercise_id]
    assert sum(not m.right for m in entries) >= 6, f"{exercise_id}: fewer than 6 wrong answers in tests/mutants"
    assert sum(m.right for m in entries) >= 3, f"{exercise_id}: fewer than 3 right answers in tests/mutants"


def test_catalogue_names_only_known_exercises():
    assert {m.exercise_id for m in CATALOGUE} <= set(REGISTRY)


def test_entries_are_unique_by_exercise_name_and_kind():
    keys = [(m.exercise_id, m.name, m.right) for m in CATALOGUE]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)[:5]


def test_the_report_from_records_needs_every_entry_once(tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from mutant_report import recorded

    entries = CATALOGUE[:3]
    lines = [{"exercise_id": m.exercise_id, "name": m.name, "right": m.right, "ok": True, "zh_problem": None,
              "message": "m"} for m in entries]
    (tmp_path / "gw0.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = recorded(tmp_path, entries)
    assert sum(len(v) for v in rows.values()) == 3
    assert recorded(tmp_path, CATALOGUE[:4]) is None  # one entry not recorded
    assert "not recorded" in capsys.readouterr().out
    assert recorded(tmp_path, entries[:2]) is None  # one record of no entry
    (tmp_path / "gw1.jsonl").write_text(json.dumps(lines[0]) + "\n")
    assert recorded(tmp_path, entries) is None  # recorded twice


def test_the_report_refuses_a_command_line_it_does_not_know(capsys):
    """--help prints the usage and an unknown or incomplete flag stops at once (exit 2), instead of scoring the
    whole catalogue for minutes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from mutant_report import main

    assert main(["--help"]) == 0 and "--exercise N.k" in capsys.readouterr().out
    assert main(["--chapter"]) == 2 and "--chapter needs a value" in capsys.readouterr().err
    assert main(["--exercise", "4.2", "--verbose"]) == 2 and "'--verbose'" in capsys.readouterr().err
