"""Starting the in-sandbox runner, keeping one started ahead, and checking that a sandbox can start at all.

A runner starts in a fresh folder, imports torch and IPython (about 1.5 s of a chapter 2 submission's 4.5 s),
says "ready", and then waits for one byte on its link before it reads the request and runs any of the learner's
cells. So while one submission's checks run in the grader (its runner only answers calls), the same grading
thread can already start the next submission's runner: `Spares` keeps at most one started runner per thread,
with nothing of any learner's in its folder until `Launched.go`. The learner code of two submissions never runs
at once on one thread, and `--jobs 1` still runs one submission at a time.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from . import protocol, sandbox
from ..i18n import _


@dataclass
class Launched:
    """A started runner: its temporary folder (`folder` is what the sandbox sees), its process and its stderr."""

    tmp: str
    folder: str
    proc: object
    stderr: protocol.StderrTail
    cpu_s: int

    def go(self, notebook: str, data: bytes, request: protocol.Request) -> None:
        """Put the submission in the folder (its bytes, to be copied as `notebook`) and let the runner read it."""
        # In place (O_TRUNC keeps the inode): the sandbox binds these very files, made empty by `launch`.
        with open(os.path.join(self.folder, protocol.SUBMISSION), "wb") as f:
            f.write(data)  # the bytes read and checked, not the path again (it may have changed since)
        protocol.write_request(self.folder, dataclasses.replace(request, notebook=notebook))
        try:
            os.write(self.proc.stdin.fileno(), protocol.GO)
        except OSError:
            pass  # it died while it waited: the watch of its progress says so

    def end(self) -> list[str]:
        """Kill its process tree and return the last lines of its stderr (what stays is removed by `remove`)."""
        try:
            sandbox.kill_tree(self.proc)
        finally:
            tail = self.stderr.close()[-4000:].decode("utf-8", "replace").strip().splitlines()
        return tail

    def remove(self) -> None:
        remove_tree(self.tmp)


def launch(cpu_s: int, box) -> Launched:
    """Start a runner in a new folder: sandboxed by `box`, or without a sandbox when `box` is None."""
    tmp = tempfile.mkdtemp(prefix="attnbook-grade-")
    try:
        folder, etc_dir = os.path.join(tmp, "submission"), os.path.join(tmp, "etc")
        os.mkdir(folder, 0o700)
        os.mkdir(etc_dir, 0o700)
        for name in (protocol.PROGRESS, protocol.REQUEST, protocol.SUBMISSION):  # bound into the sandbox: made
            open(os.path.join(folder, name), "xb").close()                      # here, empty, filled by `go`
        limits = sandbox.Limits(cpu_s=cpu_s)
        stderr = protocol.StderrTail()  # a pipe drained as it comes: never a file, at most its last 64 KB kept
        try:
            if box is not None:
                box.prepare(etc_dir)
                proc = sandbox.start(box.command(folder, etc_dir, box.runner_argv()), cwd=folder, env={},
                                     limits=limits, stderr=stderr.write_fd)
            else:
                argv, env = sandbox.unsandboxed_command(folder)
                proc = sandbox.start(argv, cwd=folder, env=env, limits=limits, stderr=stderr.write_fd)
        except BaseException:
            stderr.close()
            raise
        stderr.started()
        return Launched(tmp, folder, proc, stderr, cpu_s)
    except BaseException:
        remove_tree(tmp)
        raise


class Spares:
    """At most one runner started ahead per grading thread (see the module's docstring). `take` gives this
    thread's spare if it matches (same sandbox, same CPU limit) or starts one; `prepare` starts the next;
    `close` ends every spare left. Use as a context manager around a batch of submissions."""

    def __init__(self):
        self._lock = threading.Lock()
        self._waiting: dict[int, tuple[object, Launched]] = {}
        self._closed = False

    def take(self, cpu_s: int, box) -> Launched:
        with self._lock:
            held = self._waiting.pop(threading.get_ident(), None)
        if held is not None:
            key, launched = held
            if key == _key(box, cpu_s) and not sandbox.exited(launched.proc):
                return launched
            _discard(launched)
        return launch(cpu_s, box)

    def prepare(self, cpu_s: int, box) -> None:
        launched = launch(cpu_s, box)
        with self._lock:
            old = None if self._closed else self._waiting.pop(threading.get_ident(), None)
            if not self._closed:
                self._waiting[threading.get_ident()] = (_key(box, cpu_s), launched)
                launched = None
        for spare in (old, launched):
            if spare is not None:
                _discard(spare[1] if isinstance(spare, tuple) else spare)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            left, self._waiting = list(self._waiting.values()), {}
        for _key_of, launched in left:
            _discard(launched)

    def __enter__(self) -> Spares:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _key(box, cpu_s: int) -> tuple:
    """What a spare must share with the run that takes it: how it was started (the sandbox's command) and its
    CPU limit."""
    if box is None:
        return (None, cpu_s)
    return (type(box), getattr(box, "bwrap", None), tuple(getattr(box, "prefixes", ())),
            getattr(box, "package_root", None), getattr(box, "python", None), cpu_s)


def _discard(launched: Launched) -> None:
    try:
        launched.end()
    finally:
        launched.remove()


def remove_tree(path: str) -> None:
    """Remove a folder the sandbox wrote in, even where it took away its own permissions."""
    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=fix)


def check_available(box: sandbox.Sandbox | None = None) -> None:
    """Run `true` in the sandbox once; raise Unavailable with one line saying why and how to fix it."""
    box = box or sandbox.Sandbox()
    with tempfile.TemporaryDirectory(prefix="attnbook-grade-check-") as tmp:
        folder, etc_dir = os.path.join(tmp, "submission"), os.path.join(tmp, "etc")
        os.mkdir(folder)
        os.mkdir(etc_dir)
        box.prepare(etc_dir)
        cmd = box.command(folder, etc_dir, ["/bin/sh", "-c", "true"] if os.path.exists("/bin/sh") else ["true"])
        cmd, fds = sandbox.open_descriptors(cmd)
        try:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=30, start_new_session=True, pass_fds=fds)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise sandbox.Unavailable(_("the sandbox (bubblewrap) cannot start: {error}; {hint}", error=e,
                                hint=_(sandbox.ALLOW_HINT))) from None
        finally:
            for fd in fds:
                os.close(fd)
        if done.returncode != 0:
            why = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [_("no message")])[-1][:200]
            raise sandbox.Unavailable(_("the sandbox (bubblewrap) cannot start here ({why}): {hint}", why=why,
                                hint=_(sandbox.ALLOW_HINT)))
