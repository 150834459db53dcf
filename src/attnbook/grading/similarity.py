"""Answers that are the same program: evidence of copying for a person to look at, never a verdict.

`attnbook-grade ... --similarity` reads each submission's answers statically (`ast`, from the notebook's JSON in
the grader; nothing is run) and reports, per exercise, the pairs of submissions whose answers are the same program
after normalisation, and the answers equal to the published solution (the `solution` cells of the chapter,
book/NN_name.ipynb, when the book's folder lies beside the package).

An answer's program is the last top-level definition of the exercise's answer name in the notebook's code cells
(a function, a class, or the value assigned to it), followed by the functions and classes of the notebook it uses,
in the order it first names them (and those they use in turn). Normalised: every name bound inside a definition
(arguments, local variables, loop and comprehension variables, nested functions) becomes v0, v1, ... in the order
of first appearance; each helper of the notebook becomes h0, h1, ...; a name imported at the top of the notebook
becomes the dotted path it stands for (`F.softmax` and `torch.nn.functional.softmax` are the same); comments,
docstrings and other bare strings, annotations, `pass` and layout are dropped. Attribute names, keyword names,
constants and the names of functions that are not the notebook's own (torch's, builtins) are kept, so `max` and
`min` stay different.

An answer smaller than MIN_NODES nodes of syntax after normalisation is skipped (short answers coincide by
themselves), and so is one equal to the exercise version's stub (nothing written).
"""
from __future__ import annotations

import ast
import copy
import csv
import hashlib
import io
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..exercises.registry import id_key

MIN_NODES = 40  # syntax nodes (names, calls, operators, constants; not load/store markers) of a normalised answer
MAX_CELL_CHARS = 1_000_000  # a longer code cell is not parsed
MAX_DEFINITIONS = 50  # the answer and at most this many helpers
SOLUTION_TAG = "solution"
BOOK = Path(__file__).resolve().parents[3] / "book"  # the chapters, in a checkout of the project
_MAGIC = re.compile(r"^\s*[%!]")  # an IPython magic or shell line: not Python


@dataclass(frozen=True)
class Fingerprint:
    """One answer's normalised program: its digest, and its size in syntax nodes."""

    digest: str
    nodes: int


@dataclass(frozen=True)
class Match:
    """Two submissions with the same answer to `exercise_id`; `other` is None for the published solution."""

    exercise_id: str
    submission: str
    other: str | None
    nodes: int


# ---------------------------------------------------------------------------------------------------------
# Reading a notebook's code
# ---------------------------------------------------------------------------------------------------------


def _parse(source: str) -> ast.Module | None:
    """The cell's syntax tree; magic and shell lines are blanked first if it does not parse; None if it cannot."""
    if len(source) > MAX_CELL_CHARS:
        return None
    for attempt in (source, "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines())):
        try:
            return ast.parse(attempt)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            continue
    return None


def _dotted(alias: ast.alias, module: str | None) -> tuple[str, str]:
    """(the name an import binds, the dotted path it stands for)."""
    if module is None:  # import a.b.c [as x]
        return (alias.asname, alias.name) if alias.asname else (alias.name.split(".")[0], alias.name.split(".")[0])
    return alias.asname or alias.name, f"{module}.{alias.name}"


class Definitions:
    """The top-level definitions of a run of code cells, the last of each name winning: functions, classes and
    assignments (`defs`), and what imported names stand for (`aliases`)."""

    def __init__(self, sources: list[str]):
        self.defs: dict[str, ast.AST] = {}
        self.aliases: dict[str, str] = {}
        self.extend(sources)

    def extend(self, sources: list[str]) -> None:
        """Add the definitions of more cells, after (so over) those already read."""
        for source in sources:
            tree = _parse(source)
            for stmt in tree.body if tree is not None else ():
                self._add(stmt)

    def _add(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.defs[stmt.name] = stmt
            self.aliases.pop(stmt.name, None)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            self.defs[stmt.targets[0].id] = stmt.value
            self.aliases.pop(stmt.targets[0].id, None)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)) and not getattr(stmt, "level", 0):
            for alias in stmt.names:
                if alias.name != "*":
                    name, path = _dotted(alias, getattr(stmt, "module", None))
                    self.aliases[name] = path
                    self.defs.pop(name, None)

    def helper(self, name: str) -> bool:
        return isinstance(self.defs.get(name), (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))


def code_sources(nb: dict, tagged: str | None = None) -> list[str]:
    """The sources of the notebook's code cells, in order (only those tagged `tagged`, if given)."""
    out = []
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        tags = (cell.get("metadata") or {}).get("tags", []) if isinstance(cell.get("metadata"), dict) else []
        if tagged is None or (isinstance(tags, list) and tagged in tags):
            source = cell.get("source", "")
            out.append("".join(source) if isinstance(source, list) else str(source))
    return out


# ---------------------------------------------------------------------------------------------------------
# Normalising a definition
# ---------------------------------------------------------------------------------------------------------


def _bound(node: ast.AST) -> set[str]:
    """The names bound inside `node` (arguments, assignments, loops, imports, nested definitions), except the names
    a class's body defines directly (its methods and attributes: reached as attributes, they keep their names)."""
    names: set[str] = set()
    for n in ast.walk(node):
        if n is node:
            continue
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.alias):
            names.add(n.asname or n.name.split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    return names - _class_names(node)


def _class_names(node: ast.AST) -> set[str]:
    """The methods and attributes that the body of class `node` defines directly (none if it is no class)."""
    names: set[str] = set()
    for stmt in node.body if isinstance(node, ast.ClassDef) else ():
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
            stmt, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


class _Normaliser(ast.NodeTransformer):
    """Renames bound names to v0, v1, ... (first appearance), the notebook's helpers to h0, h1, ... (shared over
    one answer's definitions: `helpers`, which grows as new ones are met), imported names to their paths; drops
    docstrings and other bare strings, annotations and `pass`."""

    def __init__(self, defs: Definitions, bound: set[str], helpers: dict[str, str]):
        self.defs, self.bound, self.helpers = defs, bound, helpers
        self.local: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        if name in self.bound:
            return self.local.setdefault(name, f"v{len(self.local)}")
        if name in self.helpers or self.defs.helper(name):
            return self.helpers.setdefault(name, f"h{len(self.helpers)}")
        return name

    def visit_Name(self, node: ast.Name):
        if node.id not in self.bound and node.id in self.defs.aliases:
            return ast.parse(self.defs.aliases[node.id], mode="eval").body  # the dotted path, as attributes
        node.id = self._rename(node.id)
        return node

    def visit_arg(self, node: ast.arg):
        node.arg, node.annotation, node.type_comment = self._rename(node.arg), None, None
        return node

    def _definition(self, node):
        if node.name in self.bound:
            node.name = self._rename(node.name)
        if hasattr(node, "returns"):
            node.returns = None
        return self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _definition

    def visit_alias(self, node: ast.alias):
        if node.asname:
            node.asname = self._rename(node.asname)
        elif node.name.split(".")[0] in self.bound:
            node.name = ".".join([self._rename(node.name.split(".")[0]), *node.name.split(".")[1:]])
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler):
        if node.name:
            node.name = self._rename(node.name)
        return self.generic_visit(node)

    def visit_Global(self, node):
        node.names = [self._rename(n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global

    def visit_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # a docstring or a string used as a comment
        return self.generic_visit(node)

    def visit_Pass(self, node):
        return None

    def visit_AnnAssign(self, node: ast.AnnAssign):
        if node.value is None:
            return None  # `x: int` binds nothing
        return self.visit(ast.Assign(targets=[node.target], value=node.value))


def _size(tree: ast.AST) -> int:
    """Syntax nodes in `tree`, not counting the load/store markers of names."""
    return sum(not isinstance(n, ast.expr_context) for n in ast.walk(tree))


def fingerprint(defs: Definitions, answer_name: str) -> Fingerprint | None:
    """The normalised program of the answer named `answer_name` in `defs` and the helpers it uses; None when the
    notebook defines no such answer (or it cannot be read)."""
    if answer_name not in defs.defs:
        return None
    helpers = {answer_name: "answer"}
    dumps, nodes, done = [], 0, set()
    try:
        while len(done) < min(len(helpers), MAX_DEFINITIONS + 1):
            name = next(n for n in helpers if n not in done)
            done.add(name)
            node = defs.defs.get(name)
            if node is None:
                continue
            tree = _Normaliser(defs, _bound(node), helpers).visit(_copy(node))
            if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                tree.name = helpers[name]
            nodes += _size(tree)
            dumps.append(ast.dump(tree, annotate_fields=False))
    except (RecursionError, MemoryError, ValueError, SyntaxError):
        return None
    return Fingerprint(hashlib.sha256("\n".join(dumps).encode("utf-8", "surrogatepass")).hexdigest(), nodes)


def _copy(node: ast.AST) -> ast.AST:
    """A deep copy of a syntax tree (the normaliser changes what it visits)."""
    return copy.deepcopy(node)


def fingerprints(nb: dict, answers: list[tuple[str, str]]) -> dict[str, Fingerprint]:
    """{exercise id: fingerprint} of a submission's answers [(exercise id, answer name)] it defines."""
    defs = Definitions(code_sources(nb))
    found = {ex_id: fingerprint(defs, name) for ex_id, name in answers if name}
    return {ex_id: f for ex_id, f in found.items() if f is not None}


# ---------------------------------------------------------------------------------------------------------
# The published solutions, and the stubs of the exercise versions
# ---------------------------------------------------------------------------------------------------------


def _chapter_notebook(folder: Path, chapter: str) -> dict | None:
    """The notebook of `chapter` in `folder` (NN_name.ipynb), read as JSON; None if there is none."""
    found = sorted(folder.glob(f"{int(chapter):02d}_*.ipynb")) if folder.is_dir() else []
    try:
        return json.loads(found[0].read_text(encoding="utf-8")) if found else None
    except (OSError, ValueError):
        return None


def published(chapter: str, answers: list[tuple[str, str]], book: Path = BOOK) -> dict[str, Fingerprint]:
    """{exercise id: fingerprint} of the published solutions of `chapter`: each answer's definition is read from
    the chapter's `solution` cells, its helpers from all its code cells (the solution cells' own winning)."""
    nb = _chapter_notebook(book, chapter)
    if nb is None:
        return {}
    defs, solution_cells = Definitions(code_sources(nb)), code_sources(nb, SOLUTION_TAG)
    defs.extend(solution_cells)
    in_solutions = Definitions(solution_cells).defs
    found = {ex_id: fingerprint(defs, name) for ex_id, name in answers if name in in_solutions}
    return {ex_id: f for ex_id, f in found.items() if f is not None}


def stubs(chapter: str, answers: list[tuple[str, str]], book: Path = BOOK) -> dict[str, Fingerprint]:
    """{exercise id: fingerprint} of the exercise version's answers as handed out (book/exercises/): a submission
    that left one unchanged wrote nothing to compare."""
    nb = _chapter_notebook(book / "exercises", chapter)
    return fingerprints(nb, answers) if nb is not None else {}


# ---------------------------------------------------------------------------------------------------------
# Matching, and the report
# ---------------------------------------------------------------------------------------------------------


def matches(answers: dict[str, dict[str, Fingerprint]], chapters: dict[str, str], names: dict[str, str],
            book: Path = BOOK) -> list[Match]:
    """The pairs of submissions with the same program as the answer to an exercise, and the answers equal to
    the published solution, in the order the submissions were given.

    `answers`: {submission: {exercise id: fingerprint}}; `chapters`: {submission: chapter}; `names`: {exercise
    id: answer name}. Answers under MIN_NODES nodes, and answers equal to the stub handed out, are left out."""
    by_chapter: dict[str, list[tuple[str, str]]] = {}
    for ex_id, name in names.items():
        by_chapter.setdefault(ex_id.split(".")[0], []).append((ex_id, name))
    reference = {c: published(c, by_chapter.get(c, []), book) for c in set(chapters.values())}
    handed_out = {c: stubs(c, by_chapter.get(c, []), book) for c in set(chapters.values())}
    groups: dict[tuple[str, str], list[str]] = {}
    found: list[Match] = []
    for submission, prints in answers.items():
        chapter = chapters.get(submission)
        for ex_id, f in prints.items():
            if f.nodes < MIN_NODES or handed_out.get(chapter, {}).get(ex_id) == f:
                continue
            groups.setdefault((ex_id, f.digest), []).append(submission)
            if reference.get(chapter, {}).get(ex_id) == f:
                found.append(Match(ex_id, submission, None, f.nodes))
    for (ex_id, digest), members in groups.items():
        nodes = answers[members[0]][ex_id].nodes
        found += [Match(ex_id, a, b, nodes) for a, b in itertools.combinations(members, 2)]
    order = {s: i for i, s in enumerate(answers)}
    return sorted(found, key=lambda m: (id_key(m.exercise_id), order[m.submission], m.other is not None,
                                        order.get(m.other, -1)))


PUBLISHED = "the published solution"
HEADER = ("Similar answers (evidence for a person to look at, not a verdict; answers under "
          f"{MIN_NODES} syntax nodes are skipped):")


def report_lines(found: list[Match], shown) -> list[str]:
    """The printed report: a header, then one line per match (`shown` makes a name safe to print)."""
    if not found:
        return [HEADER, "  none found"]
    return [HEADER] + [f"  {m.exercise_id}: {shown(m.submission)} = "
                       f"{PUBLISHED if m.other is None else shown(m.other)} ({m.nodes} nodes)" for m in found]


def render(found: list[Match], cell) -> str:
    """The report as CSV (exercise, submission, same_as, nodes); `cell` makes a value safe for a spreadsheet."""
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(["exercise", "submission", "same_as", "nodes"])
    for m in found:
        writer.writerow([m.exercise_id, cell(m.submission), cell(PUBLISHED if m.other is None else m.other),
                         m.nodes])
    return out.getvalue()
