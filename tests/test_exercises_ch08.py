"""Chapter 8 checkers: what the mutant catalogue (tests/mutants/ch08.py, the home of every "this answer passes" or
"this answer fails with a message containing X" fact) cannot say. Here: the book's reference solutions (read from
the notebook) pass; not-attempted answers are told so; what the messages of some catalogue answers contain besides
their hint (the input and the section to re-read, the exact rule) and what no message may contain (the solution's own
lines, another mistake's hint, a module path); a right answer's message; a check imports no transformers; then, per
exercise, the statistics of 8.1 and 8.3 (false-failure rates and power), the drawn cases over many seed offsets, and
an answer whose verdict depends on an earlier check.
"""
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import mutants
from attnbook.exercises import check, compare
from attnbook.exercises.ch08._shared import FALSE_FAILURE, window
from mutants.ch08 import keeping_draws, mm
from seed_offsets import catalogue_over_offsets, offsets


def _entry(exercise_id, name):
    """The answer of the catalogue entry of `exercise_id` whose name starts with `name`, as a new kernel holds it."""
    return mutants.fresh(next(m.answer for m in mutants.load("8") if m.exercise_id == exercise_id
                              and m.name.startswith(name)))


@pytest.mark.parametrize("exercise_id, name", [("8.1", "mlm_mask"), ("8.2", "causal_lm_loss"), ("8.3", "sample_next"),
                                               ("8.4", "top_p_filter")])
def test_reference_passes_and_a_stub_is_not_attempted(exercise_id, name, solutions):
    result = check(exercise_id, solutions(8)[name])
    assert result.passed, result.message

    def stub(*args, **kwargs):
        raise NotImplementedError

    assert check(exercise_id, stub).status == "not attempted"


@pytest.mark.parametrize("exercise_id, answer", [
    ("8.2", "lambda lg, ids: F.cross_entropy(lg[:, :-1].transpose(1, 2), ids[:, 1:])"), ("8.4", "m.tp()")])
def test_a_check_does_not_import_transformers(exercise_id, answer):
    code = ("import sys, torch, torch.nn.functional as F\nfrom attnbook.exercises import check\n"
            "import mutants.ch08 as m\nassert 'transformers' not in sys.modules\n"
            f"r = check({exercise_id!r}, {answer})\nassert r.passed, r.message\nprint('transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(["tests", os.environ.get("PYTHONPATH", "")])})
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr


# Lines of the solutions that no message may show
_RECIPES = ("r < 0.8", "0.8 <= r", "< 0.15", "torch.randint(vocab_size, ids.shape", "logits[:, :-1]", "ids[:, 1:]",
            "torch.multinomial(probs, 1", "logits.argmax(dim=-1)", "torch.cat(", "probs.cumsum(dim=-1) - probs",
            "above >= p", "remove.scatter(-1, order, remove)")

# (exercise, the start of a catalogue entry's name, what its message contains besides the entry's hint, what it must
# not contain besides the solution's lines)
MESSAGES = [
    ("8.1", "every chosen position becomes [MASK]", ("ids of shape (200, 500)", "Masked language modelling (BERT)"),
     ()),
    ("8.1", "exactly round(15%) of the positions", ("independently",), ()),
    ("8.1", "exactly round(15%) of each row, by kthvalue", (), ()),
    ("8.1", "the same columns chosen in every row", (), ("labelled only",)),
    ("8.1", "one choice per row", (), ("labelled only",)),
    ("8.1", "two independent draws, the random ids written over [MASK]", (), ("0.1 / 0.2",)),
    ("8.1", "two independent draws, [MASK] written over the random ids", (), ("your cases overlap",)),
    ("8.1", "draws a fresh uniform number for the random case", (), ("your cases overlap",)),
    ("8.2", "no shift", ("logits of shape (2, 5, 7)", "Next-token prediction (GPT)"), ()),
    ("8.2", "the naive -log(exp / sum exp)", (), ()),
    ("8.2", "torch.log(torch.softmax(...))", (), ()),
    ("8.2", "returns a 1-element tensor", ("0-dimensional",), ()),
    ("8.2", "sum divided by batch * seq", ("batch * (seq - 1)",), ()),
    ("8.2", "only the last prediction", ("only the last prediction",), ()),
    ("8.2", "flattens the logits time-major", ("flattened in different orders",), ()),
    ("8.2", "label_smoothing=0.1", (), ()),
    ("8.2", ".view(-1, V) on the sliced logits and .view(-1)", (".reshape()",), ()),
    ("8.2", "transformers' ForCausalLMLoss", (), ("<module>",)),  # the function the learner called, not its module
    ("8.3", "multiplies the logits by the temperature", ("temperature=0.5", "Temperature and top-k"), ()),
    ("8.3", "keeps top_k + 1 logits", ("top_k + 1",), ()),
    ("8.3", "sets the logits outside the top k to 0", (), ()),
    ("8.3", "pushes the logits outside the top k down to the row minimum", (), ()),
    ("8.3", "temperature 0 replaced by 1e-6", ("at temperature 0",), ()),
    ("8.3", "reseeds the global generator from generator.initial_seed()", ("drew no random number",), ()),
    ("8.3", "does not handle top_k=None", ("top_k=None means no cut",), ()),
    ("8.3", "fills the logits outside the top k with -1e4", ("float('-inf')",), ()),
    ("8.3", "fills the logits outside the top k with -100", ("float('-inf')",), ()),
    ("8.3", "the k-th largest logit of the whole batch", ("each row keeps its own top_k largest logits",),
     ("over the vocabulary (dim=-1)",)),
    ("8.4", "the well-known snippet: remove where the cumulative sum > p",
     ("float32 logits of shape (3, 2), p = 1", "Nucleus (top-p) sampling"), ("-inf, -inf",)),
    ("8.4", "sorts in ascending order", ("logits of shape (6,), a single row, p = 0.8",), ()),
    ("8.4", "exp / sum without subtracting the maximum", ("large logits, about 1,000",), ("NaN at index",)),
    ("8.4", "returns float32 for float64 logits", ("return the dtype of logits (here float64)",), ()),
]


@pytest.mark.parametrize("exercise_id, name, has, has_not", MESSAGES, ids=[f"{e} {n[:40]}" for e, n, *_ in MESSAGES])
def test_messages(exercise_id, name, has, has_not):
    message = check(exercise_id, _entry(exercise_id, name)).message
    assert [piece for piece in has if piece not in message] == [], message
    assert [piece for piece in has_not + _RECIPES if piece in message] == [], message


@pytest.mark.parametrize("exercise_id, count", [("8.1", 3), ("8.2", 20), ("8.3", 2), ("8.4", 3)])
def test_catalogue_verdicts_hold_for_many_offsets(exercise_id, count, monkeypatch):
    # Every catalogue entry keeps its verdict for many values of the run's offset (each check also runs its second
    # pass, at offset + compare.FRESH_STEP); the tuned properties of the drawn cases are tested below, per exercise.
    catalogue_over_offsets(exercise_id, offsets(count), monkeypatch)


# The statistics of 8.1 and 8.3 (issue 23), computed exactly from the windows the checks test

FALSE_FAIL_LIMIT = 1e-6  # a right answer may fail one check (both of its passes together) at most this often
POWER_LIMIT = 1 - 1e-6  # each wrong class of the catalogue must fail at least this often


def _windows_of_a_right_answer(monkeypatch, exercise_id, answer):
    """The (count, n, p) of every window the check tests while a right answer passes it (both passes)."""
    from attnbook.exercises.ch08 import _shared, masking, sampling

    seen = []

    def recording(count, n, p):
        seen.append((count, n, p))
        return _shared.within_window(count, n, p)

    monkeypatch.setattr(masking, "within_window", recording)
    monkeypatch.setattr(sampling, "within_window", recording)
    result = check(exercise_id, answer)
    assert result.passed, result.message
    return seen


def _outside(n, p):
    """The exact probability that a binomial(n, p) count falls outside the check's window for (n, p)."""
    binom = pytest.importorskip("scipy.stats").binom
    low, high = window(n, p)
    return float(binom.cdf(math.ceil(low) - 1, n, p) + binom.sf(math.floor(high), n, p))


def _inside(n, p_true, p_window):
    """The probability that a binomial(n, p_true) count falls inside the check's window for (n, p_window)."""
    binom = pytest.importorskip("scipy.stats").binom
    low, high = window(n, p_window)
    return float(binom.cdf(math.floor(high), n, p_true) - binom.cdf(math.ceil(low) - 1, n, p_true))


# ---------------------------------------------------------------------------------------------------------------
# 8.1 BERT's masking
# ---------------------------------------------------------------------------------------------------------------

def test_8_1_a_right_answer_is_told_about_the_small_vocabulary():
    result = check("8.1", mm())
    assert result.passed and "vocabulary" in result.message, result.message


def test_8_1_kept_draws_are_not_blamed_on_the_global_generator():
    answer = keeping_draws()
    result = check("8.1", answer)  # the uniform numbers of its first call: the first and third call differ
    assert not result.passed and "even the first and the third" in result.message, result.message
    assert "from one call to the next" in result.message and "global random generator was" not in result.message
    result = check("8.1", answer)  # all of them kept now: the same positions for every seed
    assert not result.passed and "chose exactly the same positions" in result.message, result.message
    assert "from one call to the next" in result.message, result.message


def test_8_1_false_failure_rate(monkeypatch, solutions):
    windows = _windows_of_a_right_answer(monkeypatch, "8.1", solutions(8)["mlm_mask"])
    assert 80 <= len(windows) <= 2 * 48, len(windows)  # 48 windows per pass at most (the module's docstring)
    exact = sum(_outside(n, p) for _count, n, p in windows)
    # besides the windows: every position chosen in the (2, 8) case (0.15^16 per pass), and exactly round(15%) of
    # the positions in four calls (the product of four binomial modes, below 7e-10 per pass)
    binom = pytest.importorskip("scipy.stats").binom
    exact_15 = math.prod(binom.pmf(round(0.15 * n), n, 0.15) for n in (64 * 30, 100_000, 100_000, 300_000))
    total = exact + 2 * (0.15 ** 16 + exact_15)
    assert total <= FALSE_FAIL_LIMIT and len(windows) * FALSE_FAILURE <= FALSE_FAIL_LIMIT, (total, len(windows))


def test_8_1_power_against_each_wrong_class():
    from attnbook.exercises.ch08.masking import POSITIONS_SHAPE

    rows, _positions = POSITIONS_SHAPE
    # A position or an id that is never chosen counts 0, below every window of the positions case: power 1.
    assert window(rows, 0.15)[0] > 0 and window(1_500, 0.15)[0] > 0  # each id fills about 2,000 positions
    # A rate off by 0.01 (0.14 or 0.16; further off is caught more often): it must pass the rate windows of the
    # (200, 500) and (600, 500) calls, in both passes.
    for p in (0.14, 0.16):
        passes = (_inside(100_000, p, 0.15) * _inside(300_000, p, 0.15)) ** 2
        assert 1 - passes >= POWER_LIMIT, (p, passes)
    # A split off by 0.03 in the share of [MASK] (0.77 or 0.83; the random and unchanged shares take the rest): the
    # [MASK] windows of the (200, 500) call (about 15,000 chosen, vocabulary 1,000) and of the (600, 500) call
    # (about 45,000 chosen, vocabulary 5, where 1/5 of the random ids is [MASK] too).
    for share in (0.77, 0.83):
        random_ = (1 - share) / 2
        passes = (_inside(15_000, share + random_ / 1000, 0.8 + 0.1 / 1000)
                  * _inside(45_000, share + random_ / 5, 0.8 + 0.1 / 5)) ** 2
        assert 1 - passes >= POWER_LIMIT, (share, passes)
    # ... and in the share left unchanged (0.07 or 0.13, [MASK] keeping 0.8)
    for keep in (0.07, 0.13):
        random_ = 0.2 - keep
        passes = (_inside(15_000, keep + random_ / 1000, 0.1 + 0.1 / 1000)
                  * _inside(45_000, keep + random_ / 5, 0.1 + 0.1 / 5)) ** 2
        assert 1 - passes >= POWER_LIMIT, (keep, passes)


# ---------------------------------------------------------------------------------------------------------------
# 8.2 the causal language-modelling loss
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("offset", offsets(200))
def test_8_2_every_mistake_separates_on_every_draw(offset, monkeypatch):
    # On every draw each known mistake gives a loss far (1e-4, ten times the tolerance) from the right one, and
    # the large case's logits lie beyond float32's exp range.
    from attnbook.exercises.ch08.lm_loss import CASES, _lm_mistakes, lm_case

    monkeypatch.setattr(compare, "SEED_OFFSET", offset)
    *cases, large = [lm_case(*case[1:]) for case in CASES]
    assert large[0].abs().max() > 100
    for lg, ids in cases:
        lg, V = lg.detach(), lg.size(-1)
        right = F.cross_entropy(lg[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
        for hint, value in _lm_mistakes(lg, ids).items():
            if value is None:  # not told on this input: it gives the right loss here, or cannot be made (T = 2)
                continue
            assert not abs(float(value) - float(right)) <= 1e-4, (ids.shape, hint)  # NaN (no target left) differs too


# ---------------------------------------------------------------------------------------------------------------
# 8.3 temperature and top-k sampling
# ---------------------------------------------------------------------------------------------------------------

def test_8_3_false_failure_rate(monkeypatch, solutions):
    from attnbook.exercises.ch08.sampling import CONFIGS, TIE_SHAPE

    windows = _windows_of_a_right_answer(monkeypatch, "8.3", solutions(8)["sample_next"])
    # every count of 2 rows x 6 tokens, and the share of the second of two equal largest logits, in both passes
    assert len(windows) == 2 * (len(CONFIGS) * 12 + 1), len(windows)
    ties = [(n, p) for _count, n, p in windows if (n, p) == (TIE_SHAPE[0], 0.5)]
    assert len(ties) == 2, windows
    tie_rate = sum(_outside(n, p) for n, p in ties)  # binomial(200, 1/2) outside [48, 152]: 2.7e-14 per pass
    assert tie_rate < 1e-13, tie_rate
    # The rest cannot fail a right answer (test_8_3_tuned_cases_hold_for_every_offset): at the tiny temperature the
    # tokens other than the pair, and in the case far below 0 those outside the top k, have probability exactly 0.
    total = sum(_outside(n, p) for _count, n, p in windows)
    assert total <= FALSE_FAIL_LIMIT and len(windows) * FALSE_FAILURE <= FALSE_FAIL_LIMIT, total


def test_8_3_power_against_each_wrong_class():
    # Every mistake whose frequencies the check tests (the others fail deterministically: argmax, a shape, an
    # error such as exp overflowing): it passes a setting only if every count fits its window, so at most with
    # the probability that its least fitting count does; it must pass every setting in both passes.
    from attnbook.exercises.ch08.sampling import _N, CONFIGS, ROWS, TIE_SHAPE, _probs, _sample_mistakes

    def fit(probs, right):  # the probability that the least fitting count of `probs` fits right's window
        return min(_inside(_N, float(q), float(p)) for q, p in zip(probs.flatten(), right.flatten()))

    passes: dict[str, float] = {}
    for which, temperature, top_k in CONFIGS:
        rows = ROWS[which].float().double()
        right = _probs(rows, temperature, top_k)
        for hint, probs in _sample_mistakes(rows, temperature, top_k):
            passes[hint] = passes.get(hint, 1.0) * fit(probs, right)
    for hint, p in passes.items():
        assert 1 - p ** 2 >= POWER_LIMIT, (hint, p)
    # An answer greedy at a tiny temperature > 0 draws the first of the two equal largest logits in every row (a
    # count of 0 for the second), one that always takes the second a count of 200: both outside the window, so
    # rejected with certainty.
    low, high = window(TIE_SHAPE[0], 0.5)
    assert 0 < low and high < TIE_SHAPE[0], (low, high)
    # a finite fill at the settings whose kept logits are far below it
    for fill, before in ((-10.0, False), (-10.0, True), (-20.0, False), (0.0, False)):
        p = 1.0
        for which, temperature, top_k in CONFIGS:
            if top_k is not None:
                rows = ROWS[which].float().double()
                wrong = _probs(rows, temperature, top_k, fill=fill, fill_before=before)
                p *= fit(wrong, _probs(rows, temperature, top_k))
        assert 1 - p ** 2 >= POWER_LIMIT, (fill, before, p)


def test_8_3_tuned_cases_hold_for_every_offset():
    # For 200 offsets and their second passes: (tie) in every row two equal largest logits and the others so far
    # below that, at the tiny temperature, a right softmax gives exactly 1/2, 1/2 and 0 in float32 and float64;
    # (deep) the logits of a row at least DEEP_GAP apart, in the same order after dividing by the temperature (the
    # top k is the same for any method), logits / temperature below -20,000, so that a fill of -1e4 or -100 leaves
    # the top k exactly 0 probability, and -inf (or -1e9) every sample inside the top k.
    from attnbook.exercises.ch08.sampling import (DEEP_GAP, DEEP_SHAPE, DEEP_TEMPERATURE, DEEP_TOP_K, TIE_MARGIN,
                                                  TIE_SHAPE, TIE_TEMPERATURE, deep_case, tie_case)

    for base in offsets(200):
        for offset in (base, base + compare.FRESH_STEP):
            with compare.seed_offset(offset):
                logits, pairs = tie_case()
                deep = deep_case()
            assert logits.shape == TIE_SHAPE and logits.dtype == torch.float32
            top = logits.gather(-1, pairs)
            assert bool((pairs[:, 0] < pairs[:, 1]).all()) and torch.equal(top[:, 0], top[:, 1])
            others = logits.scatter(-1, pairs, float("-inf"))
            assert bool((others.amax(-1) <= top[:, 0] - 0.99 * TIE_MARGIN).all())
            for dtype in (torch.float32, torch.float64):
                probs = torch.softmax(logits.to(dtype) / TIE_TEMPERATURE, dim=-1)
                assert bool((probs.gather(-1, pairs) == 0.5).all()) and float(probs.scatter(-1, pairs, 0.0).sum()) == 0
            assert deep.shape == DEEP_SHAPE and deep.dtype == torch.float32
            ordered = deep.sort(dim=-1, descending=True).values
            assert float((ordered[:, :-1] - ordered[:, 1:]).min()) >= 0.99 * DEEP_GAP
            scaled = deep / DEEP_TEMPERATURE  # float32, as an answer gets it
            assert torch.equal(scaled.argsort(-1), deep.argsort(-1)) and float(scaled.max()) < -2e4
            s_ordered = scaled.sort(dim=-1, descending=True).values
            assert bool((s_ordered[:, :-1] > s_ordered[:, 1:]).all())  # no ties after the division either
            kept = torch.zeros_like(deep, dtype=torch.bool).scatter(-1, deep.topk(DEEP_TOP_K, -1).indices, True)
            for fill in (-1e4, -100.0):
                probs = torch.softmax(torch.where(kept, scaled, torch.full_like(scaled, fill)), dim=-1)
                assert float(probs[kept].sum()) == 0
            for fill in (float("-inf"), -1e9):
                probs = torch.softmax(torch.where(kept, scaled, torch.full_like(scaled, fill)), dim=-1)
                assert float(probs[~kept].sum()) == 0


# ---------------------------------------------------------------------------------------------------------------
# 8.4 nucleus filtering: the drawn cases keep their properties for every offset, every known mistake shows on them,
# and what an answer that no mistake explains is told
# ---------------------------------------------------------------------------------------------------------------

def _nucleus_size(row, p):
    """How many tokens the nucleus of `row` holds, counted in float64 with exact fractions' order: the fewest of
    the most probable whose probabilities add up to p or more."""
    probs = sorted(torch.softmax(row.double(), -1).tolist(), reverse=True)
    total = 0.0
    for k, q in enumerate(probs, start=1):
        total += q
        if total >= p:
            return k
    return len(probs)


@pytest.mark.parametrize("offset", offsets(200))
def test_8_4_cases_hold_for_every_offset(offset, monkeypatch, solutions):
    # Each case, on every draw: the shape and dtype the task text names; the logits of a row distinct; no cumulative
    # probability within 1e-3 of p, so that float32 and float64, sorted either way, give the same nucleus; the peaked
    # rows' top token above p; at p = 1 the two-token rows hold probabilities exactly 1 and 0 in float32 and float64,
    # the others no probability below 1e-3; the large rows beyond exp's range; the mixed case's rows 800 apart. The
    # chapter's solution keeps exactly the nucleus counted here, in a loop, and in float32 too.
    from attnbook.exercises.ch08.top_p import CASES, case_logits

    monkeypatch.setattr(compare, "SEED_OFFSET", offset)
    solution = solutions(8)["top_p_filter"]
    for index, (_desc, shape, dtype, p, kind) in enumerate(CASES):
        logits = case_logits(index)
        assert logits.shape == shape and logits.dtype == dtype
        rows = logits.reshape(-1, shape[-1]).double()
        kept = torch.isfinite(solution(logits, p)).reshape(-1, shape[-1])
        kept32 = torch.isfinite(solution(logits.float(), p)).reshape(-1, shape[-1])
        assert torch.equal(kept, kept32), (index, kind)
        for row, keep in zip(rows, kept):
            ordered = row.sort(descending=True).values
            assert float((ordered[:-1] - ordered[1:]).min()) > 0.04, (index, row)
            probs = torch.softmax(row, -1)
            if kind == "all in one":
                for t in (torch.float32, torch.float64):
                    assert sorted(torch.softmax(row.to(t), -1).tolist()) == [0.0, 1.0], row
                assert int(keep.sum()) == 1 and bool(keep[row.argmax()])
                continue
            if kind == "p=1":
                assert float(probs.min()) >= 1e-3 and bool(keep.all())
                continue
            cumulative = probs.sort(descending=True).values.cumsum(-1)
            assert float((cumulative[:-1] - p).abs().min()) >= 1e-3, (index, row)
            assert int(keep.sum()) == _nucleus_size(row, p), (index, row)
            if kind == "peaked":
                assert float(probs.max()) > p
            if kind == "large":
                assert bool(torch.isinf(row.exp()).any())
        if kind == "mixed":  # one row so far below the other that exp(row - the tensor's maximum) is 0 everywhere
            tops = rows.max(dim=-1).values
            assert float(tops.max() - tops.min()) > 800 and float(tops.min()) < 100, rows


@pytest.mark.parametrize("offset", offsets(50))
def test_8_4_every_mistake_shows_on_some_case(offset, monkeypatch):
    # For every hint of the checker's mistake table, some case (on every draw) where what the mistake returns
    # differs from the right answer: a mistake the cases cannot show could never be named, nor fail.
    from attnbook.exercises.ch08.top_p import CASES, case_logits, _mistakes, _same, reference

    monkeypatch.setattr(compare, "SEED_OFFSET", offset)
    shown: dict[str, bool] = {}
    for index, (_desc, _shape, _dtype, p, _kind) in enumerate(CASES):
        logits = case_logits(index)
        right = reference(logits, p)
        for hint, forms in _mistakes(logits, p).items():
            differs = forms is not None and any(not _same(form, right) for form in forms)
            shown[hint] = shown.get(hint, False) or differs
    assert [hint for hint, ok in shown.items() if not ok] == []


def test_8_4_an_unexplained_mistake_is_told_the_first_wrong_token_and_the_rule():
    # An answer that keeps one token too many in only the first row of the first batch case: no known mistake
    # explains it, so the message names the token and how much probability lies above it, not the whole row.
    def top_p_filter(logits, p):
        probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
        remove = (probs.cumsum(dim=-1) - probs) >= p
        out = logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))
        if logits.shape == (2, 6):
            out[0] = logits[0]  # the whole first row kept
        return out

    result = check("8.4", top_p_filter)
    assert not result.passed and "on logits of shape (2, 6), p = 0.9" in result.message, result.message
    assert "lies outside the nucleus" in result.message and "at least p = 0.9" in result.message, result.message
    assert "Hint: in each row the nucleus is the smallest set" in result.message, result.message


def test_8_4_the_task_names_what_it_forbids_and_how_ties_are_treated():
    import nbformat
    from conftest import chapter_path

    nb = nbformat.read(chapter_path(8), as_version=4)
    task = next(c.source for c in nb.cells if ":label: ex-8-4" in c.source)
    for piece in ("`attnbook.models.top_p_filter`", "`TopPLogitsWarper`", "Ties:", "`>= p`", "`p = 1`",
                  "do not change `logits` in place"):
        assert piece in task, piece
