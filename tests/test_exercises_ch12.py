"""Chapter 12 checkers, what the mutant catalogue (tests/mutants/ch12.py, the home of "this answer -> this verdict
and hint") cannot say: the book's reference solutions pass, stubs are not attempted, a message has several
properties at once (the input it names, the section to re-read, what it must not show), and the inputs drawn from
the run's seed keep every mistake of the checkers' tables apart. The answers are the catalogue's own (its learner
templates, or an entry looked up by name)."""
import itertools
import math
import operator

import pytest
import torch

import mutants
from attnbook.exercises import check, compare
from attnbook.exercises.ch12 import merge, perplexity, schedule
from attnbook.text import merge_pair
from attnbook.training import warmup_cosine_lr
from seed_offsets import OFFSETS


def catalogued(exercise: str, name: str):
    """The answer of the mutant catalogue whose description starts with `name` (one home for each answer)."""
    return next(m.answer for m in mutants.load("12") if m.exercise_id == exercise and m.name.startswith(name))


@pytest.mark.parametrize("exercise, name", [("12.1", "lr_at"), ("12.2", "perplexity"), ("12.3", "merge_pair")])
def test_reference_passes_and_a_stub_is_not_attempted(solutions, exercise, name):
    def stub(*args, **kwargs):
        raise NotImplementedError

    result = check(exercise, solutions(12)[name])
    assert result.passed, result.message
    assert check(exercise, stub).status == "not attempted"


@pytest.mark.parametrize("exercise, answer, phrases", [
    ("12.1", catalogued("12.1", "warm-up max_lr * step"), ["off by one", '(Re-read "The learning-rate schedule".)']),
    ("12.2", catalogued("12.2", "2 ** loss"), ["in bits", '(Re-read "Perplexity".)']),
    # ids of two digits are the case that shows a merge done on text
    ("12.3", catalogued("12.3", "joins the ids into text"),
     ["two digits", "not text", '(Re-read "Byte-pair encoding from scratch".)']),
], ids=["12.1", "12.2", "12.3"])
def test_a_hinted_mistake_names_its_case_and_the_section_to_re_read(exercise, answer, phrases):
    message = check(exercise, answer).message
    assert all(phrase in message for phrase in phrases), message


def test_12_3_an_occurrence_left_unmerged_is_named_by_its_positions_not_by_the_loop():
    chunks = catalogued("12.3", "cuts the list into aligned chunks of two")
    result = check("12.3", chunks)
    ids, pair, new, on = next(c for c in merge.cases() if chunks(*c[:3]) != merge_pair(*c[:3]))
    greedy, i = [], 0  # where the left-to-right merges start
    while i < len(ids) - 1:
        greedy, i = (greedy + [i], i + 2) if (ids[i], ids[i + 1]) == tuple(pair) else (greedy, i + 1)
    first = next(i for i in greedy if i % 2)  # the chunks of two merge only at even positions
    assert on in result.message, result.message
    assert f"ids[{first}] and ids[{first + 1}] are the pair" in result.message, result.message
    assert "leaves them unmerged" in result.message and "move on by" not in result.message, result.message


def test_12_3_a_left_out_occurrence_is_the_first_difference_of_any_reading(offset):
    # The rule hint reads a wrong list as ids with some non-overlapping occurrences merged, and names the first
    # position where that reading and the left-to-right one differ as an occurrence left unmerged: for every such
    # reading of every case, of every offset, the first difference is one the left-to-right merge makes.
    for o in OFFSETS[:50]:
        offset(o)
        for ids, pair, new, _on in merge.cases():
            if len(ids) > 12:
                continue
            starts = [i for i in range(len(ids) - 1) if (ids[i], ids[i + 1]) == tuple(pair)]
            right, i = set(), 0  # where the left-to-right merges start
            while i < len(ids) - 1:
                right, i = (right | {i}, i + 2) if i in starts else (right, i + 1)
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


def _numeric(mean_loss):
    return mean_loss.detach().double().flatten().tolist() if isinstance(mean_loss, torch.Tensor) else [mean_loss]


def _same(a, b):
    return math.isfinite(a) and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


DRAWS = {  # exercise: (its checker module, the inputs of its cases, its right result, equality of results)
    "12.1": (schedule, lambda: [(s, M, W, T, 0.0 if m is None else m) for s, M, W, T, m in schedule.cases()],
             warmup_cosine_lr, _same),
    "12.2": (perplexity, lambda: [(x,) for x, _desc in perplexity._cases()],
             lambda x: math.exp(sum(_numeric(x)) / len(_numeric(x))), _same),
    "12.3": (merge, lambda: [case[:3] for case in merge.cases()], merge_pair, operator.eq),
}


def _runs(answer, inputs):
    """The answer's results on the inputs, in order, up to the first that raises (where the check stops too). A
    table's mistake returns NaN where the answer it stands for raises (math.log(0.0))."""
    out = []
    for args in inputs:
        try:
            got = answer(*args)
        except (ArithmeticError, ValueError, IndexError):
            break
        if isinstance(got, float) and math.isnan(got):
            break
        out.append((got, args))
    return out


@pytest.mark.parametrize("exercise", DRAWS)
def test_every_draw_tells_every_known_mistake_apart(exercise, offset):
    module, inputs_of, right, same = DRAWS[exercise]
    for o in OFFSETS:
        offset(o)
        inputs = inputs_of()
        if exercise == "12.1":
            assert len(inputs) == sum(schedule.SCHEDULE_STEPS) == 37
        if exercise == "12.3":
            assert [len(ids) for ids, *_rest in inputs][-3:] == [0, 1, merge.LONG]
            assert all(new >= 256 and all(0 <= i < 256 for i in ids) for ids, _pair, new in inputs)
            assert any(merge_pair(*args) == list(args[0]) for args in inputs if args[0])  # nothing to merge
        for hint, mistake in module.MISTAKES.items():
            runs = _runs(mistake, inputs)
            assert any(not same(got, right(*args)) for got, args in runs), (o, hint)
            named = next(h for h, f in module.MISTAKES.items() if all(same(got, f(*args)) for got, args in runs))
            assert named == hint, (o, hint)


def test_12_the_second_pass_draws_new_values():
    """Every input of 12.1, 12.2 and 12.3 but the edge cases changes when the offset moves (compare.fresh_values)."""
    first = (schedule.cases(), [d for _x, d in perplexity._cases()], [c[:3] for c in merge.cases()])
    with compare.fresh_values():
        second = (schedule.cases(), [d for _x, d in perplexity._cases()], [c[:3] for c in merge.cases()])
    assert [c[1:] for c in first[0]] != [c[1:] for c in second[0]]
    assert sum(a != b for a, b in zip(first[1], second[1])) == len(first[1]) - 1  # all but mean_loss=0.0
    assert sum(a != b for a, b in zip(first[2], second[2])) == len(first[2])
