"""Grade returned exercise notebooks from the check results recorded in their outputs.

    python -m attnbook.grade returned/*.ipynb              # read the recorded results (fast)
    python -m attnbook.grade --execute returned/*.ipynb    # re-run each notebook first (trustworthy)
    python -m attnbook.grade --csv grades.csv returned/*.ipynb

Every `check(...)` output carries `{"attnbook": {"check": {...}}}` in its metadata. Recorded results are only
as honest as the file: a learner can edit them. `--execute` runs the notebook again in a fresh kernel, with
the notebook's folder as working directory, and grades what the checks say now.
"""
from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .exercises._core import METADATA_KEY, NOT_ATTEMPTED


@dataclass(frozen=True)
class Grade:
    """One exercise of one notebook: the latest check result recorded for it."""

    notebook: str
    exercise_id: str
    status: str
    points: float
    max_points: float
    message: str


def recorded_checks(nb: nbformat.NotebookNode) -> dict[str, dict]:
    """The last check record per exercise id found in `nb`'s outputs, in notebook order."""
    found: dict[str, dict] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            record = out.get("metadata", {}).get(METADATA_KEY, {}).get("check")
            if isinstance(record, dict) and "exercise_id" in record:
                found[str(record["exercise_id"])] = record
    return found


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout_s: int = 300) -> nbformat.NotebookNode:
    """Run `nb` in a fresh kernel; a failing cell does not stop the run (its later checks still count)."""
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def grade(path: Path, *, run: bool = False) -> list[Grade]:
    """The grades of one notebook: one row per exercise whose check cell has an output."""
    nb = nbformat.read(path, as_version=4)
    if run:
        nb = execute(nb, path.parent)
    rows = []
    for ex_id, r in recorded_checks(nb).items():
        rows.append(Grade(str(path), ex_id, str(r.get("status", NOT_ATTEMPTED)), float(r.get("points", 0.0)),
                          float(r.get("max_points", 0.0)), str(r.get("message", ""))))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.grade", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="returned .ipynb files")
    parser.add_argument("--execute", action="store_true", help="re-run each notebook before reading its checks")
    parser.add_argument("--csv", type=Path, help="also write one row per notebook and exercise to this file")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.notebooks if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    rows: list[Grade] = []
    for path in args.notebooks:
        graded = grade(path, run=args.execute)
        total, most = sum(g.points for g in graded), sum(g.max_points for g in graded)
        detail = ", ".join(f"{g.exercise_id} {g.status}" for g in graded) or "no check outputs found"
        print(f"{path}: {total:g}/{most:g} points ({detail})")
        rows += graded
    if args.csv:
        with args.csv.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["notebook", "exercise_id", "status", "points", "max_points", "message"])
            writer.writerows([g.notebook, g.exercise_id, g.status, g.points, g.max_points, g.message] for g in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
