"""The in-sandbox runner: `python -m attnbook.grading.runner FOLDER` runs one submission and records its checks.

It runs inside the sandbox (see sandbox.py), in the submission's folder, as the only process of the learner's
"kernel": it reads the request (protocol.py), runs the requested code cells in order in an IPython
`InteractiveShell` (magics and `!shell` lines work as in Jupyter; there is no ZMQ and no kernel), sends what the
cells print to a sink that only counts bytes, and appends a progress line before and after each cell. Then it
loads the checkers afresh from the package's files (the learner's cells may have changed the imported
`attnbook.exercises` modules; the files themselves are read-only in the sandbox) and records each exercise's
checks with `attnbook.exercises.replay.record_checks`, one transcript line per exercise.

It never decides a verdict: the grader replays the transcript in its own process. Everything here runs in the
learner's process, so a learner can change it; the grader trusts none of what it writes.
"""
from __future__ import annotations

import importlib.util
import io
import os
import sys

from . import protocol

# Where the checkers' files are, found before any learner code runs (the learner may change attnbook.__path__).
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
    """The `attnbook.exercises.replay` module, with the whole `attnbook.exercises` package imported again from
    its files (whatever the learner's cells did to the modules already imported)."""
    for name in [n for n in list(sys.modules) if n == "attnbook.exercises" or n.startswith("attnbook.exercises.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    spec = importlib.util.spec_from_file_location("attnbook.exercises", os.path.join(EXERCISES_DIR, "__init__.py"),
                                                  submodule_search_locations=[EXERCISES_DIR])
    package = importlib.util.module_from_spec(spec)
    sys.modules["attnbook.exercises"] = package
    spec.loader.exec_module(package)
    replay = importlib.import_module("attnbook.exercises.replay")
    if os.path.dirname(os.path.realpath(replay.__file__)) != EXERCISES_DIR:
        raise RuntimeError("the checkers did not load from the package's files")
    return replay


def record(replay, namespace: dict, exercise_id: str, run_seed: int):
    """One exercise's transcript (the seam: `replay.record_checks`)."""
    return replay.record_checks(namespace, [exercise_id], run_seed)


def record_all(request: protocol.Request, namespace: dict, folder: str, report: Reporter) -> None:
    """Record each exercise not yet done, appending one transcript line per exercise."""
    silent = CountingSink()
    replay = None
    with open(os.path.join(folder, protocol.TRANSCRIPT), "a", encoding="utf-8") as out:
        for exercise_id, _ in request.exercises:
            if exercise_id in request.done:
                continue
            report("check", exercise_id)
            saved = sys.stdout, sys.stderr
            sys.stdout = sys.stderr = silent
            try:
                if replay is None:
                    replay = fresh_checkers()
                line = protocol.transcript_line(exercise_id, record(replay, namespace, exercise_id, request.run_seed))
            except BaseException as e:  # recorded as nothing: the grader gives 0 and says why
                line = protocol.transcript_line(exercise_id, {"error": f"{type(e).__name__}"[:100]})
            finally:
                sys.stdout, sys.stderr = saved
            out.write(line)
            out.flush()
            report("checked", exercise_id)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = os.path.abspath(argv[0] if argv else ".")
    report = Reporter(folder)
    with open(os.path.join(folder, protocol.REQUEST), "rb") as f:
        request = protocol.Request.from_json(f.read())
    shell = make_shell()
    report("ready")
    run_cells(shell, request.cells, report)
    record_all(request, shell.user_ns, folder, report)
    report("done")
    return 0


if __name__ == "__main__":
    main()
    os._exit(0)  # no interpreter shutdown: nothing the learner registered (atexit, __del__) runs after this
