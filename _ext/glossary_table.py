"""Sphinx extension for the book: the English ↔ 中文 glossary, rendered from its one data file.

```{attnbook-glossary}
```

in a page draws the table of `book/glossary.yml` (the `attnbook_glossary` setting, relative to the book's root) in
the build's language: the English book shows English | 中文 | introduced in; the Chinese book shows 中文 | English |
首次出现 | 说明, with the chapter titles of its own edition. Below the table, a list says where d2l-zh renders a term
differently. The same file holds the rules the Chinese translation obeys (tools/i18n/checks.py).
"""
from __future__ import annotations

from pathlib import Path

import yaml
from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx import addnodes

HEADERS = {"en": ("English", "中文", "introduced in"), "zh": ("中文", "English", "首次出现", "说明")}
D2L = {"en": "Where d2l-zh (Dive into Deep Learning, Chinese edition) renders a term differently:",
       "zh": "本书与 d2l-zh（《动手学深度学习》）译法不同的术语："}


def _text(value: str) -> nodes.paragraph:
    return nodes.paragraph(text=value)


def _chapter(env, docname: str, chapter: str) -> nodes.Node:
    prefix = "book/" if docname.startswith("book/") else ""
    target = prefix + chapter
    ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget="/" + target, refexplicit=False,
                                refdoc=docname, refwarn=True)
    ref += nodes.inline(text=chapter)
    para = nodes.paragraph()
    para += ref
    return para


class GlossaryTable(Directive):
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        lang = "zh" if (env.config.language or "en").startswith("zh") else "en"
        path = Path(env.srcdir) / env.config.attnbook_glossary
        env.note_dependency(str(path))
        terms = yaml.safe_load(path.read_text(encoding="utf-8"))["terms"]
        headers = HEADERS[lang]
        table = nodes.table(classes=["attnbook-glossary"])
        group = nodes.tgroup(cols=len(headers))
        table += group
        for _ in headers:
            group += nodes.colspec(colwidth=1)
        head = nodes.thead()
        row = nodes.row()
        for title in headers:
            row += nodes.entry("", _text(title))
        head += row
        group += head
        body = nodes.tbody()
        for term in terms:
            cells = [term["en"], term["zh"]] if lang == "en" else [term["zh"], term["en"]]
            row = nodes.row()
            for value in cells:
                row += nodes.entry("", _text(value))
            chapter = term.get("chapter", "intro")
            row += nodes.entry("", _chapter(env, env.docname, chapter))
            if lang == "zh":
                row += nodes.entry("", _text(term.get("note", "")))
            body += row
        group += body
        out = [table]
        differ = [t for t in terms if t.get("d2l")]
        if differ:
            out.append(_text(D2L[lang]))
            items = nodes.bullet_list()
            for term in differ:
                items += nodes.list_item("", _text(f"{term['en']}: d2l-zh {term['d2l']} · attnbook {term['zh']}"))
            out.append(items)
        return out


def setup(app):
    app.add_config_value("attnbook_glossary", "book/glossary.yml", "env")
    app.add_directive("attnbook-glossary", GlossaryTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
