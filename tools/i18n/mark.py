"""Mark a module's messages for gettext: a one-off helper for converting checker code, kept for new checkers.

    python -m tools.i18n.mark src/attnbook/exercises/ch07/conv.py [--dry-run]

Every string or f-string that reads as a message (two words or more; not a docstring, a raw string or regular
expression, a comparison operand, a dictionary key or a `forbid=`/`what=`/`on=`/`section=` argument) becomes a
gettext call: "text" → _("text"); f"got {x.shape}, expected {n!r}" → _("got {shape}, expected {n!r}",
shape=x.shape, n=n). Module-level strings become N_("text"): extracted for translation, translated where they are shown
(`check` translates a Wrong's message and hint, `call` a forbid list's advice). Read the diff afterwards: the tool
is a start, not a judge.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

WORD = re.compile(r"[A-Za-z]{2,}")
SKIP_KEYWORDS = {"forbid", "what", "on", "section", "name", "dtype", "device", "mode", "key", "prefix"}
SKIP_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer", "startswith",
              "endswith", "replace", "getattr", "setattr", "hasattr", "join", "removeprefix", "removesuffix", "strip",
              "_", "N_", "exercise", "getenv", "get", "pop", "index", "count", "find", "rfind", "encode", "decode",
              "Path", "open", "import_module", "warn", "filterwarnings", "simplefilter", "isinstance", "builds",
              "beside_answer", "lstrip", "rstrip", "partition", "rpartition"}


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, (ast.Constant, ast.JoinedStr)):
                found.add(id(first.value))
    return found


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _chars(line: str, byte_offset: int) -> int:
    """ast's column offsets count UTF-8 bytes; the source string counts characters."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8"))


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _wrapped(text: str, indent: int, width: int = 112) -> str:
    """A long template as implicitly concatenated literals, broken at spaces."""
    room = max(40, width - indent)
    parts, rest = [], text
    while len(rest) > room:
        cut = rest.rfind(" ", 0, room)
        if cut <= 0:
            break
        parts.append(rest[:cut + 1])
        rest = rest[cut + 1:]
    parts.append(rest)
    return ("\n" + " " * indent).join(_literal(p) for p in parts)


def _name(expr: str, used: dict[str, str]) -> str:
    if expr in used.values():
        return next(k for k, v in used.items() if v == expr)
    if re.fullmatch(r"[A-Za-z_]\w*", expr):
        base = expr
    elif re.fullmatch(r"[A-Za-z_][\w.]*", expr):
        base = expr.rsplit(".", 1)[-1]
    else:
        base = re.sub(r"\W+", "_", expr).strip("_").lower()[:24].strip("_") or "value"
    if not re.match(r"[A-Za-z_]", base):
        base = "v_" + base
    if base in ("message",):
        base = "text"
    name, k = base, 2
    while name in used:
        name, k = f"{base}{k}", k + 1
    used[name] = expr
    return name


def _fstring(node: ast.JoinedStr, source: str) -> tuple[str, dict[str, str]] | None:
    template, used = [], {}
    for part in node.values:
        if isinstance(part, ast.Constant):
            template.append(str(part.value).replace("{", "{{").replace("}", "}}"))
            continue
        assert isinstance(part, ast.FormattedValue)
        if part.format_spec is not None and any(isinstance(v, ast.FormattedValue) for v in part.format_spec.values):
            return None
        expr = ast.get_source_segment(source, part.value)
        if expr is None or "\n" in expr:
            return None
        field = _name(expr, used)
        if part.conversion != -1:
            field += "!" + chr(part.conversion)
        if part.format_spec is not None:
            field += ":" + "".join(str(v.value) for v in part.format_spec.values)
        template.append("{" + field + "}")
    return "".join(template), used


def mark(path: Path) -> tuple[str, list[str]]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    parents, docs = _parents(tree), _docstrings(tree)
    lines = source.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    edits, module_level = [], []

    def skip(node: ast.AST) -> bool:
        child, parent = node, parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store) and parent.slice is child:
                return False  # mistakes[f"hint"] = value: the key is a hint
            if isinstance(parent, (ast.Compare, ast.Subscript, ast.JoinedStr)):
                return True
            if isinstance(parent, ast.Dict) and any(k is child for k in parent.keys) and False:
                return True
            if isinstance(parent, ast.keyword) and parent.arg in SKIP_KEYWORDS:
                return True
            if isinstance(parent, ast.Call):
                if _call_name(parent) in SKIP_CALLS:
                    return True
                if isinstance(parent.func, ast.Attribute) and parent.func.value is child:  # "...".format(...)
                    return False
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return False
            if isinstance(parent, ast.Module):
                return None  # module level
            child, parent = parent, parents.get(id(parent))
        return False

    for node in ast.walk(tree):
        if id(node) in docs:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
        else:
            continue
        if isinstance(parents.get(id(node)), ast.JoinedStr) or len(WORD.findall(text)) < 2 \
                or not re.search(r"\s", text):
            continue
        segment = ast.get_source_segment(source, node)
        if segment is None or re.match(r"[rRbB]", segment):
            continue
        verdict = skip(node)
        start = offsets[node.lineno - 1] + _chars(lines[node.lineno - 1], node.col_offset)
        end = offsets[node.end_lineno - 1] + _chars(lines[node.end_lineno - 1], node.end_col_offset)
        if verdict is None:
            if isinstance(node, ast.Constant):
                edits.append((start, end, "N_(" + segment + ")"))
            else:
                module_level.append(f"{path}:{node.lineno}: {segment[:90]}")
            continue
        if verdict:
            continue
        if isinstance(node, ast.Constant):
            new = "_(" + segment + ")"
        else:
            made = _fstring(node, source)
            if made is None:
                module_level.append(f"{path}:{node.lineno}: (not converted) {segment[:90]}")
                continue
            template, values = made
            col = _chars(lines[node.lineno - 1], node.col_offset)
            body = _wrapped(template, col + 2)
            args = ", ".join(f"{k}={v}" for k, v in values.items())
            last = len(body.rsplit("\n", 1)[-1]) + (col + 2 if "\n" not in body else 0)
            if args and last + len(args) > 112:
                args = "\n" + " " * (col + 2) + args
            new = "_(" + body + (("," if args.startswith("\n") else ", ") + args if args else "") + ")"
        edits.append((start, end, new))
    # outermost edits only
    edits.sort()
    kept = []
    for edit in edits:
        if kept and edit[0] < kept[-1][1]:
            continue
        kept.append(edit)
    for start, end, new in reversed(kept):
        source = source[:start] + new + source[end:]
    names = [n for n in ("N_", "_") if any(new.startswith(n + "(") for _, _, new in kept)]
    if names and not re.search(r"^from \.+i18n import ", source, re.M):
        depth = len(path.resolve().relative_to(Path(__file__).resolve().parents[2] / "src" / "attnbook").parts) - 1
        line = "from " + "." * (depth + 1) + "i18n import " + ", ".join(names) + "\n"
        relative = list(re.finditer(r"^from \.+[\w.]* import [^\n(]*(\([^)]*\))?[^\n]*\n", source, re.M))
        m = relative[-1] if relative else None
        if m:
            source = source[:m.end()] + line + source[m.end():]
        else:
            m = re.search(r"^(from|import) (?!__future__)", source, re.M)
            source = source[:m.start()] + line + source[m.start():]
    return source, module_level


def main(argv: list[str]) -> int:
    dry = "--dry-run" in argv
    for name in [a for a in argv if not a.startswith("--")]:
        path = Path(name)
        new, notes = mark(path)
        for note in notes:
            print("module level, mark by hand:", note)
        if not dry:
            path.write_text(new, encoding="utf-8")
        else:
            sys.stdout.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
