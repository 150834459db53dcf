"""Record and replay of checks: one checker definition, two runners (the seam is `guard.call`).

- record (in the sandboxed kernel, after the learner's cells ran): `record_checks(namespace, exercise_ids,
  run_seed)` runs each exercise's checker; every `guard.call` (and `guard.recorded` helper) runs the learner's
  code as in the notebook, then turns what came back into plain data (`codec.encode`) and appends an event to
  the transcript: {"kind", "digest": SHA-256 of the inputs, "return": encoded} or {"kind", "digest", "raise":
  "Wrong" | "NotAttempted" | "Error", "message", "hint"}. The kernel's checker then goes on with the decoded
  value, so it sees exactly what the grader will.
- replay (in the grader's process, which never imports or runs learner code): `judge(transcript,
  exercise_ids, run_seed)` runs the same checkers on the same inputs with a stand-in answer; every
  `guard.call` takes the next event instead of running anything, after checking that its digest is the digest
  of the grader's own inputs. Else, and when the events run out or are left over, `Divergence`: the exercise
  gets 0 points. The verdict, the points and the message are always the grader's own.

The answer itself crosses as a description: None, an encoded value, or for a function its name, qualified
name, signature (with encoded defaults) and code names, from which `ReplayedFunction` is rebuilt. Both runners
hand the checker the stand-in; the recorder alone knows the real answer behind it (`guard.actual`).
"""
from __future__ import annotations

import contextlib
import inspect
import json
import threading

from . import codec, compare, guard, results
from .codec import CodecError
from .registry import REGISTRY, NotAttempted, Wrong

TRANSCRIPT_VERSION = 1
MAX_TRANSCRIPT_BYTES = 64_000_000  # all the events of one submission
MAX_MESSAGE = 20_000  # characters of a recorded message or hint
DIVERGENCE = "the sandboxed run does not match the grader's"
_LOCK = threading.RLock()  # the runner, the seed offset and the check session are process-wide


class Divergence(BaseException):
    """The transcript does not fit the grader's own run of a check (a BaseException: no checker catches it)."""


# ---------------------------------------------------------------------------------------------------------
# Seeding, the session, the runner
# ---------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def seeding(run_seed: int):
    """The check inputs of this run: `compare.randn` adds an offset made from `run_seed` to its seeds (0: the
    notebook's inputs). Checkers whose cases are tuned to their seeds use their own generators."""
    if isinstance(run_seed, bool) or not isinstance(run_seed, int) or not 0 <= run_seed < 2 ** 63:
        raise ValueError(f"run_seed must be an int in [0, 2**63), got {run_seed!r}")
    previous = compare.SEED_OFFSET
    compare.SEED_OFFSET = (run_seed * 1_000_003) % 2 ** 31
    try:
        yield
    finally:
        compare.SEED_OFFSET = previous


@contextlib.contextmanager
def _fresh_session():
    """A check as a new learner's first attempt, leaving the notebook's session as it was."""
    saved = (dict(results._SESSION), set(results._PASSED_BEFORE), dict(results._FAILED_ATTEMPTS),
             results._current_attempts)
    results._SESSION.clear(), results._PASSED_BEFORE.clear(), results._FAILED_ATTEMPTS.clear()
    try:
        yield
    finally:
        results._SESSION.clear(), results._PASSED_BEFORE.clear(), results._FAILED_ATTEMPTS.clear()
        results._SESSION.update(saved[0]), results._PASSED_BEFORE.update(saved[1])
        results._FAILED_ATTEMPTS.update(saved[2])
        results._current_attempts = saved[3]


@contextlib.contextmanager
def _running(runner):
    previous, guard._RUNNER = guard._RUNNER, runner
    try:
        yield runner
    finally:
        guard._RUNNER = previous


def _call_digest(args, kwargs, options, observe) -> str:
    return codec.digest(["call", list(args), kwargs, options.get("seed"), options.get("on"), observe is not None])


def _unit_digest(helper, args, kwargs) -> str:
    return codec.digest(["unit", getattr(helper, "__qualname__", "?"), list(args), kwargs])


def _error_class(name: str) -> type:
    """An exception class with the recorded name (for "could not check your answer (Name: ...)")."""
    if not (isinstance(name, str) and name.isidentifier() and len(name) <= 100):
        name = "Exception"
    return type(name, (Exception,), {"__module__": __name__})


def _outcome(event, observed: bool):
    """Return or raise what an event recorded; Divergence if it is malformed."""
    if "raise" in event:
        kind, message, hint = event.get("raise"), event.get("message"), event.get("hint")
        if not isinstance(message, str) or len(message) > MAX_MESSAGE or not (
                hint is None or isinstance(hint, str) and len(hint) <= MAX_MESSAGE):
            raise Divergence(f"{DIVERGENCE} (a recorded message cannot be read)")
        if kind == "Wrong":
            raise Wrong(message, hint)
        if kind == "NotAttempted":
            raise NotAttempted(message)
        if kind == "Error":
            raise _error_class(event.get("type"))(message)
        raise Divergence(f"{DIVERGENCE} (a recorded outcome cannot be read)")
    if "return" not in event:
        raise Divergence(f"{DIVERGENCE} (a recorded outcome cannot be read)")
    try:
        value = codec.decode(event["return"])
    except CodecError as e:
        raise Divergence(f"{DIVERGENCE} (a recorded result cannot be read: {e})") from None
    if observed and not (isinstance(value, tuple) and len(value) == 2):
        raise Divergence(f"{DIVERGENCE} (a recorded result is not what the check observes)")
    return value


class Recorder:
    """Runs the learner's code and records each outcome (record mode of `guard.call`)."""

    def __init__(self, answer, stand_in, budget: list[int]):
        self.answer, self.stand_in, self.budget = answer, stand_in, budget
        self.events: list[dict] = []

    def actual(self, fn):
        return self.answer if fn is self.stand_in else fn

    def call(self, fn, args, kwargs, options, observe):
        digest = _call_digest(args, kwargs, options, observe)
        real = self.actual(fn)

        def run():
            out = guard.run_here(real, args, kwargs, **options)
            return out if observe is None else (out, observe(out))
        return self._record("call", digest, run, options["what"], observe is not None)

    def unit(self, helper, answer, args, kwargs):
        digest = _unit_digest(helper, args, kwargs)
        return self._record("unit", digest, lambda: helper(self.actual(answer), *args, **kwargs), "your function",
                            False)

    def _record(self, kind: str, digest: str, run, what: str, observed: bool):
        event = {"kind": kind, "digest": digest}
        previous, guard._RUNNER = guard._RUNNER, None  # what runs inside is the learner's run, as in a notebook
        try:
            try:
                event["return"] = codec.encode(run(), max_bytes=max(0, min(codec.MAX_BYTES, self.budget[0])))
                value = codec.decode(event["return"])  # what the checker goes on with, here as in the grader
            except Wrong as e:
                event.update({"raise": "Wrong", "message": str(e.message)[:MAX_MESSAGE],
                              "hint": None if e.hint is None else str(e.hint)[:MAX_MESSAGE]})
            except NotAttempted as e:
                event.update({"raise": "NotAttempted", "message": str(e)[:MAX_MESSAGE]})
            except CodecError as e:
                event.pop("return", None)
                event.update({"raise": "Wrong", "message": f"{what} returned something the check cannot read: {e}",
                              "hint": "return plain tensors, numbers or tuples of them, as the task asks"})
            except (Exception, KeyboardInterrupt, SystemExit) as e:  # noqa: BLE001 - recorded, judged by the grader
                event.update({"raise": "Error", "type": type(e).__name__, "message": str(e)[:MAX_MESSAGE]})
        finally:
            guard._RUNNER = previous
        size = len(json.dumps(event))
        if size > self.budget[0]:
            event = {"kind": kind, "digest": digest, "raise": "Wrong", "hint": None,
                     "message": f"the results of {what} are too large to record (more than "
                                f"{MAX_TRANSCRIPT_BYTES:,} bytes in all)"}
            size = len(json.dumps(event))
        self.budget[0] -= size
        self.events.append(event)
        if "raise" in event:
            _outcome(event, observed)
        if observed and not (isinstance(value, tuple) and len(value) == 2):
            raise Wrong("the check could not read what it observes")  # never: an observed call returns a pair
        return value


class Replayer:
    """Returns recorded outcomes instead of running anything (replay mode of `guard.call`)."""

    def __init__(self, events):
        if not isinstance(events, list):
            raise Divergence(f"{DIVERGENCE} (its record of this check cannot be read)")
        self.events, self.position = events, 0

    @staticmethod
    def actual(fn):
        return fn

    def call(self, fn, args, kwargs, options, observe):
        return _outcome(self._next("call", _call_digest(args, kwargs, options, observe)), observe is not None)

    def unit(self, helper, answer, args, kwargs):
        return _outcome(self._next("unit", _unit_digest(helper, args, kwargs)), False)

    def _next(self, kind: str, digest: str) -> dict:
        n = self.position + 1
        if self.position >= len(self.events):
            raise Divergence(f"{DIVERGENCE} (its record ends before the check does, at call {n})")
        event = self.events[self.position]
        self.position += 1
        if not isinstance(event, dict) or event.get("kind") != kind or event.get("digest") != digest:
            raise Divergence(f"{DIVERGENCE} (call {n} of the check was recorded on other inputs)")
        return event

    def finish(self) -> None:
        if self.position != len(self.events):
            raise Divergence(f"{DIVERGENCE} (its record holds {len(self.events)} calls, the check made "
                             f"{self.position})")


# ---------------------------------------------------------------------------------------------------------
# The answer: its description and the stand-in rebuilt from it
# ---------------------------------------------------------------------------------------------------------

class ReplayedFunction:
    """Stands for the learner's function: its name, qualified name, signature and code names, never its code.
    Checkers pass it to `guard.call`, which runs the real function in the kernel and replays in the grader."""

    def __init__(self, name: str, qualname: str, signature: inspect.Signature | None, code_names=()):
        self.__name__, self.__qualname__ = name, qualname
        self.__signature__ = signature
        self.code_names = frozenset(code_names)

    def __call__(self, *args, **kwargs):
        raise TypeError("a replayed answer never runs: a checker calls the answer through guard.call")

    def __repr__(self) -> str:
        return f"<replayed function {self.__qualname__}>"


def _short(x, limit: int = 200) -> str:
    return x[:limit] if isinstance(x, str) else "?"


def describe_answer(answer, kind: str = "function"):
    """The answer as plain data: None, {"kind": "value", "value": encoded}, or {"kind": "function", "name",
    "qualname", "signature": [[name, kind, has default, encoded default]] or None, "code_names": [...]}.
    CodecError when a value answer cannot be encoded."""
    if answer is None:
        return None
    if kind != "function" or not callable(answer):
        return {"kind": "value", "value": codec.encode(answer)}
    try:
        name = _short(getattr(answer, "__name__", type(answer).__name__))
        qualname = _short(getattr(answer, "__qualname__", name))
    except Exception:  # noqa: BLE001 - an odd object
        name = qualname = "?"
    try:
        params = []
        for p in inspect.signature(answer).parameters.values():
            has_default = p.default is not inspect.Parameter.empty
            try:
                default = codec.encode(p.default, max_bytes=100_000) if has_default else None
            except CodecError:
                default = {"t": "opaque", "type": _short(type(p.default).__name__), "callable": False}
            params.append([_short(p.name), int(p.kind), has_default, default])
        signature = params[:100]
    except Exception:  # noqa: BLE001 - no signature to read (a builtin, an odd callable)
        signature = None
    names: list[str] = []
    todo = [getattr(guard.unwrap(answer), "__code__", None)]
    while todo and len(names) < 2000:
        code = todo.pop()
        if code is not None and hasattr(code, "co_names"):
            names += [_short(n) for n in code.co_names]
            todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return {"kind": "function", "name": name, "qualname": qualname, "signature": signature,
            "code_names": sorted(set(names))[:2000]}


def stand_in(description):
    """The object a checker gets for a described answer: None, the decoded value, or a ReplayedFunction.
    CodecError when the description is malformed."""
    if description is None:
        return None
    if not isinstance(description, dict):
        raise CodecError("an answer description that is not an object")
    if description.get("kind") == "value":
        return codec.decode(description.get("value"))
    if description.get("kind") != "function":
        raise CodecError("an answer description of an unknown kind")
    name, qualname = description.get("name"), description.get("qualname")
    names = description.get("code_names") or []
    if not (isinstance(name, str) and isinstance(qualname, str) and len(name) <= 200 and len(qualname) <= 200
            and isinstance(names, list) and len(names) <= 2000 and all(isinstance(n, str) for n in names)):
        raise CodecError("a function description with bad names")
    signature = description.get("signature")
    if signature is not None:
        if not isinstance(signature, list) or len(signature) > 100:
            raise CodecError("a bad signature")
        params = []
        try:
            for item in signature:
                p_name, p_kind, has_default, default = item
                if not (isinstance(p_name, str) and isinstance(p_kind, int) and isinstance(has_default, bool)):
                    raise CodecError("a bad parameter")
                value = codec.decode(default, max_bytes=100_000) if has_default else inspect.Parameter.empty
                params.append(inspect.Parameter(p_name, inspect._ParameterKind(p_kind), default=value))
            signature = inspect.Signature(params)
        except (TypeError, ValueError) as e:
            raise CodecError(f"a bad signature ({type(e).__name__})") from None
    return ReplayedFunction(name, qualname, signature, names)


# ---------------------------------------------------------------------------------------------------------
# The two entry points
# ---------------------------------------------------------------------------------------------------------

def _absent_message(answer_name: str) -> str:
    return f"no `{answer_name}` defined (the cell that defines it was deleted, failed, or did not finish)"


def record_checks(namespace, exercise_ids, run_seed: int) -> dict:
    """Check the answers in `namespace` (a dict: the learner's globals) for `exercise_ids` ("2.1", ...) and return
    the transcript: a JSON-able dict (json.dumps works on it; no pickle anywhere) of about MAX_TRANSCRIPT_BYTES
    at most.

    Runs inside the sandboxed kernel. For each id, the answer is `namespace[REGISTRY[id].answer_name]` (missing:
    recorded as absent, judged "not attempted"); it is described (None, an encoded value, or a function's name,
    signature and code names), then `results.check` runs on the stand-in rebuilt from the description in record
    mode, as a first attempt, with the inputs seeded by `run_seed`. Its result is not kept: the grader decides.
    Never raises for anything the learner's code does; an unknown id raises KeyError. Shape: {"version": 1,
    "run_seed": int, "exercises": {id: {"answer": description, "events": [...]} | {"absent": true} |
    {"unreadable": message}}}.
    """
    transcript = {"version": TRANSCRIPT_VERSION, "run_seed": run_seed, "exercises": {}}
    budget = [MAX_TRANSCRIPT_BYTES]
    with _LOCK, seeding(run_seed):
        for exercise_id in exercise_ids:
            ex = REGISTRY[exercise_id]
            if not ex.answer_name or ex.answer_name not in namespace:
                transcript["exercises"][exercise_id] = {"absent": True}
                continue
            answer = namespace[ex.answer_name]
            try:
                description = describe_answer(answer, ex.answer_kind)
                budget[0] -= len(json.dumps(description))
                if budget[0] < 0:
                    raise CodecError("the answers are too large to record")
                standing = stand_in(description)
            except CodecError as e:
                transcript["exercises"][exercise_id] = {"unreadable": str(e)[:1000]}
                continue
            recorder = Recorder(answer, standing, budget)
            with _fresh_session(), _running(recorder):
                try:
                    results.check(exercise_id, standing)
                except (Exception, KeyboardInterrupt, SystemExit):  # noqa: BLE001 - the events so far stand
                    pass
            transcript["exercises"][exercise_id] = {"answer": description, "events": recorder.events}
    return transcript


def _failed(ex, message: str) -> results.CheckResult:
    return results.CheckResult(ex.exercise_id, results.FAILED, 0.0, ex.points, message)


def judge(transcript, exercise_ids, run_seed: int) -> dict:
    """The grader's verdicts {id: results.CheckResult} for `exercise_ids`, from a transcript made by
    `record_checks` (already parsed from JSON; untrusted: any shape is accepted, and anything malformed, missing
    or not matching the grader's own inputs gives that exercise 0 points with a message saying so).

    Runs in the grader's process and never imports or runs learner code: each exercise's checker runs again with
    `run_seed`, on a stand-in answer built from the description, and each `guard.call` returns the recorded
    output (after checking that the digest of the grader's own inputs equals the recorded one). An answer
    recorded as absent is "not attempted"; an id with no entry in the transcript fails ("recorded no check").
    Never raises for a bad transcript; an unknown id raises KeyError. Thread-safe (checks run one at a time).
    """
    verdicts = {}
    entries = transcript.get("exercises") if isinstance(transcript, dict) else None
    entries = entries if isinstance(entries, dict) else {}
    with _LOCK, seeding(run_seed):
        for exercise_id in exercise_ids:
            ex = REGISTRY[exercise_id]
            entry = entries.get(exercise_id)
            if not isinstance(entry, dict):
                verdicts[exercise_id] = _failed(ex, "the sandboxed run recorded no check of this exercise")
            elif entry.get("absent") is True:
                verdicts[exercise_id] = results.CheckResult(exercise_id, results.NOT_ATTEMPTED, 0.0, ex.points,
                                                            _absent_message(ex.answer_name))
            elif "unreadable" in entry:
                why = entry["unreadable"] if isinstance(entry["unreadable"], str) else "?"
                verdicts[exercise_id] = _failed(ex, f"your answer could not be read: {why[:1000]}")
            else:
                verdicts[exercise_id] = _replay_one(ex, entry)
    return verdicts


def _replay_one(ex, entry: dict) -> results.CheckResult:
    try:
        standing = stand_in(entry.get("answer"))
        replayer = Replayer(entry.get("events"))
    except CodecError as e:
        return _failed(ex, f"{DIVERGENCE} (its record of your answer cannot be read: {e})")
    except Divergence as e:
        return _failed(ex, str(e))
    with _fresh_session(), _running(replayer):
        try:
            result = results.check(ex.exercise_id, standing)
            replayer.finish()
        except Divergence as e:
            return _failed(ex, str(e))
        except RecursionError:
            return _failed(ex, f"{DIVERGENCE} (its record cannot be read)")
    return result
