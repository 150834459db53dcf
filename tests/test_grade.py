"""attnbook.grading: every way a returned notebook can go wrong becomes an entry in its row, graded in one run.

The submissions are crafted from the committed exercise versions, with answers taken from the chapters'
solution cells. Most keep only the set-up cell and the exercises section (a learner may delete cells, and it
keeps this file fast); one is the whole chapter. They run in the sandbox where this machine allows it (else
with --no-sandbox, and the sandbox's own tests are skipped). The attack suite is tests/test_grade_attacks.py.
"""
from __future__ import annotations

import copy
import csv
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

import nbformat
import pytest

from attnbook.exercises import REGISTRY
from attnbook.grading import gradebook, launch, protocol, sandbox
from attnbook.grading.cli import main
from attnbook.grading.gradebook import gradebook_columns
from attnbook.grading.submission import (ExerciseGrade, SubmissionGrade, Unreadable, grade_submission,
                                         read_submission, recognise_chapter)

from conftest import BOOK, ROOT, chapter_path

CELL_TIMEOUT = 15  # s: the infinite loop costs this much; generous for the set-up cell on a busy machine


def _sandbox_problem() -> str | None:
    try:
        launch.check_available()
    except sandbox.Unavailable as e:
        return str(e)
    return None


SANDBOX_PROBLEM = _sandbox_problem()
SANDBOXED = SANDBOX_PROBLEM is None
MODE = [] if SANDBOXED else ["--no-sandbox"]  # the crafted submissions run either way
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox here: {SANDBOX_PROBLEM}")


def ids(chapter: int) -> list[str]:
    return sorted((e for e in REGISTRY if e.split(".")[0] == str(chapter)), key=lambda e: int(e.split(".")[1]))


def points(exercise_id: str) -> str:
    return f"{REGISTRY[exercise_id].points:g}"


def exercise_version(chapter: int) -> nbformat.NotebookNode:
    return nbformat.read(BOOK / "exercises" / chapter_path(chapter).name, as_version=4)


def solution_cells(nb: nbformat.NotebookNode) -> list[tuple[str | None, nbformat.NotebookNode]]:
    """(exercise id, cell) of every solution-tagged cell, the id of the "### Exercise N.k" heading above it (an
    exercise may have several: 11.3's helper attention and its block)."""
    found, current = [], None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("### Exercise "):
            current = cell.source.split()[2]
        elif "solution" in cell.metadata.get("tags", []):
            found.append((current, cell))
    return found


def answer_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    """{exercise id: its answer cell}: the (last) solution-tagged cell under each "### Exercise N.k" heading."""
    return {ex_id: cell for ex_id, cell in solution_cells(nb) if ex_id is not None}


def solved(chapter: int, only: tuple[str, ...] | None = None, trim: bool = True) -> nbformat.NotebookNode:
    """Chapter `chapter`'s exercise version with the reference answers filled in (all, or `only` these);
    trimmed to the title, the set-up cell and the exercises section."""
    nb = exercise_version(chapter)
    reference = [c.source for c in nbformat.read(chapter_path(chapter), as_version=4).cells
                 if "solution" in c.metadata.get("tags", [])]
    for (ex_id, cell), source in zip(solution_cells(nb), reference, strict=True):
        if only is None or ex_id in only:
            cell.source = source
    if trim:
        setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        start = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## Exercises"))
        nb.cells = [nb.cells[0], nb.cells[setup], *nb.cells[start:]]
    return nb


def forge_records(nb: nbformat.NotebookNode) -> None:
    """Give every check cell an output claiming full points, as a learner editing the JSON would."""
    for cell in nb.cells:
        found = re.search(r'^check\("(\d+\.\d+)"', cell.source, re.M)
        if cell.cell_type == "code" and found:
            ex_id = found.group(1)
            most = REGISTRY[ex_id].points
            forged = {"exercise_id": ex_id, "status": "passed", "points": most, "max_points": most,
                      "message": "all tests passed", "passed": True}
            cell.outputs = [nbformat.v4.new_output("display_data", {"text/plain": f"✓ Exercise {ex_id} passed"},
                                                   metadata={"attnbook": {"check": forged}})]


def crafted(tmp_path) -> dict[str, tuple]:
    """Write every crafted submission; return {file name: (expected points per exercise, expected problem)}."""
    subs: dict[str, tuple] = {}
    ch1, ch2 = ids(1), ids(2)
    full1, full2 = {e: points(e) for e in ch1}, {e: points(e) for e in ch2}

    def write(name, nb, expected, problem=None):
        nbformat.write(nb, tmp_path / name)
        subs[name] = (expected, problem)

    nb = solved(1)  # the slowest two first, so that --jobs 2 overlaps them with the rest
    answer_cells(nb)[ch1[1]].source = "while True:\n    pass\n\n" + answer_cells(nb)[ch1[1]].source
    write("infinite_loop.ipynb", nb, {**full1, ch1[1]: "0"}, f"ran longer than {CELL_TIMEOUT} s and was stopped")

    nb = solved(1)
    answer_cells(nb)[ch1[2]].source = "import os\nos._exit(1)\n" + answer_cells(nb)[ch1[2]].source
    write("kernel_death.ipynb", nb, {**full1, ch1[2]: "0"}, "ended the process; the notebook ran again")

    if SANDBOXED:  # its parent is the sandbox's init, which a signal from inside cannot kill (unsandboxed: the grader)
        nb = solved(1)
        nb.cells.insert(3, nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"))
        write("kills_parent.ipynb", nb, full1)

    write("full_chapter_1.ipynb", solved(1, trim=False), full1)
    write("chapter_2.ipynb", solved(2), full2)
    nb = solved(2)
    nb.metadata["attnbook"] = {"chapter": "2" + "0" * 5000}  # not a chapter number: ignored, recognised instead
    write("chapter_5000_digits.ipynb", nb, full2, "not a chapter number: ignored")
    nb = solved(2)
    nb.metadata["attnbook"] = {"chapter": 1}  # the metadata decides (here wrongly: the learner's own loss)
    write("metadata_chapter_1.ipynb", nb, {e: "0" for e in ch1})
    write("partial.ipynb", solved(1, only=(ch1[0], ch1[2])), {**full1, ch1[1]: "0"})

    (tmp_path / "not_a_notebook.ipynb").write_text('{"name": "my homework", "answers": [1, 2, 3]}')
    subs["not_a_notebook.ipynb"] = ({}, "not a notebook")
    (tmp_path / "invalid_json.ipynb").write_text('{"cells": [ this is not JSON')
    subs["invalid_json.ipynb"] = ({}, "invalid JSON")
    (tmp_path / "nested.ipynb").write_text("[" * 100_000 + "]" * 100_000)
    subs["nested.ipynb"] = ({}, "nests more than")
    os.mkfifo(tmp_path / "fifo.ipynb")  # opening it for a read would block until a writer comes
    subs["fifo.ipynb"] = ({}, "not a regular file (a FIFO")
    (tmp_path / "folder.ipynb").mkdir()
    subs["folder.ipynb"] = ({}, "not a regular file (a folder")
    (tmp_path / "secret.txt").write_text("the instructor's secret")
    (tmp_path / "link.ipynb").symlink_to(tmp_path / "secret.txt")  # never read, so never copied into the sandbox
    subs["link.ipynb"] = ({}, "symbolic link")

    nb = solved(1)
    for cell in nb.cells:
        cell.source = cell.source.replace("# 1.", "# 42.").replace("Exercise 1.", "Exercise 42.") \
            .replace('check("1.', 'check("42.')
    nb.metadata["attnbook"]["chapter"] = 42
    write("unknown_chapter.ipynb", nb, {}, "chapter 42 is not one the grader knows")

    nb = solved(1)
    nb.cells.insert(3, nbformat.v4.new_code_cell('for _ in range(30):\n    print("x" * 1_000_000)'))
    write("output_flood.ipynb", nb, full1, "MB of output")

    nb = solved(1)
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and ("check(" in c.source or "summary(" in c.source))]
    write("check_cells_deleted.ipynb", nb, full1)

    nb = solved(1, only=())  # nothing solved, but check always "passes" and the records say so
    fake = ("from attnbook.exercises.results import CheckResult\n\n"
            "def check(exercise_id, answer):\n"
            "    return CheckResult(exercise_id, 'passed', 1.0, 1.0, 'all tests passed')")
    nb.cells.insert(3, nbformat.v4.new_code_cell(fake))
    for cell in nb.cells:
        if cell.source.startswith("from attnbook.exercises import check"):
            cell.source = cell.source.replace("from attnbook.exercises import check, summary\n\n", "")
    forge_records(nb)
    nbformat.write(nb, tmp_path / "forged.ipynb")
    subs["forged.ipynb"] = ({e: "0" for e in ch1}, None)

    nb = solved(1, only=())  # nothing solved, but the package's check and checkers are replaced
    patch = ("import dataclasses\nimport attnbook.exercises as exercises\nimport attnbook.exercises.results as core\n"
             "import attnbook.exercises.registry as registry\n\n"
             "def check(exercise_id, answer):\n"
             "    return core.CheckResult(exercise_id, 'passed', 1.0, 1.0, 'all tests passed')\n\n"
             "exercises.check = core.check = check\n"
             "for key, ex in list(registry.REGISTRY.items()):\n"
             "    registry.REGISTRY[key] = dataclasses.replace(ex, checker=lambda answer: 'all tests passed')")
    nb.cells.insert(3, nbformat.v4.new_code_cell(patch))
    nb.cells.append(nbformat.v4.new_code_cell("import os, sys\nsys.stdout = open(os.devnull, 'w')  # hide the rest"))
    write("check_patched.ipynb", nb, {e: "0" for e in ch1})
    return subs


NOT_GRADED = {"not_a_notebook.ipynb", "invalid_json.ipynb", "unknown_chapter.ipynb", "nested.ipynb", "fifo.ipynb",
              "folder.ipynb", "link.ipynb"}



def test_every_crafted_submission_graded_together(tmp_path, capsys, monkeypatch):
    subs = crafted(tmp_path)
    scratch = tmp_path.parent / f"{tmp_path.name}-scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the grader makes each run's folder
    book = tmp_path / "gradebook.csv"
    paths = [str(tmp_path / name) for name in subs]
    again = str(tmp_path / "." / "chapter_2.ipynb")  # the same file twice: graded once
    status = main([*paths, again, "--jobs", "2", "--csv", str(book), "--timeout", str(CELL_TIMEOUT),
                   "--notebook-timeout", "240", *MODE])
    out = capsys.readouterr().out
    assert status == 1  # some submissions could not be graded
    with book.open(encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames
        rows = {row["submission"]: row for row in reader}
    assert columns == ["submission", *ids(1), *ids(2), "total", "max_total", "problems"]
    assert list(rows) == paths  # one row per submission, the path as given, in order
    failures = []
    for name, (expected, problem) in subs.items():
        row = rows[str(tmp_path / name)]
        got = {e: row[e] for e in [*ids(1), *ids(2)] if row[e] != ""}
        if got != expected:
            failures.append(f"{name}: points {got}, expected {expected} ({row['problems']})")
        if float(row["total"]) != sum(float(v) for v in expected.values()):
            failures.append(f"{name}: total {row['total']}")
        chapter = {e.split(".")[0] for e in expected}
        most = sum(REGISTRY[e].points for e in REGISTRY if e.split(".")[0] in chapter)
        if float(row["max_total"]) != most:
            failures.append(f"{name}: max_total {row['max_total']}, expected {most:g}")
        problems = row["problems"]
        if not SANDBOXED and name not in NOT_GRADED:
            if "graded unsandboxed" not in problems:
                failures.append(f"{name}: an unsandboxed row must say so: {problems!r}")
            problems = problems.removeprefix("graded unsandboxed (--no-sandbox): the submission's code ran with "
                                             "the grader's rights").removeprefix("; ")
        if problem is None and problems:
            failures.append(f"{name}: unexpected problems {problems!r}")
        if problem is not None and problem not in problems:
            failures.append(f"{name}: problems {problems!r} do not mention {problem!r}")
    assert not failures, "\n".join(failures)
    for name in subs:  # the readable summary names every submission
        assert str(tmp_path / name) in out
    assert f"{len(NOT_GRADED)} not graded" in out and "s per submission" in out
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".gradebook")]  # no temporary file left
    assert not list(scratch.iterdir())  # every run's folder was removed, the spares' (started ahead) included
    assert not children_running_the_runner()  # and every runner, spares included, has ended


def children_running_the_runner() -> list[int]:
    """Processes of this test whose command line runs the grader's runner (sandboxed or not)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path("/proc", entry, "stat").read_text()
            cmdline = Path("/proc", entry, "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() \
                and b"attnbook.grading.runner" in cmdline:
            found.append(int(entry))
    return found


def test_recorded_mode_reads_the_records_and_so_believes_forgeries(tmp_path, capsys):
    nb = solved(1, only=())
    forge_records(nb)
    path = tmp_path / "forged.ipynb"
    nbformat.write(nb, path)
    assert main([str(path), "--recorded"]) == 0
    out = capsys.readouterr().out
    most = sum(REGISTRY[e].points for e in ids(1))
    assert f"chapter 1, {most:g}/{most:g} points" in out and "UNTRUSTED" in out
    graded = grade_submission(path, recorded=True)
    assert {e: g.status for e, g in graded.exercises.items()} == {e: "passed" for e in ids(1)}


def test_recorded_mode_reads_the_committed_chapters_and_unrun_exercise_versions():
    most = sum(REGISTRY[e].points for e in ids(2))
    chapter = grade_submission(chapter_path(2), recorded=True)  # committed with its outputs: every check passed
    assert chapter.chapter == "2" and chapter.total == chapter.max_total == most and not chapter.problems
    unrun = grade_submission(BOOK / "exercises" / chapter_path(2).name, recorded=True)
    assert unrun.chapter == "2" and unrun.total == 0 and unrun.max_total == most and not unrun.problems


def test_notebook_limit_kills_the_run_and_grades_nothing_more(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 2. Scaled dot-product attention"),
                nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, path)
    graded = grade_submission(path, timeout_s=300, notebook_timeout_s=4, sandboxed=SANDBOXED)
    assert graded.seconds < 30
    assert graded.total == 0 and set(graded.exercises) == set(ids(2))
    assert any("ran past its limit of 4 s" in p for p in graded.problems), graded.problems


@pytest.mark.parametrize("path", sorted((BOOK / "exercises").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.name)
def test_every_exercise_version_is_recognised_as_its_chapter(path):
    nb = read_submission(path)
    chapter = str(int(path.name[:2]))
    assert nb.metadata["attnbook"]["chapter"] == int(chapter)  # written by attnbook.student
    assert recognise_chapter(nb) == chapter
    broken = copy.deepcopy(nb)  # without its title, and with every check cell deleted: still recognised
    broken.cells = [c for c in broken.cells[1:] if "check(" not in c.source]
    assert recognise_chapter(broken) == chapter


def test_unreadable_files_say_why(tmp_path):
    cases = {"binary.ipynb": (b"\x89PNG\r\n\x1a\n\xff", "not UTF-8"), "list.ipynb": (b"[1, 2]", "a list without"),
             "bad_cells.ipynb": (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                             "cells": "none"}).encode(), "not a valid notebook"),
             "deep.ipynb": (b'{"nbformat": 4, "x": ' + b"[" * 1000 + b"]" * 1000 + b"}", "nests more than"),
             "nan.ipynb": (b'{"nbformat": NaN}', "invalid JSON")}
    for name, (data, why) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(Unreadable, match=why):
            read_submission(tmp_path / name)
    with (tmp_path / "huge.ipynb").open("wb") as f:
        f.truncate(25_000_000)  # sparse: nothing is written
    with pytest.raises(Unreadable, match="25.0 MB"):
        read_submission(tmp_path / "huge.ipynb")
    missing = grade_submission(tmp_path / "missing.ipynb")
    assert missing.exercises == {} and "cannot read the file" in missing.problems[0] and not missing.graded


def test_chapter_option_overrides_metadata_and_content(tmp_path):
    nb = solved(1)
    path = tmp_path / "as_chapter_2.ipynb"
    nbformat.write(nb, path)
    graded = grade_submission(path, recorded=True, chapter="2")
    assert graded.chapter == "2" and set(graded.exercises) == set(ids(2))
    for bad in ["0", "100", "2" * 5000, "two", "-1"]:
        with pytest.raises(SystemExit):
            main([str(path), "--chapter", bad])


def test_gradebook_columns_are_in_numeric_order():
    rows = [SubmissionGrade("a", "10", {e: ExerciseGrade(e, "passed", 1, 1, "") for e in ("10.1", "2.3")}),
            SubmissionGrade("b", "9", {"9.3": ExerciseGrade("9.3", "failed", 0, 1, "")})]
    assert gradebook_columns(rows) == ["submission", "2.3", "9.3", "10.1", "total", "max_total", "problems"]
    assert [r["9.3"] for r in gradebook.gradebook_rows(rows)] == ["", "0"]


def test_gradebook_is_rewritten_atomically_row_by_row(tmp_path, monkeypatch):
    path = tmp_path / "book.csv"
    book = gradebook.Gradebook(path, ["a", "b"])
    book.add(SubmissionGrade("b", "9", {"9.3": ExerciseGrade("9.3", "failed", 0, 1, "")}))
    assert [r["submission"] for r in csv.DictReader(path.open())] == ["b"]  # each finished row is on disk at once

    def crash(*args):
        raise OSError("disk full")
    monkeypatch.setattr(gradebook.os, "replace", crash)  # a crash while writing keeps the previous gradebook
    with pytest.raises(OSError):
        book.add(SubmissionGrade("a", "2", {"2.1": ExerciseGrade("2.1", "passed", 1, 1, "")}))
    assert [r["submission"] for r in csv.DictReader(path.open())] == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.csv"]


def test_protocol_readers_refuse_what_they_cannot_trust(tmp_path):
    (tmp_path / protocol.PROGRESS).write_text("ready\nstart 3\nflood 3 20000000\nend 3\ngarbage\nserving\ncheck")
    progress = protocol.read_progress(str(tmp_path))
    assert progress.last == ("serving",) and progress.floods == {3: 20_000_000} and not progress.done
    os.unlink(tmp_path / protocol.PROGRESS)
    os.mkfifo(tmp_path / protocol.PROGRESS)  # a FIFO left by the learner's code never blocks the grader
    assert "not a regular file (a FIFO" in protocol.read_progress(str(tmp_path)).problem
    secret = tmp_path / "secret.txt"
    secret.write_text("instructor's secret")
    os.unlink(tmp_path / protocol.PROGRESS)
    os.symlink(secret, tmp_path / protocol.PROGRESS)  # a link to a file outside is not followed
    assert "symbolic link" in protocol.read_progress(str(tmp_path)).problem


def _pipe_link(reply: bytes | None, deadline_s: float = 2.0):
    """A PipeLink whose "runner" has already written `reply` (None: closed its end without a word)."""
    to_runner_r, to_runner_w = os.pipe()
    from_runner_r, from_runner_w = os.pipe()
    if reply:
        def write():  # from a thread: a reply larger than the pipe's buffer blocks until the link reads it
            os.write(from_runner_w, reply)
        threading.Thread(target=write, daemon=True).start()
    if reply is None:
        os.close(from_runner_w)
    link = protocol.PipeLink(to_runner_w, from_runner_r)
    link.deadline = time.monotonic() + deadline_s
    return link


def test_the_pipe_link_bounds_what_it_reads():
    from attnbook.exercises.remote import LinkBroken

    assert _pipe_link(b'{"return": 5}\n').ask({"op": "describe"}) == {"return": 5}
    assert _pipe_link(b"not json\n").ask({"op": "describe"}) is None  # unreadable: that check gets 0
    assert _pipe_link(b"[" * 100 + b"\n").ask({"op": "describe"}) is None  # nesting bounded before parsing
    assert _pipe_link(b"[" + b"[]," * 200_000 + b"[]]\n").ask({"op": "describe"}) is None  # a memory filler
    for reply, why in ((None, "died"), (b"", "stalled"), (b'{"return": 1}', "stalled")):  # no newline: no reply yet
        with pytest.raises(LinkBroken, match=why):
            _pipe_link(reply, deadline_s=0.3).ask({"op": "describe"})
    link = _pipe_link(b"")
    link.buffer = b"x" * (protocol.MAX_REPLY_BYTES + 1)  # a flood: read no further
    with pytest.raises(LinkBroken, match="flooded"):
        link.ask({"op": "describe"})


def test_runner_runs_cells_counts_output_and_serves(tmp_path):
    """The runner as the sandbox starts it (here without one): it says "ready" and waits for the go byte; then it
    copies the notebook under its own name (read-only), runs the cells in order with magics, their output only
    counted, and answers the grader's messages over its stdin and stdout until they close."""
    request = protocol.Request(chapter="1", exercises=[("1.1", "project_qkv")], cell_timeout_s=10,
                               cells=[(0, "x = 2\n%time y = x + 1"), (2, "print('z' * 11_000_000)"),
                                      (3, "import os; os.write(1, b'into fd 1\\n'); print('more')"),
                                      (4, "raise ValueError('a learner error is not the runner\\'s')"),
                                      (5, "def project_qkv(x, W_q, W_k, W_v):\n    return x"),
                                      (6, "from attnbook.exercises import check\n"
                                          "open('said.txt', 'w').write(check('1.1', project_qkv).message)\n"
                                          "open('read.txt', 'w').write(open('mine.ipynb').read())")],
                               notebook="mine.ipynb")
    protocol.write_request(str(tmp_path), request)
    (tmp_path / protocol.SUBMISSION).write_text('{"the": "notebook"}')
    (tmp_path / protocol.PROGRESS).touch()
    argv, env = sandbox.unsandboxed_command(str(tmp_path))
    messages = [{"op": "describe", "exercise": "1.1"}, {"op": "describe", "exercise": "2.3"}, {"op": "alien"}]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          input=protocol.GO.decode() + "".join(json.dumps(m) + "\n" for m in messages))
    lines = (tmp_path / protocol.PROGRESS).read_text().split()
    assert " ".join(lines) == ("ready start 0 end 0 start 2 flood 2 11000001 end 2 start 3 end 3 start 4 end 4 "
                               "start 5 end 5 start 6 end 6 serving done"), done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]  # nothing the cells printed is in between
    assert replies[0]["answer"]["name"] == "project_qkv" and replies[1] == {"absent": True}
    assert replies[2]["raise"] == "Error" and len(replies) == 3
    # the learner's own check cell does not run the checker (the grader judges 1.1 itself, over the link)
    assert (tmp_path / "said.txt").read_text() == "not checked here: attnbook-grade checks every exercise itself"
    assert (tmp_path / "read.txt").read_text() == '{"the": "notebook"}'
    assert not os.access(tmp_path / "mine.ipynb", os.W_OK) or os.geteuid() == 0  # read-only (root writes anyway)


def test_a_runner_started_ahead_runs_nothing_until_go_and_ends_when_the_link_closes(tmp_path):
    """A spare runner (grading/launch.py) reports "ready" and waits; closing its link without the go byte ends
    it without reading the request or running a cell."""
    protocol.write_request(str(tmp_path), protocol.Request(chapter="1", exercises=[], cell_timeout_s=10,
                                                           cells=[(0, "open('ran.txt', 'w').write('x')")]))
    (tmp_path / protocol.PROGRESS).touch()
    argv, env = sandbox.unsandboxed_command(str(tmp_path))
    done = subprocess.run(argv, cwd=tmp_path, env=env, input="", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / protocol.PROGRESS).read_text().split() == ["ready"]
    assert not (tmp_path / "ran.txt").exists()


def test_a_path_repeated_as_spelled_is_graded_once_and_other_paths_keep_their_rows(tmp_path):
    """Only spellings that os.path.normpath makes equal are one path; `..` (which a link would change) and links
    to the same file keep their own rows (a link's row refuses it: tests/test_grade_integrity.py)."""
    from attnbook.grading.cli import distinct
    (tmp_path / "a.ipynb").write_text("{}")
    os.symlink(tmp_path / "a.ipynb", tmp_path / "b.ipynb")
    a, up, b = str(tmp_path / "a.ipynb"), str(tmp_path / "sub" / ".." / "a.ipynb"), str(tmp_path / "b.ipynb")
    assert distinct([a, f"{tmp_path}/./a.ipynb", f"{tmp_path}//a.ipynb", up, b, up, b]) == [a, up, b]


@pytest.mark.parametrize("bad", [["--jobs", "0"], ["--timeout", "-1"], ["--notebook-timeout", "soon"],
                                 ["--chapter", "x"]])
def test_command_line_rejects_bad_limits(bad, capsys):
    with pytest.raises(SystemExit):
        main(["x.ipynb", *bad])
    assert bad[0] in capsys.readouterr().err


def test_console_script_and_module_entry_points():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["attnbook-grade"] == "attnbook.grading.cli:main"
    for module in ("attnbook.grade", "attnbook.grading"):
        done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "--no-sandbox" in done.stdout


@needs_sandbox
def test_sandbox_keeps_the_network_files_environment_and_processes_in(tmp_path, monkeypatch):
    """Probes from a cell: each exercise's right answer is deleted if its probe got out. Harmless if one does:
    the files it writes and the processes it leaves are removed here."""
    token = os.urandom(8).hex()
    marker = f"attnbook-probe-{token}"
    secret = tmp_path / "instructor_secret.txt"
    secret.write_text("the instructor's secret")
    monkeypatch.setenv("ATTNBOOK_INSTRUCTOR_SECRET", token)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    targets = [ROOT / "src" / "attnbook" / f"probe_{token}.py", Path(sys.prefix) / f"probe_{token}",
               tmp_path / f"probe_{token}"]
    probe = f'''import os, socket, subprocess, sys
escaped = set()
try:
    socket.create_connection(("127.0.0.1", {listener.getsockname()[1]}), timeout=3).close()
    escaped.add("network")
except OSError:
    pass
try:
    open({str(secret)!r}).read()
    escaped.add("read")
except OSError:
    pass
if "ATTNBOOK_INSTRUCTOR_SECRET" in os.environ or os.path.exists("/etc/shadow") or os.path.exists({str(ROOT / "tests")!r}):
    escaped.add("read")
for target in {[str(t) for t in targets]!r}:
    try:
        with open(target, "w") as f:
            f.write("escaped")
        escaped.add("write")
    except OSError:
        pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {marker!r}], start_new_session=True)
os.system(sys.executable + " -c 'import os, time; os.fork() or os.setsid(); time.sleep(600)' {marker} &")
'''
    ch1 = ids(1)
    names = [REGISTRY[e].answer_name for e in ch1]
    nb = solved(1)
    nb.cells.insert(2, nbformat.v4.new_code_cell(probe))
    nb.cells.append(nbformat.v4.new_code_cell(
        "".join(f"if {what!r} in escaped:\n    del {name}\n" for what, name in zip(["network", "read", "write"], names))))
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    try:
        graded = grade_submission(path, timeout_s=CELL_TIMEOUT, notebook_timeout_s=120)
        time.sleep(0.5)
        try:
            listener.accept()[0].close()
            connected = True
        except OSError:
            connected = False
    finally:
        escaped_files = [t for t in targets if t.exists()]
        for t in escaped_files:
            t.unlink()
        left = []
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    left.append(int(pid))
                    os.kill(int(pid), 9)
            except OSError:
                pass
        listener.close()
    assert not connected and not escaped_files and not left, (connected, escaped_files, left)
    assert {e: g.points for e, g in graded.exercises.items()} == {e: REGISTRY[e].points for e in ch1}, graded
    assert not graded.problems, graded.problems


@needs_sandbox
def test_sandbox_command_binds_only_what_python_needs(tmp_path):
    box = sandbox.Sandbox()
    folder = tmp_path / "s"
    folder.mkdir()
    for name in (protocol.REQUEST, "homework.ipynb", protocol.PROGRESS):
        (folder / name).write_text("")
    cmd = box.command(str(folder), str(tmp_path / "etc"), ["python"])
    writable = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--bind"]
    assert writable == [str(folder / protocol.PROGRESS)]  # the progress file alone
    assert all(cmd[i - 2] == "--size" for i, a in enumerate(cmd) if a == "--tmpfs")  # every writable place bounded
    bound = [cmd[i + 1] for i, a in enumerate(cmd) if a in ("--ro-bind", "--ro-bind-try")]
    assert "/" not in bound and "/etc" not in bound and os.path.expanduser("~") not in bound
    assert str(ROOT) not in bound and str(ROOT / "tests") not in bound
    for flag in ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in cmd


def test_without_user_namespaces_the_grader_stops_with_one_line(tmp_path, monkeypatch, capsys):
    def refuse(box=None):
        raise sandbox.Unavailable("the sandbox (bubblewrap) cannot start here (No permissions to create a new "
                                  "namespace): " + sandbox.ALLOW_HINT)
    monkeypatch.setattr(launch, "check_available", refuse)
    assert main([str(tmp_path / "x.ipynb"), "--csv", str(tmp_path / "book.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "sysctl -w kernel.unprivileged_userns_clone=1" in err and "--no-sandbox" in err
    assert not (tmp_path / "book.csv").exists()
