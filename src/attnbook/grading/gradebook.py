"""The gradebook: a CSV file with one row per submission, rewritten atomically as each submission ends.

Columns: `submission` (the path as given), one per exercise id seen so far (in numeric order: 9.3 before
10.1; empty where a submission's chapter has no such exercise), `total`, `max_total`, `problems`. After each
submission the whole file is written to a temporary file next to it and renamed over it (os.replace), so a
crash, a kill or a full disk at any moment leaves either the previous complete gradebook or the new one.

Everything in it may come from a submission (its file name, an error message its code raised), so every cell is
made safe to open: control characters are shown as escapes (`printable`), and a cell that a spreadsheet would
read as a formula (starting with =, +, -, @, a tab or a carriage return) gets a leading single quote (`cell`).
The grader's printed lines go through `printable` too, so no name or message can start a line of its own.
"""
from __future__ import annotations

import csv
import io
import os
import tempfile
import threading
import unicodedata
from pathlib import Path

from ..exercises.registry import id_key
from .submission import SubmissionGrade


_HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}  # controls, format characters (bidi overrides), surrogates, line breaks
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def printable(text) -> str:
    """`text` with every control, format (bidi override, zero-width), surrogate and line-separator character
    shown as a visible escape (\\n, \\x1b, \\u202e): printed, it cannot start a line, move the cursor or reorder
    what follows."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _SHORT:
        return _SHORT[ch]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def cell(text) -> str:
    """`printable(text)`, with a leading single quote if a spreadsheet would read it as a formula (OWASP's
    advice for CSV injection)."""
    text = printable(text)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def gradebook_columns(grades: list[SubmissionGrade]) -> list[str]:
    """submission, every exercise id seen (in numeric order: 9.3 before 10.1), total, max_total, problems."""
    seen = {ex_id for g in grades for ex_id in g.exercises}
    return ["submission", *sorted(seen, key=id_key), "total", "max_total", "problems"]


def gradebook_rows(grades: list[SubmissionGrade]) -> list[dict[str, str]]:
    """One row per submission: points per exercise (empty where its chapter has no such exercise)."""
    columns = gradebook_columns(grades)
    rows = []
    for g in grades:
        row = {c: "" for c in columns}
        row.update({ex_id: f"{e.points:g}" for ex_id, e in g.exercises.items()})
        row.update(submission=g.submission, total=f"{g.total:g}", max_total=f"{g.max_total:g}",
                   problems="; ".join(g.problems))
        rows.append(row)
    return rows


def render(grades: list[SubmissionGrade]) -> str:
    """The gradebook as CSV text, every cell made safe (`cell`)."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=gradebook_columns(grades))
    writer.writeheader()
    writer.writerows({key: cell(value) for key, value in row.items()} for row in gradebook_rows(grades))
    return out.getvalue()


def write_gradebook(grades: list[SubmissionGrade], path: Path | str) -> None:
    """Write the gradebook atomically (`write_atomically`)."""
    write_atomically(render(grades), path)


def write_atomically(text: str, path: Path | str) -> None:
    """Write `text` to `path` atomically: a temporary file in the same folder, flushed to disk, then renamed."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Gradebook:
    """The rows so far, in the order the submissions were given; `add` rewrites the file (if any) each time."""

    def __init__(self, path: Path | str | None, order: list[str]):
        self.path = Path(path) if path is not None else None
        self.order = {p: i for i, p in enumerate(order)}
        self.grades: list[SubmissionGrade] = []
        self.lock = threading.Lock()

    def add(self, grade: SubmissionGrade) -> None:
        with self.lock:
            self.grades.append(grade)
            self.grades.sort(key=lambda g: self.order.get(g.submission, len(self.order)))
            if self.path is not None:
                write_gradebook(self.grades, self.path)
