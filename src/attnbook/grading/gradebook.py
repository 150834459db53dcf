"""The gradebook: a CSV file with one row per submission, rewritten atomically as each submission ends.

Columns: `submission` (the path as given), one per exercise id seen so far (in numeric order: 9.3 before
10.1; empty where a submission's chapter has no such exercise), `total`, `max_total`, `problems`. After each
submission the whole file is written to a temporary file next to it and renamed over it (os.replace), so a
crash, a kill or a full disk at any moment leaves either the previous complete gradebook or the new one.
"""
from __future__ import annotations

import csv
import io
import os
import tempfile
import threading
from pathlib import Path

from ..exercises.registry import id_key
from .submission import SubmissionGrade


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
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=gradebook_columns(grades))
    writer.writeheader()
    writer.writerows(gradebook_rows(grades))
    return out.getvalue()


def write_gradebook(grades: list[SubmissionGrade], path: Path | str) -> None:
    """Write the gradebook atomically: a temporary file in the same folder, flushed to disk, then renamed."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(render(grades))
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
