"""Generate the exercise version of each chapter: solutions replaced by stubs, outputs cleared.

    python -m attnbook.student            # write book/exercises/NN_name.ipynb for every book/NN_name.ipynb
    python -m attnbook.student book/03_multi_head.ipynb   # only these chapters
    python -m attnbook.student --check    # exit 1 if a committed exercise version is out of date

In a cell tagged `solution`, each block between `# BEGIN SOLUTION` and `# END SOLUTION` is replaced:
inside a function (indented) by `raise NotImplementedError(...)`; at the top level by `name = None` for
every name the block assigns, so `check(...)` reports "not attempted yet" and later cells still run.

Exercise versions are read in Jupyter and Colab, which do not know MyST directives, so each
`:::{exercise} 2.1 · Title` block becomes a plain heading "### Exercise 2.1 · Title" followed by its text.
"""
from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from pathlib import Path

import nbformat

from .i18n import N_, translations

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
SOLUTION_TAG = "solution"
METADATA_KEY = "attnbook"  # the notebook's metadata: {"chapter": N}
CHAPTER_GLOB = "[0-9][0-9]_*.ipynb"
EXERCISE_DIRECTIVE = re.compile(r"\A:::\{exercise\} (?P<title>[^\n]+)\n(?::[\w-]+:[^\n]*\n)*\n?(?P<body>.*?)\n:::\s*\Z", re.S)
# In the language of the notebook (metadata.attnbook.language, "zh" in book/zh/), from the feedback's catalog
NOTICE = N_(
    "**Exercise version.** The solutions in this notebook are replaced by stubs. Fill them in and run the "
    "check cell under each one; `summary({chapter})` at the end shows your progress.\n\n"
    "**Stuck?** Read the check's message: it names the input that went wrong and gives a hint. Then re-read the "
    "section of the chapter it names. The solutions are in the chapter itself, `{path}`: the first badge "
    "at the top opens it in Colab, and on the website each one sits behind \"Show solution\"."
)
HEADING = N_("Exercise {title}")
CODE_HERE, ANSWER_HERE = N_("YOUR CODE HERE"), N_("YOUR ANSWER HERE")
REPLACE_LINE = N_("replace this line with your code")


def stub_source(source: str, language: str = "en") -> str:
    """Replace every BEGIN/END SOLUTION block in `source` by its stub (its comments in `language`)."""
    lines = source.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != BEGIN:
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        try:
            j = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == END)
        except StopIteration:
            raise ValueError(f"'{BEGIN}' on line {i + 1} has no matching '{END}'") from None
        out.extend(_stub(lines[i + 1 : j], indent, translations(language).gettext))
        i = j + 1
    return "\n".join(out)


def _stub(block: list[str], indent: str, tr=str) -> list[str]:
    """The stub lines for one solution block at `indent`; `tr` translates its words."""
    if indent:
        return [f"{indent}# {tr(CODE_HERE)}", f'{indent}raise NotImplementedError("{tr(REPLACE_LINE)}")']
    names = _assigned_names("\n".join(block))
    if not names:
        raise ValueError("a top-level solution block must assign at least one name, e.g. `answer = ...`")
    return [f"{name} = None  # {tr(ANSWER_HERE)}" for name in names]


def _assigned_names(code: str) -> list[str]:
    """Names assigned at the top level of `code`, in order of first assignment."""
    names: list[str] = []
    for node in ast.parse(code).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for t in targets:
            if isinstance(t, ast.Name) and t.id not in names:
                names.append(t.id)
    return names


def plain_exercise(source: str, language: str = "en") -> str:
    """':::{exercise} 2.1 · Title' + options + body + ':::'  ->  '### Exercise 2.1 · Title' + body."""
    m = EXERCISE_DIRECTIVE.match(source)
    if m is None:
        raise ValueError(f"not an exercise directive of the form ':::{{exercise}} N.k · title ... :::': {source[:60]!r}")
    heading = translations(language).gettext(HEADING).format(title=m.group("title"))
    return f"### {heading}\n\n{m.group('body').strip()}"


def exercise_version(nb: nbformat.NotebookNode, chapter: str, name: str) -> nbformat.NotebookNode:
    """A copy of chapter notebook `nb` with solutions stubbed, outputs cleared, plain exercise headings, a
    notice on top, and the chapter number in the notebook's metadata (`metadata.attnbook.chapter`)."""
    nb = copy.deepcopy(nb)
    language = nb.metadata.get(METADATA_KEY, {}).get("language", "en")
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith(":::{exercise}"):
            cell.source = plain_exercise(cell.source, language)
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        tags = cell.metadata.get("tags", [])
        if SOLUTION_TAG in tags:
            cell.source = stub_source(cell.source, language)
            cell.metadata["tags"] = [t for t in tags if t != "hide-input"]  # learners must see their cell
            cell.metadata.pop("mystnb", None)
        elif BEGIN in cell.source:
            raise ValueError(f"a cell holds '{BEGIN}' but is not tagged {SOLUTION_TAG!r}: {cell.source[:60]!r}")
    nb.metadata[METADATA_KEY] = {"chapter": int(chapter)}  # attnbook-grade reads it (else it recognises the content)
    if language != "en":
        nb.metadata[METADATA_KEY]["language"] = language
    path = f"book/{name}" if language == "en" else f"book/{language}/{name}"
    notice = nbformat.v4.new_markdown_cell(translations(language).gettext(NOTICE).format(chapter=chapter, path=path))
    notice.id = "exercise-version-notice"
    nb.cells.insert(1, notice)
    return nb


def chapter_number(path: Path) -> str:
    """'02_scaled_attention.ipynb' -> '2'."""
    m = re.match(r"(\d+)_", path.name)
    if not m:
        raise ValueError(f"{path.name} does not start with a chapter number like '02_'")
    return str(int(m.group(1)))


def render(nb: nbformat.NotebookNode) -> str:
    """The notebook as the exact text we commit."""
    return nbformat.writes(nb) + "\n"


def generate(book_dir: Path, chapters: list[Path] | None = None) -> dict[Path, str]:
    """Map each exercise-version path to its freshly generated text (for every chapter, or for `chapters`)."""
    out = {}
    for path in chapters or sorted(book_dir.glob(CHAPTER_GLOB)):
        nb = nbformat.read(path, as_version=4)
        out[book_dir / "exercises" / path.name] = render(exercise_version(nb, chapter_number(path), path.name))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.student", description=__doc__.split("\n")[0])
    parser.add_argument("--book", type=Path, default=Path("book"), help="folder of chapter notebooks")
    parser.add_argument("--check", action="store_true", help="exit 1 if an exercise version is stale")
    parser.add_argument("chapters", nargs="*", type=Path, help="only these chapter notebooks (default: all)")
    args = parser.parse_args(argv)
    if not args.book.is_dir():
        parser.error(f"--book {args.book} is not a folder")
    missing = [str(p) for p in args.chapters if not p.is_file()]
    if missing:
        parser.error(f"no such chapter: {', '.join(missing)}")
    stale = []
    for path, text in generate(args.book, [args.book / p.name for p in args.chapters]).items():
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print("out of date (run `python -m attnbook.student`):", *map(str, stale), sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
