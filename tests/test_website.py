"""The website, English at the top and Chinese under zh/: nothing loaded from another host, every page checked in a
real browser, each page linked to its counterpart in the other language, Chinese search, Chinese text in a CJK font.

The static tests read every HTML and CSS file of the built site. The browser tests drive Debian's Chromium
(headless, through Playwright given its executable path: Playwright's own browser download is never used) against
the site served on localhost, at desktop (1280 px) and phone (390 px) width, and in the dark theme. With
ATTNBOOK_SCREENSHOTS=folder, screenshots of every chapter at both widths go there (`make screenshots`:
_build/screenshots/); they check nothing and cost about 3 s a chapter, so `make test` takes none.

`make test` builds the site first and runs this file with ATTNBOOK_SITE=_build/html; run on its own, it builds the
site into a temporary folder (about a minute).
"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from bs4 import BeautifulSoup
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from conftest import ROOT

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
REPO = CONFIG["repository"]["url"].removeprefix("https://github.com/")
BRANCH = CONFIG["repository"]["branch"]
BROWSER_JS = ROOT / "tests" / "browser"
SCREENSHOTS = Path(os.environ["ATTNBOOK_SCREENSHOTS"]).resolve() if os.environ.get("ATTNBOOK_SCREENSHOTS") else None

# Every page a reader can reach: the table of contents, plus Sphinx's index and search pages, in both languages.
TOC_PAGES = [TOC["root"]] + [entry["file"] for part in TOC.get("parts", []) for entry in part["chapters"]]
EN_PAGES = [f"{page}.html" for page in TOC_PAGES] + ["genindex.html", "search.html"]
ZH_PAGES = [f"zh/{page.removeprefix('book/')}.html" for page in TOC_PAGES] + ["zh/genindex.html", "zh/search.html"]
PAGES = EN_PAGES + ZH_PAGES
COUNTERPART = dict(zip(EN_PAGES, ZH_PAGES)) | dict(zip(ZH_PAGES, EN_PAGES))
CHAPTER = re.compile(r"(book|zh)/\d\d_\w+\.html")
CJK = re.compile(r"[\u4e00-\u9fff]")
CJK_FONT = re.compile(r"Noto Sans SC|CJK|PingFang|YaHei|Hei|Song|WenQuanYi")  # fonts that have Chinese glyphs

CHROMIUM = os.environ.get("ATTNBOOK_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 # nothing but localhost resolves, so a load from another host fails here as it would offline
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
MIN_TEXT_PX = 10  # smallest label size a diagram may be drawn at
MIN_CONTRAST = 4.5  # WCAG AA for text
LOAD_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon", "shortcut", "apple-touch-icon",
             "manifest", "preconnect", "dns-prefetch"}
URL_IN_CSS = re.compile(r"""url\(\s*['"]?([^'")]+)|@import\s+['"]([^'"]+)""")
IMPORT_IN_JS = re.compile(r"""\bimport\s*(?:[\w{}*,\s]+from\s*)?\(?\s*['"]([^'"]+)['"]""")


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built website: ATTNBOOK_SITE (make test sets _build/html), else a fresh build in a temporary folder."""
    if os.environ.get("ATTNBOOK_SITE"):
        path = Path(os.environ["ATTNBOOK_SITE"]).resolve()
        assert (path / "index.html").exists(), f"ATTNBOOK_SITE={path} has no index.html: build the book first"
        return path
    out = tmp_path_factory.mktemp("site")
    for book, path_output in ((ROOT, out), (ROOT / "book" / "zh", out / "zh")):  # as make book does
        build = subprocess.run(
            [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", "--all", "--keep-going",
             "--path-output", str(path_output), str(book)], capture_output=True, text=True, timeout=900)
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    shutil.copytree(out / "zh" / "_build" / "html", out / "_build" / "html" / "zh")
    return out / "_build" / "html"


def html_files(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if not {"_static", "_sources"} & set(p.relative_to(site).parts))


def is_external(url: str) -> bool:
    return url.strip().lower().startswith(("http:", "https:", "//", "ftp:"))


@functools.cache
def loads(path: Path) -> list[tuple[str, str]]:
    """(what, url) for everything the HTML page at `path` makes a browser fetch."""
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    found = []
    for tag in soup.find_all("script"):
        if tag.get("src"):
            found.append(("<script src>", tag["src"]))
        elif tag.get("type") == "module":
            found += [("import in <script type=module>", url) for url in IMPORT_IN_JS.findall(tag.string or "")]
    for tag in soup.find_all("link", href=True):
        if LOAD_RELS & {rel.lower() for rel in tag.get("rel", [])}:
            found.append((f"<link rel={' '.join(tag['rel'])}>", tag["href"]))
    for name, attr in [("img", "src"), ("source", "src"), ("iframe", "src"), ("embed", "src"), ("video", "src"),
                       ("video", "poster"), ("audio", "src"), ("object", "data"), ("input", "src")]:
        found += [(f"<{name} {attr}>", tag[attr]) for tag in soup.find_all(name) if tag.get(attr)]
    for tag in soup.find_all(["img", "source"], srcset=True):
        found += [(f"<{tag.name} srcset>", item.split()[0]) for item in tag["srcset"].split(",") if item.strip()]
    for tag in soup.find_all(style=True):
        found += [("style attribute", a or b) for a, b in URL_IN_CSS.findall(tag["style"])]
    for tag in soup.find_all("style"):
        found += [("<style>", a or b) for a, b in URL_IN_CSS.findall(tag.string or "")]
    return found


def test_every_page_of_the_table_of_contents_was_built(site):
    built = {str(p.relative_to(site)) for p in html_files(site)}
    missing = sorted(set(PAGES) - built)
    assert not missing, f"not built: {missing}"
    assert built - set(PAGES) <= {"index.html", "zh/index.html"}, \
        f"pages the browser tests do not visit: {built - set(PAGES)}"


def test_no_page_loads_a_script_stylesheet_font_or_image_from_another_host(site):
    external = [f"{p.relative_to(site)}: {what} {url}" for p in html_files(site) for what, url in loads(p)
                if is_external(url)]
    for css in sorted(site.rglob("*.css")):
        external += [f"{css.relative_to(site)}: url() {a or b}" for a, b in URL_IN_CSS.findall(css.read_text(
            encoding="utf-8", errors="replace")) if is_external(a or b)]
    assert not external, "loads from other hosts:\n" + "\n".join(external)


def test_everything_a_page_loads_is_in_the_site(site):
    missing = []
    for page in html_files(site):
        for what, url in loads(page):
            if is_external(url) or url.startswith(("data:", "#")):
                continue
            target = (page.parent / urlsplit(url).path).resolve()
            if not target.is_file():
                missing.append(f"{page.relative_to(site)}: {what} {url}")
    assert not missing, "\n".join(missing)


def test_mathjax_and_mermaid_are_the_versions_pinned_in_package_json(site):
    pins = json.loads((ROOT / "package.json").read_text())["dependencies"]
    assert pins["mermaid"] == CONFIG["sphinx"]["config"]["mermaid_version"], "_config.yml and package.json disagree"
    vendor = site / "_static" / "vendor"
    mathjax = (vendor / "mathjax" / "tex-mml-chtml.js").read_text(encoding="utf-8")
    assert f'VERSION="{pins["mathjax"]}"' in mathjax
    assert (vendor / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
    assert f'"{pins["mermaid"]}"' in (vendor / "mermaid" / "mermaid.min.js").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------
# In Chromium
# ---------------------------------------------------------------------------------------------------------

class _QuietHandler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".js": "text/javascript",
                      ".mjs": "text/javascript", ".svg": "image/svg+xml", ".woff": "font/woff"}

    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def browser(site):
    """(base URL of the site served on localhost, Chromium)."""
    if not CHROMIUM:
        reason = "Chromium is not installed (apt-get install -y chromium; .ci/run does)"
        pytest.fail(reason) if os.environ.get("CI") else pytest.skip(reason)  # in CI the browser tests must run
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if SCREENSHOTS:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield f"http://127.0.0.1:{server.server_port}/", chromium
        chromium.close()
    server.shutdown()


@pytest.fixture(scope="session")
def context(browser):
    """One browser context for every page (so the test stays fast); pages switch between desktop and phone width."""
    _, chromium = browser
    made = chromium.new_context(viewport=DESKTOP)
    yield made
    made.close()


class Visit:
    """A page opened in a context, with everything it logged and fetched."""

    def __init__(self, context, base: str, url: str):
        self.errors, self.elsewhere, self.failed = [], [], []
        self.page = context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("request", lambda r: None if r.url.startswith((base, "data:", "blob:", "about:", "file:"))
                     else self.elsewhere.append(r.url))
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))
        self.page.on("requestfailed", lambda r: r.url.startswith(base) and self.failed.append(f"failed {r.url}"))
        self.page.goto(url, wait_until="load")
        self.settle()

    def settle(self) -> None:
        """Wait for MathJax's typesetting, mermaid's diagrams, images and fonts; note what never came."""
        waits = [("MathJax did not start", "() => !document.querySelector('.math') || window.MathJax?.startup?.promise"),
                 ("mermaid did not draw every diagram", "() => [...document.querySelectorAll('pre.mermaid')]"
                  ".every(p => p.querySelector('svg') || p.dataset.mermaidRenderFailed)")]
        for problem, condition in waits:
            try:
                self.page.wait_for_function(condition, timeout=20_000)
            except PlaywrightTimeout:
                self.errors.append(f"{problem} within 20 s")
        self.page.evaluate("""() => Promise.all([window.MathJax?.startup?.promise, document.fonts.ready,
                                                 ...[...document.images].map(i => i.decode().catch(() => null))])
                                   .then(() => true)""")

    def inspect(self) -> dict:
        return self.page.evaluate((BROWSER_JS / "inspect_page.js").read_text())

    def problems(self, report: dict, width: str) -> list[str]:
        """What a reader would find broken, from `inspect()`, for the width `width`."""
        found = []
        for m in report["math"]:
            if not m["typeset"] or m["error"] or m["raw"]:
                found.append(f"formula not typeset ({'TeX error' if m['error'] else 'raw'}): {m['text']}")
        for d in report["diagrams"]:
            if not d["svg"]:
                found.append(f"diagram not drawn: {d['source']}")
            elif d["width"] < 200 or d["text_px"] is None or d["text_px"] < MIN_TEXT_PX or not d["fits"]:
                found.append(f"diagram {d['width']:.0f} px wide, labels {d['text_px'] or 0:.1f} px "
                             f"(scale {d['scale']:.2f}{'' if d['fits'] else ', cut off'}): {d['source']}")
        found += [f"image not loaded: {i['src']}" for i in report["images"] if not i["loaded"]]
        if report["page_width"] > report["window_width"] + 1:
            found.append(f"page scrolls sideways at {width} width ({report['page_width']} px > "
                         f"{report['window_width']} px): {report['sticks_out']}")
        if report["summary_styled"] is False:
            found.append("the summary table is unstyled")
        return found

    def resize(self, viewport: dict) -> None:
        self.page.set_viewport_size(viewport)
        self.page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")

    def contrast(self, theme: str) -> list[str]:
        lines = self.page.evaluate((BROWSER_JS / "contrast.js").read_text(), theme)
        return [f"{theme} theme: contrast {line['ratio']:.2f} < {MIN_CONTRAST} for {line['text']!r}"
                for line in lines if line["ratio"] < MIN_CONTRAST]

    def screenshot(self, path: Path) -> None:
        self.page.screenshot(path=path, full_page=True, type="jpeg", quality=80)

    def close(self) -> list[str]:
        """Close the page; what went wrong while it was open (console errors, loads that failed or left)."""
        self.page.close()
        return [*self.errors, *(f"load from another host: {u}" for u in self.elsewhere),
                *(f"not served: {f}" for f in self.failed)]


def colab_problems(hrefs: list[str]) -> list[str]:
    """Colab links must open a notebook of this repository and branch that exists."""
    found = []
    for href in hrefs:
        m = re.fullmatch(r"https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/(.+\.ipynb)", href)
        if not m or (m.group(1), m.group(2)) != (REPO, BRANCH):
            found.append(f"Colab link not to {REPO}@{BRANCH}: {href}")
        elif not (ROOT / m.group(3)).is_file():
            found.append(f"Colab link to a missing file: {m.group(3)}")
    return found


def solution_problems(page, label: str = "Show solution") -> list[str]:
    """Solutions start folded behind "Show solution" (显示答案 in Chinese); a click shows the code and another folds
    it again.

    The first solution is clicked with the mouse (it must be on top and clickable); the rest through the DOM."""
    found = page.evaluate("""label => [...document.querySelectorAll('.cell.tag_solution')].flatMap((cell, i) => {
        const summary = cell.querySelector('details > summary'), code = cell.querySelector('.cell_input');
        if (!summary || !code || code.checkVisibility() || !summary.innerText.includes(label))
          return [`solution ${i + 1} is not folded behind '${label}'`];
        summary.click();
        const shown = code.checkVisibility();
        summary.click();
        return shown && !code.checkVisibility() ? [] : [`solution ${i + 1} does not unfold and fold on a click`];
      })""", label)
    first = page.locator(".cell.tag_solution").first
    if not found and first.count():
        first.locator("summary").click()
        if not first.locator(".cell_input").is_visible():
            found.append("clicking 'Show solution' does not show the first solution")
        first.locator("summary").click()
    return found


@pytest.mark.parametrize("name", PAGES)
def test_page_in_chromium(browser, context, name):
    """What a reader sees on each page, at desktop and phone width, light and dark."""
    base, _ = browser
    stem = ("zh-" if name.startswith("zh/") else "") + Path(name).stem
    chapter = CHAPTER.fullmatch(name) is not None
    start = time.perf_counter()
    visit = Visit(context, base, base + name)
    report = visit.inspect()
    problems = [f"desktop: {p}" for p in visit.problems(report, "desktop")]
    problems += colab_problems(report["colab"])
    if chapter and len({h.split(f"/blob/{BRANCH}/")[-1] for h in report["colab"]}) < 2:
        problems.append("a chapter shows two Colab links (the chapter and its exercise version)")
    problems += solution_problems(visit.page, "显示答案" if name.startswith("zh/") else "Show solution")
    problems += visit.contrast("light")
    if chapter and SCREENSHOTS:
        visit.screenshot(SCREENSHOTS / f"{stem}-desktop.jpg")
    visit.resize(PHONE)
    problems += [f"phone: {p}" for p in visit.problems(visit.inspect(), "phone")]
    if chapter and SCREENSHOTS:
        visit.screenshot(SCREENSHOTS / f"{stem}-phone.jpg")
    problems += visit.contrast("dark")
    problems += visit.close()
    print(f"{name}: {time.perf_counter() - start:.1f} s")
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_diagrams_and_formulas_draw_from_disk(site, context):
    """Opened as a file (no server, no network), a chapter still draws its diagrams and typesets its formulas."""
    chapter = next(p for p in PAGES if CHAPTER.fullmatch(p) and 'class="mermaid"' in (site / p).read_text())
    visit = Visit(context, "file://", (site / chapter).as_uri())
    report = visit.inspect()
    problems = visit.close()
    assert report["diagrams"] and all(d["svg"] for d in report["diagrams"]), report["diagrams"]
    assert report["math"] and all(m["typeset"] and not m["error"] for m in report["math"])
    assert not problems, problems


# ---------------------------------------------------------------------------------------------------------
# The two languages
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PAGES)
def test_every_page_links_to_its_counterpart_in_the_other_language(site, name):
    soup = BeautifulSoup((site / name).read_text(encoding="utf-8"), "html.parser")
    links = soup.select(".attnbook-language-switch a")
    assert len(links) == 1, f"{name}: {len(links)} language switches"
    target = (site / name).parent / links[0]["href"]
    assert target.resolve() == (site / COUNTERPART[name]).resolve(), f"{name} -> {links[0]['href']}"
    assert soup.html["lang"] == ("zh-CN" if name.startswith("zh/") else "en")
    alternates = {a["hreflang"] for a in soup.find_all("link", rel="alternate") if a.get("hreflang")}
    assert alternates == {"en", "zh-CN"}, alternates


@pytest.mark.parametrize("name", [p for p in ZH_PAGES if p not in ("zh/genindex.html", "zh/search.html")])
def test_a_chinese_page_is_chinese(site, name):
    """The article's text is mostly Chinese: every paragraph translated, not just the headings."""
    soup = BeautifulSoup((site / name).read_text(encoding="utf-8"), "html.parser")
    article = soup.select_one("article.bd-article")
    for tag in article.select("pre, code, .math, .cell_output, script, style, mjx-container, .mermaid"):
        tag.decompose()
    paragraphs = [p.get_text(" ", strip=True) for p in article.find_all("p")]
    english = [p for p in paragraphs if len(p) > 60 and not CJK.search(p)]
    assert not english, f"{name}: paragraphs without Chinese: {english[:3]}"
    assert sum(len(CJK.findall(p)) for p in paragraphs) > 200


def _cjk_fonts(visit, selector: str) -> list[tuple[int, int, list[str]]]:
    """(CJK characters in its text, glyphs drawn by CJK fonts, fonts used) of each element matching `selector`."""
    session = visit.page.context.new_cdp_session(visit.page)
    session.send("DOM.enable")
    session.send("CSS.enable")
    # the fonts Chromium reports are those of the element's own text nodes: count the CJK characters there
    visit.page.evaluate("""selector => document.querySelectorAll(selector).forEach((e, i) => e.dataset.cjkText =
        [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join(''))""", selector)
    root = session.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    found = []
    for node in session.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector})["nodeIds"][:40]:
        attributes = session.send("DOM.getAttributes", {"nodeId": node})["attributes"]
        text = dict(zip(attributes[::2], attributes[1::2])).get("data-cjk-text", "")
        fonts = session.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        cjk_glyphs = sum(f["glyphCount"] for f in fonts if CJK_FONT.search(f["familyName"]))
        found.append((len(CJK.findall(text)), cjk_glyphs, [f["familyName"] for f in fonts]))
    session.detach()
    return found


@pytest.mark.parametrize("name, selector", [("zh/02_scaled_attention.html", "article.bd-article p"),
                                            ("zh/intro.html", "article.bd-article h1, article.bd-article p"),
                                            ("book/glossary.html", "table.attnbook-glossary td p")])
def test_chinese_text_is_drawn_in_a_cjk_font(browser, context, name, selector):
    """No missing-glyph boxes: every Chinese character of these elements is drawn by a font that has it (the site's
    own Noto Sans SC on a machine without CJK fonts), and the text is laid out (it has a size on the page)."""
    base, _ = browser
    visit = Visit(context, base, base + name)
    # web fonts load after the first paint (font-display: swap): wait for the faces this page's characters need
    visit.page.evaluate("""() => Promise.all(['400', '700'].map(w => document.fonts.load(`${w} 1em "Noto Sans SC"`,
                                                                   document.body.innerText))).then(() => true)""")
    visit.page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    measured = _cjk_fonts(visit, selector)
    sizes = visit.page.evaluate(f"""() => [...document.querySelectorAll({json.dumps(selector)})]
        .filter(e => e.checkVisibility() && /[\u4e00-\u9fff]/.test(e.textContent))
        .map(e => e.getBoundingClientRect().height)""")
    problems = visit.close()
    with_cjk = [(n, g, f) for n, g, f in measured if n]
    assert with_cjk, f"{name}: no Chinese text in {selector}"
    bad = [(n, g, f) for n, g, f in with_cjk if g < n]
    assert not bad, f"{name}: Chinese characters not drawn by a CJK font (count, CJK glyphs, fonts): {bad[:3]}"
    assert sizes and min(sizes) > 8, f"{name}: Chinese text not laid out: heights {sizes[:5]}"
    assert not problems, problems


def test_chinese_search_finds_chinese_words(browser, context):
    """Sphinx's Chinese search (jieba splits the words): a Chinese query finds the chapters that use the word."""
    base, _ = browser
    visit = Visit(context, base, base + "zh/search.html?q=" + "注意力")
    try:
        visit.page.wait_for_function("() => document.querySelectorAll('#search-results li').length > 0",
                                     timeout=20_000)
    except PlaywrightTimeout:
        pass
    hits = visit.page.evaluate("() => [...document.querySelectorAll('#search-results li a')].map(a => a.href)")
    problems = visit.close()
    assert len(hits) >= 3 and any("02_scaled_attention" in h for h in hits), hits
    assert not problems, problems
