"""Issue 23's fresh values, tested: values of `compare.SEED_OFFSET` to run drawn cases under, and the catalogue's
verdicts under each (every check also runs its second pass, at offset + compare.FRESH_STEP)."""
from __future__ import annotations

OFFSETS = [o * 7919 + 13 for o in range(200)]  # 200 values of compare.SEED_OFFSET, for the tuned properties of cases


def offsets(count: int) -> list[int]:
    """`count` values of compare.SEED_OFFSET, spread over its range (0 first: the notebook's own)."""
    return [(i * 104_729_003) % 2 ** 31 for i in range(count)]


def catalogue_over_offsets(exercise_id: str, values, monkeypatch, generated: bool = True) -> None:
    """Every catalogue entry of `exercise_id` (the generated ones too, unless `generated` is False) gets its verdict
    (a right answer passes, a wrong one fails with its promised message) for every offset in `values`."""
    import mutants
    from attnbook.exercises import compare

    entries = [m for m in mutants.load(exercise_id.split(".")[0]) if m.exercise_id == exercise_id
               and (generated or "(generated)" not in m.name)]
    wrong_verdicts = []
    for offset in values:
        monkeypatch.setattr(compare, "SEED_OFFSET", offset)
        for m in entries:
            ok, result = mutants.run(m)
            if not ok:
                wrong_verdicts.append((offset, m.name, result.message[:300]))
    assert not wrong_verdicts, wrong_verdicts
