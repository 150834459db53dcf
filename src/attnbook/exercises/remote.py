"""Checks run by the grader on code that runs elsewhere: one checker definition, two runners (the seam is
`guard.call`).

- In a notebook, `guard.call` runs the learner's function in the same process (`execute.execute`).
- In the grader, `judge_exercise(link, exercise_id, run_seed)` runs the same checker in the grader's own
  process, which never imports or runs learner code. Every `guard.call` on the learner's answer becomes a
  message to the sandboxed kernel (`Server`, at the other end of `link`): the inputs as plain data
  (`inputs.encode`), the options, and the observer's name and parameters. The kernel runs the learner's
  function on those inputs (`execute.execute`, as in a notebook) and sends back what it returned, as plain data
  (`codec.encode`, read from tensor storage, never pickle), or how it failed. The references, the comparisons,
  the points and the hint are computed here only: the kernel never holds an expected value, so the learner's
  code has nothing to read them from. Inputs come from the run seed, which stays in the grader (the kernel is
  sent inputs, never the seed), so the learner cannot know them in advance.

Messages (JSON objects, one per line over the link):
  {"op": "describe", "exercise": id} -> {"absent": true} | {"answer": description} | {"unreadable": why}
  {"op": "call", "exercise": id, "args", "kwargs", "options", "observe": [name, params] | null}
  {"op": "unit", "exercise": id, "helper": "module:qualname", "args", "kwargs"}
      -> {"return": encoded} | {"raise": "Wrong", "message", "hint"} | {"raise": "NotAttempted", "message"}
         | {"raise": "Raised", "error": "Type: message"} | {"raise": "Error", "type", "message"}
  {"op": "calls", "exercise": id, "args", "kwargs", "options", "seeds": [int]} (guard.call_many: one call per
      seed, in order, up to the first that fails)
      -> {"returns": encoded list of the outputs, "failed": null | one of the outcomes above, for the next call}
Anything else from the kernel ends that exercise with 0 points (`LinkBroken` for a link that fails).
"""
from __future__ import annotations

import contextlib
import inspect
import json
import threading

from . import codec, compare, guard, inputs, results
from .codec import CodecError
from .execute import execute
from .feedback import Raised
from .reach import unwrap
from .observe import from_spec
from .registry import REGISTRY, NotAttempted, Wrong
from ..i18n import N_, _

MAX_REPLY_BYTES = 11_000_000  # array bytes in one reply (the largest honest one, 8.1's ids, is about 4.8 MB)
MAX_CALLS = 1_000  # calls in one "calls" message (guard.call_many)
MAX_MESSAGE = 20_000  # characters of a message or hint from the kernel
OUT_OF_STEP = N_("the sandboxed run's reply does not fit the check")
_LOCK = threading.RLock()  # the runner, the seed offset and the check session are process-wide


class LinkBroken(BaseException):
    """The kernel did not answer (it died, hung or closed the link); a BaseException: no checker catches it."""


class BadReply(BaseException):
    """The kernel's reply cannot be read; the exercise gets 0 points."""


# ---------------------------------------------------------------------------------------------------------
# Seeding, the session, the runner
# ---------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def seeding(run_seed: int):
    """The check inputs of this run: `compare.randn` adds an offset made from `run_seed` to its seeds (0: the
    notebook's inputs). Checkers whose cases are tuned to their seeds use their own generators."""
    if isinstance(run_seed, bool) or not isinstance(run_seed, int) or not 0 <= run_seed < 2 ** 63:
        raise ValueError(_("run_seed must be an int in [0, 2**63), got {run_seed!r}", run_seed=run_seed))
    with compare.seed_offset(run_seed * 1_000_003):
        yield


def _where(options: dict) -> str:
    return _(" on {on}", on=options["on"]) if options.get("on") else ""


def _bounded(x, what: str = N_("a message")) -> str:
    if not isinstance(x, str) or len(x) > MAX_MESSAGE:
        raise BadReply(_("{OUT_OF_STEP} ({what} cannot be read)", OUT_OF_STEP=_(OUT_OF_STEP), what=_(what)))
    return x


def _error_class(name) -> type:
    """An exception class with the reported name (for "could not check your answer (Name: ...)")."""
    if not (isinstance(name, str) and name.isidentifier() and len(name) <= 100):
        name = "Exception"
    return type(name, (Exception,), {"__module__": __name__})


# ---------------------------------------------------------------------------------------------------------
# The grader's side
# ---------------------------------------------------------------------------------------------------------

class Remote:
    """The runner of `guard.call` in the grader (`guard.running_on`): the learner's answer runs at the other end
    of `link`."""

    def __init__(self, link, exercise_id: str, stand_in):
        self.link, self.exercise_id, self.stand_in = link, exercise_id, stand_in

    def call(self, fn, args, kwargs, options, observe):
        if fn is not self.stand_in:  # the grader's own object (a module rebuilt from a result): it runs here
            out = execute(fn, args, kwargs, **options)
            return out if observe is None else (out, observe.read(out, args, kwargs))
        sent = {k: options[k] for k in ("what", "on", "time_limit_s", "seed", "reload")}
        sent.update(forbid=inputs.encode(options["forbid"]), prepare=inputs.encode(options["prepare"]))
        spec = None if observe is None else observe.spec()
        reply = self.link.ask({"op": "call", "exercise": self.exercise_id, "args": inputs.encode(list(args)),
                               "kwargs": inputs.encode(dict(kwargs)), "options": sent,
                               "observe": None if spec is None else [spec[0], inputs.encode(spec[1])]})
        value = _outcome(reply, options)
        if observe is not None and not (isinstance(value, tuple) and len(value) == 2):
            raise BadReply(_("{OUT_OF_STEP} (an observed call did not return a pair)", OUT_OF_STEP=_(OUT_OF_STEP)))
        return value

    def call_many(self, fn, args, kwargs, options, seeds):
        if fn is not self.stand_in:
            return (execute(fn, args, kwargs, seed=seed, **options) for seed in seeds)
        if not seeds:
            return iter(())
        sent = {k: options[k] for k in ("what", "on", "time_limit_s", "reload")}
        sent.update(forbid=inputs.encode(options["forbid"]), prepare=inputs.encode(options["prepare"]))
        reply = self.link.ask({"op": "calls", "exercise": self.exercise_id, "args": inputs.encode(list(args)),
                               "kwargs": inputs.encode(dict(kwargs)), "options": sent, "seeds": list(seeds)})
        if not isinstance(reply, dict) or "returns" not in reply or "failed" not in reply:
            raise BadReply(_("{OUT_OF_STEP} (a reply without outcomes)", OUT_OF_STEP=_(OUT_OF_STEP)))
        values = _outcome({"return": reply["returns"]}, options)
        failed = reply["failed"]
        if not (isinstance(values, list) and (len(values) == len(seeds) if failed is None else len(values) < len(seeds))):
            raise BadReply(_("{OUT_OF_STEP} (a reply with the wrong number of outcomes)", OUT_OF_STEP=_(OUT_OF_STEP)))
        return self._replay(values, failed, options)

    @staticmethod
    def _replay(values, failed, options):
        yield from values
        if failed is not None:
            _outcome(failed, options)  # raises what the kernel reported for the call after the last output
            raise BadReply(_("{OUT_OF_STEP} (a failed call that returned)", OUT_OF_STEP=_(OUT_OF_STEP)))

    def unit(self, helper, answer, args, kwargs):
        name = inputs.function_name(helper)
        if name is None or answer is not self.stand_in:
            raise TypeError(_("a beside_answer helper must be module-level and get the answer being checked"))
        reply = self.link.ask({"op": "unit", "exercise": self.exercise_id, "helper": name,
                               "args": inputs.encode(list(args)), "kwargs": inputs.encode(dict(kwargs))})
        return _outcome(reply, {"what": _("your function"), "on": "", "explain": None})


def _outcome(reply, options: dict):
    """Return or raise what the kernel reported; BadReply if it cannot be read."""
    if not isinstance(reply, dict):
        raise BadReply(_("{OUT_OF_STEP} (a reply that is not an object)", OUT_OF_STEP=_(OUT_OF_STEP)))
    if "raise" in reply:
        kind = reply.get("raise")
        if kind == "Wrong":
            hint = reply.get("hint")
            raise Wrong(_bounded(reply.get("message")), None if hint is None else _bounded(hint, N_("a hint")))
        if kind == "NotAttempted":
            raise NotAttempted(_bounded(reply.get("message")))
        if kind == "Raised":
            raise Raised(options["what"], _where(options), _bounded(reply.get("error")), options.get("explain"))
        if kind == "Error":
            raise _error_class(reply.get("type"))(_bounded(reply.get("message")))
        raise BadReply(_("{OUT_OF_STEP} (an outcome of an unknown kind)", OUT_OF_STEP=_(OUT_OF_STEP)))
    if "return" not in reply:
        raise BadReply(_("{OUT_OF_STEP} (a reply without an outcome)", OUT_OF_STEP=_(OUT_OF_STEP)))
    try:
        return codec.decode(reply["return"], max_bytes=MAX_REPLY_BYTES)
    except CodecError as e:
        raise BadReply(_("{OUT_OF_STEP} (a result cannot be read: {e})", OUT_OF_STEP=_(OUT_OF_STEP), e=e)) from None


def judge_exercise(link, exercise_id: str, run_seed: int) -> results.CheckResult:
    """The grader's verdict on one exercise, its answer running at the other end of `link` (module docstring).

    The answer is described by the kernel (its name, signature and code names, or its value for a by-hand answer),
    and the checker runs here on a stand-in built from that description, as a first attempt, with the inputs of
    `run_seed`. An unreadable reply gives 0 points and says so. Raises LinkBroken when the link fails (the caller
    decides what the exercise gets); an unknown id raises KeyError. Thread-safe (checks run one at a time).
    """
    ex = REGISTRY[exercise_id]
    failed = lambda message: results.CheckResult(exercise_id, results.FAILED, 0.0, ex.points, message)  # noqa: E731
    with _LOCK, seeding(run_seed):
        reply = link.ask({"op": "describe", "exercise": exercise_id})
        if not isinstance(reply, dict):
            return failed(_("{OUT_OF_STEP} (its description of your answer cannot be read)",
                            OUT_OF_STEP=_(OUT_OF_STEP)))
        if reply.get("absent") is True:
            return results.CheckResult(exercise_id, results.NOT_ATTEMPTED, 0.0, ex.points,
                                       _absent_message(ex.answer_name))
        if "unreadable" in reply:
            why = reply["unreadable"] if isinstance(reply["unreadable"], str) else "?"
            return failed(_("your answer could not be read: {why_1000}", why_1000=why[:1000]))
        try:
            standing = stand_in(reply.get("answer"))
        except CodecError as e:
            return failed(_("{OUT_OF_STEP} (its description of your answer cannot be read: {e})",
                            OUT_OF_STEP=_(OUT_OF_STEP), e=e))
        with results.fresh_session(), guard.running_on(Remote(link, exercise_id, standing)):
            try:
                return results.check(exercise_id, standing)
            except BadReply as e:
                return failed(str(e))
            except RecursionError:
                return failed(_("{OUT_OF_STEP} (a reply cannot be read)", OUT_OF_STEP=_(OUT_OF_STEP)))


def _absent_message(answer_name: str) -> str:
    return _("no `{answer_name}` defined (the cell that defines it was deleted, failed, or did not finish)",
             answer_name=answer_name)


# ---------------------------------------------------------------------------------------------------------
# The kernel's side
# ---------------------------------------------------------------------------------------------------------

class Server:
    """Answers the grader's messages in the sandboxed kernel, where the learner's answers live (`namespace`: the
    learner's globals). It runs the learner's code on the inputs it is sent and reports what came back; it never
    sees a reference or decides a verdict."""

    def __init__(self, namespace: dict):
        self.namespace = namespace

    def handle(self, message) -> dict:
        """The reply to one message (never raises for anything the learner's code does)."""
        op = message.get("op") if isinstance(message, dict) else None
        ex = REGISTRY.get(message.get("exercise")) if isinstance(message, dict) else None
        if ex is None or op not in ("describe", "call", "calls", "unit"):
            return {"raise": "Error", "type": "ValueError", "message": _("a message the kernel does not understand")}
        with guard.running_on(None):  # the learner's code runs here, as in a notebook
            if op == "describe":
                return self._describe(ex)
            answer = self.namespace.get(ex.answer_name)
            with guard.checking(ex.references):
                if op == "calls":
                    return self._run_many(message, answer, ex.references)
                return self._run(op, message, answer, ex.references)

    def _describe(self, ex) -> dict:
        if not ex.answer_name or ex.answer_name not in self.namespace:
            return {"absent": True}
        try:
            return {"answer": describe_answer(self.namespace[ex.answer_name], ex.answer_kind)}
        except CodecError as e:
            return {"unreadable": str(e)[:1000]}

    def _run_many(self, message: dict, answer, references) -> dict:
        """One call per seed, up to the first that fails: {"returns": the outputs, "failed": its outcome or None}."""
        seeds = message.get("seeds")
        if not (isinstance(seeds, list) and len(seeds) <= MAX_CALLS
                and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
            return {"returns": codec.encode([]), "failed": {"raise": "Error", "type": "ValueError",
                                                            "message": _("a message the kernel does not understand")}}
        outputs = []
        for seed in seeds:
            reply = self._run("call", {**message, "options": {**message.get("options", {}), "seed": seed}}, answer,
                              references)
            if "return" not in reply:
                break
            outputs.append(reply["return"])
        else:
            reply = None
        return {"returns": {"t": "list", "v": outputs}, "failed": reply}

    def _run(self, op: str, message: dict, answer, references) -> dict:
        what = _("your function")
        try:
            args, kwargs = inputs.decode(message["args"]), inputs.decode(message["kwargs"])
            if op == "unit":
                helper = inputs.resolve(message["helper"], guard.UNIT)
                value = helper.__wrapped__(answer, *args, **kwargs)
            else:
                options = dict(message["options"])
                what = options["what"]
                options.update(forbid=inputs.decode(options["forbid"]), prepare=inputs.decode(options["prepare"]),
                               explain=None)
                out = execute(answer, args, kwargs, references=references, **options)
                observer = message.get("observe")
                value = out if observer is None else (
                    out, from_spec(observer[0], inputs.decode(observer[1])).read(out, args, kwargs))
            return {"return": codec.encode(value, max_bytes=MAX_REPLY_BYTES)}
        except Raised as e:
            if op == "call":  # the grader words the hint (its `explain`); a helper's own calls were explained here
                return {"raise": "Raised", "error": str(e.error)[:MAX_MESSAGE]}
            return {"raise": "Wrong", "message": str(e.message)[:MAX_MESSAGE],
                    "hint": None if e.hint is None else str(e.hint)[:MAX_MESSAGE]}
        except Wrong as e:
            return {"raise": "Wrong", "message": str(e.message)[:MAX_MESSAGE],
                    "hint": None if e.hint is None else str(e.hint)[:MAX_MESSAGE]}
        except NotAttempted as e:
            return {"raise": "NotAttempted", "message": str(e)[:MAX_MESSAGE]}
        except CodecError as e:
            return {"raise": "Wrong", "message": _("{what} returned something the check cannot read: {e}", what=what,
                                                          e=e)[:MAX_MESSAGE],
                    "hint": _("return plain tensors, numbers or tuples of them, as the task asks")}
        except (Exception, KeyboardInterrupt, SystemExit) as e:  # noqa: BLE001 - reported, judged by the grader
            return {"raise": "Error", "type": type(e).__name__[:100], "message": str(e)[:MAX_MESSAGE]}


class LocalLink:
    """A link to a `Server` in this process, every message through JSON text as over the pipe (for tests and for
    grading without a sandbox's process boundary)."""

    def __init__(self, server: Server):
        self.server = server

    def ask(self, message: dict):
        reply = self.server.handle(json.loads(json.dumps(message)))
        return json.loads(json.dumps(reply))


# ---------------------------------------------------------------------------------------------------------
# The answer: its description and the stand-in rebuilt from it
# ---------------------------------------------------------------------------------------------------------

class RemoteFunction:
    """Stands for the learner's function in the grader: its name, qualified name, signature and code names, never
    its code. Checkers pass it to `guard.call`, which runs the real function in the kernel."""

    def __init__(self, name: str, qualname: str, signature: inspect.Signature | None, code_names=()):
        self.__name__, self.__qualname__ = name, qualname
        self.__signature__ = signature
        self.code_names = frozenset(code_names)

    def __call__(self, *args, **kwargs):
        raise TypeError(_("the learner's function runs in the sandboxed kernel: a checker calls it through guard.call"))

    def __repr__(self) -> str:
        return f"<function {self.__qualname__} (in the sandboxed kernel)>"


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
    todo = [getattr(unwrap(answer), "__code__", None)]
    while todo and len(names) < 2000:
        code = todo.pop()
        if code is not None and hasattr(code, "co_names"):
            names += [_short(n) for n in code.co_names]
            todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return {"kind": "function", "name": name, "qualname": qualname, "signature": signature,
            "code_names": sorted(set(names))[:2000]}


def stand_in(description):
    """The object a checker gets for a described answer: None, the decoded value, or a RemoteFunction.
    CodecError when the description is malformed."""
    if description is None:
        return None
    if not isinstance(description, dict):
        raise CodecError(_("an answer description that is not an object"))
    if description.get("kind") == "value":
        return codec.decode(description.get("value"))
    if description.get("kind") != "function":
        raise CodecError(_("an answer description of an unknown kind"))
    name, qualname = description.get("name"), description.get("qualname")
    names = description.get("code_names") or []
    if not (isinstance(name, str) and isinstance(qualname, str) and len(name) <= 200 and len(qualname) <= 200
            and isinstance(names, list) and len(names) <= 2000 and all(isinstance(n, str) for n in names)):
        raise CodecError(_("a function description with bad names"))
    signature = description.get("signature")
    if signature is not None:
        if not isinstance(signature, list) or len(signature) > 100:
            raise CodecError(_("a bad signature"))
        params = []
        try:
            for item in signature:
                p_name, p_kind, has_default, default = item
                if not (isinstance(p_name, str) and isinstance(p_kind, int) and isinstance(has_default, bool)):
                    raise CodecError(_("a bad parameter"))
                value = codec.decode(default, max_bytes=100_000) if has_default else inspect.Parameter.empty
                params.append(inspect.Parameter(p_name, inspect._ParameterKind(p_kind), default=value))
            signature = inspect.Signature(params)
        except (TypeError, ValueError) as e:
            raise CodecError(_("a bad signature ({type_e___name})", type_e___name=type(e).__name__)) from None
    return RemoteFunction(name, qualname, signature, names)
