"""The package's shape, as CONTRIBUTING promises it: no module of src/attnbook over 500 lines, and no import cycle
between its modules (a module-level import of one module by another, counting `from . import x` and
`from .x import y`; a submodule's import of its own package, which Python runs first anyway, is not an edge)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "attnbook").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def imports(name: str, path: Path) -> set[str]:
    """The attnbook modules that `name` imports at module level."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in MODULES and m != name and not name.startswith(m + ".")}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return groups


def test_the_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_imports_are_resolved():
    assert "attnbook.exercises.forbid" in imports("attnbook.exercises.execute", MODULES["attnbook.exercises.execute"])
    assert "attnbook.exercises.guard" in imports("attnbook.exercises.ch02.variance",
                                                 MODULES["attnbook.exercises.ch02.variance"])


def test_no_import_cycles():
    graph = {name: imports(name, path) for name, path in MODULES.items()}
    assert cycles(graph) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_500_lines(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(SRC)} has {lines} lines: split it by role"
