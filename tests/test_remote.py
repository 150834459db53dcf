"""Checks run by the grader on code that runs elsewhere (attnbook.exercises.remote, inputs, codec), and the one
test of every mutant catalogue entry's verdict: graded, with the answer behind a link to a kernel, it meets the
catalogue's expectation under run seeds 0, 1 and 2 in turn, the same check in a notebook in Chinese gives the same
verdict in Chinese, and at run seed 0 the notebook's English message equals the grader's (`make test` prints the
score from what this test records: tools/mutant_report.py --recorded). Inputs cross to the kernel as the same
objects; results cross back as plain data; a reply that does not fit the check gets 0 points."""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import mutants
from attnbook import get_language, set_language
from attnbook.exercises import REGISTRY, check, codec, inputs, remote, reset_session
from attnbook.exercises.codec import CodecError
from attnbook.exercises.results import FAILED, NOT_ATTEMPTED, PASSED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from mutant_report import chinese_problem  # noqa: E402 - the report's own rule for a Chinese verdict

CATALOGUE = mutants.load()


@pytest.fixture(autouse=True)
def _warn_always():
    """PyTorch warns once per process (e.g. .T on a 3-D tensor); a check's message may mention the warning, so
    the direct and the remote runs of one answer in one process must both see it."""
    before = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    yield
    torch.set_warn_always(before)


def _direct(exercise_id: str, answer, run_seed: int, language: str = "en"):
    mutants.fresh(answer)
    before = get_language()
    set_language(language)
    reset_session()
    try:
        with remote.seeding(run_seed):
            return check(exercise_id, answer)
    finally:
        reset_session()
        set_language(before)


class _CountingLink(remote.LocalLink):
    def __init__(self, server, tamper=None):
        super().__init__(server)
        self.asked, self.tamper = [], tamper

    def ask(self, message):
        self.asked.append(message["op"])
        reply = super().ask(message)
        return reply if self.tamper is None else self.tamper(message, reply)


def _remote(exercise_id: str, answer, run_seed: int, tamper=None, namespace=None):
    """The grader's verdict with the answer behind a link (every message through JSON text, as over the pipe)."""
    namespace = {REGISTRY[exercise_id].answer_name: mutants.fresh(answer)} if namespace is None else namespace
    link = _CountingLink(remote.Server(namespace), tamper)
    return remote.judge_exercise(link, exercise_id, run_seed)


def _same(a, b) -> bool:
    return (a.exercise_id, a.status, a.points, a.max_points, a.message) == \
        (b.exercise_id, b.status, b.points, b.max_points, b.message)


def _record(mutant, graded, ok: bool, problem: str | None) -> None:
    """One line per entry for tools/mutant_report.py --recorded (when ATTNBOOK_CATALOGUE_RECORD names a folder:
    `make test` prints the catalogue's score from these lines instead of running it a fourth time)."""
    folder = os.environ.get("ATTNBOOK_CATALOGUE_RECORD")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    line = {"exercise_id": mutant.exercise_id, "name": mutant.name, "right": mutant.right, "ok": ok,
            "zh_problem": problem, "message": graded.message[:300]}
    with open(os.path.join(folder, f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")


@pytest.mark.parametrize("index", range(len(CATALOGUE)),
                         ids=[f"{m.exercise_id}-{'right' if m.right else 'wrong'}-{m.name}" for m in CATALOGUE])
def test_every_entry_gets_its_verdict_graded_and_in_chinese(index):
    """The one test of every catalogue entry's verdict, under run seed 0, 1 or 2 in turn:
    - graded (judge_exercise, the answer behind a link): right answers pass, wrong ones fail with the promised hint;
    - checked in a notebook in Chinese (set_language("zh")): the same status and points, and a Chinese message
      (mutant_report.chinese_problem: no run of English prose left in it);
    - on every third entry (run seed 0: the notebook's own inputs), also checked in a notebook in English: the
      same status, points and message as graded (an answer whose own output varies from run to run, it times
      with the CPU clock, or whose first run differs from later ones, a first import, needs only the same
      status and points). Under run seeds 1 and 2 the graded verdict and hint are checked against the catalogue,
      and the Chinese verdict against the graded one, as above."""
    mutant = CATALOGUE[index]
    run_seed = index % 3
    graded = _remote(mutant.exercise_id, mutant.answer, run_seed)
    if mutant.right:
        ok = graded.passed
    else:
        ok = graded.status == "failed" and (mutant.hint is None or mutant.hint.lower() in graded.message.lower())
    chinese = _direct(mutant.exercise_id, mutant.answer, run_seed, "zh")
    problem = chinese_problem(mutant, graded, chinese)
    _record(mutant, graded, ok, problem)
    assert ok, f"a {'right' if mutant.right else 'wrong'} answer graded with run seed {run_seed} did not " \
        f"{'pass' if mutant.right else 'fail as promised'}: {graded}"
    assert problem is None, f"in Chinese: {problem}"
    if run_seed == 0:
        direct = _direct(mutant.exercise_id, mutant.answer, run_seed)
        if not _same(direct, graded):
            again = _direct(mutant.exercise_id, mutant.answer, run_seed)
            assert _same(again, graded) or (not _same(again, direct) and (direct.status, direct.points) == (
                graded.status, graded.points)), f"direct: {direct}\ngraded: {graded}"


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
    t = torch.randn(2, 3, requires_grad=True) * 2  # a non-leaf result: decoded as a leaf that requires grad
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
# Inputs sent to the kernel
# ---------------------------------------------------------------------------------------------------------

def _sent(x):
    return inputs.decode(json.loads(json.dumps(inputs.encode(x), allow_nan=False)))


def test_input_tensors_keep_values_gradients_and_strides():
    leaf = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    copy = leaf * 1  # what grad_inputs hands over: a non-leaf, so that an in-place change is reported as one
    assert _sent(leaf).is_leaf and _sent(leaf).requires_grad
    assert not _sent(copy).is_leaf and _sent(copy).requires_grad and torch.equal(_sent(copy), copy)
    base = torch.arange(24.0).reshape(2, 3, 4)
    for view in (base.transpose(1, 2), base[:, 1:, ::2], torch.arange(3.0)[:, None].expand(3, 5), base.mT[1]):
        out = _sent(view)
        assert torch.equal(out, view) and out.stride() == view.stride() and not out.is_contiguous()
    with pytest.raises(RuntimeError):
        _sent(base.transpose(1, 2)).view(2, 12)  # the view refuses it as it refuses the checker's own


def test_input_generators_functions_and_containers():
    g = torch.Generator().manual_seed(5)
    g.manual_seed(7)
    out = _sent(g)
    assert isinstance(out, torch.Generator) and torch.equal(out.get_state(), g.get_state())
    from attnbook.exercises.ch10.repeat import repeat_kv_forbidden

    assert _sent(repeat_kv_forbidden) is repeat_kv_forbidden
    assert _sent({"a": (1, [2.5, None]), "b": "s"}) == {"a": (1, [2.5, None]), "b": "s"}
    with pytest.raises(CodecError):
        inputs.encode(lambda t: t)  # a closure cannot cross: checkers make such inputs with @builds factories
    with pytest.raises(CodecError):
        inputs.encode(nn.Linear(2, 2))


def test_built_inputs_are_made_again_by_their_factory():
    from attnbook.exercises.ch04.block import _block_cases

    for desc, x, *pieces, _ in _block_cases():
        again = _sent(pieces)
        assert [p.__name__ for p in again] == [p.__name__ for p in pieces]
        for mine, theirs in zip(pieces, again):
            assert mine is not theirs and torch.equal(mine(x), theirs(x)), desc
    from attnbook.exercises.ch06.greedy import _fresh_model

    model = _fresh_model(1, 2)
    rebuilt = _sent(model)
    assert rebuilt is not model and rebuilt.training
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), rebuilt.state_dict().values()))


def test_a_name_outside_the_package_is_never_resolved():
    for name in ("os:system", "builtins:eval", "attnbook.exercises.guard:<locals>.x"):
        with pytest.raises(ValueError):
            inputs.resolve(name)
    with pytest.raises(ValueError):  # a function of the package that is not a factory
        inputs.decode({"t": "built", "factory": "attnbook.attention:softmax", "args": [], "kwargs": {},
                       "index": None})


# ---------------------------------------------------------------------------------------------------------
# Replies that do not fit the check
# ---------------------------------------------------------------------------------------------------------

def _right(exercise_id: str):
    return next(m.answer for m in CATALOGUE if m.exercise_id == exercise_id and m.right)


def _wrong(exercise_id: str):
    return next(m.answer for m in CATALOGUE if m.exercise_id == exercise_id and not m.right)


def test_the_kernel_is_asked_and_the_grader_decides():
    link = _CountingLink(remote.Server({"padding_mask": _right("2.3")}))
    assert remote.judge_exercise(link, "2.3", 5).status == PASSED
    assert link.asked[0] == "describe" and link.asked.count("call") >= 5


def _first_call(replace):
    def tamper(message, reply):
        return replace(message, reply) if message["op"] == "call" else reply
    return tamper


@pytest.mark.parametrize("replace", [
    lambda m, r: "nope",
    lambda m, r: {"return": {"t": "tensor", "dtype": "float32", "v": "AAAA"}},
    lambda m, r: {"raise": "Wrong", "message": 5},
    lambda m, r: {"raise": "Alien"},
    lambda m, r: {},
    lambda m, r: {"return": {"t": "nope"}},
])
def test_an_unreadable_reply_gets_no_points(replace):
    result = _remote("2.3", _right("2.3"), 0, _first_call(replace))
    assert result.status == FAILED and result.points == 0 and remote.OUT_OF_STEP in result.message


def _calls_tamper(replace):
    def tamper(message, reply):
        return replace(message, reply) if message["op"] == "calls" else reply
    return tamper


def test_a_statistical_check_sends_its_calls_together():
    """2.4 makes 397 calls in each of its two passes, in 3 "calls" messages (guard.call_many) and 5 single ones,
    not one message each."""
    link = _CountingLink(remote.Server({"dot_product_variance": _right("2.4")}))
    assert remote.judge_exercise(link, "2.4", 3).status == PASSED
    assert link.asked.count("calls") == 6 and link.asked.count("call") == 10


@pytest.mark.parametrize("replace", [
    lambda m, r: {"returns": r["returns"]},  # no "failed"
    lambda m, r: {"returns": {"t": "list", "v": r["returns"]["v"][:-1]}, "failed": None},  # one output short
    lambda m, r: {"returns": {"t": "list", "v": r["returns"]["v"] * 2}, "failed": None},  # too many
    lambda m, r: {"returns": r["returns"], "failed": {"raise": "Wrong", "message": "x", "hint": None}},  # all, and a fail
    lambda m, r: {"returns": {"t": "list", "v": r["returns"]["v"][:3]}, "failed": {"return": 1.0}},  # a "failure" returns
    lambda m, r: {"returns": {"t": "tuple", "v": r["returns"]["v"]}, "failed": None},  # not a list
    lambda m, r: {"returns": "nope", "failed": None},
])
def test_an_unreadable_calls_reply_gets_no_points(replace):
    result = _remote("2.4", _right("2.4"), 0, _calls_tamper(replace))
    assert result.status == FAILED and result.points == 0 and remote.OUT_OF_STEP in result.message


def test_a_failure_among_sent_calls_is_raised_where_it_happened():
    """The kernel stops at the first call that fails and reports it; the checker sees the outputs before it, then
    that failure, as with one message per call: the verdict equals the direct check's."""
    def fails_on_the_fifth_call(d_k, n_samples=10_000):
        import torch
        fails_on_the_fifth_call.calls = getattr(fails_on_the_fifth_call, "calls", 0) + 1
        if n_samples == 2 and fails_on_the_fifth_call.calls % 50 == 0:
            raise ZeroDivisionError("fifth")
        q, k = torch.randn(n_samples, d_k), torch.randn(n_samples, d_k)
        return (q * k).sum(-1).var().item()
    graded = _remote("2.4", fails_on_the_fifth_call, 0)
    fails_on_the_fifth_call.calls = 0
    direct = _direct("2.4", fails_on_the_fifth_call, 0)
    assert graded.status == direct.status == FAILED and "ZeroDivisionError" in graded.message
    assert _same(graded, direct)


def test_a_calls_message_with_bad_seeds_is_refused_by_the_kernel():
    server = remote.Server({"dot_product_variance": _right("2.4")})
    options = {"what": "f", "on": "", "time_limit_s": 1.0, "reload": False, "forbid": [], "prepare": None}
    base = {"op": "calls", "exercise": "2.4", "args": [64], "kwargs": {"t": "dict", "v": []}, "options": options}
    for seeds in ("1", [True], [1.5], list(range(remote.MAX_CALLS + 1))):
        reply = server.handle({**base, "seeds": seeds})
        assert reply["returns"] == {"t": "list", "v": []} and reply["failed"]["raise"] == "Error"


def test_a_forged_reply_is_judged_by_the_grader():
    """Whatever the kernel sends back is judged as the answer's output: a forged 'passed' message is a Wrong,
    and another input's output is wrong for this one."""
    result = _remote("2.3", _right("2.3"), 0, _first_call(
        lambda m, r: {"raise": "Wrong", "message": "all tests passed", "hint": None}))
    assert result.status == FAILED and result.points == 0
    first = []

    def replay_first(message, reply):
        first.append(reply)
        return first[0]
    result = _remote("2.3", _right("2.3"), 0, _first_call(replay_first))
    assert result.status == FAILED and result.points == 0


def test_a_broken_link_is_left_to_the_grader():
    class Dead:
        def ask(self, message):
            raise remote.LinkBroken("the kernel died")
    with pytest.raises(remote.LinkBroken):
        remote.judge_exercise(Dead(), "2.3", 0)


def test_a_missing_answer_and_a_garbled_description():
    assert _remote("2.3", None, 0, namespace={}).status == NOT_ATTEMPTED
    garbled = _remote("2.3", _right("2.3"), 0, lambda m, r: {"answer": {"kind": "alien"}} if m["op"] == "describe" else r)
    assert garbled.status == FAILED and garbled.points == 0


def test_the_run_seed_changes_the_inputs():
    """The inputs sent to the kernel differ from one run seed to the next: no output can be prepared in advance."""
    sent = {}
    for run_seed in (1, 2):
        def keep(message, reply, run_seed=run_seed):
            sent.setdefault(run_seed, message["args"])
            return reply
        assert _remote("2.2", _right("2.2"), run_seed, _first_call(keep)).status == PASSED
    assert sent[1] != sent[2]


def test_a_models_weights_are_new_on_every_run():
    """4.3's sublayers (a block's attention, feed-forward network and LayerNorms) are made by a factory: their
    weights, not only x, differ from one run seed to the next (they were once fixed), and are the same again under
    the same run seed. A right answer records norm1 applied to a fixed probe on its first call."""
    def recorder(seen):
        def pre_norm_block(x, attn, ffn, norm1, norm2):
            if not seen:
                seen.append(norm1(torch.ones(1, 1, x.shape[-1], dtype=x.dtype)).detach().clone())
            h = x + attn(norm1(x))
            return h + ffn(norm2(h))
        return pre_norm_block

    probes = []
    for run_seed in (1, 2, 1):
        seen = []
        assert _direct("4.3", recorder(seen), run_seed).passed
        probes.append(seen[0])
    assert not torch.allclose(probes[0], probes[1]) and torch.equal(probes[0], probes[2])


def test_judging_leaves_the_session_and_the_mode_alone():
    from attnbook.exercises import guard, results

    reset_session()
    check("2.3", _wrong("2.3"))
    before = dict(results._SESSION), dict(results._FAILED_ATTEMPTS)
    _remote("2.3", _right("2.3"), 0)
    assert (dict(results._SESSION), dict(results._FAILED_ATTEMPTS)) == before and guard._RUNNER is None
    reset_session()


def test_the_stand_in_carries_the_signature():
    def time_it(fn, n_warmup=5, n_runs=10, *, clock=None):
        return math.floor(1.0)

    import inspect

    stand_in = remote.stand_in(json.loads(json.dumps(remote.describe_answer(time_it))))
    assert stand_in.__name__ == "time_it" and "floor" in stand_in.code_names
    assert str(inspect.signature(stand_in)) == str(inspect.signature(time_it))
    with pytest.raises(TypeError):
        stand_in(len)
