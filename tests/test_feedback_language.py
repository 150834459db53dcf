"""Exercise feedback in English or Chinese: set_language, ATTNBOOK_LANG, the gettext catalog, and the grader's --lang.

The whole mutant catalogue is also checked in Chinese (tools/mutant_report.py, run by make test): every answer gets
the same verdict in both languages, with a Chinese message.
"""
from __future__ import annotations

import gettext
import re

import nbformat
import pytest
import torch

import attnbook
from attnbook import i18n
from attnbook.exercises import check, reset_session, summary

from conftest import ROOT

CJK = re.compile(r"[\u4e00-\u9fff]")
PO = ROOT / "src" / "attnbook" / "locale" / "zh" / "LC_MESSAGES" / "attnbook.po"


@pytest.fixture(autouse=True)
def english_afterwards(monkeypatch):
    monkeypatch.delenv("ATTNBOOK_LANG", raising=False)
    attnbook.set_language("en")
    reset_session()
    yield
    attnbook.set_language("en")
    i18n._language = None
    reset_session()


def no_mask_attention(q, k, v, mask=None):
    """A learner's answer that forgets the mask."""
    w = torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1)
    return w @ v, w


def test_set_language_switches_check_and_summary_to_chinese_and_back():
    english = check("2.2", no_mask_attention)
    attnbook.set_language("zh")
    chinese = check("2.2", no_mask_attention)
    shown, table = str(chinese), summary(2)  # a result is worded when shown, in the language of the moment
    table_text, table_html = str(table), table._repr_html_()
    attnbook.set_language("en")
    again = check("2.2", no_mask_attention)
    assert english.status == chinese.status == "failed" and english.points == chinese.points == 0
    assert not CJK.search(english.message) and again.message == english.message
    assert CJK.search(chinese.message) and "练习 2.2" in shown and "Exercise 2.2" in str(chinese)
    assert "提示" in chinese.message and "请重读" in chinese.message, chinese.message
    assert "缩放点积注意力" in table_text and "第 2 章" in table_text and "第 2 章" in table_html
    # the machine-readable record stays language-neutral, for graders
    assert chinese.to_dict()["status"] == "failed" and table.to_dict()["exercises"][1]["status"] == "failed"


def test_the_section_and_title_in_chinese_feedback_are_the_chinese_books_own():
    """'(Re-read "...")' names the section by its heading in the Chinese chapter, so the learner can find it."""
    from tools.i18n import catalog as cat
    headings = {m.string for page in cat.pages() for m in cat.entries(cat.read(cat.po_path(page)))
                if "heading" in m.auto_comments}
    attnbook.set_language("zh")
    message = check("2.2", no_mask_attention).message
    section = re.search(r"请重读“(.+?)”一节", message).group(1)
    assert section in headings, section


def test_attnbook_lang_is_the_default_and_set_language_wins(monkeypatch):
    i18n._language = None
    monkeypatch.setenv("ATTNBOOK_LANG", "zh_CN")
    assert attnbook.get_language() == "zh" and CJK.search(check("2.2", no_mask_attention).message)
    monkeypatch.setenv("ATTNBOOK_LANG", "klingon")  # unknown: English, never an error
    assert attnbook.get_language() == "en"
    monkeypatch.setenv("ATTNBOOK_LANG", "zh")
    attnbook.set_language("en")
    assert attnbook.get_language() == "en"


@pytest.mark.parametrize("bad, error", [("fr", ValueError), ("", None), (None, TypeError), (2, TypeError)])
def test_set_language_names_what_it_accepts(bad, error):
    if error is None:
        attnbook.set_language(bad)  # "" is English
        assert attnbook.get_language() == "en"
        return
    with pytest.raises(error, match="language"):
        attnbook.set_language(bad)


def test_values_are_filled_in_after_translation_and_a_broken_translation_still_shows_them(monkeypatch):
    class Broken(gettext.NullTranslations):
        def gettext(self, message):
            return {"got {got}, expected {want}": "得到 {gott}，应为 {want}"}.get(message, message)

    attnbook.set_language("zh")
    monkeypatch.setattr(i18n, "translations", lambda language: Broken())
    assert i18n._("got {got}, expected {want}", got=1, want=2) == "got 1, expected 2"
    assert i18n._("plain") == "plain"


def test_the_compiled_catalog_is_the_one_gettext_reads():
    from babel.messages.mofile import read_mo
    catalog = read_mo(PO.with_suffix(".mo").open("rb"))
    translated = [m for m in catalog if m.id and m.string]
    assert len(translated) > 1000
    attnbook.set_language("zh")
    sample = translated[len(translated) // 2]
    assert i18n._(sample.id) in (sample.string, sample.string.replace(" ", ""))


def test_grader_writes_feedback_in_the_language_asked(tmp_path, capsys):
    """attnbook-grade --lang zh: the checks run in the grader's process, whose language the option sets."""
    from attnbook.grading.cli import main
    from test_grade import exercise_version, solved  # the crafted chapter-2 submissions of test_grade

    nb = solved(2, only=("2.1",))
    path = tmp_path / "student.ipynb"
    nbformat.write(nb, path)
    assert exercise_version(2) is not None
    main([str(path), "--lang", "zh", "--no-sandbox", "--timeout", "30"])
    out = capsys.readouterr().out
    assert CJK.search(out), out[-2000:]
    assert attnbook.get_language() == "zh"
