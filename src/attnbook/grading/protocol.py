"""How the grader and the sandboxed runner talk: two files and a pipe, with strict readers for what comes back.

A submission's folder (the only place the sandbox may write) holds:

- `request.json`, written by the grader: the chapter, the exercises (id and answer name), the per-cell limit,
  and the code cells to run (position in the notebook and source; skipped ones left out). It holds no seed: the
  run's seed stays in the grader, and an input the kernel must rebuild carries only what rebuilding it needs
  (`attnbook.exercises.inputs`);
- `.submission`, the notebook's bytes, which the runner copies under the notebook's own name (read-only) before
  any cell runs (the learner's code may read it);
- `progress.jsonl`, appended by the runner, one flushed line per step: `ready`, `start I` / `end I` around
  code cell I, `flood I BYTES` when cell I printed more than OUTPUT_FLOOD_BYTES, `serving` once the cells have
  run, `done`.

The runner starts before its submission is known (grading/launch.py keeps one started ahead): the grader makes
the three files empty when it starts the runner, which reports `ready` once Python, torch and IPython are
loaded and then waits. The grader fills `request.json` and `.submission` in place (the sandbox sees those same
files) and writes one byte, `GO`, to the runner's stdin; only then does the runner read them.

The runner's stderr (descriptor 2 of it and of every process it starts) is a pipe that the grader drains as it
is written, keeping only its last STDERR_TAIL_BYTES (`StderrTail`): nothing written there reaches the grader's
disk, and its memory holds at most that tail.

Once the runner reports `serving`, the checks run in the grader (`attnbook.exercises.remote.judge_exercise`)
and each call of the learner's code goes over the link: one JSON message per line to the runner's stdin, one
reply per line from its stdout (`PipeLink`, `serve`). The learner's prints never reach that pipe (the runner
moves it off descriptors 0 and 1 before any learner code runs), but the learner's code can find it, so a reply
is read like the files: bounded, strict, and judged as evidence, never as a verdict.

Everything in that folder may have been written, replaced or removed by the learner's code, so the grader
reads it as untrusted: regular files only (never following a link, never blocking on a FIFO), bounded sizes,
strict shapes. A missing, truncated, oversized or malformed file becomes a problem entry, never a crash.
"""
from __future__ import annotations

import errno
import json
import os
import select
import stat
import threading
import time
from dataclasses import dataclass, field

REQUEST = "request.json"
PROGRESS = "progress.jsonl"
SUBMISSION = ".submission"
GO = b"\n"  # the one byte the runner waits for: the request and the notebook are in its folder
RESERVED_NAMES = {REQUEST, PROGRESS, SUBMISSION}

OUTPUT_FLOOD_BYTES = 10_000_000  # a cell that prints more is reported (outputs are never kept)
MAX_PROGRESS_BYTES = 1_000_000
MAX_REPLY_BYTES = 16_000_000  # one reply line from the runner (the largest honest one, 8.1's, is about 6.4 MB)
MAX_REPLY_CONTAINERS = 100_000  # lists and objects in one reply (an honest one has a few dozen)
MAX_JSON_DEPTH = 64  # nesting allowed in any JSON the grader parses (a notebook is about 6 deep)
STDERR_TAIL_BYTES = 64_000  # of what the runner's process tree writes to its stderr: the rest is read and dropped


class BadFile(Exception):
    """A file of the protocol (or a submission) that cannot be used; the message says why, without its content."""


class LinkInPath(BadFile):
    """A path with a symbolic link in it (the file itself or a folder on the way); the message names the link."""


def read_regular(path: str, limit: int, *, what: str = "the file", whole_path: bool = False) -> bytes:
    """The bytes of `path`, which must be a regular file (not a link, FIFO, device or folder) of at most
    `limit` bytes; opened without following a link and without blocking, checked with fstat before reading.
    With `whole_path`, no folder on the way may be a link either (`open_without_links`); otherwise only the
    last component is checked (O_NOFOLLOW)."""
    try:
        fd = open_without_links(path) if whole_path else os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise BadFile(f"{what} is missing") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BadFile(f"{what} is a symbolic link (not read)") from None
        raise BadFile(f"cannot read {what}: {e.strerror or e}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BadFile(f"{what} is not a regular file ({_kind(info.st_mode)}; not read)")
        if info.st_size > limit:
            raise BadFile(f"{what} is {info.st_size / 1e6:.1f} MB (at most {limit / 1e6:g} MB are read)")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise BadFile(f"{what} grew past {limit / 1e6:g} MB while it was read")
        return b"".join(chunks)
    except OSError as e:
        raise BadFile(f"cannot read {what}: {e.strerror or e}") from None
    finally:
        os.close(fd)


_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
# A folder on the way is only walked through: O_PATH (Linux) needs no read permission on it.
_FOLDER_FLAGS = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def open_without_links(path: str) -> int:
    """A read-only descriptor of `path`, reached without following a symbolic link anywhere in it.

    The walk starts at / for an absolute path and at the working directory for a relative one (its own path,
    as os.getcwd() gives it, has no link in it), and opens each component relative to the folder before with
    O_NOFOLLOW, after an lstat of it (`LinkInPath` names the first component that is a link). Then the opened
    file's device and inode are compared with an lstat of the whole path, so a folder swapped for a link while
    the walk went on is refused too. OSError for a missing or unreadable component."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    start = "/" if path.startswith("/") else "."
    fd = os.open(start, _FOLDER_FLAGS if parts else _READ_FLAGS & ~os.O_NOFOLLOW)
    try:
        for i, name in enumerate(parts):
            shown = ("/" if start == "/" else "") + "/".join(parts[:i + 1])
            if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):  # (missing: OSError)
                raise LinkInPath(f"the path goes through a symbolic link: `{shown}` is a link (links are not "
                                 "followed: give the file's own path)")
            try:
                inner = os.open(name, _READ_FLAGS if i == len(parts) - 1 else _FOLDER_FLAGS, dir_fd=fd)
            except OSError as e:  # ELOOP (or ENOTDIR for a folder): made a link since the lstat just above?
                if e.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, fd):
                    raise LinkInPath(f"the path goes through a symbolic link: `{shown}` became a link while it "
                                     "was opened") from None
                raise
            os.close(fd)
            fd = inner
        opened, named = os.fstat(fd), os.lstat(path)
        if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
            raise LinkInPath("the path changed while it was opened (a folder on the way was replaced)")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def json_depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the brackets of JSON `text` nest at most `limit` deep (brackets inside strings ignored), so
    json.loads cannot hit the recursion limit. A linear scan; it does not validate anything else."""
    if text.count("[") + text.count("{") <= limit:  # cannot nest deeper than it has brackets (fast for array data)
        return True
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def loads_bounded(data: bytes, *, what: str = "the file", depth: int = MAX_JSON_DEPTH, constants: bool = False):
    """Strict JSON from `data`: UTF-8, nesting at most `depth`, and no NaN/Infinity unless `constants`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadFile(f"{what} is not UTF-8 text") from None
    if not json_depth_ok(text, depth):
        raise BadFile(f"{what} nests more than {depth} levels deep (not parsed)")
    try:
        return json.loads(text) if constants else json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        msg = f"{e.msg} at line {e.lineno}, column {e.colno}" if isinstance(e, json.JSONDecodeError) else type(e).__name__
        raise BadFile(f"{what} is not valid JSON ({msg})") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


# ---------------------------------------------------------------------------------------------------------
# The request (grader -> runner)
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Request:
    chapter: str
    exercises: list[tuple[str, str]]  # (exercise id, answer name), in order
    cell_timeout_s: float
    cells: list[tuple[int, str]]  # (position in the notebook, source) of the code cells to run, in order
    notebook: str = ""  # the copy's file name

    def to_json(self) -> str:
        return json.dumps({"chapter": self.chapter, "exercises": self.exercises,
                           "cell_timeout_s": self.cell_timeout_s, "cells": self.cells, "notebook": self.notebook})

    @classmethod
    def from_json(cls, data: bytes) -> "Request":
        raw = loads_bounded(data, what="the request")
        return cls(chapter=str(raw["chapter"]), exercises=[(str(e), str(n)) for e, n in raw["exercises"]],
                   cell_timeout_s=float(raw["cell_timeout_s"]),
                   cells=[(int(i), str(s)) for i, s in raw["cells"]], notebook=str(raw.get("notebook", "")))


def write_request(folder: str, request: Request) -> None:
    with open(os.path.join(folder, REQUEST), "w", encoding="utf-8") as f:
        f.write(request.to_json())


# ---------------------------------------------------------------------------------------------------------
# Progress (runner -> grader), read while the runner runs
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Progress:
    """What the runner has reported so far. `last` is the latest step: ("ready",), ("start", i), ("end", i),
    ("serving",) (the cells have run; the checks go over the link) or ("done",); `floods` {cell: bytes};
    `problem` when the file was unusable."""

    lines: int = 0
    last: tuple = ()
    floods: dict[int, int] = field(default_factory=dict)
    problem: str | None = None

    @property
    def done(self) -> bool:
        return self.last == ("done",)


def read_progress(folder: str) -> Progress:
    """Parse progress.jsonl (bounded, regular file only). Unknown or malformed lines are ignored: the file is
    the learner's to write too, and a forged line can only mislead the grader about the learner's own run."""
    progress = Progress()
    try:
        data = read_regular(os.path.join(folder, PROGRESS), MAX_PROGRESS_BYTES, what="the progress file")
    except BadFile as e:
        if "missing" not in str(e):
            progress.problem = str(e)
        return progress
    for raw in data.split(b"\n")[:-1]:  # a last line without its newline is still being written
        words = raw.decode("ascii", "replace").split()
        step = _step(words)
        if step is None:
            continue
        progress.lines += 1
        if step[0] == "flood":
            progress.floods[step[1]] = step[2]
        else:
            progress.last = step
    return progress


def _step(words: list[str]):
    try:
        if words in (["ready"], ["serving"], ["done"]):
            return (words[0],)
        if len(words) == 2 and words[0] in ("start", "end"):
            return (words[0], int(words[1]))
        if len(words) == 3 and words[0] == "flood":
            return ("flood", int(words[1]), int(words[2]))
    except ValueError:
        return None
    return None


# ---------------------------------------------------------------------------------------------------------
# The link (grader <-> runner): one JSON object per line over the runner's stdin and stdout
# ---------------------------------------------------------------------------------------------------------


class PipeLink:
    """The grader's end of the link to a runner that serves checks (`attnbook.exercises.remote.Server`): `ask`
    writes one message and reads one reply line, bounded in size, before `deadline` (time.monotonic()).
    LinkBroken when the runner has closed its end, does not answer in time, or sends more than a reply may hold."""

    def __init__(self, to_runner: int, from_runner: int):
        self.to_runner, self.from_runner = to_runner, from_runner
        self.deadline = float("inf")
        self.buffer = b""
        for fd in (to_runner, from_runner):
            os.set_blocking(fd, False)

    def ask(self, message: dict):
        from ..exercises.remote import LinkBroken

        self._write((json.dumps(message) + "\n").encode("utf-8"), LinkBroken)
        line = self._read_line(LinkBroken)
        if line.count(b"[") + line.count(b"{") > MAX_REPLY_CONTAINERS:
            return None  # a reply made to fill the grader's memory when parsed: unreadable
        try:
            return loads_bounded(line, what="a reply")
        except BadFile:
            return None  # unreadable: the check says so and gives 0

    def _wait(self, fd: int, write: bool, broken) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise broken("stalled")
        ready = select.select([], [fd], [], left) if write else select.select([fd], [], [], left)
        if not any(ready):
            raise broken("stalled")

    def _write(self, data: bytes, broken) -> None:
        view = memoryview(data)
        while view:
            self._wait(self.to_runner, True, broken)
            try:
                view = view[os.write(self.to_runner, view):]
            except BlockingIOError:
                continue
            except OSError:  # EPIPE: the runner has gone
                raise broken("died") from None

    def _read_line(self, broken) -> bytes:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_REPLY_BYTES:
                raise broken("flooded")
            self._wait(self.from_runner, False, broken)
            try:
                chunk = os.read(self.from_runner, 1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                raise broken("died") from None
            if not chunk:
                raise broken("died")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        if len(line) > MAX_REPLY_BYTES:
            raise broken("flooded")
        return line


def serve(server, requests: int, replies: int, quiet) -> None:
    """The runner's end of the link: answer each message line from `requests` with `server.handle`, one line to
    `replies`, until the grader closes its end. `quiet()` is a context manager that silences the learner's prints."""
    reader = os.fdopen(requests, "rb", buffering=1 << 16)
    while True:
        line = reader.readline(MAX_REPLY_BYTES + 1)
        if not line:
            return
        try:
            with quiet():
                reply = json.dumps(server.handle(json.loads(line)))
        except Exception as e:  # noqa: BLE001 - a reply that cannot be written is an error the grader reports
            reply = json.dumps({"raise": "Error", "type": type(e).__name__[:100], "message": "no reply"})
        data = (reply + "\n").encode("utf-8")
        while data:
            data = data[os.write(replies, data):]


# ---------------------------------------------------------------------------------------------------------
# The runner's stderr (runner -> grader): drained as it comes, only a tail kept
# ---------------------------------------------------------------------------------------------------------


class StderrTail:
    """A pipe to give a process as its stderr (`write_fd`), drained by a thread that keeps only the last `keep`
    bytes, so that what the process writes there never fills the grader's disk or memory.

    `started()` after the process has started (closes the grader's copy of the write end); `close()` when it
    has ended: waits briefly for what is still in the pipe, stops the thread and returns the tail."""

    def __init__(self, keep: int = STDERR_TAIL_BYTES):
        self.read_fd, self.write_fd = os.pipe()  # both non-inheritable: only the process it is given to gets it
        self.keep, self.total = keep, 0
        self.tail = bytearray()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._drain, name="attnbook-stderr", daemon=True)

    def started(self) -> None:
        os.close(self.write_fd)
        self.write_fd = -1
        self.thread.start()

    def _drain(self) -> None:
        poller = select.poll()
        poller.register(self.read_fd, select.POLLIN)
        after_stop = 0
        while after_stop <= (1 << 20):  # after close(): at most 1 MB more (a process left behind may write on)
            stopping = self.stopping.is_set()
            if not poller.poll(0 if stopping else 200):
                if stopping:
                    return
                continue
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                return
            self.total += len(chunk)
            after_stop += len(chunk) if stopping else 0
            self.tail += chunk
            del self.tail[:-self.keep]

    def close(self) -> bytes:
        """Stop draining and return the last bytes written (at most `keep`)."""
        if self.write_fd >= 0:  # the process never started
            os.close(self.write_fd)
            self.write_fd = -1
        else:
            self.stopping.set()
            self.thread.join(timeout=5)
        if not self.thread.is_alive():
            os.close(self.read_fd)  # (a thread still reading keeps it: the descriptor is not reused under it)
        return bytes(self.tail)
