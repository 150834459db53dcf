"""The exercise system itself: CheckResult, check, summary, and the promise that a check never raises."""
import json
import time

import pytest
import torch

from attnbook.exercises import REGISTRY, CheckResult, check, reset_session, summary
from attnbook.exercises._core import Wrong, call, expect_close, expect_tensor, expect_tuple


def raises_value_error(*args, **kwargs):
    raise ValueError("boom")


def returns_none(*args, **kwargs):
    return None


def returns_list(*args, **kwargs):
    return [1.0, 2.0]


def returns_nan(*args, **kwargs):
    return torch.full((3, 3), float("nan"))


def returns_wrong_shape(*args, **kwargs):
    return torch.zeros(7, 1, 5)


def returns_string(*args, **kwargs):
    return "an answer"


def mutates_every_tensor(*args, **kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            a.add_(1.0)
    return None


def stub(*args, **kwargs):
    raise NotImplementedError("replace this line with your code")


BAD_ANSWERS = [
    raises_value_error, returns_none, returns_list, returns_nan, returns_wrong_shape, returns_string,
    mutates_every_tensor, 42, "a string", [[1, 2], [3]], {"a": 1}, float("nan"), torch.tensor(float("nan")),
    torch.zeros(0), object(),
]


@pytest.mark.parametrize("exercise_id", sorted(REGISTRY))
@pytest.mark.parametrize("answer", BAD_ANSWERS, ids=lambda a: getattr(a, "__name__", type(a).__name__))
def test_bad_answers_become_feedback_never_exceptions(exercise_id, answer):
    result = check(exercise_id, answer)
    assert isinstance(result, CheckResult)
    assert not result.passed
    assert result.points == 0
    assert result.message
    assert "could not check your answer" not in result.message, result.message  # specific, not generic


@pytest.mark.parametrize("exercise_id", sorted(REGISTRY))
def test_stub_and_none_are_not_attempted(exercise_id):
    stubs = [None, stub] if REGISTRY[exercise_id].answer_kind == "function" else [None]
    for answer in stubs:
        result = check(exercise_id, answer)
        assert result.status == "not attempted", (exercise_id, answer, result.message)
        assert "not attempted yet" in str(result)


def test_unknown_exercise_is_feedback():
    result = check("99.9", lambda x: x)
    assert not result.passed and "no exercise '99.9'" in result.message


def test_check_result_renders_one_line_and_carries_json():
    result = CheckResult("1.3", "failed", 0.0, 1.0, "the result has the wrong values")
    text = str(result)
    assert "\n" not in text and text.startswith("✗ Exercise 1.3 failed [0/1]")
    data, metadata = result._repr_mimebundle_()
    assert data["text/plain"] == text and "Exercise 1.3" in data["text/html"]
    record = json.loads(json.dumps(metadata["attnbook"]["check"]))
    assert record == {"exercise_id": "1.3", "status": "failed", "points": 0.0, "max_points": 1.0,
                      "message": "the result has the wrong values", "passed": False}


def test_html_escapes_messages():
    result = CheckResult("1.3", "failed", 0.0, 1.0, "got <script>")
    assert "<script>" not in result._repr_html_()


def test_summary_tracks_the_latest_result_per_exercise():
    reset_session()
    chapter_1 = sorted(e for e in REGISTRY if e.startswith("1."))
    before = summary(1)
    assert before.points == 0 and all(r is None for _, r in before.rows)
    assert "not checked yet" in str(before)
    check(chapter_1[0], None)
    after = summary("1")
    assert after.to_dict()["exercises"][0]["status"] == "not attempted"
    assert after.max_points == sum(REGISTRY[e].points for e in chapter_1)
    data, metadata = after._repr_mimebundle_()
    assert metadata["attnbook"]["summary"]["chapter"] == "1"


def test_summary_of_unknown_chapter_is_a_clear_error():
    with pytest.raises(ValueError, match="chapter='42' has no exercises"):
        summary(42)


def test_call_reports_exceptions_mutation_and_non_callables():
    with pytest.raises(Wrong, match="raised ValueError on x of shape"):
        call(raises_value_error, torch.zeros(2), on="x of shape (2,)")
    with pytest.raises(Wrong, match="changed its input"):
        call(mutates_every_tensor, torch.zeros(2))
    with pytest.raises(Wrong, match="expected a function, got an int"):
        call(3)


def test_call_stops_slow_code():
    def slow(x):
        time.sleep(5)

    start = time.perf_counter()
    with pytest.raises(Wrong, match="took longer than 0.2 s"):
        call(slow, 1, time_limit_s=0.2)
    assert time.perf_counter() - start < 2


def test_expect_tensor_and_expect_close_messages():
    with pytest.raises(Wrong, match="is None"):
        expect_tensor(None)
    with pytest.raises(Wrong, match=r"has shape \(2,\), expected \(3,\)"):
        expect_tensor(torch.zeros(2), shape=(3,))
    with pytest.raises(Wrong, match="contains NaN"):
        expect_tensor(torch.tensor([0.0, float("nan")]))
    assert expect_tensor([[1, 2]], allow_sequences=True).shape == (1, 2)
    expected = torch.tensor([1.0, 2.0])
    with pytest.raises(Wrong) as info:
        expect_close(torch.tensor([2.0, 4.0]), expected, mistakes={"you doubled it": 2 * expected})
    assert info.value.hint == "you doubled it"
    with pytest.raises(Wrong, match=r"at index \[1\] expected 2, got 5"):
        expect_close(torch.tensor([1.0, 5.0]), expected)
    expect_close(torch.tensor([1.0, 2.0 + 1e-7]), expected)


def test_expect_tuple_says_what_came_back_instead():
    names = ("output", "weights")
    assert expect_tuple([1, 2], names, "attention", "x") == (1, 2)
    for got, message in [(torch.zeros(2, 3), r"a single tensor of shape \(2, 3\)"), (None, "returned None"),
                         ("ab", "returned a str"), ((1, 2, 3), "returned 3 values on x, expected 2")]:
        with pytest.raises(Wrong, match=message) as info:
            expect_tuple(got, names, "attention", "x")
        assert info.value.hint
