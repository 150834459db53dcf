"""The language of exercise feedback: English, or Chinese after `set_language("zh")` (or with ATTNBOOK_LANG=zh).

Every message and hint of `check()` and `summary()` goes through gettext. Messages are marked in the code as
`_("template {name}", name=value)`: the template is what gettext looks up (the catalog holds
src/attnbook/locale/zh/LC_MESSAGES/attnbook.po, compiled to .mo next to it), and the values are filled in after
translation, so a translated template keeps every `{name}` of the English. Module-level strings that are only
displayed later are marked `N_("...")` and translated where they are shown with `_(text)`.

    >>> import attnbook
    >>> attnbook.set_language("zh")
"""
from __future__ import annotations

import gettext as _gettext
import os
import re
from functools import lru_cache
from pathlib import Path

LANGUAGES = ("en", "zh")
LOCALE_DIR = Path(__file__).with_name("locale")
DOMAIN = "attnbook"

_language: str | None = None  # None: follow ATTNBOOK_LANG
# Between two Chinese characters (or punctuation) a space is a gap, not a word break: a translated template that
# spaces out a value ("{what} 的形状") reads right when the value is Latin, and must not leave
# "你的结果 的形状" when the value is Chinese.
_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_CJK_GAP = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


def _normalise(language: str) -> str:
    code = str(language).strip().lower().replace("_", "-")
    if code in ("zh", "zh-cn", "zh-hans", "zh-hans-cn", "zh-sg", "cn", "chinese", "中文"):
        return "zh"
    if code in ("en", "en-us", "en-gb", "english", ""):
        return "en"
    raise ValueError(f"language must be one of {', '.join(repr(x) for x in LANGUAGES)}, got {language!r}")


def set_language(language: str) -> None:
    """Show exercise feedback in `language`: "en" (the default) or "zh" (Chinese)."""
    global _language
    if not isinstance(language, str):
        raise TypeError(f"language must be a string such as 'zh' or 'en', got {type(language).__name__}")
    _language = _normalise(language)


def get_language() -> str:
    """The language of feedback now: set_language's, else ATTNBOOK_LANG's (an unknown value means English)."""
    if _language is not None:
        return _language
    try:
        return _normalise(os.environ.get("ATTNBOOK_LANG", "en"))
    except ValueError:
        return "en"


@lru_cache(maxsize=None)
def translations(language: str) -> _gettext.NullTranslations:
    if language == "en":
        return _gettext.NullTranslations()
    return _gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[language], fallback=True)


def _(message: str, /, **values) -> str:
    """`message` in the current language, with `values` filled into its `{name}` fields."""
    language = get_language()
    catalog = translations(language)
    text = catalog.gettext(message) if message else message
    if values and language != "en":  # a value may itself be a marked string (N_): shown in the same language
        values = {k: catalog.gettext(v) if isinstance(v, str) and v else v for k, v in values.items()}
    if values:
        try:
            text = text.format(**values)
        except (KeyError, IndexError, ValueError):  # a broken translation must never hide the feedback
            text = message.format(**values)
    return _CJK_GAP.sub("", text) if language == "zh" else text


def N_(message: str) -> str:
    """Mark a string for translation where it is defined; translate it where it is shown, with _(text)."""
    return message
