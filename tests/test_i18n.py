"""The Chinese edition: catalogs in step with the English, translations that keep what must not change, the glossary
obeyed, and book/zh/ exactly what the catalogs make of the English notebooks.

`python -m tools.i18n check` (the first step of make test) lists every problem; these tests show that each kind of
problem it looks for is found when it is there, and that none is there now.
"""
from __future__ import annotations

import io
import json
import re
import tokenize

import pytest

from conftest import ROOT
from tools.i18n import __main__ as cli
from tools.i18n import catalog as cat
from tools.i18n import checks, edition
from tools.i18n.markdown import translate_code, translate_markdown

PAGES = cat.pages()
NOTEBOOKS = [p for p in PAGES if p.suffix == ".ipynb"]
CJK = re.compile(r"[\u4e00-\u9fff]")


def _identity(text, kind):
    return text


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --- cutting the English into units, and putting translations back ---------------------------------------------

@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_cutting_and_rebuilding_with_the_english_changes_nothing_but_line_breaks(page):
    if page.suffix == ".md":
        sources = [("markdown", page.read_text(encoding="utf-8"))]
    else:
        sources = [(c["cell_type"], "".join(c["source"])) for c in json.loads(page.read_text())["cells"]]
    for kind, source in sources:
        rebuilt = (translate_markdown if kind == "markdown" else translate_code)(source, _identity)
        assert _squash(rebuilt) == _squash(source)


def test_units_are_the_prose_and_only_the_prose():
    text = ("# 2. A title\n\nA paragraph that goes\non over two lines with `code` and $x^2$.\n\n"
            "- an item\n  that continues\n- another item\n\n| head one | `code` |\n|---|---|\n| a cell | 42 |\n\n"
            "$$\n\\text{never translated}\n$$\n\n```python\nprint('never')\n```\n\n"
            ":::{exercise} 2.1 · Attention by hand\n:label: ex-2-1\n:nonumber:\nDo the thing.\n:::\n\n"
            "```mermaid\nflowchart LR\n  a[\"a box\"] -- an edge --> b\n  b -->|\"a label\"| c\n```\n")
    units = []
    translate_markdown(text, lambda t, k: units.append((k, t)) or t)
    assert units == [("heading", "2. A title"),
                     ("paragraph", "A paragraph that goes on over two lines with `code` and $x^2$."),
                     ("list item", "an item that continues"), ("list item", "another item"),
                     ("table cell", "head one"), ("table cell", "a cell"),
                     ("exercise title", "2.1 · Attention by hand"), ("paragraph", "Do the thing."),
                     ("diagram label", "a box"), ("diagram label", "an edge"), ("diagram label", '"a label"')]
    shouted = translate_markdown(text, lambda t, k: t.upper())
    assert "\\text{never translated}" in shouted and "print('never')" in shouted and ":label: ex-2-1" in shouted
    assert "A PARAGRAPH THAT GOES ON OVER TWO LINES WITH `CODE`" in shouted


def test_code_comments_are_units_and_the_code_is_not():
    source = ("# NBVAL_IGNORE_OUTPUT\n# A comment that runs\n# over two lines.\nx = 1  # a trailing note\n"
              "s = '# not a comment'\n%pip install nothing\n# BEGIN SOLUTION\ny = 2\n# END SOLUTION")
    units = []
    out = translate_code(source, lambda t, k: units.append(t) or "注释")
    assert units == ["A comment that runs over two lines.", "a trailing note"]
    assert out.split("\n") == ["# NBVAL_IGNORE_OUTPUT", "# 注释", "x = 1  # 注释", "s = '# not a comment'",
                               "%pip install nothing", "# BEGIN SOLUTION", "y = 2", "# END SOLUTION"]


# --- what a translation must keep ---------------------------------------------------------------------------------

@pytest.mark.parametrize("english, chinese, problem", [
    ("Call `softmax(x, dim=-1)` here.", "在这里调用 `softmax(x, dim=1)`。", "changed or missing"),
    ("The scale is $1/\\sqrt{d_k}$.", "缩放因子是 $1/\\sqrt{d}$。", "changed or missing"),
    ("It took {glue:text}`t:.1f` s.", "耗时 {glue:text}`t:.2f` 秒。", "changed or missing"),
    ("See [chapter 2](02_scaled_attention.ipynb).", "见[第 2 章](03_multi_head.ipynb)。", "changed or missing"),
    ("A batch of 64 sequences.", "一批 46 个序列。", "changed or missing"),
    ("got {got}, expected {want}", "得到 {got}，应为 {wanted}", "changed or missing"),  # a message's placeholders
    ("A **bold claim.** Then more.", "一个**大胆的说法。**然后更多。", "emphasis that does not render"),
    ("The Transformer is a model.", "变压器是一种模型。", "mistranslation"),
    ("Attention with a padding mask.", "带填充遮罩的注意力。", "the Chinese must say '填充掩码'"),
    ("Every token attends to every other.", "每个词都关注其他所有词。", "the Chinese must say 'token'"),
    ("A long sentence that was simply left in English here.", "A long sentence that was simply left in English here.",
     "no Chinese"),
    ("One unit.", "第一行\n第二行", "line breaks"),
    ("Anything at all.", "", "untranslated"),
])
def test_a_bad_translation_is_reported(english, chinese, problem):
    found = checks.problems(english, chinese, placeholders="{" in english and "`" not in english)
    assert any(problem in p for p in found), found


@pytest.mark.parametrize("english, chinese", [
    ("Call `softmax(x, dim=-1)` on {glue:text}`n` rows of $QK^\\top$.",
     "对 $QK^\\top$ 的 {glue:text}`n` 行调用 `softmax(x, dim=-1)`。"),
    ("See {ref}`the masks <masks>`.", "参见{ref}`掩码一节 <masks>`。"),
    ("The Transformer uses a padding mask.", "Transformer 使用填充掩码。"),
    ("A **bold claim.** Then more.", "一个**大胆的说法**。然后更多。"),
    ("`(B, n_heads, n, d_head)`", "`(B, n_heads, n, d_head)`"),
])
def test_a_good_translation_passes(english, chinese):
    assert checks.problems(english, chinese) == []


# --- the glossary ---------------------------------------------------------------------------------------------------

def test_the_glossary_is_complete_data():
    terms = checks.glossary()
    chapters = {p.stem for p in PAGES} | {"intro"}
    for term in terms:
        assert term["en"] and term["zh"] and term["chapter"] in chapters, term
        for pattern in term.get("require", []):
            re.compile(pattern)
        for form in term.get("forms", []):
            assert form, term
    transformer = next(t for t in terms if t["en"] == "Transformer")
    assert {"变压器", "变形金刚"} <= set(transformer["avoid"]) and transformer["english"]
    kept = {t["en"] for t in terms if t.get("english")}
    assert {"Transformer", "BERT", "GPT", "token", "softmax"} <= kept


def test_every_english_term_the_glossary_requires_appears_in_the_english_book():
    """A `require` pattern that matches nothing in the book enforces nothing: it is a typo or a dead entry."""
    english = " ".join(m.id for page in PAGES for m in cat.entries(cat.read(cat.po_path(page))))
    dead = [p for t in checks.glossary() for p in t.get("require", []) if not re.search(p, english, re.I)]
    assert not dead, dead


# --- the catalogs and book/zh/ now -----------------------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES + [cat.SITE, cat.MESSAGES], ids=str)
def test_catalog_is_current_complete_and_valid(page):
    assert cli.catalog_problems(page) == []


def test_book_zh_is_what_the_catalogs_make_of_the_english():
    stale = [str(path.relative_to(ROOT)) for path, text in edition.generate().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    assert not stale, f"run python -m tools.i18n build: {stale}"


def test_a_changed_english_sentence_is_reported_until_translated(monkeypatch):
    page = cat.BOOK / "02_scaled_attention.ipynb"
    units = cat.units_of(page)
    changed = [cat.Unit(units[5].text + " And one more sentence.", units[5].kind, units[5].where), *units[6:]]
    monkeypatch.setattr(cat, "units_of", lambda p: units[:5] + changed)
    found = cli.catalog_problems(page)
    assert any("English changed or added" in p and "one more sentence" in p for p in found), found
    assert any("no longer in the English" in p for p in found), found


def test_fuzzy_and_untranslated_entries_are_reported(tmp_path, monkeypatch):
    page = cat.BOOK / "01_qkv.ipynb"
    catalog = cat.read(cat.po_path(page))
    messages = cat.entries(catalog)
    messages[3].flags.add("fuzzy")
    messages[4].string = ""
    copy = tmp_path / "01_qkv.po"
    cat.write(catalog, copy)
    monkeypatch.setattr(cat, "po_path", lambda p, lang="zh": copy)
    found = cli.catalog_problems(page)
    assert any("@@ 4: fuzzy" in p for p in found) and any("@@ 5: untranslated" in p for p in found), found


# --- the Chinese notebooks ---------------------------------------------------------------------------------------

def _code_without_comments(source: str) -> str:
    masked = "\n".join("pass" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n"))
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(masked).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    return " ".join(t.string for t in tokens)


@pytest.mark.parametrize("english", NOTEBOOKS, ids=lambda p: p.name)
def test_a_chinese_notebook_runs_the_english_code_and_shows_its_outputs(english):
    en = json.loads(english.read_text(encoding="utf-8"))
    zh = json.loads((edition.ZH / english.name).read_text(encoding="utf-8"))
    assert len(zh["cells"]) == len(en["cells"])
    feedback = 0
    for i, (a, b) in enumerate(zip(en["cells"], zh["cells"])):
        assert a["cell_type"] == b["cell_type"], i
        if a["cell_type"] != "code":
            continue
        src_en, src_zh = "".join(a["source"]), "".join(b["source"])
        if edition.SETUP_IMPORT in src_en:
            assert 'set_language("zh")' in src_zh, "the set-up cell switches check() to Chinese"
            src_zh = src_zh.replace(edition.SETUP_ZH, edition.SETUP_IMPORT)
        assert _code_without_comments(src_zh) == _code_without_comments(src_en), f"cell {i}: the code differs"
        if edition.feedback_cell(src_en):
            feedback += 1
            text = json.dumps(b["outputs"], ensure_ascii=False)
            assert CJK.search(text), f"cell {i}: the check's verdict is not in Chinese (python -m tools.i18n execute)"
        else:
            assert b["outputs"] == a["outputs"], f"cell {i}: outputs differ from the English run"
    if english.stem[:2].isdigit():
        assert feedback, "a chapter has check cells"


@pytest.mark.parametrize("english", NOTEBOOKS, ids=lambda p: p.name)
def test_a_chinese_notebook_is_translated_and_links_to_chinese_notebooks(english):
    zh = json.loads((edition.ZH / english.name).read_text(encoding="utf-8"))
    prose = "".join("".join(c["source"]) for c in zh["cells"] if c["cell_type"] == "markdown")
    assert len(CJK.findall(prose)) > 300
    links = re.findall(r"colab\.research\.google\.com/github/[^/]+/[^/]+/blob/[^/]+/([^)\s]+\.ipynb)", prose)
    if english.stem[:2].isdigit():
        assert sorted(links) == sorted([f"book/zh/{english.name}", f"book/zh/exercises/{english.name}"])
    for link in links:
        assert (ROOT / link).is_file(), link
    assert zh["metadata"]["attnbook"] == {"language": "zh", "translated_from": f"book/{english.name}"}


def test_the_chinese_exercise_versions_are_in_sync():
    from attnbook import student
    generated = student.generate(edition.ZH)
    stale = [str(p.relative_to(ROOT)) for p, text in generated.items() if not p.exists() or p.read_text() != text]
    assert len(generated) == len([p for p in NOTEBOOKS if p.stem[:2].isdigit()]) and not stale, stale
