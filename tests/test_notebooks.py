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
        # graders find the answer under the name the registry gives
        assert f'check("{ex_id}", {REGISTRY[ex_id].answer_name})' in checker.source, ex_id
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
    for local in ("/work", "/root", "/tmp", "/home"):  # no slash after: a figure's base64 can spell one by chance,
        assert local not in text, f"{path.name} contains a path of this machine ({local})"  # and reads as a path


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


# ---------------------------------------------------------------------------------------------------------
# Hygiene that strict nbval, Jupyter/Colab and the website depend on
# ---------------------------------------------------------------------------------------------------------

NBVAL_MARKERS = {"# NBVAL_IGNORE_OUTPUT", "# NBVAL_CHECK_OUTPUT", "# NBVAL_RAISES_EXCEPTION", "# NBVAL_SKIP"}
GLUE_ROLE = re.compile(r"\{glue(?::text)?\}`([\w.-]+)(?::([^`]*))?`")
GLUE_PREFIX = "application/papermill.record/"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_nbval_marker_is_exact(path):
    """nbval compares the whole comment: `# NBVAL_IGNORE_OUTPUT (because ...)` is silently not a marker."""
    for cell in code_cells(read(path)):
        for line in cell.source.split("\n"):
            if "NBVAL_" in line:
                assert line.strip() in NBVAL_MARKERS, f"not an nbval marker: {line.strip()!r}"
                assert cell.source.split("\n")[0].strip() == line.strip(), "the marker must be the first line"


def test_diagrams_are_mermaid_fences_not_directives():
    """Jupyter, Colab and GitHub draw ```mermaid fences; a {mermaid} directive shows as code there."""
    pages = CHAPTERS + sorted(BOOK.glob("*.md"))
    for path in pages:
        assert "```{mermaid}" not in path.read_text(encoding="utf-8"), path.name
    assert "mermaid" in CONFIG["sphinx"]["config"]["myst_fence_as_directive"]
    assert any("```mermaid" in p.read_text(encoding="utf-8") for p in pages)


def _visible_text(cell) -> str:
    """What a reader sees of a code cell's outputs in Jupyter: streams and plain-text results."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts += [v for k, v in out.data.items() if k == "text/plain"]
    return "\n".join(parts)


def _glued(cell) -> dict[str, str]:
    """{name: text/plain value} of the glue records a code cell published."""
    found = {}
    for out in cell.get("outputs", []):
        name = out.get("metadata", {}).get("scrapbook", {}).get("name")
        if name is not None:
            text = out.data.get(GLUE_PREFIX + "text/plain", out.data.get("text/plain"))
            found[name] = text
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_glued_number_in_the_prose_is_also_visible_in_a_code_output(path):
    """A {glue} role renders only on the website; in Jupyter and Colab the reader needs the number printed."""
    import ast

    glued, visible, roles = {}, "", 0
    for cell in read(path).cells:
        if cell.cell_type == "code":
            glued.update(_glued(cell))
            visible += _visible_text(cell) + "\n"
            continue
        for name, fmt in GLUE_ROLE.findall(cell.source):
            roles += 1
            assert name in glued, f"{{glue}} `{name}` is used before any cell glues it"
            try:
                value = ast.literal_eval(glued[name])
            except (ValueError, SyntaxError):
                value = glued[name]
            shown = format(value, fmt) if fmt else str(value)
            assert shown in visible, f"{name} = {shown} appears in the prose but in no code output above it"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_cells_that_only_glue_or_assert_are_hidden_on_the_website(path):
    import ast

    for cell in code_cells(read(path)):
        lines = [line if not line.lstrip().startswith(("%", "!")) else line.replace(line.strip(), "pass")
                 for line in cell.source.split("\n")]  # IPython magics are not Python
        body = ast.parse("\n".join(lines))
        only_asserts = (any(isinstance(n, ast.Assert) for n in body.body)
                        and all(isinstance(n, (ast.Assert, ast.Import, ast.ImportFrom)) for n in body.body))
        if "glue(" in cell.source or only_asserts:
            assert "remove-cell" in cell.metadata.get("tags", []), f"not tagged remove-cell: {cell.source[:60]!r}"


def test_the_website_hides_nbval_markers_but_keeps_the_code():
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("nbval_markers", ROOT / "_ext" / "nbval_markers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    nb = {"cells": [{"cell_type": "code", "source": ["# NBVAL_IGNORE_OUTPUT\n", "x = 1  # NBVAL_ in a comment stays\n"]},
                    {"cell_type": "markdown", "source": "# NBVAL_IGNORE_OUTPUT"}]}
    out = json.loads(module.strip_markers(json.dumps(nb)))
    assert out["cells"][0]["source"] == "x = 1  # NBVAL_ in a comment stays\n"
    assert out["cells"][1]["source"] == "# NBVAL_IGNORE_OUTPUT"  # markdown is left alone
    assert "nbval_markers" in CONFIG["sphinx"]["local_extensions"]


APPENDICES = sorted(BOOK.glob("appendix_*.ipynb"))


@pytest.mark.parametrize("path", APPENDICES, ids=lambda p: p.stem)
def test_appendix_notebooks_follow_the_chapter_hygiene(path):
    """Appendix pages run under nbval too: same set-up cell, exact markers, clean outputs, no recorded attempts."""
    nb = read(path)
    cells = code_cells(nb)
    assert cells[0].source == SETUP_CELL
    for cell in cells:
        assert cell.execution_count is not None, f"unexecuted cell: {cell.source[:60]!r}"
        for line in cell.source.split("\n"):
            if "NBVAL_" in line:
                assert line.strip() in NBVAL_MARKERS
        for out in cell.outputs:
            assert out.output_type != "error", cell.source[:60]
            assert not (out.output_type == "stream" and out.name == "stderr"), cell.source[:60]
            assert "check" not in out.get("metadata", {}).get("attnbook", {}), "a check result is displayed"
    text = path.read_text(encoding="utf-8")
    for local in ("/work", "/root", "/tmp", "/home"):  # no slash after: a figure's base64 can spell one by chance,
        assert local not in text, f"{path.name} contains a path of this machine ({local})"  # and reads as a path
