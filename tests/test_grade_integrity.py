"""Issue 23, a grader that loses no row: links, names that forge output or read as options, a flooded stderr, the
run seed out of the kernel's reach, and the similarity report.

The graded runs are crafted as in test_grade.py (trimmed exercise versions with the chapters' solutions), in the
sandbox where this machine allows it, else with --no-sandbox; tests of names and output use --recorded (nothing
runs). Every probe is harmless: files are written under pytest's tmp_path only, and the stderr flood is 120 MB
through a pipe that the grader drains.
"""
from __future__ import annotations

import csv
import os
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest
import torch

from attnbook.exercises import REGISTRY, compare, inputs
from attnbook.grading import protocol, similarity
from attnbook.grading.cli import grade_all, main
from attnbook.grading.gradebook import FORMULA_STARTS

from test_grade import MODE, SANDBOXED, answer_cells, forge_records, ids, points, solved

TIMEOUT = ["--timeout", "30", "--notebook-timeout", "180"]


def write(path: Path, nb) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def rows_of(book: Path) -> list[dict[str, str]]:
    with book.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def forged(chapter: int = 2):
    """An unsolved chapter whose check cells claim full points (read by --recorded)."""
    nb = solved(chapter, only=())
    forge_records(nb)
    return nb


# ---------------------------------------------------------------------------------------------------------
# 1. Links: every path its own row; a path through a link is refused in its own row, its target graded
# ---------------------------------------------------------------------------------------------------------


def test_a_link_never_takes_its_targets_row_whichever_comes_first(tmp_path, monkeypatch, capsys):
    """aaron.ipynb -> zoe.ipynb and aaron_dir -> zoe_dir (relative paths, from the working directory): the links'
    rows are refused with 0 points and name the link; zoe's rows keep full points, before or after them."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "zoe.ipynb", solved(2))
    write(tmp_path / "zoe_dir" / "hw.ipynb", solved(1))
    for link, target in (("aaron.ipynb", "zoe.ipynb"), ("carl.ipynb", "zoe.ipynb"), ("aaron_dir", "zoe_dir"),
                         ("carl_dir", "zoe_dir")):
        os.symlink(target, tmp_path / link)
    paths = ["aaron.ipynb", "zoe.ipynb", "carl.ipynb", "aaron_dir/hw.ipynb", "zoe_dir/hw.ipynb", "carl_dir/hw.ipynb"]
    status = main(["--csv", "book.csv", "--jobs", "2", *TIMEOUT, *MODE, "--", *paths])
    out = capsys.readouterr().out
    rows = {r["submission"]: r for r in rows_of(tmp_path / "book.csv")}
    assert list(rows) == paths and status == 1, out[-3000:]
    for path, link in (("aaron.ipynb", "aaron.ipynb"), ("carl.ipynb", "carl.ipynb"),
                       ("aaron_dir/hw.ipynb", "aaron_dir"), ("carl_dir/hw.ipynb", "carl_dir")):
        row = rows[path]
        assert row["total"] == "0" and f"goes through a symbolic link: `{link}` is a link" in row["problems"], row
    for path, chapter in (("zoe.ipynb", 2), ("zoe_dir/hw.ipynb", 1)):
        row = rows[path]
        assert {e: row[e] for e in ids(chapter)} == {e: points(e) for e in ids(chapter)}, row
        assert "symbolic link" not in row["problems"], row


def test_the_walk_refuses_a_link_anywhere_and_a_path_changed_under_it(tmp_path, monkeypatch):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.ipynb").write_text("{}")
    (tmp_path / "other.ipynb").write_text("[]")
    os.symlink(tmp_path / "real", tmp_path / "folder_link")
    os.symlink(tmp_path / "real" / "a.ipynb", tmp_path / "real" / "file_link.ipynb")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.ipynb")
    read = lambda p: protocol.read_regular(str(p), 1000, whole_path=True)  # noqa: E731
    assert read(tmp_path / "real" / "a.ipynb") == b"{}"
    assert read(f"{tmp_path}/real/../real/./a.ipynb") == b"{}"
    monkeypatch.chdir(tmp_path)
    assert read("real/a.ipynb") == b"{}"
    for path, link in ((f"{tmp_path}/folder_link/a.ipynb", f"{tmp_path}/folder_link"),
                       ("folder_link/a.ipynb", "folder_link"), ("folder_link/../other.ipynb", "folder_link"),
                       ("real/file_link.ipynb", "real/file_link.ipynb"), ("dangling.ipynb", "dangling.ipynb")):
        with pytest.raises(protocol.LinkInPath, match=f"`{link}` is a link"):
            read(path)
    with pytest.raises(protocol.BadFile, match="a folder"):
        read("real")
    with pytest.raises(protocol.BadFile, match="missing"):
        read("real/none.ipynb")
    # A folder swapped for a link after it was walked: the opened file is not the one the path names now.
    other = os.lstat(tmp_path / "other.ipynb")
    monkeypatch.setattr(protocol.os, "lstat", lambda path: other)
    with pytest.raises(protocol.LinkInPath, match="changed while it was opened"):
        read("real/a.ipynb")


def test_a_link_swapped_in_during_the_open_is_not_followed(tmp_path, monkeypatch):
    """The lstat of a component says folder, then the component becomes a link before it is opened: O_NOFOLLOW
    refuses it (ELOOP), and the refusal names it."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.ipynb").write_text("{}")
    real_open = os.open

    def swapping_open(path, flags, mode=0o777, *, dir_fd=None):
        if path == "real" and dir_fd is not None:
            os.rename(tmp_path / "real", tmp_path / "moved")
            os.symlink(tmp_path / "moved", tmp_path / "real")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(protocol.os, "open", swapping_open)
    with pytest.raises(protocol.LinkInPath, match="became a link"):
        protocol.read_regular("real/a.ipynb", 1000, whole_path=True)


# ---------------------------------------------------------------------------------------------------------
# 2. Output injection: formulas in the gradebook, control characters in what is printed
# ---------------------------------------------------------------------------------------------------------

FORGED_LINE = "zoe.ipynb: chapter 2, 4/4 points (0.1 s)"


def test_names_and_messages_cannot_be_formulas_or_forge_lines(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    names = ["=1+1.ipynb", "@SUM(A1).ipynb", "+cmd.ipynb", f"a\n{FORGED_LINE}\n.ipynb", "b\x1b[2K\r\u202eknird.ipynb",
             "\tc.ipynb", "bad\udcff.ipynb"]
    for name in names:
        write(tmp_path / name, forged())
    nb = forged()
    for cell in nb.cells:  # a failed record whose message would print a line of its own
        for out in cell.get("outputs", []):
            record = out.get("metadata", {}).get("attnbook", {}).get("check")
            if record:
                record.update(status="failed", points=0, passed=False,
                              message=f"wrong\n{FORGED_LINE}\x1b[1A\u2028-@x")
    write(tmp_path / "-messages.ipynb", nb)
    assert main(["--recorded", "--csv", "book.csv", "--", *names, "-messages.ipynb"]) == 0
    out = capsys.readouterr()
    printed = out.out + out.err
    for hidden in ("\x1b", "\u202e", "\r", "\u2028", "\udcff", "\t"):
        assert hidden not in printed, repr(hidden)
    assert not [line for line in printed.splitlines() if line.startswith(FORGED_LINE)]
    assert "a\\nzoe.ipynb" in printed and "b\\x1b[2K\\r\\u202eknird.ipynb" in printed and "bad\\udcff" in printed
    text = (tmp_path / "book.csv").read_text(encoding="utf-8")
    assert not any(hidden in text for hidden in ("\x1b", "\u202e", "\u2028", "\t"))
    rows = rows_of(tmp_path / "book.csv")
    assert len(text.splitlines()) == len(rows) + 1 == len(names) + 2  # no cell breaks a line
    for row in rows:
        for value in row.values():
            assert not value.startswith(FORMULA_STARTS), row
    assert [r["submission"] for r in rows][:3] == ["'=1+1.ipynb", "'@SUM(A1).ipynb", "'+cmd.ipynb"]
    assert rows[-1]["submission"] == "'-messages.ipynb"


# ---------------------------------------------------------------------------------------------------------
# 3. File names read as options; the gradebook never written over a submission
# ---------------------------------------------------------------------------------------------------------


def test_after_a_double_dash_names_like_options_are_submissions(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in ("-x.ipynb", "--csv=victim.ipynb", "victim.ipynb", "-h.ipynb"):
        write(tmp_path / name, forged())
    before = (tmp_path / "victim.ipynb").read_bytes()
    assert main(["--recorded", "--", "-x.ipynb", "--csv=victim.ipynb", "-h.ipynb", "victim.ipynb"]) == 0
    out = capsys.readouterr().out
    for name in ("-x.ipynb", "--csv=victim.ipynb", "-h.ipynb", "victim.ipynb"):
        assert f"\n{name}: chapter 2, " in out
    assert (tmp_path / "victim.ipynb").read_bytes() == before
    with pytest.raises(SystemExit):  # without --, a name starting with - is an option: the error says what to do
        main(["--recorded", "victim.ipynb", "-x.ipynb"])
    assert "put -- before the files" in capsys.readouterr().err


def test_the_gradebook_is_never_written_over_a_submission(tmp_path, monkeypatch, capsys):
    import attnbook.grading.cli as cli

    monkeypatch.setattr(cli, "grade_all", lambda *a, **k: pytest.fail("graded before refusing"))
    monkeypatch.chdir(tmp_path)
    for name in ("a.ipynb", "victim.ipynb", "work.txt", "book-similarity.csv"):
        write(tmp_path / name, forged())
    os.link(tmp_path / "work.txt", tmp_path / "hard.csv")
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path, tmp_path / "dir" / "up")
    snapshot = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    cases = [["--csv=victim.ipynb", "a.ipynb"], ["--csv", "new.IPYNB", "a.ipynb"],
             ["--csv", "work.txt", "--", "work.txt"], ["--csv", "hard.csv", "--", "work.txt"],
             ["--csv", "dir/up/work.txt", "--", "work.txt"], ["--csv", "./work.txt", "--", f"{tmp_path}/work.txt"],
             ["--csv", "book.csv", "--similarity", "--", "a.ipynb", "book-similarity.csv"]]
    for argv in cases:
        assert main(["--recorded", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert "refusing to write" in err and "nothing was graded" in err, (argv, err)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == snapshot
    assert not (tmp_path / "book.csv").exists()


# ---------------------------------------------------------------------------------------------------------
# 4. The runner's stderr is bounded: a flood neither fills the grader's disk nor its memory
# ---------------------------------------------------------------------------------------------------------

STDERR_FLOOD = r'''
import os, subprocess, sys
chunk = b"e" * (1 << 20)
for _ in range(60):  # 60 MB to descriptor 2 from the kernel itself
    os.write(2, chunk)
child = "import os\nchunk = b'f' * (1 << 20)\nfor _ in range(60):\n    os.write(2, chunk)\n"
subprocess.run([sys.executable, "-c", child])  # and 60 MB from a process it starts (stderr inherited)
'''


def _resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _disk_bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def test_a_stderr_flood_neither_fills_the_disk_nor_the_memory(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the grader makes each run's folder
    nb = solved(2)
    nb.cells.insert(2, nbformat.v4.new_code_cell(STDERR_FLOOD))
    path = write(tmp_path / "flood.ipynb", nb)
    grade_all([str(write(tmp_path / "quiet.ipynb", solved(2)))], timeout_s=30, notebook_timeout_s=180,
              sandboxed=SANDBOXED)  # the same work without the flood first: what grading itself costs is paid
    baseline, peak = _resident_bytes(), {"disk": 0, "memory": 0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak["disk"] = max(peak["disk"], _disk_bytes(scratch))
            peak["memory"] = max(peak["memory"], _resident_bytes() - baseline)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        graded = grade_all([str(path)], timeout_s=30, notebook_timeout_s=180, sandboxed=SANDBOXED)[0]
    finally:
        done.set()
        sampler.join()
    assert peak["disk"] < 4_000_000, peak  # 120 MB went through: none of it on the disk
    assert peak["memory"] < 16_000_000, peak  # nor in memory (grading itself costs well under 1 MB by now)
    assert not list(scratch.iterdir())
    assert {e: g.points for e, g in graded.exercises.items()} == {e: REGISTRY[e].points for e in ids(2)}, graded
    assert not [p for p in graded.problems if "unsandboxed" not in p], graded.problems


def test_the_stderr_tail_keeps_only_the_last_bytes():
    import subprocess
    import sys

    tail = protocol.StderrTail(keep=1000)
    child = "import os\nfor i in range(50):\n    os.write(2, bytes([65 + i % 26]) * (1 << 20))\nos.write(2, b'the end')"
    proc = subprocess.Popen([sys.executable, "-c", child], stderr=tail.write_fd)
    tail.started()
    proc.wait(timeout=60)
    kept = tail.close()
    assert tail.total == 50 * (1 << 20) + 7 and len(kept) == 1000 and kept.endswith(b"the end")


# ---------------------------------------------------------------------------------------------------------
# 5. The run seed stays in the grader
# ---------------------------------------------------------------------------------------------------------

RUN_SEED = 1_234_567_891
MASK = 0x5A5A5A5A


def _secrets() -> list[int]:
    """The run seed and the seed offsets of the check's two passes."""
    offset = (RUN_SEED * 1_000_003) % 2 ** 31
    return [RUN_SEED, offset, (offset + getattr(compare, "FRESH_STEP", 0)) % 2 ** 31]


SEED_SEARCH = r'''
import json, os, sys
_TARGETS = [str(x ^ MASK_VALUE).encode() for x in MASKED_VALUES]


def _seed_found():
    """Where this process could read the run's seed: its folder, its environment, its command line, the
    checkers' seed offset."""
    found = []
    for root, _dirs, files in os.walk("."):
        for name in files:
            try:
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read(20_000_000)
            except OSError:
                continue
            if any(t in data for t in _TARGETS) or (name == "request.json" and "seed" in " ".join(json.loads(data))):
                found.append(name)
    for where in ("/proc/self/environ", "/proc/self/cmdline"):
        try:
            if any(t in open(where, "rb").read() for t in _TARGETS):
                found.append(where)
        except OSError:
            pass
    if any(t in repr(os.environ).encode() for t in _TARGETS):
        found.append("environ")
    compare = sys.modules.get("attnbook.exercises.compare")
    if compare is not None and compare.SEED_OFFSET != 0:
        found.append("SEED_OFFSET")
    return found


if _seed_found():
    del attention
'''

SEED_AT_CALL = r'''
_answer = attention


def attention(q, k, v, mask=None):
    if _seed_found():  # during the checks: the kernel still holds no seed
        return None
    return _answer(q, k, v, mask)
'''

OFFSET_AT_CALL = ("    import sys as _sys\n"
                  "    assert _sys.modules['attnbook.exercises.compare'].SEED_OFFSET == 0  # never set while I run\n")


def test_the_request_carries_no_seed():
    request = protocol.Request(chapter="2", exercises=[("2.2", "attention")], cell_timeout_s=5, cells=[(0, "x = 1")])
    assert "seed" not in request.to_json()


def test_no_seed_in_the_kernel_and_rebuilt_inputs_match_the_graders(tmp_path):
    """Graded under a known run seed: a cell and the answer itself search the sandbox folder, the environment, the
    command line and the checkers' offset for it and find nothing (else the answer is deleted or returns None);
    chapter 4.3's sublayers, rebuilt in the kernel from their recipes, equal the grader's under that seed (else
    the right answer would fail), and its answer never runs with an offset set."""
    masked = [x ^ MASK for x in _secrets()]
    nb = solved(2)
    source = SEED_SEARCH.replace("MASKED_VALUES", repr(masked)).replace("MASK_VALUE", str(MASK))
    assert not any(str(x) in source for x in _secrets())
    nb.cells.insert(2, nbformat.v4.new_code_cell(source))  # before the answers: nothing to delete yet
    nb.cells.append(nbformat.v4.new_code_cell(source + SEED_AT_CALL))
    seeker = write(tmp_path / "seeker.ipynb", nb)
    nb = solved(4, only=("4.3",))
    cell = answer_cells(nb)["4.3"]
    cell.source = cell.source.replace("    # BEGIN SOLUTION\n", "    # BEGIN SOLUTION\n" + OFFSET_AT_CALL)
    block = write(tmp_path / "block.ipynb", nb)
    seeker_grade, block_grade = grade_all([str(seeker), str(block)], jobs=2, timeout_s=30, notebook_timeout_s=180,
                                          sandboxed=SANDBOXED, run_seed=RUN_SEED)
    assert seeker_grade.exercises["2.2"].points == REGISTRY["2.2"].points, seeker_grade  # the seeker's answer
    assert block_grade.exercises["4.3"].points == REGISTRY["4.3"].points, block_grade


def test_a_built_input_is_rebuilt_under_the_offset_it_was_made_under():
    from attnbook.exercises.ch04.block import _mixing_sublayers

    x = torch.randn(2, 3, 4, dtype=torch.float64)
    saved = compare.SEED_OFFSET
    try:
        made = {}
        for offset in (0, 777):
            compare.SEED_OFFSET = offset  # the grader, in a pass with this offset
            made[offset] = _mixing_sublayers()
        sent = [inputs.encode(list(made[offset]))["v"][0] for offset in (0, 777)]
        assert [s["offset"] for s in sent] == [0, 777]
        compare.SEED_OFFSET = 5  # the kernel's own, whatever it is, is put back after each rebuild
        cache: dict = {}
        again = [inputs.decode(s, cache) for s in sent]
        assert compare.SEED_OFFSET == 5 and len(cache) == 2
        assert torch.equal(again[0](x), made[0][0](x)) and torch.equal(again[1](x), made[777][0](x))
        assert not torch.equal(again[0](x), again[1](x))
    finally:
        compare.SEED_OFFSET = saved


# ---------------------------------------------------------------------------------------------------------
# 6. The similarity report
# ---------------------------------------------------------------------------------------------------------

OWN = '''import math
import torch


def _logits(q, k):
    return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])


def attention(q, k, v, mask=None):
    scores = _logits(q, k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    w = torch.softmax(scores, dim=-1)
    out = torch.matmul(w, v)
    return out, w
'''

RENAMED_COPY = '''import math as m
from torch import matmul, softmax


def my_scores(query, key):
    """My own helper."""
    return matmul(query, key.transpose(-1, -2)) / m.sqrt(query.shape[-1])  # scaled


def attention(query: "Tensor", key, value, mask=None) -> tuple:
    """Written all by myself."""
    # first the scores
    s = my_scores(query, key)
    if mask is not None:

        s = s.masked_fill(mask == 0, -1e9)   # hide the blocked keys
    probabilities = softmax(s, dim=-1)
    result = matmul(probabilities, value)
    return result, probabilities
'''

INDEPENDENT = '''import torch


def attention(q, k, v, mask=None):
    scores = torch.einsum("...id,...jd->...ij", q, k) * q.size(-1) ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf")))
    weights = scores.softmax(dim=-1).nan_to_num(0.0)
    return torch.einsum("...ij,...jd->...id", weights, v), weights
'''

PUBLISHED_RENAMED = '''import math
import torch


def attention(Q, K, V, mask=None):
    # found on the website
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        S = S.masked_fill(~mask, float("-inf"))
    A = torch.softmax(S, dim=-1)
    if mask is not None:
        A = A.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return A @ V, A
'''


def test_similarity_reports_copies_and_the_published_solution_only(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name, source in (("own.ipynb", OWN), ("copy.ipynb", RENAMED_COPY), ("independent.ipynb", INDEPENDENT),
                         ("from_website.ipynb", PUBLISHED_RENAMED)):
        nb = forged()
        answer_cells(nb)["2.2"].source = source
        write(tmp_path / name, nb)
    write(tmp_path / "=solved.ipynb", solved(2))  # every published answer (the short ones are skipped)
    write(tmp_path / "untouched.ipynb", forged())  # the stubs as handed out: nothing to compare
    names = ["own.ipynb", "copy.ipynb", "independent.ipynb", "from_website.ipynb", "=solved.ipynb",
             "untouched.ipynb"]
    assert main(["--recorded", "--similarity", "--csv", "grades.csv", "--", *names]) == 0
    out = capsys.readouterr().out
    report = out[out.index("Similar answers"):]
    assert f"answers under {similarity.MIN_NODES} syntax nodes are skipped" in report
    with (tmp_path / "grades-similarity.csv").open(encoding="utf-8", newline="") as f:
        found = {(r["exercise"], r["submission"], r["same_as"]) for r in csv.DictReader(f)}
    published = similarity.PUBLISHED
    assert found == {("2.2", "own.ipynb", "copy.ipynb"), ("2.2", "from_website.ipynb", published),
                     ("2.2", "'=solved.ipynb", published), ("2.2", "from_website.ipynb", "'=solved.ipynb")}, found
    assert "2.2: own.ipynb = copy.ipynb" in report and f"2.2: from_website.ipynb = {published}" in report
    assert "independent.ipynb" not in report and "untouched.ipynb" not in report


def test_similarity_reads_code_statically_and_survives_what_does_not_parse():
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": "%time x = 1\n!ls\n" + OWN},
                    {"cell_type": "code", "metadata": {}, "source": "def attention(:\n"},  # a syntax error
                    {"cell_type": "code", "metadata": {}, "source": "(" * 500 + ")" * 500},
                    {"cell_type": "code", "metadata": {}, "source": "import os\nos._exit(1)\n"}]}  # never run
    found = similarity.fingerprints(nb, [("2.2", "attention"), ("2.3", "padding_mask")])
    assert set(found) == {"2.2"}
    alone = similarity.fingerprints({"cells": [{"cell_type": "code", "metadata": {}, "source": OWN}]},
                                    [("2.2", "attention")])
    assert found == alone
    deep = "def attention(q, k, v, mask=None):\n    return " + "-" * 5000 + "q\n"  # deeper than the recursion limit
    assert isinstance(similarity.fingerprints({"cells": [{"cell_type": "code", "source": deep}]},
                                              [("2.2", "attention")]), dict)
