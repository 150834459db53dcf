"""Structure of the chapter notebooks: set-up cell, exercises, table of contents, Colab links, hygiene."""
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from attnbook.exercises import REGISTRY
from attnbook.student import BEGIN, END, chapter_number

from conftest import BOOK, CHAPTERS, ROOT

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
REPO_URL = CONFIG["repository"]["url"]
BRANCH = CONFIG["repository"]["branch"]
REPO = REPO_URL.removeprefix("https://github.com/")

SETUP_CELL = f'''# Set-up (the same first cell in every chapter): install attnbook where it is missing (Colab), then
# seed every random generator and set print options and the plot style.
try:
    import attnbook
except ImportError:
    %pip install --quiet "attnbook @ git+{REPO_URL}@{BRANCH}"
from attnbook import setup
setup()'''

EXERCISE = re.compile(r"\A:::\{exercise\} (\d+\.\d+) · .+\n:label: ex-(\d+)-(\d+)\n:nonumber:\n\n(.|\n)+\n:::\Z")
COLAB = re.compile(r"https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/([^)\s]+)")


def read(path: Path):
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def toc_files():
    files = [TOC["root"]]
    for part in TOC.get("parts", []):
        files += [entry["file"] for entry in part["chapters"]]
    return files


def test_there_are_chapters():
    assert len(CHAPTERS) >= 2


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_first_code_cell_is_the_shared_setup_cell(path):
    assert code_cells(read(path))[0].source == SETUP_CELL


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_opens_with_title_badges_and_goals_and_closes_with_summary_and_exercises(path):
    nb = read(path)
    number = chapter_number(path)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith(f"# {number}. ")
    assert "you will be able to" in first.source
    links = {m.group(3) for m in COLAB.finditer(first.source)}
    assert links == {f"book/{path.name}", f"book/exercises/{path.name}"}
    headings = [line for c in nb.cells if c.cell_type == "markdown" for line in c.source.split("\n")
                if line.startswith("## ")]
    assert "## Summary" in headings and "## Exercises" in headings
    assert headings.index("## Summary") < headings.index("## Exercises") == len(headings) - 1
    assert code_cells(nb)[-1].source.strip() == f"summary({number})"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_exercise_is_task_solution_check(path):
    nb = read(path)
    number = chapter_number(path)
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown" or "{exercise}" not in cell.source:
            continue
        m = EXERCISE.match(cell.source)  # a colon fence, so Jupyter and Colab still render the text inside
        assert m, f"malformed exercise directive: {cell.source[:80]!r}"
        ex_id = m.group(1)
        assert f"{m.group(2)}.{m.group(3)}" == ex_id and ex_id.split(".")[0] == number
        solution, checker = nb.cells[i + 1], nb.cells[i + 2]
        assert solution.cell_type == "code" and solution.metadata.get("tags") == ["solution", "hide-input"]
        assert solution.metadata["mystnb"]["code_prompt_show"] == "Show solution"
        assert BEGIN in solution.source and END in solution.source
        assert checker.cell_type == "code" and f'check("{ex_id}", ' in checker.source
        found.append(ex_id)
    registered = sorted((e for e in REGISTRY if e.split(".")[0] == number), key=lambda e: int(e.split(".")[1]))
    assert found == registered, "every registered exercise appears once, in order"
    assert len(found) >= 3


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_committed_outputs_are_clean_and_every_check_passed(path):
    nb = read(path)
    checks = []
    for cell in code_cells(nb):
        assert cell.execution_count is not None, f"unexecuted cell: {cell.source[:60]!r}"
        for out in cell.outputs:
            assert out.output_type != "error", cell.source[:60]
            assert not (out.output_type == "stream" and out.name == "stderr"), f"stderr in {cell.source[:60]!r}"
            if "attnbook" in out.get("metadata", {}) and "check" in out.metadata["attnbook"]:
                checks.append(out.metadata["attnbook"]["check"])
    assert checks and all(c["passed"] for c in checks), [c for c in checks if not c["passed"]]
    text = path.read_text(encoding="utf-8")
    for local in ("/work/", "/root/", "/tmp/", "/home/"):
        assert local not in text, f"{path.name} contains a path of this machine ({local})"


def test_every_page_is_in_the_toc_and_every_toc_entry_exists():
    pages = {str(p.relative_to(ROOT).with_suffix("")) for p in BOOK.glob("*.ipynb")}
    pages |= {str(p.relative_to(ROOT).with_suffix("")) for p in BOOK.glob("*.md")}
    listed = toc_files()
    assert sorted(pages) == sorted(listed)
    for entry in listed:
        assert (ROOT / f"{entry}.ipynb").exists() or (ROOT / f"{entry}.md").exists(), entry


def test_colab_links_point_at_this_repository_and_at_files_that_exist():
    for path in CHAPTERS + sorted((BOOK / "exercises").glob("*.ipynb")) + [BOOK / "intro.md"]:
        for repo, branch, file in COLAB.findall(path.read_text(encoding="utf-8")):
            assert (repo, branch) == (REPO, BRANCH), path
            assert (ROOT / file).exists(), f"{path.name} links to missing {file}"


def test_config_enables_what_the_book_needs():
    assert CONFIG["only_build_toc_files"] is True
    assert CONFIG["execute"]["execute_notebooks"] == "off"  # nbval re-executes; the site shows committed outputs
    assert {"sphinx_exercise", "sphinxcontrib.mermaid"} <= set(CONFIG["sphinx"]["extra_extensions"])
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
