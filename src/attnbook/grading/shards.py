"""Grading a course in shards on a batch system (a Slurm array, a Kubernetes Indexed Job), and merging them.

    attnbook-grade --shard 0/3 --csv book-0.csv -- returned/*.ipynb    # shard 0 of 3 (0-based, as
    attnbook-grade --shard 1/3 --csv book-1.csv -- returned/*.ipynb    # JOB_COMPLETION_INDEX and a Slurm
    attnbook-grade --shard 2/3 --csv book-2.csv -- returned/*.ipynb    # array --array=0-2 number them)
    attnbook-grade merge book-0.csv book-1.csv book-2.csv -o gradebook.csv

A submission's identity is the path as given, spelled as the grader compares paths (`identity`: os.path.normpath,
except a path with `..`, which is kept as spelled). Two paths to one file are two submissions, each with its own row,
as in a single run. Every shard is given the whole course (the same list, in the same order) and grades its
share: the identities sorted by their SHA-256, dealt round-robin, so shard sizes differ by at most one, and a
submission's shard depends on the list's content, never on its order or on the machine (no `hash()`, which is
salted per process).

Each shard writes its gradebook (`--csv`, the usual CSV) and beside it a manifest (`manifest_path`): the shard
(i, n), the whole course in order, the share it graded, the checker (package version and a digest of its
source) and the options that change a grade. `merge` refuses, naming the shard or the submission, a shard
missing or given twice, shards of another course, checker or options, and a gradebook whose rows are not
exactly its share (a shard killed before its end); otherwise it writes exactly the gradebook one run over the
whole course would have written: the same rows in the same order, the same columns (`gradebook_columns`: the
exercises any row has, in numeric order).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from pathlib import Path

from ..exercises.registry import id_key
from .gradebook import cell, write_atomically

FORMAT = 1  # the manifest's version
FIXED_COLUMNS = ("submission", "total", "max_total", "problems")


class MergeError(ValueError):
    """The shards cannot make the course's gradebook; the message names the shard or the submission."""


def parse_shard(text: str) -> tuple[int, int]:
    """"i/n" -> (i, n): shard i (0-based) of n, 0 <= i < n."""
    if not isinstance(text, str):
        raise TypeError(f"shard must be a string 'i/n', got {type(text).__name__}")
    found = re.fullmatch(r"(\d{1,6})/(\d{1,6})", text.strip())
    if found is None:
        raise ValueError(f"shard must be 'i/n' with whole numbers (shard i of n, 0-based), got {text[:40]!r}")
    i, n = int(found[1]), int(found[2])
    if n < 1:
        raise ValueError(f"shard count n must be at least 1, got {text!r}")
    if not 0 <= i < n:
        raise ValueError(f"shard index i must be from 0 to n-1 = {n - 1} (0-based, like JOB_COMPLETION_INDEX), "
                         f"got {text!r}")
    return i, n


def identity(path: str) -> str:
    """A submission's identity: the path as given, spelled by os.path.normpath unless it has a `..` (after a link,
    `..` does not mean what normpath assumes). `cli.distinct` keeps one path per identity."""
    return path if ".." in path.split(os.sep) else os.path.normpath(path)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def assignment(paths: list[str], n: int) -> dict[str, int]:
    """{path: its shard} for shard count `n`: identities sorted by SHA-256 (then by themselves), dealt in turn."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    ranked = sorted(set(map(identity, paths)), key=lambda key: (_digest(key), key))
    shard = {key: rank % n for rank, key in enumerate(ranked)}
    return {p: shard[identity(p)] for p in paths}


def share(paths: list[str], i: int, n: int) -> list[str]:
    """The paths shard i of n grades, in the order given."""
    if not isinstance(i, int) or not 0 <= i < n:
        raise ValueError(f"i must be an int from 0 to n-1 = {n - 1}, got {i!r}")
    shards = assignment(paths, n)
    return [p for p in paths if shards[p] == i]


def checker_version() -> dict[str, str]:
    """The package's version and a SHA-256 over its Python source (the checkers, the grader, the references)."""
    from .. import __version__
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return {"attnbook": __version__, "source_sha256": h.hexdigest()}


def manifest_path(book: Path | str) -> Path:
    """Where a shard's manifest goes: beside its gradebook, `<stem>.shard.json`."""
    book = Path(book)
    return book.with_name(f"{book.stem}.shard.json")


def manifest(course: list[str], i: int, n: int, options: dict) -> dict:
    """What `merge` needs to know about shard i of n of `course` (the paths given, after `cli.distinct`)."""
    return {"attnbook_shard": FORMAT, "shard": [i, n], "course": list(course),
            "course_sha256": _digest(json.dumps(course)), "share": share(course, i, n),
            "checker": checker_version(), "options": dict(options)}


def write_manifest(book: Path | str, course: list[str], i: int, n: int, options: dict) -> Path:
    path = manifest_path(book)
    write_atomically(json.dumps(manifest(course, i, n, options), indent=1) + "\n", path)
    return path


def _read_shard(book: Path) -> tuple[dict, list[dict[str, str]], list[str]]:
    """(manifest, rows, columns) of one shard's gradebook."""
    try:
        record = json.loads(manifest_path(book).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise MergeError(f"{book}: no readable shard manifest {manifest_path(book)} ({type(e).__name__}); "
                         "was it graded with --shard?") from None
    if not _well_formed(record):
        raise MergeError(f"{manifest_path(book)}: not a shard manifest of format {FORMAT}")
    try:
        with book.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            rows, columns = list(reader), list(reader.fieldnames or [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise MergeError(f"{book}: unreadable gradebook ({type(e).__name__}: {e})") from None
    if columns[:1] != ["submission"] or columns[-3:] != list(FIXED_COLUMNS[1:]):
        raise MergeError(f"{book}: not a gradebook (columns {columns[:3]}...)")
    return record, rows, columns


def _well_formed(record) -> bool:
    """The manifest has the fields `merge` reads, of the right types."""
    if not isinstance(record, dict) or record.get("attnbook_shard") != FORMAT:
        return False
    shard = record.get("shard")
    if not (isinstance(shard, list) and len(shard) == 2 and all(type(v) is int for v in shard)):
        return False
    lists = [record.get("course"), record.get("share")]
    return 0 <= shard[0] < shard[1] and all(isinstance(x, list) and all(isinstance(p, str) for p in x)
                                            for x in lists)


def _label(record: dict, book: Path) -> str:
    i, n = record["shard"]
    return f"shard {i}/{n} ({book})"


def _check_same(first: tuple[dict, Path], other: tuple[dict, Path]) -> None:
    """Both shards come from the same course, checker and options, and count the same n."""
    (a, book_a), (b, book_b) = first, other
    for key, what in (("course", "a different submission list"),
                      ("checker", "a different checker version"), ("options", "different grading options")):
        if a.get(key) != b.get(key):
            detail = "" if key == "course" else f": {b.get(key)} against {a.get(key)}"
            if key == "course" and set(a["course"]) == set(b["course"]):
                detail = ": the same submissions in another order, so the merged order would be ambiguous"
            elif key == "course":
                extra = sorted(set(b["course"]) - set(a["course"]))[:3]
                lacking = sorted(set(a["course"]) - set(b["course"]))[:3]
                detail = f": it has {extra} that the other lacks, and lacks {lacking}"
            raise MergeError(f"{_label(b, book_b)} was given {what} from {_label(a, book_a)}{detail}")
    if a["shard"][1] != b["shard"][1]:
        raise MergeError(f"{_label(b, book_b)} counts {b['shard'][1]} shards, {_label(a, book_a)} "
                         f"{a['shard'][1]}")


def _check_rows(record: dict, rows: list[dict[str, str]], book: Path) -> None:
    """The gradebook's rows are exactly the shard's share, and the share is what the assignment gives."""
    i, n = record["shard"]
    expected = share(record["course"], i, n)
    if record["share"] != expected:
        raise MergeError(f"{_label(record, book)}: its manifest's share is not shard {i}/{n} of its course")
    got, want = [r["submission"] for r in rows], [cell(p) for p in expected]
    has, wanted = set(got), set(want)
    missing = [p for p, c in zip(expected, want) if c not in has]
    if missing:
        raise MergeError(f"{_label(record, book)}: no row for submission {missing[0]!r}"
                         f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''} (did the shard end?)")
    foreign = [s for s in got if s not in wanted]
    if foreign:
        raise MergeError(f"{_label(record, book)}: a row for submission {foreign[0]!r}, which is not in its share")
    seen = set()
    for s in got:
        if s in seen and got.count(s) > want.count(s):
            raise MergeError(f"{_label(record, book)}: submission {s!r} has two rows")
        seen.add(s)
    if got != want:
        raise MergeError(f"{_label(record, book)}: its rows are not in the order of its share")


def merge(books: list[Path | str]) -> str:
    """The gradebook (CSV text) one run over the whole course would write, from every shard's gradebook."""
    if not books:
        raise MergeError("no shard gradebooks given")
    shards = [(Path(b), *_read_shard(Path(b))) for b in books]
    first = (shards[0][1], shards[0][0])
    by_index: dict[int, tuple[Path, dict, list, list]] = {}
    for book, record, rows, columns in shards:
        _check_same(first, (record, book))
        i = record["shard"][0]
        if i in by_index:
            raise MergeError(f"shard {i}/{record['shard'][1]} given twice: {by_index[i][0]} and {book}")
        by_index[i] = (book, record, rows, columns)
    course, n = first[0]["course"], first[0]["shard"][1]
    absent = [i for i in range(n) if i not in by_index]
    if absent:
        lost = share(course, absent[0], n)
        raise MergeError(f"shard {absent[0]}/{n} is missing ({len(absent)} of {n} missing); its submissions "
                         f"include {lost[:3]}" if lost else f"shard {absent[0]}/{n} is missing")
    row_of: dict[str, dict[str, str]] = {}
    for book, record, rows, _ in by_index.values():
        _check_rows(record, rows, book)
        row_of.update(zip(record["share"], rows))  # in the share's order (checked), so two paths that escape
        # to the same cell ("=a", "'=a") keep their own rows
    exercises = {c for *_, columns in by_index.values() for c in columns if c not in FIXED_COLUMNS}
    fieldnames = ["submission", *sorted(exercises, key=id_key), *FIXED_COLUMNS[1:]]
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=fieldnames)
    writer.writeheader()
    for path in course:
        row = row_of[path]
        writer.writerow({c: cell(row.get(c) or "") for c in fieldnames})  # None: a short row's missing cells
    return out.getvalue()
