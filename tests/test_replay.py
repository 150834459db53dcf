"""Record and replay of checks (attnbook.exercises.replay, codec): the grader's verdict from a transcript equals
the direct check's for every entry of the mutant catalogue; the catalogue stays at 100% under other run seeds;
the codec round-trips what answers return and refuses hostile data; a tampered transcript gets 0 points."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch import nn

import mutants
from attnbook.exercises import REGISTRY, check, codec, replay, reset_session
from attnbook.exercises.codec import CodecError
from attnbook.exercises.results import FAILED, NOT_ATTEMPTED, PASSED

CATALOGUE = mutants.load()


@pytest.fixture(autouse=True)
def _warn_always():
    """PyTorch warns once per process (e.g. .T on a 3-D tensor); a check's message may mention the warning, so
    the direct and the recorded runs of one answer in one process must both see it."""
    before = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    yield
    torch.set_warn_always(before)


def _direct(exercise_id: str, answer, run_seed: int):
    reset_session()
    with replay.seeding(run_seed):
        result = check(exercise_id, answer)
    reset_session()
    return result


def _recorded(exercise_id: str, answer, run_seed: int, tamper=None):
    """record_checks in "the kernel", through JSON text, then judge in "the grader" (one process here)."""
    namespace = {REGISTRY[exercise_id].answer_name: answer}
    transcript = json.loads(json.dumps(replay.record_checks(namespace, [exercise_id], run_seed)))
    if tamper is not None:
        tamper(transcript["exercises"][exercise_id])
    return replay.judge(transcript, [exercise_id], run_seed)[exercise_id]


def _same(a, b) -> bool:
    return (a.exercise_id, a.status, a.points, a.max_points, a.message) == \
        (b.exercise_id, b.status, b.points, b.max_points, b.message)


@pytest.mark.parametrize("index", range(len(CATALOGUE)),
                         ids=[f"{m.exercise_id}-{'right' if m.right else 'wrong'}-{m.name}" for m in CATALOGUE])
def test_replayed_verdict_equals_the_direct_check(index):
    """Same status, points and message from judge(record_checks(...)) as from check(...), under run seed
    0, 1 or 2 in turn; an answer whose own output varies from run to run (it times with the CPU clock) or whose
    first run differs from later ones (a first import) needs only the same status and points."""
    mutant = CATALOGUE[index]
    run_seed = index % 3
    replayed = _recorded(mutant.exercise_id, mutant.answer, run_seed)
    direct = _direct(mutant.exercise_id, mutant.answer, run_seed)
    if not _same(direct, replayed):
        again = _direct(mutant.exercise_id, mutant.answer, run_seed)
        assert _same(again, replayed) or (not _same(again, direct) and (direct.status, direct.points) == (
            replayed.status, replayed.points)), f"direct: {direct}\nreplayed: {replayed}"
    # and the grader's verdict is the catalogue's under this run seed: right answers pass, wrong ones fail as promised
    if mutant.right:
        assert replayed.passed, f"a right answer failed when graded with run seed {run_seed}: {replayed}"
    else:
        assert replayed.status == "failed" and (mutant.hint is None or mutant.hint.lower() in replayed.message.lower()), \
            f"a wrong answer was not rejected as promised when graded with run seed {run_seed}: {replayed}"


@pytest.mark.parametrize("run_seed", [1])  # seed 0 is tests/test_mutants.py; every entry is also graded above
@pytest.mark.parametrize("chapter", sorted({m.exercise_id.split(".")[0] for m in CATALOGUE}, key=int))
def test_catalogue_stays_at_100_percent_under_other_run_seeds(chapter, run_seed):
    failures = []
    for m in CATALOGUE:
        if m.exercise_id.split(".")[0] != chapter:
            continue
        with replay.seeding(run_seed):
            ok, result = mutants.run(m)
        if not ok:
            failures.append(f"{m.exercise_id} {m.name}: {result}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------------------------------------
# The codec
# ---------------------------------------------------------------------------------------------------------

def _round_trip(x):
    return codec.decode(json.loads(json.dumps(codec.encode(x), allow_nan=False)))


@pytest.mark.parametrize("value", [None, True, False, 0, -7, 2 ** 80, -(10 ** 40), 1.5, -0.0, 1e300, "text", "",
                                   (1, 2), [1, [2, (3,)]], {"a": 1, 2: [3.5]}, torch.float16, torch.bfloat16,
                                   1 + 2j])
def test_plain_values_round_trip(value):
    out = _round_trip(value)
    assert out == value and type(out) is type(value)


def test_special_floats_round_trip():
    assert math.isnan(_round_trip(float("nan")))
    assert _round_trip(float("inf")) == float("inf") and _round_trip(float("-inf")) == float("-inf")
    assert math.copysign(1, _round_trip(-0.0)) == -1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.uint8, torch.bool, torch.complex64])
def test_tensors_round_trip_with_their_dtype(dtype):
    t = (torch.randn(3, 4) * 5).to(dtype)
    out = _round_trip(t)
    assert out.dtype == dtype and out.shape == t.shape and torch.equal(out, t)


def test_tensor_details_round_trip():
    t = torch.randn(2, 3, requires_grad=True) * 2  # a non-leaf: decoded as a leaf that requires grad
    assert _round_trip(t).requires_grad and not _round_trip(t.detach()).requires_grad
    view = torch.arange(24.0).reshape(2, 3, 4).transpose(0, 2)[1:]  # strided, offset
    assert torch.equal(_round_trip(view), view)
    assert _round_trip(torch.zeros(0, 5)).shape == (0, 5)
    assert torch.equal(_round_trip(torch.tensor(3.0)), torch.tensor(3.0))
    out = _round_trip(torch.randn(4).max(dim=0))
    assert type(out) is torch.return_types.max and out.indices.dtype == torch.int64
    assert type(_round_trip(torch.Size([2, 3]))) is torch.Size


def test_numpy_keeps_its_types():
    for x in (np.int64(5), np.int32(-2), np.float32(1.25), np.float64(2.5), np.bool_(True)):
        out = _round_trip(x)
        assert type(out) is type(x) and out == x
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    out = _round_trip(arr)
    assert isinstance(out, np.ndarray) and out.dtype == np.int16 and (out == arr).all()


def test_conv2d_is_rebuilt_and_other_objects_keep_their_type_name():
    conv = nn.Conv2d(3, 8, kernel_size=2, stride=2, dtype=torch.float64)
    out = _round_trip(conv)
    assert type(out) is nn.Conv2d and out.stride == (2, 2) and out.weight.dtype == torch.float64
    images = torch.randn(1, 3, 4, 4, dtype=torch.float64)
    assert torch.equal(out(images), conv(images))

    class MyConv(nn.Conv2d):
        pass

    class Thing:
        pass

    assert type(_round_trip(MyConv(1, 1, 1))).__name__ == "MyConv"
    assert not isinstance(_round_trip(MyConv(1, 1, 1)), nn.Module)
    assert type(_round_trip(Thing())).__name__ == "Thing" and type(_round_trip({1, 2})).__name__ == "set"
    assert callable(_round_trip(len)) and type(_round_trip(len)).__name__ == "builtin_function_or_method"


class _Liar(torch.Tensor):
    """A tensor subclass that lies about its values wherever Python code asks."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch.zeros(2)

    def numpy(self, *args, **kwargs):
        return np.zeros(2, dtype=np.float32)

    def tolist(self):
        return [0.0, 0.0]

    def untyped_storage(self):
        return torch.zeros(2).untyped_storage()


def test_a_tensor_subclass_is_read_from_its_storage():
    liar = torch.tensor([3.0, 4.0]).as_subclass(_Liar)
    out = _round_trip(liar)
    assert type(out) is torch.Tensor and out.tolist() == [3.0, 4.0]


def test_limits_are_enforced():
    deep = []
    for _ in range(30):
        deep = [deep]
    with pytest.raises(CodecError):
        codec.encode(deep)
    with pytest.raises(CodecError):
        codec.encode("x" * (codec.MAX_STR + 1))
    with pytest.raises(CodecError):
        codec.encode(10 ** 2000)
    with pytest.raises(CodecError):
        codec.encode(torch.zeros(1000), max_bytes=100)


@pytest.mark.parametrize("data", [
    {"t": "nope"}, {"t": "tensor", "dtype": "float32", "v": "not base64!"}, {"t": "int", "v": "12a"},
    {"t": "float", "v": "1e5"}, {"t": "dtype", "v": []}, {"t": "list", "v": "abc"}, [1, 2], 2 ** 60, float("nan"),
    {"t": "module", "class": "Linear"}, {"t": "dict", "v": [[{"t": "list", "v": []}, 1]]},
    {"t": "tensor", "dtype": "float32", "v": codec.encode(np.arange(3))["v"]},  # int64 data for a float32 tag
    {"t": "tuple", "type": "Evil", "module": "os", "fields": ["__class__"], "v": [1]},
    {"t": "module", "class": "Conv2d", "config": {"in_channels": -1}},
])
def test_hostile_data_is_refused_cleanly(data):
    with pytest.raises(CodecError):
        codec.decode(data)


def test_object_arrays_are_never_unpickled():
    import base64
    import io

    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CodecError):
        codec.decode({"t": "ndarray", "v": base64.b64encode(buf.getvalue()).decode()})


# ---------------------------------------------------------------------------------------------------------
# A transcript that does not match the grader's run
# ---------------------------------------------------------------------------------------------------------

def _right(exercise_id: str):
    return next(m.answer for m in CATALOGUE if m.exercise_id == exercise_id and m.right)


def _wrong(exercise_id: str):
    return next(m.answer for m in CATALOGUE if m.exercise_id == exercise_id and not m.right)


def test_an_untouched_transcript_passes():
    assert _recorded("2.3", _right("2.3"), 5).status == PASSED


@pytest.mark.parametrize("tamper", [
    lambda e: e["events"][0].update(digest="0" * 64),  # recorded on another input
    lambda e: e["events"].pop(),  # the record ends early
    lambda e: e["events"].append(dict(e["events"][-1])),  # events left over
    lambda e: e.update(events="nope"),
    lambda e: e["events"][0].update(kind="unit"),
    lambda e: e["events"][0].update({"return": {"t": "tensor", "dtype": "float32", "v": "AAAA"}}),
    lambda e: e["events"][0].update({"raise": "Wrong", "message": 5}),
])
def test_a_tampered_transcript_gets_no_points(tamper):
    result = _recorded("2.3", _right("2.3"), 0, tamper)
    assert result.status == FAILED and result.points == 0
    assert result.message.startswith(replay.DIVERGENCE)


def test_another_inputs_output_forged_in_fails():
    def forge(entry):
        first, second = entry["events"][0], entry["events"][1]
        assert first["return"] != second["return"]
        second["return"] = first["return"]  # the output for input 1, under input 2's digest
    result = _recorded("2.3", _right("2.3"), 0, forge)
    assert result.status == FAILED and result.points == 0


def test_a_forged_return_is_judged_by_the_grader():
    """Forging the right output for a wrong answer is no easier than writing a right answer: the grader's
    checker computes the verdict; a forged Wrong can only cost points."""
    def forge_raise(entry):
        entry["events"][0] = {"kind": "call", "digest": entry["events"][0]["digest"], "raise": "Wrong",
                              "message": "all tests passed", "hint": None}
    result = _recorded("2.3", _right("2.3"), 0, forge_raise)
    assert result.status == FAILED and result.points == 0


def test_a_missing_or_absent_answer():
    transcript = json.loads(json.dumps(replay.record_checks({}, ["2.3"], 0)))
    assert replay.judge(transcript, ["2.3"], 0)["2.3"].status == NOT_ATTEMPTED
    assert replay.judge({"exercises": {}}, ["2.3"], 0)["2.3"].status == FAILED
    assert replay.judge("garbage", ["2.3"], 0)["2.3"].points == 0
    assert replay.judge({"exercises": {"2.3": {"answer": {"kind": "alien"}}}}, ["2.3"], 0)["2.3"].points == 0


def test_the_run_seed_changes_the_inputs():
    """A transcript recorded under one run seed does not replay under another (the inputs differ)."""
    namespace = {"attention": _right("2.2")}
    transcript = json.loads(json.dumps(replay.record_checks(namespace, ["2.2"], 1)))
    assert replay.judge(transcript, ["2.2"], 1)["2.2"].status == PASSED
    assert replay.judge(transcript, ["2.2"], 2)["2.2"].message.startswith(replay.DIVERGENCE)


def test_record_checks_leaves_the_session_and_the_mode_alone():
    from attnbook.exercises import guard, results

    reset_session()
    check("2.3", _wrong("2.3"))
    before = dict(results._SESSION), dict(results._FAILED_ATTEMPTS)
    replay.record_checks({"padding_mask": _right("2.3")}, ["2.3"], 0)
    assert (dict(results._SESSION), dict(results._FAILED_ATTEMPTS)) == before and guard._RUNNER is None
    reset_session()


def test_the_replayed_function_carries_the_signature():
    def time_it(fn, n_warmup=5, n_runs=10, *, clock=None):
        return math.floor(1.0)

    import inspect

    stand_in = replay.stand_in(json.loads(json.dumps(replay.describe_answer(time_it))))
    assert stand_in.__name__ == "time_it" and "floor" in stand_in.code_names
    assert str(inspect.signature(stand_in)) == str(inspect.signature(time_it))
    with pytest.raises(TypeError):
        stand_in(len)
