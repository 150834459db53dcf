"""Sphinx extension for the book: on every page, a link to the same page in the other language.

The English site is `_build/html/` (chapters under `book/`), the Chinese one `_build/html/zh/` (chapters at its
top), both built by `make book`. Each page gets, first in its article, a link to its counterpart ("中文" on English
pages, "English" on Chinese ones), and `<link rel="alternate" hreflang>` tags in its head. Sphinx's own pages
(search, index) have counterparts too.

`attnbook_language` ("en" or "zh") says which site is being built; the Chinese book's `_config.yml` sets it.
"""
from __future__ import annotations

import html
import posixpath
import re
from pathlib import Path

LABELS = {"en": ("English", "en"), "zh": ("中文", "zh-CN")}
SPECIAL = {"genindex", "search", "index"}  # Sphinx's pages: the same name on both sites
ARTICLE = re.compile(r'(<article class="bd-article"[^>]*>|<div class="bd-search-container"[^>]*>)')


def counterpart(docname: str, language: str) -> str:
    """The counterpart's path relative to the page's own folder (docname: the page's name on its own site)."""
    depth = docname.count("/")
    if language == "en":  # book/01_qkv -> zh/01_qkv
        other = docname if docname in SPECIAL else docname.removeprefix("book/")
        return "../" * depth + f"zh/{other}.html"
    other = docname if docname in SPECIAL else f"book/{docname}"  # 01_qkv -> ../book/01_qkv
    return "../" * (depth + 1) + f"{other}.html"


def _switch(language: str, href: str) -> str:
    label, lang = LABELS["zh" if language == "en" else "en"]
    return (f'<p class="attnbook-language-switch"><a href="{html.escape(href)}" hreflang="{lang}" lang="{lang}">'
            f"{label}</a></p>")


def _head(app, pagename, templatename, context, doctree) -> None:
    language = app.config.attnbook_language
    href = counterpart(pagename, language)
    mine, other = LABELS[language][1], LABELS["zh" if language == "en" else "en"][1]
    own = posixpath.basename(pagename) + ".html"
    context["metatags"] = context.get("metatags", "") + (
        f'\n<link rel="alternate" hreflang="{mine}" href="{own}">'
        f'\n<link rel="alternate" hreflang="{other}" href="{html.escape(href)}">')


def _insert_switches(app, exception) -> None:
    """After the build: the switch as the first thing in every page's article (search and index pages included,
    which a page template hook does not reach)."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for path in out.rglob("*.html"):
        rel = path.relative_to(out).as_posix()
        if rel.startswith(("_static/", "_sources/", "_images/")):
            continue
        docname = rel.removesuffix(".html")
        text = path.read_text(encoding="utf-8")
        if "attnbook-language-switch" in text or not ARTICLE.search(text):
            continue
        switch = _switch(app.config.attnbook_language, counterpart(docname, app.config.attnbook_language))
        path.write_text(ARTICLE.sub(lambda m: m.group(1) + switch, text, count=1), encoding="utf-8")


def setup(app):
    app.add_config_value("attnbook_language", "en", "html")
    app.connect("html-page-context", _head)
    app.connect("build-finished", _insert_switches)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
