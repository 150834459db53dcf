"""attnbook.student: stubbing solutions, the committed exercise versions, and running them."""
import nbformat
import pytest
from nbclient import NotebookClient

from attnbook.exercises import REGISTRY
from attnbook.student import NOTICE, chapter_number, exercise_version, generate, plain_exercise, stub_source

from conftest import BOOK, CHAPTERS, exercise_section


def test_indented_block_becomes_not_implemented():
    source = "def f(x):\n    # BEGIN SOLUTION\n    y = x + 1\n    return y\n    # END SOLUTION\n"
    stubbed = stub_source(source)
    assert "x + 1" not in stubbed
    assert '    raise NotImplementedError("replace this line with your code")' in stubbed
    namespace = {}
    exec(stubbed, namespace)
    with pytest.raises(NotImplementedError):
        namespace["f"](1)


def test_top_level_block_assigns_none_to_each_name():
    source = "import torch\n# BEGIN SOLUTION\nw = torch.ones(2)\nanswer = w * 2\nanswer += 1\n# END SOLUTION\nprint(1)"
    assert stub_source(source) == ("import torch\nw = None  # YOUR ANSWER HERE\n"
                                   "answer = None  # YOUR ANSWER HERE\nprint(1)")


def test_several_blocks_and_text_outside_them_survive():
    source = ("def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n\n"
              "def g():\n    '''doc'''\n    # BEGIN SOLUTION\n    return 2\n    # END SOLUTION")
    stubbed = stub_source(source)
    assert stubbed.count("raise NotImplementedError") == 2 and "'''doc'''" in stubbed
    assert "return 1" not in stubbed and "return 2" not in stubbed


@pytest.mark.parametrize("source, message", [
    ("# BEGIN SOLUTION\nx = 1\n", "no matching"),
    ("# BEGIN SOLUTION\nprint(1)\n# END SOLUTION", "must assign at least one name"),
])
def test_malformed_blocks_are_clear_errors(source, message):
    with pytest.raises(ValueError, match=message):
        stub_source(source)


def test_exercise_directive_becomes_a_plain_heading():
    source = ":::{exercise} 2.3 · A padding mask\n:label: ex-2-3\n:nonumber:\n\nWrite `f`.\n\n- a list\n:::"
    assert plain_exercise(source) == "### Exercise 2.3 · A padding mask\n\nWrite `f`.\n\n- a list"
    with pytest.raises(ValueError, match="not an exercise directive"):
        plain_exercise("```{exercise} 2.3 · old fence\nbody\n```")


def _tiny_chapter():
    nb = nbformat.v4.new_notebook()
    solution = nbformat.v4.new_code_cell("def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION")
    solution.metadata = {"tags": ["solution", "hide-input"], "mystnb": {"code_prompt_show": "Show solution"}}
    shown = nbformat.v4.new_code_cell("1 + 1")
    shown.outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=1)]
    shown.execution_count = 1
    task = nbformat.v4.new_markdown_cell(":::{exercise} 9.1 · Task\n:label: ex-9-1\n:nonumber:\n\nDo it.\n:::")
    nb.cells = [nbformat.v4.new_markdown_cell("# 9. Title"), task, solution, shown]
    return nb


def test_exercise_version_stubs_clears_outputs_and_adds_a_notice():
    ex = exercise_version(_tiny_chapter(), "9", "09_tiny.ipynb")
    assert ex.cells[1].source == NOTICE.format(chapter="9", path="book/09_tiny.ipynb")
    assert ex.cells[2].source == "### Exercise 9.1 · Task\n\nDo it."
    solution, shown = ex.cells[3], ex.cells[4]
    assert "raise NotImplementedError" in solution.source
    assert solution.metadata["tags"] == ["solution"] and "mystnb" not in solution.metadata
    assert shown.outputs == [] and shown.execution_count is None


def test_untagged_solution_block_is_rejected():
    nb = _tiny_chapter()
    nb.cells[2].metadata = {}
    with pytest.raises(ValueError, match="not tagged 'solution'"):
        exercise_version(nb, "9", "09_tiny.ipynb")


def test_chapter_number():
    assert chapter_number(BOOK / "02_scaled_attention.ipynb") == "2"
    with pytest.raises(ValueError, match="chapter number"):
        chapter_number(BOOK / "intro.ipynb")


def test_committed_exercise_versions_are_up_to_date():
    fresh = generate(BOOK)
    assert sorted(p.name for p in fresh) == sorted(p.name for p in CHAPTERS)
    committed = sorted(p.name for p in (BOOK / "exercises").glob("*.ipynb"))
    assert committed == sorted(p.name for p in fresh), "book/exercises holds a file with no chapter"
    for path, text in fresh.items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run `python -m attnbook.student`"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_exercise_version_runs_and_every_check_is_not_attempted(chapter):
    """What a learner sees on opening the exercise version: no cell fails, every check says 'not attempted yet'.
    Only the set-up cell and the exercise section run here (`exercise_section`): the cells between them are the
    chapter's own, which strict nbval runs; `test_committed_exercise_versions_are_up_to_date` keeps them so."""
    nb = exercise_section(nbformat.read(BOOK / "exercises" / chapter.name, as_version=4))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(BOOK)}}).execute()
    records = [out.metadata["attnbook"] for cell in nb.cells if cell.cell_type == "code"
               for out in cell.outputs if "attnbook" in out.get("metadata", {})]
    checks = [r["check"] for r in records if "check" in r]
    number = chapter_number(chapter)
    expected = sorted((e for e in REGISTRY if e.split(".")[0] == number), key=lambda e: int(e.split(".")[1]))
    assert [c["exercise_id"] for c in checks] == expected
    assert all(c["status"] == "not attempted" for c in checks), checks
    (summary,) = [r["summary"] for r in records if "summary" in r]
    assert summary["points"] == 0 and len(summary["exercises"]) == len(expected)


def test_exercise_section_keeps_the_set_up_and_the_exercises_and_refuses_a_section_that_needs_the_chapter():
    nb = _tiny_chapter()
    setup = nbformat.v4.new_code_cell("from attnbook import setup\nfrom attnbook.exercises import check\nsetup()")
    body = nbformat.v4.new_code_cell("table = [1, 2]")
    heading = nbformat.v4.new_markdown_cell("## Exercises")
    check = nbformat.v4.new_code_cell("check('9.1', f)")
    nb.cells = [nb.cells[0], setup, nbformat.v4.new_markdown_cell("## Body"), body, heading, *nb.cells[1:3], check]
    cut = exercise_section(nb)
    assert [c.source for c in cut.cells] == [setup.source, heading.source, nb.cells[5].source,
                                             nb.cells[6].source, check.source]
    check.source = "check('9.1', f, table)"
    with pytest.raises(ValueError, match=r"\['table'\]"):
        exercise_section(nb)
