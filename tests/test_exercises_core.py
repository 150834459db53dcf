"""The exercise system itself: CheckResult, check, summary, and the promise that a check never raises."""
import json
import time

import pytest
import torch

from attnbook.exercises import REGISTRY, CheckResult, check, reset_session, summary
from attnbook.exercises.compare import expect_close, expect_tensor, expect_tuple
from attnbook.exercises.guard import call
from attnbook.exercises.registry import Wrong


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
    with pytest.raises(Wrong, match="raised ValueError: boom on x of shape"):
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
    assert expect_tuple((1, 2), names, "attention", "x") == (1, 2)
    for got, message in [(torch.zeros(2, 3), r"a single tensor of shape \(2, 3\)"), (None, "returned None"),
                         ([1, 2], "returned a list on x, expected a tuple"),
                         ("ab", "returned a str"), ((1, 2, 3), "returned 3 values on x, expected 2")]:
        with pytest.raises(Wrong, match=message) as info:
            expect_tuple(got, names, "attention", "x")
        assert info.value.hint


# ---------------------------------------------------------------------------------------------------------
# check() called in every way a learner might: it answers, it never raises
# ---------------------------------------------------------------------------------------------------------


def test_check_without_an_answer_or_with_swapped_arguments_is_feedback():
    def project_qkv(X, W_q, W_k, W_v):
        return X @ W_q, X @ W_k, X @ W_v

    no_answer = check("1.1")
    assert not no_answer.passed and "second argument" in no_answer.message
    nothing = check()
    assert not nothing.passed and 'check("2.3", your_answer)' in nothing.message
    swapped = check(project_qkv, "1.1")
    assert not swapped.passed and "swapped" in swapped.message and swapped.exercise_id == "1.1"
    extra = check("1.1", project_qkv, 3)
    assert not extra.passed and "two arguments" in extra.message
    assert check(1.1, project_qkv).passed  # a number for the id is fine


def test_summary_says_when_an_exercise_passed_earlier():
    reset_session()

    def right(X, W_q, W_k, W_v):
        return X @ W_q, X @ W_k, X @ W_v

    def wrong(X, W_q, W_k, W_v):
        return X @ W_q, X @ W_q, X @ W_v

    assert check("1.1", right).passed
    assert not check("1.1", wrong).passed
    s = summary(1)
    assert "failed (passed earlier; the latest attempt counts)" in str(s)
    assert s.to_dict()["exercises"][0]["passed_earlier"] is True
    assert s.points == 0  # the latest attempt counts
    reset_session()
    assert "passed earlier" not in str(summary(1))


def test_failed_checks_point_back_to_a_section_of_the_chapter():
    for ex in REGISTRY.values():
        assert ex.section, f"exercise {ex.exercise_id} names no section to re-read"
    result = check("1.1", lambda X, W_q, W_k, W_v: (X, X, X))
    assert f'(Re-read "{REGISTRY["1.1"].section}".)' in result.message


# ---------------------------------------------------------------------------------------------------------
# call(): forbidden functions, seeded generators, hints for common exceptions
# ---------------------------------------------------------------------------------------------------------


def test_forbid_catches_every_way_of_reaching_the_function_and_restores_it():
    import torch.nn.functional as F

    import attnbook
    from attnbook import softmax as imported_softmax

    ways = {
        "torch.softmax": lambda x: torch.softmax(x, dim=-1),
        "method": lambda x: x.softmax(-1),
        "functional": lambda x: F.softmax(x, dim=-1),
        "module": lambda x: torch.nn.Softmax(dim=-1)(x),
        "package": lambda x: attnbook.softmax(x, dim=-1),
        "imported name": lambda x: imported_softmax(x, dim=-1),
    }
    forbid = ["torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "attnbook.attention.softmax"]
    x = torch.randn(2, 3)
    for name, fn in ways.items():
        with pytest.raises(Wrong, match="the task asks you to write this without") as info:
            call(fn, x, forbid=forbid)
        assert info.value.hint, name
    # Everything is back afterwards, for the checker's own reference and for the learner's notebook.
    assert torch.allclose(torch.softmax(x, dim=-1), x.softmax(-1))
    assert torch.allclose(F.softmax(x, dim=-1), attnbook.softmax(x, dim=-1))
    assert imported_softmax is attnbook.attention.softmax
    assert "softmax" not in vars(torch.Tensor)


def test_forbid_cannot_be_swallowed_by_the_learners_try_except():
    def sneaky(x):
        try:
            return torch.softmax(x, dim=-1)
        except Exception:
            return x

    with pytest.raises(Wrong, match="without torch.softmax"):
        call(sneaky, torch.randn(3), forbid=["torch.softmax"])


def test_call_seeds_the_generators_and_restores_them():
    import random

    import numpy as np

    def draws(_):
        return torch.rand(3), np.random.rand(), random.random()

    torch.manual_seed(123)
    outside_before = torch.rand(1)
    torch.manual_seed(123)
    first = call(draws, 0)
    outside_after = torch.rand(1)
    assert torch.equal(outside_before, outside_after), "the learner's own random stream is left as it was"
    second = call(draws, 0)
    assert torch.equal(first[0], second[0]) and first[1:] == second[1:]
    other = call(draws, 0, seed=1)
    assert not torch.equal(first[0], other[0])


@pytest.mark.parametrize("raise_it, expected", [
    (lambda: __import__("math").exp(1000), "torch.exp"),
    (lambda: torch.randn(3, 4).softmax(dim=2), "dim=-1 is always the last dimension"),
    (lambda: torch.randn(3, 4)[torch.ones(4, dtype=torch.bool)], "boolean indexing"),
    (lambda: torch.arange(4)[None, :] < torch.tensor([1, 2, 3]), "x[:, None]"),
    (lambda: torch.randn(2, 3, 4) @ torch.randn(2, 3, 4).T, "k.transpose(-2, -1)"),
    (lambda: torch.randn(3, 4) @ torch.randn(3, 4), "transpose"),
    (lambda: torch.randn(3, 4).masked_fill(torch.ones(3, 4, dtype=torch.long), 0), "boolean mask"),
    (lambda: torch.randn(3, 4).max(dim=-1) - 1, ".amax"),
    (lambda: torch.randn(2, 3, 4).transpose(1, 2).view(2, 12), ".contiguous()"),
])
def test_common_exceptions_get_a_general_hint(raise_it, expected):
    with pytest.raises(Wrong) as info:
        call(lambda: raise_it())
    assert info.value.hint and expected in info.value.hint, (info.value.message, info.value.hint)


def test_an_exercise_specific_explanation_wins_over_the_general_one():
    with pytest.raises(Wrong) as info:
        call(lambda: torch.randn(3, 4) @ torch.randn(3, 4), explain=lambda message: "specific")
    assert info.value.hint == "specific"


# ---------------------------------------------------------------------------------------------------------
# Value answers: which entries are wrong, never the expected numbers
# ---------------------------------------------------------------------------------------------------------


def test_expect_value_names_wrong_entries_without_the_expected_numbers():
    from attnbook.exercises.compare import as_value, expect_value

    expected = torch.tensor([[0.123456, 2.5], [3.25, 4.0]], dtype=torch.float64)
    with pytest.raises(Wrong) as info:
        expect_value(as_value([[0.123456, 2.5], [3.0, 4.0]]), expected, hint="the general hint")
    message = info.value.message
    assert "entry [1, 0] is wrong" in message and info.value.hint == "the general hint"
    assert "3.25" not in message and "0.25" not in message  # neither the value nor the distance
    with pytest.raises(Wrong, match="entries \\[0, 0\\], \\[0, 1\\] and \\[1, 0\\] are wrong"):
        expect_value(as_value([[1.0, 2.0], [3.0, 4.0]]), expected)
    with pytest.raises(Wrong, match="every entry is wrong"):
        expect_value(as_value([[9.0, 9.0], [9.0, 9.0]]), expected)
    with pytest.raises(Wrong, match="integer tensor"):
        expect_value(as_value(torch.tensor([[0, 2], [3, 4]])), expected)
    with pytest.raises(Wrong, match="NaN or inf at entry \\[0, 1\\]") as info:
        expect_value(as_value([[0.1, float("nan")], [3.0, 4.0]]), expected, nan_hint="nan advice")
    assert info.value.hint == "nan advice"
    with pytest.raises(Wrong) as info:
        expect_value(as_value([[0.0, 0.0], [0.0, 0.0]]), expected, mistakes={"all zeros mistake": torch.zeros(2, 2)})
    assert info.value.hint == "all zeros mistake"
    expect_value(as_value(expected.tolist()), expected)  # right: no exception


def test_misuse_is_not_an_attempt_and_names_the_exercise():
    reset_session()

    def right(X, W_q, W_k, W_v):
        return X @ W_q, X @ W_k, X @ W_v

    assert check("1.1", right).passed
    misuse = check("1.1")
    assert 'check("1.1", your_answer)' in misuse.message
    assert "passed earlier" not in str(summary(1)) and summary(1).points == summary(1).max_points - sum(
        REGISTRY[e].points for e in REGISTRY if e.startswith("1.") and e != "1.1")
    assert summary().chapter == "1"  # no argument: the chapter of the latest check
    reset_session()
    with pytest.raises(ValueError, match="summary needs a chapter number"):
        summary()


def test_forbid_catches_a_default_argument_capture_and_patterns():
    from attnbook.attention import softmax as library_softmax

    def captured(x, _sm=library_softmax):
        return _sm(x, dim=-1)

    with pytest.raises(Wrong, match="without attnbook.attention.softmax"):
        call(captured, torch.randn(3), forbid=["attnbook.attention.softmax"])
    assert captured.__defaults__ == (library_softmax,)  # restored

    def uses_a_module_function(x):
        import json

        return json.dumps([1])  # a Python function in another module, matched by pattern

    with pytest.raises(Wrong, match="without json.dumps"):
        call(uses_a_module_function, 1, forbid=["json.*dump*"])
    import sys

    assert sys.getprofile() is None
    assert call(uses_a_module_function, 1, forbid=["json.loads"]) == "[1]"


def test_a_string_answer_is_told_to_drop_the_quotes():
    with pytest.raises(Wrong) as info:
        call("project_qkv")
    assert "without quotes" in info.value.hint


def test_forbid_catches_a_partial_kept_in_the_notebook():
    import functools

    from attnbook.attention import softmax as library_softmax

    namespace = {"_p": functools.partial(library_softmax, dim=-1)}
    exec("def answer(x):\n    return _p(x)\n", namespace)
    with pytest.raises(Wrong, match="without attnbook.attention.softmax"):
        call(namespace["answer"], torch.randn(3), forbid=["attnbook.attention.softmax"])
    assert isinstance(namespace["_p"], functools.partial) and namespace["_p"].func is library_softmax


def test_a_read_only_forbidden_attribute_does_not_break_right_answers():
    # torch._C._VariableFunctions.softmax cannot be replaced; listing it must not make every answer fail.
    out = call(lambda x: x + 1, torch.zeros(2), forbid=["torch._C._VariableFunctions.softmax", "torch.softmax"])
    assert torch.equal(out, torch.ones(2))
    assert torch.softmax(torch.zeros(2), dim=0).sum() == 1  # and what could be patched is back


def test_patches_restore_attributes_dict_entries_and_inherited_methods():
    from attnbook.exercises.forbid import Patches

    namespace = {"a": 1}
    patches = Patches()
    patches.set(namespace, "a", 2)
    patches.set(namespace, "b", 3)
    patches.set(torch.Tensor, "softmax", None)  # inherited from the C base class
    assert namespace == {"a": 2, "b": 3} and torch.Tensor.softmax is None
    patches.restore()
    assert namespace == {"a": 1} and "softmax" not in vars(torch.Tensor)


# ---------------------------------------------------------------------------------------------------------
# The guard: what an answer reaches is recorded and judged after the call
# ---------------------------------------------------------------------------------------------------------


def test_a_bare_except_cannot_hide_a_forbidden_call_from_the_profile_hook():
    # A profile function that raises is removed by Python; the hook only records, so a bare except that
    # swallows one refusal leaves the next forbidden call (reached by a pattern) still seen.
    import json
    import sys

    def swallow_then_call(x):
        try:
            json.dumps([1])
        except:  # noqa: E722 - the learner's bare except
            pass
        return json.dumps([2])

    with pytest.raises(Wrong, match="without json.dumps"):
        call(swallow_then_call, 1, forbid=["json.*dump*"])
    assert sys.getprofile() is None

    def swallow_patched(x):
        try:
            return torch.softmax(x, dim=-1)
        except:  # noqa: E722
            return x.exp() / x.exp().sum()

    with pytest.raises(Wrong, match="without torch.softmax"):
        call(swallow_patched, torch.randn(3), forbid=["torch.softmax"])


def test_asking_about_a_forbidden_function_is_not_calling_it():
    def curious(x):
        assert not hasattr(torch.softmax, "no_such_attribute")
        assert callable(torch.softmax)
        return x * 2

    assert torch.equal(call(curious, torch.ones(2), forbid=["torch.softmax"]), torch.full((2,), 2.0))


def test_low_level_routes_of_a_forbidden_op_are_refused():
    forbid = ["torch.softmax", "torch.Tensor.softmax"]
    routes = {
        "aten op": lambda x: torch.ops.aten._softmax(x, -1, False),
        "aten overload": lambda x: torch.ops.aten.softmax.int(x, -1),
        "method": lambda x: x.softmax(-1),
    }
    for name, fn in routes.items():
        with pytest.raises(Wrong, match="the task asks you to write this without") as info:
            call(fn, torch.randn(2, 3), forbid=forbid)
        assert info.value.hint, name


@pytest.mark.parametrize("held", ["torch.ops.aten.softmax.int", "torch.ops.aten.softmax", "torch._softmax"])
def test_a_forbidden_op_held_in_another_module_is_refused(held):
    """An aten overload, an overload packet or a C function kept under a name of its own in a module of the
    learner's (not the answer's own namespace, which is patched): its calls are seen by the C function it runs.
    A review found the overload held this way passing 3.2 with a ready-made attention."""
    import types

    helpers = types.ModuleType("learners_own_helpers")
    exec(f"import torch\nHELD = {held}\ndef soft(x):\n    return HELD(x, -1, False) if HELD is torch._softmax "
         f"else HELD(x, -1)\n", helpers.__dict__)

    def answer(x, soft=helpers.soft):
        return soft(x)

    assert torch.allclose(answer(torch.randn(2, 3)).sum(-1), torch.ones(2))  # the route works outside the check
    with pytest.raises(Wrong, match="the task asks you to write this without"):
        call(answer, torch.randn(2, 3), forbid=["torch.softmax", "torch.Tensor.softmax"])


def test_a_module_that_subclasses_a_forbidden_class_imports_cleanly_during_a_call():
    """A library imported for the first time inside a check may subclass a forbidden class (transformers'
    optimization module subclasses LRScheduler): the class statement gets the original class, not a crash that
    the learner would be told is their signature's fault. Calling the forbidden class is still refused."""
    def answer(x):
        namespace = {}
        exec("import torch\nclass Later(torch.optim.lr_scheduler.LRScheduler):\n    pass\n", namespace)
        assert issubclass(namespace["Later"], torch.optim.lr_scheduler.LambdaLR.__mro__[1])  # the real LRScheduler
        return x + 1

    assert call(answer, 1, forbid=["torch.optim.lr_scheduler.LRScheduler"]) == 2

    def calls_it(x):
        torch.optim.lr_scheduler.LRScheduler(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1))
        return x

    with pytest.raises(Wrong, match="without torch.optim.lr_scheduler.LRScheduler"):
        call(calls_it, 1, forbid=["torch.optim.lr_scheduler.LRScheduler"])


def test_a_copy_or_second_import_of_a_forbidden_function_is_refused_without_running_it():
    import types

    from attnbook.attention import softmax

    copy = types.FunctionType(softmax.__code__, softmax.__globals__, "mine", softmax.__defaults__)
    again = _second_import("attnbook.attention")
    for answer in (lambda x: copy(x), lambda x: again.softmax(x)):
        with pytest.raises(Wrong, match="without attnbook.attention.softmax"):
            call(answer, torch.randn(3), forbid=["attnbook.attention.softmax"])


def test_switching_off_the_profiler_is_refused():
    import sys

    def stop_watching(x):
        sys.setprofile(None)
        return x

    with pytest.raises(Wrong, match="switched off the profiler"):
        call(stop_watching, 1, forbid=["json.*dump*"])


def test_a_long_c_call_is_reported_as_slow_not_as_switching_off_the_profiler():
    """The time limit's signal lands when a long C call returns, inside the profile hook, and Python drops the
    hook: that is the time limit's doing, not the answer's (a blind trial got the profiler message here)."""
    a = torch.randn(900, 900, dtype=torch.float64)

    def slow(x):
        return float((a @ a @ a @ a).sum()) + x  # long C calls, never interrupted inside

    with pytest.raises(Wrong) as caught:
        call(slow, 1, forbid=["json.*dump*"], time_limit_s=0.02)
    assert "took" in str(caught.value) and "profiler" not in str(caught.value), str(caught.value)


def _second_import(module_name: str):
    """The package module loaded again from its file, as a learner might (a separate module object)."""
    import importlib.util
    import sys

    original = sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name + "_again", original.__file__)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_the_package_solution_is_refused_however_it_is_reached():
    import functools
    import types

    from attnbook.exercises.guard import checking
    from attnbook.masks import padding_mask

    again = _second_import("attnbook.masks")
    copy = types.FunctionType(padding_mask.__code__, padding_mask.__globals__, "mine", padding_mask.__defaults__,
                              padding_mask.__closure__)
    answers = {
        "itself": padding_mask, "partial": functools.partial(padding_mask),
        "lambda": lambda lengths, max_len=None: padding_mask(lengths, max_len),
        "FunctionType copy": copy, "second import": again.padding_mask,
        "wrapper of the second import": lambda lengths, max_len=None: again.padding_mask(lengths, max_len),
    }
    lengths = torch.tensor([1, 3])
    for name, answer in answers.items():
        with checking(["attnbook.masks.padding_mask"]), pytest.raises(Wrong, match="the package's own solution"):
            call(answer, lengths, 4)
    # Outside an exercise's check, or for another exercise, the same call is an ordinary call.
    assert call(copy, lengths, 4).shape == (2, 4)
    with checking(["attnbook.masks.causal_mask"]):
        assert call(copy, lengths, 4).shape == (2, 4)


def test_every_reference_exists_and_each_check_refuses_it_itself():
    from attnbook.exercises.reach import resolve_or_none

    for ex in REGISTRY.values():
        for path in ex.references:
            assert path.startswith("attnbook.") and resolve_or_none(path) is not None, (ex.exercise_id, path)
        if ex.answer_kind == "function" and ex.references and callable(resolve_or_none(ex.references[0])):
            result = check(ex.exercise_id, resolve_or_none(ex.references[0]))
            assert not result.passed and "package's own" in result.message, (ex.exercise_id, result.message)


def test_a_check_stays_fast_with_the_profile_hook():
    from conftest import solution_namespace

    answers = solution_namespace(2)
    check("2.2", answers["attention"])  # warm up
    start = time.perf_counter()
    result = check("2.2", answers["attention"])
    assert result.passed and time.perf_counter() - start < 1.0


def test_answer_names_are_unique_within_each_chapter():
    """The grader looks each answer up by its name in the learner's notebook: two exercises of one chapter with the
    same name would grade one definition twice and the other never."""
    by_chapter: dict[str, list[str]] = {}
    for ex in REGISTRY.values():
        by_chapter.setdefault(ex.chapter, []).append(ex.answer_name)
    for chapter, names in by_chapter.items():
        assert len(names) == len(set(names)), f"chapter {chapter}: answer names repeat: {sorted(names)}"


@pytest.mark.parametrize("answer_name", [None, "", "not a name", 3])
def test_an_exercise_must_name_its_answer(answer_name):
    from attnbook.exercises.registry import exercise

    with pytest.raises(ValueError, match="answer_name must name the answer"):
        exercise("1.98", "nameless", answer_name=answer_name)
    assert "1.98" not in REGISTRY


def test_registering_a_second_answer_of_the_same_name_is_refused():
    from attnbook.exercises.registry import exercise

    with pytest.raises(ValueError, match="1.1 and 1.99 both name their answer 'project_qkv'"):
        exercise("1.99", "a twin", answer_name="project_qkv")(lambda answer: "ok")
    assert "1.99" not in REGISTRY


def test_seeded_draws_what_torch_manual_seed_draws_and_restores_the_state():
    """`seeded` seeds only the CPU generator (torch.manual_seed's accelerator seeding formats the stack on every
    call while CUDA is not initialised); the draws are the same, and the state outside is left as it was."""
    from attnbook.exercises.limits import seeded

    torch.manual_seed(123)
    outside = torch.randn(2)
    torch.manual_seed(123)
    with seeded(7):
        inside = torch.randn(3)
    after = torch.randn(2)
    torch.manual_seed(7)
    assert torch.equal(inside, torch.randn(3)) and torch.equal(after, outside)


def test_resolve_remembers_what_is_not_a_module_and_still_imports_what_is():
    """reach.resolve skips the import of a name that failed before (torch.ops.aten is an object, not a module),
    returns what importlib would, and still imports a module that is not loaded yet."""
    import sys

    import torch

    from attnbook.exercises.reach import resolve, resolve_or_none

    for _ in range(2):  # the second time from what the first remembered
        assert resolve("torch.ops.aten._softmax.default")[2] is torch.ops.aten._softmax.default
        assert resolve_or_none("torch.ops.aten.no_such_op_anywhere") is None
    sys.modules.pop("wave", None)
    owner, name, obj = resolve("wave.open")
    assert owner is sys.modules["wave"] and name == "open" and obj is sys.modules["wave"].open


def test_a_failed_import_under_a_package_is_tried_again():
    """Only imports that can never succeed are remembered: a submodule of a package whose import failed once (a
    learner's cell poisoned sys.modules) is imported when asked again, so its forbidden functions are still found."""
    import sys

    from attnbook.exercises.reach import resolve_or_none

    import email

    sys.modules.pop("email.quoprimime", None)
    vars(email).pop("quoprimime", None)  # not loaded, not reachable as an attribute
    sys.modules["email.quoprimime"] = None  # import now fails
    try:
        assert resolve_or_none("email.quoprimime.quote") is None
    finally:
        del sys.modules["email.quoprimime"]
    assert resolve_or_none("email.quoprimime.quote") is sys.modules["email.quoprimime"].quote


def test_a_package_module_imported_between_calls_has_its_forbidden_attributes_stood_in_for():
    """`call` keeps the list of attnbook modules between calls (filtering all of sys.modules each time was a fifth
    of the catalogue's time); a module added, or put back under the same name, after one call is still seen by
    the next."""
    import sys
    import types

    def kind(name):
        return type(sys.modules[name].held).__name__  # a stand-in while forbidden, else the builtin's type

    call(lambda: None, forbid=["torch.softmax"])  # the list is made
    for attempt in range(2):  # added, then removed and added again (the same size and last key)
        late = types.ModuleType("attnbook._late_for_test")
        late.held = torch.softmax
        sys.modules[late.__name__] = late
        try:
            assert call(kind, late.__name__, forbid=["torch.softmax"]) == "Raiser"
            assert kind(late.__name__) == "builtin_function_or_method"  # restored after the call
        finally:
            del sys.modules[late.__name__]


@pytest.mark.parametrize("got, says", [([0.5, float("-inf"), 2.0], "at index [2] expected 1, got 2"),
                                       ([0.5, 0.0, 1.0], "at index [1] expected -inf, got 0"),
                                       ([float("inf"), float("-inf"), 1.0], "contains inf (first at index [0])"),
                                       ([0.5, float("nan"), 1.0], "contains NaN (first at index [1])")])
def test_runs_verdict_accepts_the_infinities_the_right_result_has(got, says):
    """A right result may hold -inf (masked logits, 8.4's filtered ones): only a NaN, or an inf where the right result
    has none, is reported as such; otherwise the first wrong entry is shown."""
    from attnbook.exercises.runs import Run, verdict

    with pytest.raises(Wrong) as caught:
        verdict([Run("case", torch.tensor(got), torch.tensor([0.5, float("-inf"), 1.0]), {})], what="f", rule="r")
    assert says in str(caught.value), str(caught.value)


def test_runs_verdict_shared_hints_and_band_hint():
    """A key (hint, tag) gives its mistake that hint; band_hint replaces the rule only when every run lies within its
    band (chapter 5's float16 results); a tolerance without rtol still says how close the two numbers are."""
    from attnbook.exercises.runs import Run, verdict

    ref = torch.tensor([1.0, 2.0])

    def told(runs, **band):
        with pytest.raises(Wrong) as caught:
            verdict(runs, what="f", rule="the rule", **band)
        return caught.value

    assert told([Run("a", ref + 1, ref, {"h1": ref - 1, ("h2", "tag"): ref + 1})]).hint == "h2"
    near = [Run("a", ref + 5e-4, ref, {}, 1e-4, 0.0, 2e-3), Run("b", ref, ref, {}, 1e-4, 0.0, 2e-3)]
    wrong = told(near, band_hint="band")
    assert wrong.hint == "band" and "agree to 3 significant digits" in str(wrong) and "about 4" in str(wrong)
    assert told(near[:1] + [Run("b", ref + 1e-2, ref, {}, 1e-4, 0.0, 2e-3)], band_hint="band").hint == "the rule"
    assert told(near).hint == "the rule"
