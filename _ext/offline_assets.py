"""Sphinx extension for the book: a website that needs no other host, even opened from disk.

- MathJax and mermaid come from the npm packages in `package.json` (`npm ci`, which `make book` and `make test`
  run, installs them into `node_modules/`). The files the pages use are copied into `_static/vendor/`:
  MathJax's `tex-mml-chtml.js` with its fonts and the components it loads on demand, and mermaid's
  self-contained `mermaid.min.js`.
- sphinxcontrib-mermaid imports mermaid as an ES module, which browsers refuse from `file://` pages. The page
  loads `mermaid.min.js` as a classic deferred script instead, and the extension's module script takes that
  `window.mermaid` (deferred and module scripts run in document order), so diagrams draw from disk too.
- sphinx-thebe's inline script appears twice on every page, and the second copy is an error in the console;
  duplicate inline scripts are dropped.
- The Colab badge image of the chapters is a local SVG (`_static/colab-badge.svg`) rather than Colab's own.
- Chinese text is set in Noto Sans SC (SIL Open Font License), from the `@fontsource/noto-sans-sc` package: its
  regular and bold faces, split by Unicode range into small WOFF2 files, of which a browser fetches only those
  holding characters on the page; cut down to the CJK ranges, so that the font can come first in every font list
  (the system's generic fonts would otherwise draw Chinese as empty boxes on a machine without CJK fonts). So the
  Chinese edition, and the Chinese column of the English glossary, render on a machine without any CJK font, and
  look the same everywhere (`_static/attnbook.css` names the font).
"""
from __future__ import annotations

import posixpath
import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.builders.html._assets import _JavaScript
from sphinx.errors import ExtensionError

NODE_MODULES = Path(__file__).resolve().parents[1] / "node_modules"
VENDOR = "vendor"  # under the site's _static/
# (source under node_modules, destination under _static/vendor): everything the pages load.
FILES = [
    ("mathjax/es5/tex-mml-chtml.js", "mathjax/tex-mml-chtml.js"),
    ("mathjax/es5/input", "mathjax/input"),  # TeX extensions MathJax loads when a formula uses them
    ("mathjax/es5/output/chtml", "mathjax/output/chtml"),  # fonts
    ("mathjax/es5/a11y", "mathjax/a11y"),  # accessibility options of MathJax's menu
    ("mathjax/es5/sre", "mathjax/sre"),
    ("mathjax/es5/ui", "mathjax/ui"),
    ("mathjax/LICENSE", "mathjax/LICENSE"),
    ("mermaid/dist/mermaid.min.js", "mermaid/mermaid.min.js"),
    ("mermaid/LICENSE", "mermaid/LICENSE"),
]
FONT_PACKAGE = "@fontsource/noto-sans-sc"
FONT_WEIGHTS = ("400", "700")
FONT_CSS = f"{VENDOR}/noto-sans-sc/noto-sans-sc.css"
FONT_URL = re.compile(r"url\(\./files/([\w.-]+\.woff2)\) format\('woff2'\)(?:, url\([^)]*\) format\('woff'\))?")
MATHJAX_PATH = f"{VENDOR}/mathjax/tex-mml-chtml.js"
MERMAID_PATH = f"{VENDOR}/mermaid/mermaid.min.js"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
LOCAL_BADGE = "_static/colab-badge.svg"
MERMAID_IMPORT = re.compile(r'^import mermaid from "[^"]*";$', re.M)


def _copy_vendor_files(app) -> None:
    if app.builder.format != "html":
        return
    missing = [src for src, _ in FILES if not (NODE_MODULES / src).exists()]
    if missing:
        raise ExtensionError(f"{NODE_MODULES} lacks {', '.join(missing)}: run `npm ci` in the repository root "
                             "(make book and make test do) to install MathJax and mermaid for the website")
    target = Path(app.outdir) / "_static" / VENDOR
    for src, dst in FILES:
        (target / dst).parent.mkdir(parents=True, exist_ok=True)
        if (NODE_MODULES / src).is_dir():
            shutil.copytree(NODE_MODULES / src, target / dst, dirs_exist_ok=True)
        else:
            shutil.copy2(NODE_MODULES / src, target / dst)
    _copy_font(Path(app.outdir) / "_static" / FONT_CSS)


CJK_START = 0x2E80  # CJK radicals, punctuation, kana, ideographs, full-width forms: everything from here up


def _cjk_ranges(ranges: str) -> str:
    """The part of a CSS unicode-range at or above CJK_START: the font then draws only CJK characters, and Latin text
    keeps the system font even though the font is named first (fontsource's subsets also hold Latin letters)."""
    kept = []
    for item in ranges.split(","):
        low, _, high = item.strip().removeprefix("U+").removeprefix("u+").partition("-")
        low, high = int(low, 16), int(high or low, 16)
        if high >= CJK_START:
            low = max(low, CJK_START)
            kept.append(f"U+{low:x}" + (f"-{high:x}" if high != low else ""))
    return ",".join(kept)


def _copy_font(css_path: Path) -> None:
    """Noto Sans SC's @font-face rules (WOFF2 only: every browser the site supports reads it) and their files."""
    package = NODE_MODULES / FONT_PACKAGE
    if not (package / "400.css").exists():
        raise ExtensionError(f"{package} is missing: run `npm ci` in the repository root (make book does)")
    (css_path.parent / "files").mkdir(parents=True, exist_ok=True)
    rules = []
    for weight in FONT_WEIGHTS:
        for rule in re.findall(r"@font-face \{[^}]*\}", (package / f"{weight}.css").read_text(encoding="utf-8")):
            ranges = _cjk_ranges(re.search(r"unicode-range: ([^;]*);", rule).group(1))
            if not ranges:
                continue  # Latin, Cyrillic, Vietnamese: the system's fonts draw those
            for name in FONT_URL.findall(rule):
                shutil.copy2(package / "files" / name, css_path.parent / "files" / name)
            rule = re.sub(r"unicode-range: [^;]*;", f"unicode-range: {ranges};", rule)
            rules.append(FONT_URL.sub(r"url(./files/\1) format('woff2')", rule))
    shutil.copy2(package / "LICENSE", css_path.parent / "LICENSE")
    css_path.write_text("\n".join(rules), encoding="utf-8")

def _check_config(app, config) -> None:
    if config.mathjax_path != MATHJAX_PATH or config.mermaid_use_local != MERMAID_PATH:
        raise ExtensionError(f"offline_assets: set mathjax_path: {MATHJAX_PATH!r} and mermaid_use_local: "
                             f"{MERMAID_PATH!r} in _config.yml (sphinx.config)")


def _local_colab_badge(app, doctree, docname: str) -> None:
    """Point every Colab badge image at the local copy, relative to the page."""
    if app.builder.format != "html":
        return
    local = posixpath.relpath(LOCAL_BADGE, posixpath.dirname(docname) or ".")
    for image in doctree.findall(nodes.image):
        if image.get("uri") == COLAB_BADGE:
            image["uri"] = local
            image["candidates"] = {"*": local}


def _fix_scripts(app, pagename, templatename, context, doctree) -> None:
    """This page's scripts (Sphinx restores the list after the page): no duplicates, mermaid as a classic script."""
    scripts = app.builder._js_files
    # sphinx-thebe's inline `const THEBE_JS_URL = ...` comes twice, and the second one is a SyntaxError.
    seen = set()
    for js in list(scripts):
        key = (js.attributes.get("body"), tuple(sorted((k, v) for k, v in js.attributes.items() if k != "body")))
        if not js.filename and key in seen:
            scripts.remove(js)
        seen.add(key)
    _mermaid_as_classic_script(scripts, pagename)


def _mermaid_as_classic_script(scripts, pagename: str) -> None:
    """Load mermaid.min.js with a deferred <script src> and let sphinxcontrib-mermaid's module script use it."""
    for i, js in enumerate(scripts):
        body = js.attributes.get("body") or ""
        if not js.filename and js.attributes.get("type") == "module" and MERMAID_IMPORT.search(body):
            body, count = MERMAID_IMPORT.subn("const mermaid = window.mermaid;", body)
            if count != 1:
                raise ExtensionError(f"offline_assets: {pagename}: expected one mermaid import, found {count}")
            attributes = {k: v for k, v in js.attributes.items() if k != "body"}
            scripts[i] = _JavaScript(None, priority=js.priority, body=body, **attributes)
            script = _JavaScript(posixpath.join("_static", MERMAID_PATH), priority=js.priority, defer="defer")
            scripts.insert(i, script)
            return


def setup(app):
    app.add_css_file(FONT_CSS, priority=200)
    app.connect("config-inited", _check_config)
    app.connect("builder-inited", _copy_vendor_files)
    app.connect("doctree-resolved", _local_colab_badge)
    app.connect("html-page-context", _fix_scripts, priority=900)  # after sphinxcontrib-mermaid's
    return {"parallel_read_safe": True, "parallel_write_safe": True}
