"""The mutant catalogue (tests/mutants/): every wrong answer fails with its promised message, every right answer
passes, and every exercise has at least 6 wrong and 3 right answers. tools/mutant_report.py prints the score."""
from __future__ import annotations

import pytest

import mutants
from attnbook.exercises import REGISTRY

CATALOGUE = mutants.load()


@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda m: f"{m.exercise_id}-{'right' if m.right else 'wrong'}-{m.name}")
def test_mutant(mutant):
    ok, result = mutants.run(mutant)
    if mutant.right:
        assert ok, f"a right answer failed: {result}"
    else:
        assert ok, f"a wrong answer was not rejected as promised (hint {mutant.hint!r}): {result}"


@pytest.mark.parametrize("exercise_id", sorted(REGISTRY))
def test_every_exercise_has_enough_mutants(exercise_id):
    entries = [m for m in CATALOGUE if m.exercise_id == exercise_id]
    assert sum(not m.right for m in entries) >= 6, f"{exercise_id}: fewer than 6 wrong answers in tests/mutants"
    assert sum(m.right for m in entries) >= 3, f"{exercise_id}: fewer than 3 right answers in tests/mutants"


def test_catalogue_names_only_known_exercises():
    assert {m.exercise_id for m in CATALOGUE} <= set(REGISTRY)
