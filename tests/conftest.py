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


def _names(code: str) -> tuple[set[str], set[str]]:
    """(names a cell's code binds, names it reads)."""
    import ast

    bound, read = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def exercise_section(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """An exercise version cut to what it adds to its chapter: the set-up cell, then everything from the heading
    of the section that holds the first exercise ('## Exercises') to the end.

    The cells in between are the chapter's own, unchanged (no solution cell among them: checked here), and strict
    nbval runs them in the chapter; running them again here would only repeat that. Raises ValueError when the
    section reads a name that only those cells define, so cutting them would change what the section does."""
    import builtins

    cells = nb.cells
    solutions = [i for i, c in enumerate(cells) if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]
    if not solutions:
        raise ValueError("the notebook has no solution cell")
    headings = [i for i in range(solutions[0]) if cells[i].cell_type == "markdown" and cells[i].source.startswith("## ")]
    if not headings:
        raise ValueError("no '## ' heading before the first solution cell")
    setup = next(i for i, c in enumerate(cells) if c.cell_type == "code")
    kept = [cells[setup], *cells[headings[-1]:]]
    bound, read = set(dir(builtins)), set()
    for cell in kept:
        if cell.cell_type == "code":
            code = "\n".join(line.split("%")[0] + "pass" if line.lstrip().startswith("%") else line
                             for line in cell.source.splitlines())  # an IPython magic (%pip) reads no name
            b, r = _names(code)
            bound |= b
            read |= r
    if read - bound:
        raise ValueError(f"the exercise section reads names the chapter's other cells define: {sorted(read - bound)}")
    cut = nbformat.from_dict(nb)
    cut.cells = kept
    return cut
