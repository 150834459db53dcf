"""The mutant catalogue's shape (tests/mutants/): every exercise has at least 6 wrong and 3 right answers, and
every entry names a known exercise.

Each entry's verdict is tested once, in tests/test_remote.py (checked in the notebook's way and graded over the
link, under run seeds 0, 1 and 2 in turn: same verdict, and the one the catalogue promises), and scored by
tools/mutant_report.py (with the notebook's inputs, in English and in Chinese), which `make test` runs too."""
from __future__ import annotations

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
