"""The in-sandbox runner: `python -m attnbook.grading.runner FOLDER` runs one submission and serves its checks.

It runs inside the sandbox (see sandbox.py), in the submission's folder, as the only process of the learner's
"kernel". It may start before its submission is known (grading/launch.py): it loads Python, torch, IPython and
what every chapter imports, reports "ready" and waits for the grader's go byte on its link. Then it reads the
request (protocol.py), copies the notebook under its own name, and runs the requested code cells in order in an
IPython `InteractiveShell` (magics and `!shell` lines work as in Jupyter; there is no ZMQ and no kernel); the
learner's own `check(...)` cells return at once (results.GRADER_RUN), since the grader judges every exercise
itself. What the cells print goes to a sink that only counts bytes, and a progress line is appended before and
after each cell. Then it
loads the checkers afresh from the package's files (the learner's cells may have changed the imported
`attnbook.exercises` modules; the files themselves are read-only in the sandbox) and serves the grader's checks
(`attnbook.exercises.remote.Server`): it runs the learner's functions on the inputs the grader sends over the
pipe and sends back what they returned.

It never sees a reference value and never decides a verdict: the checks run in the grader's process. Nor does it
get the run's seed: the inputs arrive as data, and an object the kernel rebuilds (`inputs.builds`) carries the
offset its factory ran under in the grader. Everything here runs in the learner's process, so a learner can
change it; the grader trusts none of what it sends.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys

from . import protocol

# Where the checkers' files are, found before any learner code runs (the learner may change attnbook.__path__).
# results.GRADER_RUN: named here, not imported, so that nothing of attnbook.exercises loads before the cells.
GRADER_RUN = "ATTNBOOK_GRADER_RUN"
EXERCISES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "exercises")


class CountingSink(io.TextIOBase):
    """A text stream that keeps nothing and counts the bytes written to it."""

    def __init__(self):
        self.bytes = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        self.bytes += len(text.encode("utf-8", "replace"))
        return len(text)

    def isatty(self) -> bool:
        return False


class Reporter:
    """Appends progress lines to progress.jsonl through a descriptor opened before any learner code ran; if
    the learner's code closed it, reopens the file by name."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, protocol.PROGRESS)
        self.fd = self._open()

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def __call__(self, *words) -> None:
        line = (" ".join(str(w) for w in words) + "\n").encode("ascii", "replace")
        try:
            os.write(self.fd, line)
        except OSError:
            try:
                self.fd = self._open()
                os.write(self.fd, line)
            except OSError:
                pass


def make_shell():
    """A fresh IPython shell, without history (nothing is kept in the private home) or terminal features."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"
    config.InteractiveShell.xmode = "Plain"
    return InteractiveShell.instance(config=config)


# What every chapter's first cell imports, loaded while the runner waits (started ahead): about 0.5 s less per
# submission. Importing them changes nothing the learner's code can rely on.
PRELOAD = ("matplotlib.pyplot", "attnbook.exercises")


def preload() -> None:
    for name in PRELOAD:
        try:
            with contextlib.redirect_stdout(CountingSink()), contextlib.redirect_stderr(CountingSink()):
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the learner's cell will import it again, and say what fails
            pass


def run_cells(shell, cells: list[tuple[int, str]], report: Reporter) -> None:
    """Run each (position, source) cell in `shell`, its output counted and dropped; report start/end/flood."""
    for index, source in cells:
        sink = CountingSink()
        report("start", index)
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = sink
        try:
            shell.run_cell(source, store_history=True, silent=False)
        except BaseException:  # run_cell catches the learner's exceptions; this is for anything that escapes it
            pass
        finally:
            sys.stdout, sys.stderr = saved
        if sink.bytes > protocol.OUTPUT_FLOOD_BYTES:
            report("flood", index, sink.bytes)
        report("end", index)


def fresh_checkers():
    """The `attnbook.exercises.remote` module, with the whole `attnbook.exercises` package imported again from
    its files (whatever the learner's cells did to the modules already imported)."""
    for name in [n for n in list(sys.modules) if n == "attnbook.exercises" or n.startswith("attnbook.exercises.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    spec = importlib.util.spec_from_file_location("attnbook.exercises", os.path.join(EXERCISES_DIR, "__init__.py"),
                                                  submodule_search_locations=[EXERCISES_DIR])
    package = importlib.util.module_from_spec(spec)
    sys.modules["attnbook.exercises"] = package
    spec.loader.exec_module(package)
    remote = importlib.import_module("attnbook.exercises.remote")
    if os.path.dirname(os.path.realpath(remote.__file__)) != EXERCISES_DIR:
        raise RuntimeError("the checkers did not load from the package's files")
    return remote


@contextlib.contextmanager
def quiet():
    """The learner's prints while a check runs their code go to a sink that keeps nothing."""
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = CountingSink()
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def private_link() -> tuple[int, int]:
    """(requests, replies): the grader's pipe, moved off descriptors 0 and 1 (which then read and write
    /dev/null), so that nothing the learner's code or its subprocesses print reaches the grader."""
    requests, replies = os.dup(0), os.dup(1)  # os.dup: not inherited by subprocesses
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return requests, replies


def copy_notebook(folder: str, name: str) -> None:
    """The submission's bytes (protocol.SUBMISSION) copied, read-only, under the notebook's own file name."""
    if not name or os.path.basename(name) != name or name.startswith(".") or name in protocol.RESERVED_NAMES:
        return
    try:
        with open(os.path.join(folder, protocol.SUBMISSION), "rb") as src:
            data = src.read()
        path = os.path.join(folder, name)
        with open(path, "xb") as dst:
            dst.write(data)
        os.chmod(path, 0o444)
    except OSError:
        pass  # a notebook the learner's code cannot read is no reason not to run its cells


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = os.path.abspath(argv[0] if argv else ".")
    requests, replies = private_link()
    report = Reporter(folder)
    shell = make_shell()
    preload()
    report("ready")
    if os.read(requests, 1) != protocol.GO:  # started ahead (grading/launch.py): wait for the submission
        return 0  # the grader closed the link: this runner was not needed
    with open(os.path.join(folder, protocol.REQUEST), "rb") as f:
        request = protocol.Request.from_json(f.read())
    copy_notebook(folder, request.notebook)
    os.environ[GRADER_RUN] = "1"  # the learner's check() cells return at once: the grader judges each exercise
    run_cells(shell, request.cells, report)
    with quiet():
        remote = fresh_checkers()
    report("serving")
    protocol.serve(remote.Server(shell.user_ns), requests, replies, quiet)  # no seed here: it stays in the grader
    report("done")
    return 0


if __name__ == "__main__":
    main()
    os._exit(0)  # no interpreter shutdown: nothing the learner registered (atexit, __del__) runs after this
