"""Chapter 12 checkers, what the mutant catalogue (tests/mutants/ch12.py, the home of "this answer passes" and "this
answer fails with a message containing X") cannot say: the book's reference solutions pass, stubs are not attempted,
the catalogue's hinted mistakes name the section to re-read too, a message has several properties at once (the input
it names, what it must not show), and the inputs drawn from the run's seed keep every mistake of the checkers' tables
apart. The answers are the catalogue's own (its learner templates, or an entry looked up by name).
"""
import math

import pytest
import torch

import mutants
from attnbook.exercises import check
from mutants.ch12 import merge

# ---------------------------------------------------------------------------------------------------------
# The reference solutions, the stubs, and the section every hinted mistake names
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise, name", [("12.1", "lr_at"), ("12.2", "perplexity"), ("12.3", "merge_pair")])
def test_12_reference_passes(solutions, exercise, name):
    result = check(exercise, solutions(12)[name])
    assert result.passed, result.message


@pytest.mark.parametrize("exercise", ["12.1", "12.2", "12.3"])
def test_12_not_attempted(exercise):
    def stub(*args, **kwargs):
        raise NotImplementedError

    assert check(exercise, stub).status == "not attempted"


SECTIONS = {"12.1": "The learning-rate schedule", "12.2": "Perplexity", "12.3": "Byte-pair encoding from scratch"}


@pytest.mark.parametrize("exercise, hint", [
    ("12.1", "off by one"), ("12.1", "warmup_steps + 1"), ("12.1", "not divided by total_steps"),
    ("12.1", "half a period is π"), ("12.1", "cos(2π t)"), ("12.1", "ends at min_lr, not at 0"),
    ("12.1", "comes back up"),
    ("12.2", "in bits"), ("12.2", "base-10"), ("12.2", "summed the batch losses"),
    ("12.2", "mean of the batches' perplexities"), ("12.2", "1 / perplexity"), ("12.2", "the loss itself"),
    ("12.3", "left to right"), ("12.3", "skip both ids"), ("12.3", "last id is lost"), ("12.3", "in place"),
    ("12.3", "expected a list"),
])
def test_12_hinted_mistakes_name_the_section_to_re_read(exercise, hint):
    """The catalogue's answers with this hint (it checks the hint) also get the section of the chapter to re-read."""
    answers = [m.answer for m in mutants.load("12") if m.exercise_id == exercise and m.hint == hint]
    assert answers, hint
    for answer in answers:
        message = check(exercise, answer).message
        assert hint in message and f'Re-read "{SECTIONS[exercise]}"' in message, message


# ---------------------------------------------------------------------------------------------------------
# 12.3 one BPE merge: what a message names, and what it must not say
# ---------------------------------------------------------------------------------------------------------


def _catalogued(name: str):
    """The 12.3 answer of the mutant catalogue whose description starts with `name` (one home for each answer)."""
    return next(m.answer for m in mutants.load("12") if m.exercise_id == "12.3" and m.name.startswith(name))


def test_12_3_a_merge_on_text_is_caught_by_ids_of_two_digits():
    result = check("12.3", _catalogued("joins the ids into text"))
    assert not result.passed and "two digits" in result.message and "not text" in result.message, result.message


def test_12_3_a_padded_text_replace_is_named():
    # A learner trial: ' a b ' replaced in the ids joined with spaces misses an occurrence right after a merge, and
    # got the solution's loop in words as its hint.
    result = check("12.3", _catalogued("str.replace on the ids joined with a space on each side"))
    assert not result.passed and "uses up the space after it" in result.message, result.message
    assert "move on by" not in result.message, result.message


_merge_by_chunks = _catalogued("cuts the list into aligned chunks of two")
_merge_skipping_one = merge(step_after=3)
merge_pair_right = merge()


def test_12_3_an_unknown_mistake_gets_the_rule_it_breaks_not_the_loop():
    from attnbook.exercises.ch12.merge import cases

    # ids lost: the list is not ids with pairs replaced
    result = check("12.3", _merge_skipping_one)
    assert "putting the pair back in place of every new_id in your list does not give ids again" in result.message
    assert "move on by" not in result.message, result.message
    # an occurrence left unmerged: named by its positions in the case shown
    result = check("12.3", _merge_by_chunks)
    for ids, pair, new, on in cases():
        if _merge_by_chunks(ids, pair, new) != merge_pair_right(ids, pair, new):
            break
    greedy, i = [], 0  # where the left-to-right merges start
    while i < len(ids) - 1:
        greedy, i = (greedy + [i], i + 2) if (ids[i], ids[i + 1]) == tuple(pair) else (greedy, i + 1)
    first = next(i for i in greedy if i % 2)  # the chunks of two merge only at even positions
    assert on in result.message, result.message
    assert f"ids[{first}] and ids[{first + 1}] are the pair" in result.message, result.message
    assert "leaves them unmerged" in result.message and "move on by" not in result.message, result.message


def test_12_3_a_left_out_occurrence_is_the_first_difference_of_any_reading(monkeypatch):
    # The rule hint reads a wrong list as ids with some non-overlapping occurrences merged, and names the first
    # position where that reading and the left-to-right one differ as an occurrence left unmerged: for every such
    # reading of every case, of every offset, the first difference is one the left-to-right merge makes.
    import itertools

    from attnbook.exercises import compare
    from attnbook.exercises.ch12.merge import cases

    for offset in OFFSETS[:50]:
        monkeypatch.setattr(compare, "SEED_OFFSET", offset)
        for ids, pair, _new, _on in cases():
            if len(ids) > 12:
                continue
            starts = [i for i in range(len(ids) - 1) if (ids[i], ids[i + 1]) == tuple(pair)]
            right, i = set(), 0
            while i < len(ids) - 1:
                if i in starts:
                    right.add(i)
                    i += 2
                else:
                    i += 1
            for k in range(len(starts) + 1):
                for chosen in itertools.combinations(starts, k):
                    if any(b - a < 2 for a, b in zip(chosen, chosen[1:])) or set(chosen) == right:
                        continue  # overlapping: not a reading of ids; or the right one
                    assert min(set(chosen) ^ right) in right, (ids, pair, chosen)


# ---------------------------------------------------------------------------------------------------------
# Cases drawn from the run's seed: the properties they are tuned for hold in every draw. For 200 offsets of
# compare.SEED_OFFSET (the second pass of a check and the grader move it), every known mistake of the check's
# table is rejected, and named by its own hint: no mistake listed before it gives the same results on every case
# the check would run. The checkers' case generators and mistake tables are the parameters under test here.
# ---------------------------------------------------------------------------------------------------------

OFFSETS = [k * 7_919 + 1 for k in range(200)]


def _runs(answer, inputs, stop=(ArithmeticError, ValueError, IndexError)):
    """The answer's results on the inputs, in order, up to the first that raises (where the check stops too). A
    table's mistake returns NaN where the answer it stands for raises (math.log(0.0))."""
    out = []
    for args in inputs:
        try:
            got = answer(*args)
        except stop:
            break
        if isinstance(got, float) and math.isnan(got):
            break
        out.append((got, args))
    return out


def _named(runs, table, same) -> str | None:
    """The hint a check would give: the first mistake of the table that gives every result of the runs."""
    return next((hint for hint, f in table.items() if all(same(got, f(*args)) for got, args in runs)), None)


def test_12_1_every_draw_tells_every_known_mistake_apart(monkeypatch):
    from attnbook.exercises import compare
    from attnbook.exercises.ch12 import schedule
    from attnbook.training import warmup_cosine_lr

    same = lambda a, b: math.isfinite(a) and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)  # noqa: E731
    for offset in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", offset)
        cases = schedule.cases()
        assert len(cases) == sum(schedule.SCHEDULE_STEPS) == 37
        inputs = [(s, M, W, T, 0.0 if m is None else m) for s, M, W, T, m in cases]
        for hint, mistake in schedule.MISTAKES.items():
            runs = _runs(mistake, inputs)
            assert any(not same(got, warmup_cosine_lr(*args)) for got, args in runs), (offset, hint)
            assert _named(runs, schedule.MISTAKES, same) == hint, (offset, hint)


def _numeric(mean_loss):
    return mean_loss.detach().double().flatten().tolist() if isinstance(mean_loss, torch.Tensor) else [mean_loss]


def test_12_2_every_draw_tells_every_known_mistake_apart(monkeypatch):
    from attnbook.exercises import compare
    from attnbook.exercises.ch12 import perplexity

    same = lambda a, b: math.isfinite(a) and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)  # noqa: E731
    right = lambda x: math.exp(sum(_numeric(x)) / len(_numeric(x)))  # noqa: E731
    for offset in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", offset)
        inputs = [(x,) for x, _desc in perplexity._cases()]
        for hint, mistake in perplexity.MISTAKES.items():
            runs = _runs(mistake, inputs)
            assert any(not same(got, right(*args)) for got, args in runs), (offset, hint)
            assert _named(runs, perplexity.MISTAKES, same) == hint, (offset, hint)


def test_12_3_every_draw_tells_every_known_mistake_apart(monkeypatch):
    from attnbook.exercises import compare
    from attnbook.exercises.ch12 import merge
    from attnbook.text import merge_pair

    for offset in OFFSETS:
        monkeypatch.setattr(compare, "SEED_OFFSET", offset)
        inputs = [(ids, pair, new) for ids, pair, new, _desc in merge.cases()]
        assert [len(ids) for ids, *_rest in inputs][-3:] == [0, 1, merge.LONG]
        assert all(new >= 256 and all(0 <= i < 256 for i in ids) for ids, _pair, new in inputs)
        assert any(merge_pair(*args) == list(args[0]) for args in inputs if args[0])  # nothing to merge
        for hint, mistake in merge.MISTAKES.items():
            runs = _runs(mistake, inputs)
            assert any(got != merge_pair(*args) for got, args in runs), (offset, hint)
            assert _named(runs, merge.MISTAKES, lambda a, b: a == b) == hint, (offset, hint)


def test_12_the_second_pass_draws_new_values():
    """Every input of 12.1, 12.2 and 12.3 but the edge cases changes when the offset moves (compare.fresh_values)."""
    from attnbook.exercises import compare
    from attnbook.exercises.ch12 import merge, perplexity, schedule

    first = (schedule.cases(), [d for _x, d in perplexity._cases()], [c[:3] for c in merge.cases()])
    with compare.fresh_values():
        second = (schedule.cases(), [d for _x, d in perplexity._cases()], [c[:3] for c in merge.cases()])
    assert [c[1:] for c in first[0]] != [c[1:] for c in second[0]]
    assert sum(a != b for a, b in zip(first[1], second[1])) == len(first[1]) - 1  # all but mean_loss=0.0
    assert sum(a != b for a, b in zip(first[2], second[2])) == len(first[2])
