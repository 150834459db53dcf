"""A grader that loses no memory (issue 23): neither the sandbox nor the replies can fill the machine's memory.

- Sandbox: every writable place is a file system of a set size (writing past it fails with ENOSPC), the rest is
  read-only (EROFS); no nested user namespace (so no mount of an unsized tmpfs of one's own); no memory that no
  process and no file system shows (memfd, System V shared memory); and one memory budget for the whole process
  tree, enforced by the grader's Watch, whose reason ends up in the submission's row.
- Replies: decoding keeps nothing after the value is dropped (no cache of the classes made for a reply's types),
  and an array's elements and nested lists are bounded by the bytes that came (a zero-size dtype, a shape such as
  (n, 0)).

The limits are lowered for the tests (sizes of 1 MiB, a budget of 300 MB), so no test holds more than about half
a gigabyte, and every process a test starts is killed with its sandbox.
"""
from __future__ import annotations

import base64
import gc
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
import weakref

import nbformat
import numpy as np
import pytest
import torch
from numpy.lib import format as npy_format

from attnbook.exercises import codec, remote
from attnbook.exercises.codec import CodecError
from attnbook.exercises.results import FAILED
from attnbook.grading import sandbox
from attnbook.grading.submission import grade_submission

from test_grade import CELL_TIMEOUT, REGISTRY, ids, needs_sandbox, solved

MiB = 1 << 20


def _run(script: str, limits: sandbox.Limits | None = None, *, timeout: float = 60.0, during=None):
    """Run Python `script` in a sandbox through the grader's own `start` (its limits and Watch); returns (its
    stdout, why_stopped, what `during(proc)` returned). `during` is called once the script has printed its first
    line (it holds its files and processes until the grader closes its stdin)."""
    box = sandbox.Sandbox()
    with tempfile.TemporaryDirectory(prefix="attnbook-memory-test-") as tmp:
        folder, etc_dir = os.path.join(tmp, "submission"), os.path.join(tmp, "etc")
        os.mkdir(folder)
        os.mkdir(etc_dir)
        box.prepare(etc_dir)
        proc = sandbox.start(box.command(folder, etc_dir, [box.python, "-c", script]), cwd=folder, env={},
                             limits=limits or sandbox.Limits(cpu_s=60), stderr=subprocess.DEVNULL)
        seen = None
        try:
            deadline = time.monotonic() + timeout
            first = proc.stdout.readline()
            if during is not None and first:
                seen = during(proc)
            proc.stdin.close()
            rest = b""
            while time.monotonic() < deadline and not sandbox.exited(proc):
                time.sleep(0.05)
            if sandbox.exited(proc):
                rest = proc.stdout.read()
        finally:
            sandbox.kill_tree(proc)
        return (first + rest).decode(), sandbox.why_stopped(proc), seen


# ---------------------------------------------------------------------------------------------------------
# Every writable place has a size; the rest is read-only
# ---------------------------------------------------------------------------------------------------------

FILL = r'''
import errno, json, os, sys
places = ["/work/submission/f", "/tmp/f", "/home/student/f", "/dev/shm/f", "/f", "/dev/f", "/usr/f"]
found, held = {}, []
for path in places:
    try:
        f = open(path, "wb")
        for _ in range(16):
            f.write(b"x" * (256 << 10))
            f.flush()
        found[path] = "written"
    except OSError as e:
        found[path] = errno.errorcode.get(e.errno, str(e.errno))
    else:
        held.append(f)
print(json.dumps(found), flush=True)
sys.stdin.read()  # hold the files until the grader has looked
'''


@needs_sandbox
def test_every_writable_place_has_a_size_and_the_rest_is_read_only(monkeypatch):
    for name in ("FOLDER_BYTES", "TMP_BYTES", "HOME_BYTES", "SHM_BYTES"):
        monkeypatch.setattr(sandbox, name, 1 * MiB)

    def look(proc):  # what the Watch counts for the full file systems, seen from the grader
        tree = sandbox.process_tree(proc.pid, 100)
        return sandbox.files_held(tree[1], sandbox._file_systems())

    out, why, held = _run(FILL, during=look)
    found = json.loads(out.splitlines()[0])
    assert found == {"/work/submission/f": "ENOSPC", "/tmp/f": "ENOSPC", "/home/student/f": "ENOSPC",
                     "/dev/shm/f": "ENOSPC", "/f": "EROFS", "/dev/f": "EROFS", "/usr/f": "EROFS"}, found
    assert 3.5 * MiB <= held <= 4 * MiB, held  # the four full file systems count in the budget
    assert why is None


def test_every_tmpfs_of_the_command_has_a_size_and_the_root_and_dev_are_remounted_read_only(tmp_path):
    box = sandbox.Sandbox()
    cmd = box.command(str(tmp_path), str(tmp_path), ["python"])
    tmpfs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--tmpfs"]
    assert sorted(tmpfs) == sorted(path for path, _ in sandbox._file_systems())
    assert all(cmd[i - 2] == "--size" for i, a in enumerate(cmd) if a == "--tmpfs")
    remounted = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--remount-ro"]
    assert remounted == ["/dev", "/"] and cmd[-6:-4] == ["--remount-ro", "/"]  # the root last, after every mount
    assert "--disable-userns" in cmd


# ---------------------------------------------------------------------------------------------------------
# No nested user namespace; no memory outside processes and file systems
# ---------------------------------------------------------------------------------------------------------

ESCAPES = r'''
import ctypes, errno, json, os, shutil, subprocess
libc = ctypes.CDLL(None, use_errno=True)
found = {}
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
found["unshare(user, mount)"] = libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 or errno.errorcode[ctypes.get_errno()]
found["unshare(user)"] = libc.unshare(CLONE_NEWUSER) == 0 or errno.errorcode[ctypes.get_errno()]
if shutil.which("unshare"):
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs none /tmp && echo mounted"],
                          capture_output=True, text=True)
    found["unshare -Urm"] = "refused" if done.returncode != 0 and "mounted" not in done.stdout else "mounted"
try:
    os.memfd_create("hold")
    found["memfd_create"] = True
except OSError as e:
    found["memfd_create"] = errno.errorcode[e.errno]
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
found["shmget"] = libc.shmget(0, 1 << 20, 0o1600) != -1 or errno.errorcode[ctypes.get_errno()]
print(json.dumps(found), flush=True)
'''


@needs_sandbox
def test_no_nested_user_namespace_and_no_memory_outside_processes_and_files():
    out, why, _ = _run(ESCAPES)
    found = json.loads(out.splitlines()[0])
    assert found["unshare(user, mount)"] in ("ENOSPC", "EPERM") and found["unshare(user)"] in ("ENOSPC", "EPERM")
    assert found.get("unshare -Urm", "refused") == "refused"
    assert found["memfd_create"] == "EPERM" and found["shmget"] == "EPERM", found
    assert why is None


def test_the_seccomp_filter_is_well_formed():
    prog = sandbox.seccomp_program("x86_64")
    assert len(prog) % 8 == 0 and len(prog) // 8 == 4 + 1 + 3 + 2  # arch check, x32, three syscalls, returns
    assert sandbox.seccomp_program("riscv64") is None  # no filter where the numbers are not known
    assert sandbox.seccomp_program("aarch64") is not None


# ---------------------------------------------------------------------------------------------------------
# One memory budget for the whole process tree
# ---------------------------------------------------------------------------------------------------------

# Four processes, each taking 150 MB in steps of 10 MB (so the Watch sees the total grow), then waiting.
TREE = r'''
import subprocess, sys, time
child = ("import time\nheld = []\nfor _ in range(15):\n    held.append(b'x' * (10 << 20))\n"
         "    time.sleep(0.02)\nprint('full', flush=True)\ntime.sleep(120)")
kids = [subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE) for _ in range(4)]
print("started", flush=True)
for k in kids:
    k.stdout.readline()
print("all full", flush=True)
time.sleep(120)
'''


@needs_sandbox
def test_a_process_tree_past_the_budget_is_killed_as_a_whole():
    budget = 300_000_000
    start = time.monotonic()
    out, why, _ = _run(TREE, sandbox.Limits(cpu_s=60, memory=budget), timeout=60)
    assert time.monotonic() - start < 30
    assert "all full" not in out  # four times 150 MB never existed together
    assert why is not None and "300 MB" in why and "memory" in why, why


@needs_sandbox
def test_a_process_tree_within_the_budget_is_left_alone():
    out, why, _ = _run(TREE.replace("range(4)", "range(1)").replace("time.sleep(120)", "pass"),
                       sandbox.Limits(cpu_s=60, memory=400_000_000), timeout=60)
    assert "all full" in out and why is None


@needs_sandbox
def test_too_many_processes_are_stopped_even_for_root():
    """RLIMIT_NPROC stops an ordinary user's fork bomb; root's (the kernel does not count root's processes) is
    stopped by the Watch."""
    script = r'''
import subprocess, sys
kids = []
for _ in range(40):
    try:
        kids.append(subprocess.Popen(["sleep", "60"]))
    except OSError:
        break
print(len(kids), flush=True)
sys.stdin.read()
'''
    out, why, _ = _run(script, sandbox.Limits(cpu_s=60, processes=20), timeout=30, during=lambda p: time.sleep(1))
    if os.geteuid() == 0:
        assert why is not None and "20 processes" in why, (out, why)
    else:
        assert why is not None or int(out.split()[0]) < 20


@needs_sandbox
def test_the_budget_is_in_the_grade_row(tmp_path, monkeypatch):
    """A cell whose processes pass the budget: the sandbox is killed, the notebook runs again without that cell,
    and the row says why. The budget is lowered to 800 MB (a chapter-1 run holds about 0.35 GB)."""
    monkeypatch.setattr(sandbox, "MEMORY_BYTES", 800_000_000)
    child = "import time\nheld = []\nfor _ in range(15):\n    held.append(b'x' * (10 << 20))\n    time.sleep(0.02)\n" \
            "time.sleep(120)"
    hog = (f"import subprocess, sys\nchild = {child!r}\n"
           "for k in [subprocess.Popen([sys.executable, '-c', child]) for _ in range(4)]:\n    k.wait()\n")
    nb = solved(1)
    nb.cells.insert(2, nbformat.v4.new_code_cell(hog))
    path = tmp_path / "hog.ipynb"
    nbformat.write(nb, path)
    graded = grade_submission(path, timeout_s=CELL_TIMEOUT, notebook_timeout_s=120)
    assert {e: g.points for e, g in graded.exercises.items()} == {e: REGISTRY[e].points for e in ids(1)}, graded
    assert any("800 MB" in p and "memory" in p for p in graded.problems), graded.problems
    assert any("cell 3 " in p for p in graded.problems), graded.problems  # the cell that did it, skipped


# ---------------------------------------------------------------------------------------------------------
# Replies: bounded by their own size, and nothing kept after them
# ---------------------------------------------------------------------------------------------------------

def _npy(descr: str, shape: tuple, data: bytes = b"") -> str:
    """A base64 .npy with this header, followed by `data` (the header may lie about how much data there is)."""
    buf = io.BytesIO()
    npy_format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return base64.b64encode(buf.getvalue() + data).decode()


def _peak_while(fn) -> int:
    """Bytes Python and NumPy allocated at the peak while `fn()` ran (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
    except CodecError:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("descr,shape", [
    ("<U0", (2_000_000,)),  # zero-size strings: no bytes at all, a list of two million '' from tolist()
    ("|V0", (2_000_000,)),  # a void dtype of size 0
    ("|b1", (2_000_000, 0)),  # no elements, but two million empty lists from tolist()
    ("<f4", (1, 2_000_000, 0)),
    ("<U0", (1000, 1000)),
])
def test_a_tiny_reply_cannot_make_a_huge_value(descr, shape):
    text = _npy(descr, shape)
    assert len(text) < 300
    for data in ({"t": "ndarray", "v": text}, {"t": "tensor", "dtype": "bool", "v": text},
                 {"t": "npscalar", "v": text}):
        with pytest.raises(CodecError):
            codec.decode(data)

    def attack():  # what a checker does with a value answer (compare.as_value: tolist)
        codec.decode({"t": "ndarray", "v": text}).tolist()
    assert _peak_while(attack) < 1_000_000


def test_array_headers_must_match_their_data():
    with pytest.raises(CodecError):  # a header promising 8 GB over 16 bytes of data: refused before reading
        codec.decode({"t": "ndarray", "v": _npy("<f8", (10 ** 9,), b"\0" * 16)})
    with pytest.raises(CodecError):  # more data than the shape needs
        codec.decode({"t": "ndarray", "v": _npy("<f4", (2,), b"\0" * 12)})
    with pytest.raises(CodecError):  # a structured dtype
        codec.decode({"t": "ndarray", "v": _npy([("a", "<f4")], (2,), b"\0" * 8)})
    for honest in (np.zeros((3, 0)), np.zeros((0, 5), np.float32), np.array(["", "ab"]), np.zeros((8, 1, 1)),
                   np.zeros((4, 1, 1, 1, 1), bool), np.float32(2.5), np.arange(6).reshape(2, 3)):
        back = codec.decode(codec.encode(honest))
        assert np.array_equal(back, honest) and back.dtype == honest.dtype and back.shape == np.shape(honest)
    t = torch.ones(2, 0, 3)
    assert codec.decode(codec.encode(t)).shape == t.shape


def _many_types(seed: int, n: int = codec.MAX_TYPES) -> dict:
    """A reply whose items each need a class of their own: stand-ins for unknown objects, named tuples with
    fields, dict subclasses, all named for this reply."""
    items = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            items.append({"t": "opaque", "type": f"Thing{seed}_{i}", "callable": True})
        elif kind == 1:
            items.append({"t": "tuple", "type": f"Pair{seed}_{i}", "module": "m",
                          "fields": [f"f{seed}_{i}_{j}" for j in range(20)], "v": list(range(20))})
        else:
            items.append({"t": "dict", "type": f"Table{seed}_{i}", "v": [["k", i]]})
    return {"t": "list", "v": items}


def test_decoded_classes_live_no_longer_than_their_value():
    out = codec.decode(_many_types(0))
    made = [weakref.ref(type(x)) for x in out]
    assert len({r() for r in made}) == codec.MAX_TYPES
    assert type(out[1]).__name__ == "Pair0_1" and out[1].f0_1_3 == 3 and type(out[0]).__name__ == "Thing0_0"
    del out
    gc.collect()
    assert all(r() is None for r in made)  # no cache holds them


def test_a_reply_with_too_many_types_or_fields_is_refused():
    with pytest.raises(CodecError):
        codec.decode(_many_types(1, codec.MAX_TYPES + 1))
    fields = [f"f{i}" for i in range(codec.MAX_FIELDS + 1)]
    with pytest.raises(CodecError):
        codec.decode({"t": "tuple", "type": "Wide", "module": "m", "fields": fields, "v": list(range(len(fields)))})
    same = codec.decode({"t": "list", "v": [{"t": "opaque", "type": "Same"}] * (codec.MAX_TYPES * 10)})
    assert len({type(x) for x in same}) == 1  # one name within one reply: one class


class _ForgedReplies(remote.LocalLink):
    """A kernel that answers every call of the learner's function with a reply made by `forge(i)`."""

    def __init__(self, server, forge):
        super().__init__(server)
        self.forge, self.calls = forge, 0

    def ask(self, message):
        if message["op"] != "call":
            return super().ask(message)
        self.calls += 1
        return json.loads(json.dumps({"return": self.forge(self.calls)}))


def test_the_graders_memory_stays_flat_over_many_judged_replies():
    """Two hundred checks of 2.3, each answered with replies that need a hundred classes, named afresh for each
    call, and a large array: what the grader holds after a warm-up does not grow (before the fix, four replies
    of 2 MB kept 199 MB)."""
    big = codec.encode(np.zeros(250_000, np.float32))  # 1 MB of array data per reply

    def forge(i):
        return {"t": "list", "v": [_many_types(i), big]}

    link = _ForgedReplies(remote.Server({"padding_mask": lambda *a, **k: None}), forge)
    tracemalloc.start()
    try:
        sizes = []
        for n in range(200):
            result = remote.judge_exercise(link, "2.3", n)
            assert result.status == FAILED
            result = None
            if n in (49, 199):
                gc.collect()
                sizes.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert link.calls >= 200
    assert sizes[1] - sizes[0] < 2_000_000, sizes
