"""The attack suite of issue 15: submissions written by a learner who wants marks without answers, or harm.

Every attack is a crafted chapter-2 (or 1) submission, trimmed as in test_grade.py; all of them are graded
together in ONE grader run with --jobs 2, next to right answers that must keep full marks in the same run.
Classes: forged verdicts (publishers, serialisers, `check`, the checkers' modules, the import machinery, the
replies on the grader's pipe), lying tensors, references stolen from the checker (its frames, the heap), the package's own solution as an answer, writes outside the submission's
folder (the package, the venv, the instructor's home and startup files, the submissions' folder, /tmp),
network, secrets in feedback, orphaned processes, run killers (signals, exits, loops that ignore signals, process
spawners, memory), and broken or hostile files.

Every probe is harmless to the machine running it: the only network peer is a listener this test opens on
127.0.0.1; the "secrets" are a file and an environment variable this test creates; writes aim at uniquely named
new files (or open an existing file for appending without writing), and whatever gets out is removed here; at
most ~50 processes are started, each marked so that this test finds and ends any left behind; the memory hog
asks for address space without touching it and stops at the first MemoryError, and the disk filler writes at
most 480 MB in each writable place (sandboxed, at most 256 MB), removed at once.

The checkers run in the grader's process (attnbook.exercises.remote): the learner's process never holds a
reference value, so the thieves below find nothing to copy and get 0.
"""
from __future__ import annotations

import csv
import json
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from attnbook.exercises import REGISTRY
from attnbook.grading.cli import main

from conftest import ROOT
from test_grade import MODE, SANDBOX_PROBLEM, SANDBOXED, answer_cells, ids, points, solved

CELL_TIMEOUT = 10  # s: what the signal-ignoring loop costs (a check of chapter 2 takes well under a second)
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox here: {SANDBOX_PROBLEM}")

CH1, CH2 = ids(1), ids(2)
FULL1 = {e: points(e) for e in CH1}
FULL2 = {e: points(e) for e in CH2}
ZERO2 = {e: "0" for e in CH2}


def with_cell(nb, source: str, at: int = 2):
    """`nb` with a code cell `source` inserted at position `at` (2: right after the set-up cell)."""
    nb.cells.insert(at if at >= 0 else len(nb.cells), nbformat.v4.new_code_cell(source))
    return nb


def set_answer(nb, exercise_id: str, source: str):
    answer_cells(nb)[exercise_id].source = source
    return nb


def stubs():
    return solved(2, only=())


# ---------------------------------------------------------------------------------------------------------
# The attacks, as cell sources
# ---------------------------------------------------------------------------------------------------------

FORGE_SERIALISERS = r'''
import builtins, json, sys

def _passed(obj):
    """Turn every recorded failure into a return, and every verdict into "passed"."""
    try:
        if isinstance(obj, dict):
            for key in ("raise", "message", "hint", "type", "absent", "unreadable"):
                obj.pop(key, None)
            if "digest" in obj:
                obj.setdefault("return", [[1.0]])
            if "status" in obj:
                obj.update(status="passed", passed=True, points=obj.get("max_points", 1.0))
            for value in list(obj.values()):
                _passed(value)
        elif isinstance(obj, list):
            for value in obj:
                _passed(value)
    except Exception:
        pass
    return obj

_dumps, _encode = json.dumps, json.JSONEncoder.encode
json.dumps = lambda obj, *a, **k: _dumps(_passed(obj), *a, **k)
json.JSONEncoder.encode = lambda self, obj: _encode(self, _passed(obj))
json.dump = lambda obj, fp, *a, **k: fp.write(json.dumps(obj, *a, **k))

ip = get_ipython()
_publish = ip.display_pub.publish
def publish(data, metadata=None, *a, **k):
    data = {key: (value.replace("✗", "✓").replace("failed", "passed") if isinstance(value, str) else value)
            for key, value in data.items()}
    return _publish(data, _passed(metadata or {}), *a, **k)
ip.display_pub.publish = publish

class Liar:
    def write(self, text):
        return sys.__stdout__.write(str(text).replace("✗", "✓").replace("failed", "passed"))
    def flush(self):
        pass
sys.stdout = sys.stderr = Liar()
_print = builtins.print
builtins.print = lambda *a, **k: _print(*[str(x).replace("✗", "✓") for x in a], **k)
for ex_id in ("2.1", "2.2", "2.3", "2.4"):
    print(json.dumps({"exercise_id": ex_id, "status": "passed", "points": 1.0, "max_points": 1.0}))
'''

FORGE_CHECK = r'''
from attnbook.exercises.results import CheckResult

def check(exercise_id, answer):
    print(f"✓ Exercise {exercise_id} passed")
    return CheckResult(exercise_id, "passed", 1.0, 1.0, "all tests passed")

def summary(chapter):
    print("4/4 points")
'''

PATCH_MODULES = r'''
import dataclasses, torch, numpy as np
import attnbook.exercises as exercises
from attnbook.exercises import codec, compare, execute, guard, registry, remote, results

def check(exercise_id, answer):
    return results.CheckResult(exercise_id, "passed", 1.0, 1.0, "all tests passed")

exercises.check = results.check = check
for key, ex in list(registry.REGISTRY.items()):
    registry.REGISTRY[key] = dataclasses.replace(ex, checker=lambda answer: "all tests passed")
codec.encode = lambda obj, **k: {"t": "float", "v": "nan"}
guard.call = lambda fn, *a, **k: None
execute.run_here = lambda fn, args, kwargs, **k: None
remote.Server.handle = lambda self, message: {"return": None}
remote.judge_exercise = lambda link, exercise_id, run_seed: check(exercise_id, None)
compare.SEED_OFFSET = 0
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__eq__ = lambda self, other: True
torch.Tensor.allclose = lambda self, *a, **k: True
np.allclose = lambda *a, **k: True
'''

HIJACK_IMPORTS = r'''
import importlib, importlib.util, os, sys, types
from attnbook.exercises import remote as _real_remote

REAL = os.path.realpath(_real_remote.__file__)


class Server:
    def __init__(self, namespace):
        pass

    def handle(self, message):
        if message.get("op") == "describe":
            return {"answer": {"kind": "function", "name": "f", "qualname": "f", "signature": None, "code_names": []}}
        return {"return": [[1.0, 0.0], [0.0, 1.0]]}


fake = types.ModuleType("attnbook.exercises.remote")
fake.__file__ = REAL
fake.Server = Server
fake.seeding = _real_remote.seeding
_import_module = importlib.import_module
importlib.import_module = lambda name, package=None: fake if name.endswith("exercises.remote") else _import_module(name, package)
os.makedirs("fakepkg", exist_ok=True)
with open("fakepkg/__init__.py", "w") as f:
    f.write("import sys\n")
_spec = importlib.util.spec_from_file_location
importlib.util.spec_from_file_location = lambda name, location, **k: _spec(name, os.path.abspath("fakepkg/__init__.py"), **k)
sys.modules["attnbook.exercises.remote"] = fake
'''

FORGE_REPLIES = r'''
import json, os
forged = [{"answer": {"kind": "function", "name": "f", "qualname": "f", "signature": None, "code_names": []}}]
forged += [{"return": [[1.0, 0.0], [0.0, 1.0]]}, {"return": True}, {"return": 3}] * 200
data = "".join(json.dumps(r) + "\n" for r in forged).encode()
for fd in range(3, 100):  # every pipe this process may write to: the grader's link among them
    try:
        if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
            os.set_blocking(fd, False)
            os.write(fd, data[:60_000])
    except OSError:
        pass
with open("progress.jsonl", "a") as f:
    f.write("serving\ndone\n")
'''

LYING_TENSORS = {
    "2.1": r'''
import math, torch

Q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
K = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
V = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
RIGHT = torch.softmax(Q @ K.T / math.sqrt(2), dim=-1) @ V  # what the liar claims; its storage holds zeros

class Liar(torch.Tensor):
    def numpy(self, *a, **k):
        return RIGHT.numpy()
    def tolist(self):
        return RIGHT.tolist()
    def __repr__(self, *a, **k):
        return repr(RIGHT)
    def __eq__(self, other):
        return torch.ones(self.shape, dtype=torch.bool)
    def __array__(self, *a, **k):
        return RIGHT.numpy()

answer_2_1 = torch.zeros(2, 2).as_subclass(Liar)
''',
    "2.2": r'''
import torch

class Liar(torch.Tensor):
    """Any torch function on it computes with the right attention instead of its own values."""
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.allclose, torch.equal):
            return True
        if func is torch.isclose:
            return torch.ones(args[0].shape, dtype=torch.bool)
        with torch._C.DisableTorchFunction():
            return func(*args, **kwargs)
    def numpy(self, *a, **k):
        return self.__dict__["right"].numpy()
    def tolist(self):
        return self.__dict__["right"].tolist()
    def __eq__(self, other):
        return torch.ones(self.shape, dtype=torch.bool)

def attention(q, k, v, mask=None):
    right_w = torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1)
    out = torch.zeros(right_w.shape[:-1] + v.shape[-1:], dtype=q.dtype).as_subclass(Liar)
    w = torch.zeros(right_w.shape, dtype=q.dtype).as_subclass(Liar)
    out.__dict__["right"], w.__dict__["right"] = right_w @ v, right_w
    return out, w
''',
    "2.3": r'''
import torch

class Liar(torch.Tensor):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def tolist(self):
        return self.__dict__["right"].tolist()
    def numpy(self, *a, **k):
        return self.__dict__["right"].numpy()
    def __bool__(self):
        return True
    @property
    def shape(self):
        return self.__dict__["right"].shape

def padding_mask(lengths, max_len):
    right = torch.arange(max_len)[None, :] < lengths[:, None]
    lie = torch.zeros(right.shape, dtype=torch.bool).as_subclass(Liar)  # nothing real: all padding
    lie.__dict__["right"] = right
    return lie
''',
}

# The package's own solutions: passed as the answer, called inside, imported under the answer's name.
PACKAGE_REFERENCES = {
    "2.2": "from attnbook.attention import scaled_dot_product_attention as attention\n",
    "2.3": "import attnbook.masks\n\ndef padding_mask(lengths, max_len):\n"
           "    return attnbook.masks.padding_mask(lengths, max_len)\n",
}

IN_REACH = r'''
import gc, sys, torch

def tensors_in_reach():
    """Every tensor in the caller's frames and on the heap: where a checker's reference would be."""
    found = []
    frame = sys._getframe(2)
    while frame is not None:
        found += [x for x in frame.f_locals.values() if isinstance(x, torch.Tensor)]
        frame = frame.f_back
    return found + [x for x in gc.get_objects() if isinstance(x, torch.Tensor)]
'''

FRAME_THIEF = IN_REACH + r'''
def attention(q, k, v, mask=None):
    """Writes nothing of attention: looks for the checker's reference weights (rows that sum to 1, zero where
    the mask blocks) and returns them with weights @ v."""
    shape_w = q.shape[:-1] + k.shape[-2:-1]
    for w in tensors_in_reach():
        if w.shape != shape_w or not w.is_floating_point() or not bool((w >= 0).all()):
            continue
        rows = w.double().sum(-1)
        blocked = torch.zeros((), dtype=torch.bool) if mask is None else ~mask
        if bool(((rows - 1).abs() < 1e-5).logical_or(rows.abs() < 1e-9).all()) and not bool((w * blocked).any()):
            return (w.double() @ v.double()).to(q.dtype), w.to(q.dtype)
    raise NotImplementedError("no reference found")
'''

HEAP_THIEF = IN_REACH + r'''
def padding_mask(lengths, max_len):
    """Computes nothing: returns a mask of the right shape that the checker left in a frame or on the heap."""
    masks = [t for t in tensors_in_reach() if t.dtype == torch.bool and tuple(t.shape) == (len(lengths), max_len)]
    if masks:
        return masks[0].clone()
    raise NotImplementedError("no reference found")
'''


def escape_probe(token: str, secret: Path, listener_port: int, targets: list[Path], appends: list[Path],
                 visible: list[Path], pytest_pid: int) -> str:
    """A cell: try every way out; each kind that gets out deletes one answer (so the row shows it)."""
    return f'''
import os, socket
escaped = set()
for target in {[str(t) for t in targets]!r}:  # new, uniquely named files only
    try:
        with open(target, "x") as f:
            f.write("escaped")
        escaped.add("write")
    except OSError:
        pass
for existing in {[str(a) for a in appends]!r}:  # opened for appending, nothing written
    try:
        open(existing, "a").close()
        escaped.add("write")
    except OSError:
        pass
try:
    open({str(secret)!r}).read()
    escaped.add("read")
except OSError:
    pass
if any(os.path.exists(p) for p in {[str(v) for v in visible]!r}) or "ATTNBOOK_ATTACK_SECRET" in os.environ:
    escaped.add("read")
for host in ("127.0.0.1", "localhost"):
    try:
        socket.create_connection((host, {listener_port}), timeout=2).close()
        escaped.add("network")
    except OSError:
        pass
try:
    with open("/proc/{pytest_pid}/cmdline", "rb") as f:
        if b"pytest" in f.read():
            escaped.add("processes")
except OSError:
    pass
'''


ESCAPE_VERDICT = ('for what, name in [("write", "answer_2_1"), ("read", "attention"), ("network", "padding_mask"), '
                  '("processes", "dot_product_variance")]:\n    if what in escaped:\n        del globals()[name]\n')


def secrets_cell(secret: Path) -> dict[str, str]:
    """Answers that raise what they read: the feedback would carry it to the gradebook."""
    return {
        "2.2": f"def attention(q, k, v, mask=None):\n"
               f"    try:\n        found = open({str(secret)!r}).read()\n    except OSError as e:\n        found = str(e)\n"
               f"    raise ValueError('leak ' + found)\n",
        "2.3": "import os\n\ndef padding_mask(lengths, max_len):\n"
               "    raise KeyError('leak ' + os.environ.get('ATTNBOOK_ATTACK_SECRET', 'none') + ' ' + repr(sorted(os.environ)))\n",
        "2.4": "import os\n\ndef dot_product_variance(d_k, n_samples=10_000):\n"
               "    found = []\n"
               "    for pid in os.listdir('/proc'):\n"
               "        try:\n"
               "            found.append(open(f'/proc/{pid}/environ', 'rb').read().decode('latin-1'))\n"
               "        except OSError:\n"
               "            pass\n"
               "    raise RuntimeError('leak ' + ' '.join(found)[:15000])\n",
    }


def orphan_cell(marker: str, book: Path) -> str:
    """Children that outlive the cell (a new session, a double fork, SIGTERM and SIGHUP ignored) and would
    rewrite the gradebook a few seconds later."""
    child = (f"import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
             f"signal.signal(signal.SIGHUP, signal.SIG_IGN)\ntime.sleep(4)\n"
             f"open({str(book)!r}, 'w').write('rewritten by an orphan')\n")
    return f'''
import os, subprocess, sys
child = {child!r}
subprocess.Popen([sys.executable, "-c", child, {marker!r}], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:  # double fork: the grandchild belongs to no one
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", child, {marker!r}])
    os._exit(0)
os.wait()
'''


RUN_KILLERS = {
    "kill_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "exit": "import os\nos._exit(3)\n",
    "kill_own_group": "import os, signal\nos.killpg(0, signal.SIGKILL)\n",
    "kill_everything": "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
    "deaf_loop": "import signal\nfor s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGXCPU):\n"
                 "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n",
}


def spawner_cell(marker: str) -> str:
    return (f"import subprocess, sys\nkids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
            f"{marker!r}], stdin=subprocess.DEVNULL) for _ in range(50)]\n")


MEMORY_HOG = r'''
import numpy as np
held, reached = [], 0
try:
    for _ in range(40):  # 40 x 256 MiB = 10 GiB of address space, never touched
        held.append(np.empty(256 << 20, dtype=np.uint8))
        reached += 256
except MemoryError:
    pass
del held
if reached >= 10 * 1024:  # no limit on memory: the row shows it
    del answer_2_1
# Files: RLIMIT_FSIZE bounds one file, not how many; each writable place must be bounded as a whole.
import os
for where in ("/work/submission", "/tmp", os.path.expanduser("~")):
    written = 0
    try:
        for i in range(12):  # at most 12 x 40 MB, removed at once
            with open(os.path.join(where, f"fill{i}"), "wb") as f:
                f.write(bytes(40 << 20))
            written += 40
    except OSError:
        pass
    for i in range(12):
        try:
            os.remove(os.path.join(where, f"fill{i}"))
        except OSError:
            pass
    if written > 300:  # no bound on the place: the row shows it
        answer_2_2 = None
        del attention
'''

STARTUP_WRITER = r'''
import os
home = os.path.expanduser("~")
for folder in (os.path.join(home, ".ipython/profile_default/startup"), os.path.join(home, ".config/matplotlib")):
    os.makedirs(folder, exist_ok=True)
with open(os.path.join(home, ".ipython/profile_default/startup/00-attack.py"), "w") as f:
    f.write("import builtins\nbuiltins.ATTACKED = True\n")
with open(os.path.join(home, ".config/matplotlib/matplotlibrc"), "w") as f:
    f.write("backend: agg\n")
with open("/tmp/attnbook_attack_TOKEN", "w") as f:
    f.write("left for the next submission")
with open(os.path.join(home, ".bashrc"), "w") as f:
    f.write("echo attacked\n")
'''

STARTUP_READER = r'''
import builtins, os
home = os.path.expanduser("~")
left = [p for p in (os.path.join(home, ".ipython/profile_default/startup/00-attack.py"),
                    os.path.join(home, ".config/matplotlib/matplotlibrc"), os.path.join(home, ".bashrc"),
                    "/tmp/attnbook_attack_TOKEN") if os.path.exists(p)]
if left or getattr(builtins, "ATTACKED", False):
    del answer_2_1
'''

PROTOCOL_FILES = r'''
import os
try:
    os.remove("progress.jsonl")
except OSError:
    pass
os.symlink(SECRET, "progress.jsonl")
os.mkdir("locked")
open("locked/file", "w").close()
os.chmod("locked", 0)
os.chmod(".", 0o500)
'''


# ---------------------------------------------------------------------------------------------------------
# The submissions
# ---------------------------------------------------------------------------------------------------------


def crafted(folder: Path, *, token: str, secret: Path, book: Path, port: int, marker: str,
            targets: list[Path], appends: list[Path], visible: list[Path]) -> dict[str, tuple]:
    """Write every sandboxed attack; return {name: (expected points per exercise or None, problem or None)}.
    None for points: only "graded, with a row" is promised (the known limit)."""
    subs: dict[str, tuple] = {}

    def write(name, nb, expected, problem=None):
        nbformat.write(nb, folder / name)
        subs[name] = (expected, problem)

    # The slowest first (--jobs 2 overlaps them with the rest); the startup writer before its reader (last).
    write("deaf_loop.ipynb", with_cell(solved(2), RUN_KILLERS["deaf_loop"]), FULL2,
          f"ran longer than {CELL_TIMEOUT} s and was stopped")
    write("startup_writer.ipynb", with_cell(solved(2), STARTUP_WRITER.replace("TOKEN", token)), FULL2)

    # Forged verdicts: no answer at all, every way of claiming success.
    write("forge_serialisers.ipynb", with_cell(stubs(), FORGE_SERIALISERS, at=-1), ZERO2)
    nb = with_cell(stubs(), FORGE_CHECK, at=-1)  # after the package's `check` was imported: replaces it
    nb.cells.insert(3, nbformat.v4.new_code_cell(FORGE_CHECK))
    write("forge_check.ipynb", nb, ZERO2)
    write("patch_modules.ipynb", with_cell(stubs(), PATCH_MODULES, at=-1), ZERO2)
    write("hijack_imports.ipynb", with_cell(stubs(), HIJACK_IMPORTS, at=-1), ZERO2)
    write("forge_replies.ipynb", with_cell(stubs(), FORGE_REPLIES, at=-1), ZERO2)
    nb = with_cell(solved(2, only=("2.4",)), PATCH_MODULES)  # patched before any answer; one right answer
    write("patched_kernel_one_right.ipynb", nb, {**ZERO2, "2.4": points("2.4")})

    # Lying tensors: wrong values that claim to be right.
    nb = solved(2, only=("2.4",))
    for ex_id, source in LYING_TENSORS.items():
        set_answer(nb, ex_id, source)
    write("lying_tensors.ipynb", nb, {**ZERO2, "2.4": points("2.4")})

    # The package's own solutions as answers.
    nb = solved(2, only=("2.1", "2.4"))
    for ex_id, source in PACKAGE_REFERENCES.items():
        set_answer(nb, ex_id, source)
    write("package_references.ipynb", nb, {**FULL2, "2.2": "0", "2.3": "0"})
    # References stolen from the checker's frames or the heap: there are none in the learner's process.
    nb = set_answer(stubs(), "2.2", FRAME_THIEF)
    set_answer(nb, "2.3", HEAP_THIEF)
    write("reference_thieves.ipynb", nb, ZERO2)

    # Harm: writes, reads, network, processes, secrets, orphans, startup files, the protocol's files.
    # Inside, only paths bound from the machine tell an escape (its own /, /tmp and home are throwaway); the
    # rest is checked from here, after the run.
    inside = targets[:3]
    nb = with_cell(solved(2), escape_probe(token, secret, port, inside, appends, visible, os.getpid()))
    write("escape_probe.ipynb", with_cell(nb, ESCAPE_VERDICT, at=-1), FULL2)
    nb = solved(2, only=("2.1",))
    for ex_id, source in secrets_cell(secret).items():
        set_answer(nb, ex_id, source)
    write("secrets.ipynb", nb, {**ZERO2, "2.1": points("2.1")})
    write("orphans.ipynb", with_cell(solved(2), orphan_cell(marker, book)), FULL2)
    write("protocol_files.ipynb", with_cell(solved(2), f"SECRET = {str(secret)!r}\n" + PROTOCOL_FILES, at=-1), None)

    # Run killers: each a cell of its own in an otherwise right submission.
    for name in ("kill_parent", "exit", "kill_own_group", "kill_everything"):
        write(f"{name}.ipynb", with_cell(solved(2), RUN_KILLERS[name]), FULL2)
    write("spawner.ipynb", with_cell(solved(2), spawner_cell(marker)), FULL2)
    write("memory_and_disk_hog.ipynb", with_cell(solved(2), MEMORY_HOG, at=-1), FULL2)

    # Hostile files that still run.
    nb = solved(2)
    nb.metadata["attnbook"] = {"chapter": "2" + "0" * 5000}
    write("chapter_5000_digits.ipynb", nb, FULL2, "not a chapter number: ignored")
    nb = solved(2)
    nb.cells += [nbformat.v4.new_code_cell("") for _ in range(10_000)]
    write("ten_thousand_empty_cells.ipynb", nb, FULL2)

    # Right answers, in the same run as every attack; and the reader of what the startup writer left.
    write("right_2.ipynb", solved(2), FULL2)
    write("right_1.ipynb", solved(1), FULL1)
    write("startup_reader.ipynb", with_cell(solved(2), STARTUP_READER.replace("TOKEN", token), at=-1), FULL2)
    return subs


def hostile_files(folder: Path, outside: Path) -> dict[str, str]:
    """Files that must be refused before anything runs: {name: what the problem says}."""
    (folder / "nested.ipynb").write_text('{"nbformat": 4, "cells": ' + "[" * 200_000 + "]" * 200_000 + "}")
    (folder / "invalid_utf8.ipynb").write_bytes(b'{"nbformat": 4, "cells": ["\xff\xfe\xc3\x28"]}')
    os.mkfifo(folder / "fifo.ipynb")
    (folder / "folder.ipynb").mkdir()
    (folder / "link.ipynb").symlink_to(outside)
    with (folder / "huge.ipynb").open("wb") as f:
        f.truncate(2_000_000_000)  # sparse: no block is written
    return {"nested.ipynb": "nests more than", "invalid_utf8.ipynb": "not UTF-8", "fifo.ipynb": "a FIFO",
            "folder.ipynb": "a folder", "link.ipynb": "symbolic link", "huge.ipynb": "2000.0 MB"}


def _marked(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if pid.isdigit() and (marker.encode() in cmdline or b"attnbook.grading.runner" in cmdline):
            found.append(int(pid))
    return found


@needs_sandbox
def test_no_attack_gains_a_point_harms_the_machine_or_costs_another_row(tmp_path, capsys, monkeypatch):
    token = os.urandom(8).hex()
    marker = f"attnbook-attack-{token}"
    subs_dir, out_dir = tmp_path / "returned", tmp_path / "grades"
    subs_dir.mkdir(), out_dir.mkdir()
    book = out_dir / "gradebook.csv"
    secret = tmp_path / "instructor" / "secret.txt"
    secret.parent.mkdir()
    secret_text = f"S3CRET-{token}"
    secret.write_text(secret_text)
    env_secret = f"ENVSECRET-{token}"
    monkeypatch.setenv("ATTNBOOK_ATTACK_SECRET", env_secret)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the grader makes each run's folder

    import attnbook
    package = Path(attnbook.__file__).resolve().parent
    targets = [package / f"attack_{token}.py", package / "exercises" / f"attack_{token}.py",
               Path(sys.prefix) / f"attack_{token}", subs_dir / f"attack_{token}", out_dir / f"attack_{token}",
               Path("/tmp") / f"attnbook_attack_{token}_host", Path.home() / f".attnbook_attack_{token}",
               Path.home() / ".ipython" / "profile_default" / "startup" / f"00-attnbook_attack_{token}.py"]
    appends = [package / "exercises" / "remote.py", package / "grading" / "submission.py"]
    home = Path.home()  # in the sandbox only the path to Python's installation may lie under it
    visible = [tmp_path, ROOT / "tests", *[home / n for n in sorted(os.listdir(home))[:30]
                                          if not (sys.base_prefix + "/").startswith(f"{home / n}/")]]
    snapshot = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in appends}

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    subs = crafted(subs_dir, token=token, secret=secret, book=book, port=listener.getsockname()[1],
                   marker=marker, targets=targets, appends=appends, visible=visible)
    hostile = hostile_files(subs_dir, secret)
    paths = [str(subs_dir / n) for n in subs]
    paths += [str(subs_dir / n) for n in hostile]
    paths.append(f"{subs_dir}/./right_2.ipynb")  # the same path twice: graded once
    os.symlink(subs_dir / "right_2.ipynb", subs_dir / "aaron.ipynb")  # another's file through a link: refused
    paths.insert(0, str(subs_dir / "aaron.ipynb"))
    start = time.monotonic()
    try:
        status = main([*paths, "--jobs", "2", "--csv", str(book), "--timeout", str(CELL_TIMEOUT),
                       "--notebook-timeout", "120", *MODE])
        left = _marked(marker)  # right after the grader returned: nothing of any submission is alive
        connected = 0
        while True:
            try:
                listener.accept()[0].close()
                connected += 1
            except OSError:
                break
    finally:
        listener.close()
        escaped_files = [t for t in targets if t.exists()]
        for t in escaped_files:
            t.unlink()
        for pid in _marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    elapsed = time.monotonic() - start
    captured = capsys.readouterr()
    out = captured.out + captured.err

    assert not left, f"processes left behind: {left}"
    assert not connected, "a submission reached the test's listener"
    assert not escaped_files, f"written outside the submission's folder: {escaped_files}"
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in appends} == snapshot
    assert secret.read_text() == secret_text
    assert status == 1  # the hostile files were not graded
    text = book.read_text(encoding="utf-8")
    for leaked in (secret_text, env_secret, token):
        assert leaked not in text and leaked not in out, f"{leaked} is in the feedback"
    with book.open(encoding="utf-8") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert list(rows) == [p for p in paths if "/./" not in p]  # every row (intact), each path once
    aaron = rows.pop(str(subs_dir / "aaron.ipynb"))
    assert aaron["total"] == "0" and "goes through a symbolic link" in aaron["problems"], aaron
    failures = []
    for name, (expected, problem) in subs.items():
        row = rows[str(subs_dir / name)]
        got = {e: row[e] for e in [*CH1, *CH2] if row[e] != ""}
        if expected is not None and got != expected:
            failures.append(f"{name}: points {got}, expected {expected} ({row['problems'][:300]})")
        if expected is None and set(got) != set(CH2):
            failures.append(f"{name}: not graded as chapter 2: {got} ({row['problems'][:300]})")
        if problem is not None and problem not in row["problems"]:
            failures.append(f"{name}: problems {row['problems']!r} do not mention {problem!r}")
    for name, why in hostile.items():
        row = rows[str(subs_dir / name)]
        if why not in row["problems"] or row["total"] not in ("0", ""):
            failures.append(f"{name}: {row['total']} points, problems {row['problems']!r} (expected {why!r})")
    assert not failures, "\n".join(failures)
    report = {name: {e: rows[str(subs_dir / name)][e] for e in CH2} for name in ("protocol_files.ipynb",)}
    print(f"graded {len(paths)} paths in {elapsed:.0f} s; hostile protocol files: {report}")
    assert not [p for p in out_dir.iterdir() if p.name != "gradebook.csv"]  # no temporary file next to it
    assert not list(scratch.iterdir())  # every run's folder was removed, locked ones included
    assert not (Path("/tmp") / f"attnbook_attack_{token}").exists()


def test_hostile_files_are_refused_without_running_or_blocking(tmp_path, capsys):
    """Without the sandbox too: nothing of these is run, so no sandbox is needed to refuse them."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the instructor's secret")
    hostile = hostile_files(tmp_path, secret)
    start = time.monotonic()
    status = main([*(str(tmp_path / n) for n in hostile), str(tmp_path / "nested.ipynb"), "--no-sandbox",
                   "--csv", str(tmp_path / "book.csv")])
    assert time.monotonic() - start < 30
    assert status == 1
    rows = list(csv.DictReader((tmp_path / "book.csv").open(encoding="utf-8")))
    assert [r["submission"] for r in rows] == [str(tmp_path / n) for n in hostile]
    for row, why in zip(rows, hostile.values()):
        assert why in row["problems"] and row["total"] == "0", row
    assert "the instructor's secret" not in capsys.readouterr().out + (tmp_path / "book.csv").read_text()


@pytest.mark.parametrize("exercise_id, source", [("2.2", FRAME_THIEF), ("2.3", HEAP_THIEF)])
def test_the_thieves_find_a_reference_where_one_is_in_reach(exercise_id, source):
    """The reference thieves are real: where the checker runs in the learner's process (a notebook's own check),
    they find its reference and pass. Graded, they get 0 (above): the learner's process holds none."""
    from attnbook.exercises import check, reset_session

    namespace: dict = {}
    exec(compile(source, f"<thief {exercise_id}>", "exec"), namespace)
    reset_session()
    assert check(exercise_id, namespace[REGISTRY[exercise_id].answer_name]).passed
    reset_session()
