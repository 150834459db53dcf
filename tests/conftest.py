"""Shared fixtures: the book's folders, and the reference solutions read from the chapter notebooks."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display in CI; set before pyplot is imported anywhere

from pathlib import Path

import nbformat
import pytest
import torch

# The tests use tiny tensors, for which a second thread costs more than it gives (and on a busy machine a
# 2-thread kernel can stall for milliseconds per call). Notebook kernels are separate processes, unaffected.
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))


def chapter_path(number: int) -> Path:
    """book/NN_name.ipynb for chapter `number`."""
    (path,) = [p for p in CHAPTERS if p.name.startswith(f"{number:02d}_")]
    return path


def solution_namespace(number: int) -> dict:
    """Run every `solution`-tagged cell of chapter `number` (in order) and return the names they define.

    So the tests check the reference solutions exactly as the book shows them.
    """
    nb = nbformat.read(chapter_path(number), as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            exec(compile(cell.source, f"<chapter {number} solution>", "exec"), namespace)
    return namespace


@pytest.fixture(scope="session")
def solutions():
    """solutions(1) -> the namespace of chapter 1's reference solutions."""
    cache: dict[int, dict] = {}

    def get(number: int) -> dict:
        if number not in cache:
            cache[number] = solution_namespace(number)
        return cache[number]

    return get


@pytest.fixture(autouse=True)
def _fresh_check_session():
    """Every test starts as a new learner: no earlier attempts (after 10 failed tries a by-hand exercise stops
    naming wrong entries, so attempts must not leak between tests)."""
    from attnbook.exercises import reset_session

    reset_session()
    yield
    reset_session()


@pytest.fixture
def offset():
    """Set compare.SEED_OFFSET for a test (`offset(value)`), and put it back after."""
    from attnbook.exercises import compare

    before = compare.SEED_OFFSET

    def set_to(value):
        compare.SEED_OFFSET = value

    yield set_to
    compare.SEED_OFFSET = before
