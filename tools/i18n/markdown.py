"""Cut a notebook's MyST markdown and its code comments into translatable units, and put translations back.

One walker serves both directions: `translate_markdown(text, tr)` calls `tr(unit, kind)` for every unit and
rebuilds the text with what `tr` returns. Extraction passes a `tr` that records the unit and returns it unchanged;
building the Chinese edition passes one that looks the unit up in the catalog.

A unit is what a translator translates as a whole: a heading, a paragraph (its lines joined: a soft line break is
a space in English but would be a stray space between Chinese characters), a list item, a table cell, a
directive's title (an exercise's "2.1 · Title", an admonition's title), a label in a mermaid diagram, a run of
full-line comments in a code cell, or a trailing comment. Everything else is copied through unchanged: code,
display math, directive options, labels, HTML. Inline code, math, roles, links and numbers stay inside a unit; the
checker (`checks.py`) requires every translation to keep them unchanged.
"""
from __future__ import annotations

import io
import re
import tokenize
from typing import Callable

Translate = Callable[[str, str], str]

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})(.*)$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,3}[.)])(\s+)(.*)$")
OPTION = re.compile(r"^\s*:[\w-]+:")
LABEL = re.compile(r"^\s*\([\w-]+\)=\s*$")
HAS_WORDS = re.compile(r"[A-Za-z]{2,}")
# directives whose body is markdown (translated) and whose argument is a title (translated)
PROSE_DIRECTIVES = {"exercise", "solution", "note", "tip", "warning", "important", "admonition", "hint", "caution",
                    "seealso", "attention", "danger", "error", "figure", "glue:figure", "dropdown", "margin",
                    "epigraph", "div", "topic", "sidebar"}
TITLED_DIRECTIVES = {"exercise", "admonition", "dropdown", "topic", "sidebar", "solution"}
# code-cell comments that are markers for tools, never prose
MARKER_COMMENT = re.compile(r"^#\s*(NBVAL_\w+|BEGIN SOLUTION|END SOLUTION|noqa\b|type:|pragma\b|fmt:|%%)")
MERMAID_LABEL = re.compile(r'"([^"\n]*)"|\|([^|\n]+)\||(?<=-- )([A-Za-z][^"|\n]*?)(?= -->)')


def _starts_block(line: str) -> bool:
    return bool(FENCE.match(line) or HEADING.match(line) or LIST_ITEM.match(line) or LABEL.match(line)
                or line.lstrip().startswith(("|", "$$", "<", "+++", "%")))


def _hard_break(line: str) -> bool:
    return line.endswith("  ") or line.endswith("\\")


def _translate_text(lines: list[str], tr: Translate, kind: str) -> list[str]:
    """A paragraph (or list item body): units split at hard line breaks, each joined onto one line."""
    out, group = [], []
    for line in lines:
        group.append(line.strip())
        if _hard_break(line):
            tail = "  " if line.endswith("  ") else "\\"
            out.append(_unit(" ".join(group).rstrip("\\").rstrip(), tr, kind) + tail)
            group = []
    if group:
        out.append(_unit(" ".join(group), tr, kind))
    return out


def _unit(text: str, tr: Translate, kind: str) -> str:
    """`text` translated, when it has words outside its code and math (a cell holding only `dtype` is code)."""
    words = HAS_WORDS.search(re.sub(r"`[^`]*`|\$[^$]*\$", " ", text))
    return tr(text, kind) if words else text


def _table_row(line: str, tr: Translate) -> str:
    if re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", line):  # the separator row
        return line
    indent = line[: len(line) - len(line.lstrip())]
    body = line.strip()
    cells = re.split(r"(?<!\\)\|", body.strip("|"))
    return indent + "| " + " | ".join(_unit(cell.strip(), tr, "table cell") for cell in cells) + " |"


def _mermaid(lines: list[str], tr: Translate) -> list[str]:
    def label(match: re.Match) -> str:
        if match.group(1) is not None:
            return '"' + _unit(match.group(1), tr, "diagram label") + '"'
        if match.group(2) is not None:
            return "|" + _unit(match.group(2), tr, "diagram label") + "|"
        return _unit(match.group(3), tr, "diagram label")
    return [MERMAID_LABEL.sub(label, line) for line in lines]


def translate_markdown(text: str, tr: Translate) -> str:
    return "\n".join(_blocks(text.split("\n"), tr))


def _blocks(lines: list[str], tr: Translate) -> list[str]:
    out: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        stripped = line.strip()
        fence = FENCE.match(line)
        if not stripped or LABEL.match(line) or stripped.startswith(("+++", "%", "<!--")):
            out.append(line)
            i += 1
        elif fence:
            indent, marks, info = fence.groups()
            j = i + 1
            while j < n and not re.fullmatch(rf"\s*{re.escape(marks[0])}{{{len(marks)},}}\s*", lines[j]):
                j += 1
            body, close = lines[i + 1:j], lines[j:j + 1]
            out.extend(_fenced(indent, marks, info, body, tr))
            out.extend(close)
            i = j + 1
        elif stripped.startswith("$$"):
            j = i
            if not (stripped.endswith("$$") and len(stripped) > 2):
                j = i + 1
                while j < n and "$$" not in lines[j]:
                    j += 1
            out.extend(lines[i:j + 1])
            i = j + 1
        elif HEADING.match(line):
            hashes, title = HEADING.match(line).groups()
            out.append(f"{hashes} {_unit(title, tr, 'heading')}")
            i += 1
        elif stripped.startswith("|"):
            while i < n and lines[i].strip().startswith("|"):
                out.append(_table_row(lines[i], tr))
                i += 1
        elif stripped.startswith("<"):
            while i < n and lines[i].strip():
                out.append(lines[i])
                i += 1
        elif stripped.startswith(">"):
            j = i
            while j < n and lines[j].strip().startswith(">"):
                j += 1
            inner = [re.sub(r"^\s*>\s?", "", item) for item in lines[i:j]]
            out.extend("> " + item if item else ">" for item in _blocks(inner, tr))
            i = j
        elif LIST_ITEM.match(line):
            indent, marker, space, first = LIST_ITEM.match(line).groups()
            body = [first]
            j = i + 1
            width = len(indent) + len(marker) + len(space)
            while j < n and lines[j].strip() and not LIST_ITEM.match(lines[j]) and not FENCE.match(lines[j]) \
                    and len(lines[j]) - len(lines[j].lstrip()) >= min(width, len(indent) + 1):
                body.append(lines[j])
                j += 1
            texts = _translate_text(body, tr, "list item")
            out.append(f"{indent}{marker}{space}{texts[0]}")
            out.extend(" " * width + t for t in texts[1:])
            i = j
        else:
            indent = line[: len(line) - len(line.lstrip())]
            j = i + 1
            while j < n and lines[j].strip() and not _starts_block(lines[j]) and not lines[j].strip().startswith(">"):
                j += 1
            out.extend(indent + t for t in _translate_text(lines[i:j], tr, "paragraph"))
            i = j
    return out


def _fenced(indent: str, marks: str, info: str, body: list[str], tr: Translate) -> list[str]:
    directive = re.match(r"\{([\w:-]+)\}\s*(.*)$", info.strip())
    if info.strip() == "mermaid":
        return [indent + marks + info] + _mermaid(body, tr)
    if not directive:
        return [indent + marks + info] + body
    name, argument = directive.groups()
    if name not in PROSE_DIRECTIVES:
        return [indent + marks + info] + body
    if argument and name in TITLED_DIRECTIVES:
        argument = _unit(argument, tr, f"{name} title")
    head = f"{indent}{marks}{{{name}}}" + (f" {argument}" if argument else "")
    k = 0
    while k < len(body) and OPTION.match(body[k]):
        k += 1
    options = body[:k]
    if name in {"figure", "glue:figure"}:  # the body of a figure is its caption
        return [head] + options + _blocks(body[k:], tr)
    return [head] + options + _blocks(body[k:], tr)


# --- comments in code cells ---------------------------------------------------------------------------------------

def _comments(source: str) -> list[tuple[int, int, str]]:
    """(row, column, text) of every comment token; IPython magics and shell lines are blanked so that tokenize reads
    the rest of the cell."""
    masked = "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
                       for line in source.split("\n"))
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(masked).readline):
            if token.type == tokenize.COMMENT:
                found.append((token.start[0] - 1, token.start[1], token.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return found


def _wrap(text: str, width: int) -> list[str]:
    """Break a translated comment into lines of at most `width` columns (a CJK character is two columns), between
    characters of Chinese text and at spaces of English, never inside an English word."""
    lines, line, col = [], "", 0
    for piece in re.findall(r"[\x00-\x7f]+?(?=\s|[^\x00-\x7f]|$)\s*|[^\x00-\x7f]", text):
        w = sum(2 if ord(ch) > 0x2e7f else 1 for ch in piece)
        if line and col + w > width:
            lines.append(line.rstrip())
            line, col, piece = "", 0, piece.lstrip()
            w = sum(2 if ord(ch) > 0x2e7f else 1 for ch in piece)
        line += piece
        col += w
    if line.strip():
        lines.append(line.rstrip())
    return lines or [""]


def translate_code(source: str, tr: Translate, width: int = 116) -> str:
    """The cell with its comments translated: a run of full-line comments at one indentation is one unit (a
    sentence often spans lines), rewrapped to `width`; a trailing comment is one unit on its own line."""
    lines = source.split("\n")
    comments = _comments(source)
    full = [(r, c, t) for r, c, t in comments if not lines[r][:c].strip()]
    trailing = [(r, c, t) for r, c, t in comments if lines[r][:c].strip()]
    replace: dict[int, list[str]] = {}
    drop: set[int] = set()
    run: list[tuple[int, int, str]] = []

    def flush() -> None:
        if not run:
            return
        row, col = run[0][0], run[0][1]
        text = " ".join(t[1:].strip() for _, _, t in run)
        if MARKER_COMMENT.match(run[0][2]) or not HAS_WORDS.search(text):
            run.clear()
            return
        translated = tr(text, "code comment")
        if translated != text:
            indent = lines[row][:col]
            replace[row] = [indent + "# " + part for part in _wrap(translated, width - col - 2)]
            drop.update(r for r, _, _ in run[1:])
        run.clear()

    for r, c, t in full:
        if MARKER_COMMENT.match(t) or (run and (r != run[-1][0] + 1 or c != run[-1][1])):
            flush()
        run.append((r, c, t))
        if MARKER_COMMENT.match(t):
            run.clear()
    flush()
    for r, c, t in trailing:
        text = t[1:].strip()
        if MARKER_COMMENT.match(t) or not HAS_WORDS.search(text):
            continue
        translated = tr(text, "code comment")
        if translated != text:
            replace[r] = [lines[r][:c] + "# " + translated]
    out = []
    for r, line in enumerate(lines):
        if r in drop:
            continue
        out.extend(replace.get(r, [line]))
    return "\n".join(out)
