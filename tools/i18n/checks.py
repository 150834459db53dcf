"""What every translated entry must satisfy, and the glossary it must obey.

A translation changes words, never what the English source computes or points at: inline code, math, roles (a
glue role's number, a cross-reference's target), link targets, HTML tags and numbers come through unchanged, so
the numbers of both editions are the same numbers. The glossary (book/glossary.yml) fixes how terms are rendered.
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

import yaml

GLOSSARY = Path(__file__).resolve().parents[2] / "book" / "glossary.yml"

CODE = re.compile(r"(`+)(?!\s)(.+?)(?<!\s)\1")
ROLE = re.compile(r"\{([\w:-]+)\}(`+)(.+?)\2")
MATH = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<!\\)\$")
LINK_TARGET = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
TAG = re.compile(r"</?[A-Za-z][^>]*>")
PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*(?:![rsa])?(?::[^{}]*)?\}")  # a feedback message's {name}, filled in later
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")  # Chinese characters and punctuation
TEXT_ROLES = {"ref", "doc", "numref", "term", "abbr"}  # roles whose shown text is prose


def protected(text: str, placeholders: bool = False) -> Counter:
    """The parts of a unit that a translation must keep exactly, with their counts (with `placeholders`, a feedback
    message's `{name}` fields too)."""
    found: Counter = Counter()
    rest = text

    def role(match: re.Match) -> str:
        name, _, content = match.groups()
        if name in TEXT_ROLES:
            target = re.search(r"<([^>]+)>\s*$", content)
            found[f"{{{name}}} → {target.group(1) if target else content}"] += 1
        else:
            found[match.group(0)] += 1
        return " "

    rest = ROLE.sub(role, rest)
    rest = CODE.sub(lambda m: found.update([m.group(0)]) or " ", rest)
    rest = MATH.sub(lambda m: found.update([m.group(0)]) or " ", rest)
    rest = LINK_TARGET.sub(lambda m: found.update([f"]({m.group(1)})"]) or "] ", rest)
    rest = TAG.sub(lambda m: found.update([m.group(0)]) or " ", rest)
    if placeholders:
        rest = PLACEHOLDER.sub(lambda m: found.update([m.group(0)]) or " ", rest)
    found.update(NUMBER.findall(rest))
    return found


def english_words(text: str) -> int:
    rest = ROLE.sub(" ", CODE.sub(" ", MATH.sub(" ", LINK_TARGET.sub(" ", text))))
    return len(re.findall(r"[A-Za-z]{3,}", rest))


@lru_cache(maxsize=None)
def _stray_stars(text: str) -> int:
    """Asterisks left as text once the unit is rendered (outside code and math): emphasis that failed to open or
    close."""
    from markdown_it import MarkdownIt
    html = MarkdownIt("commonmark").render(CODE.sub(" ", MATH.sub(" ", ROLE.sub(" ", text))))
    return html.count("*")


@lru_cache(maxsize=1)
def glossary() -> list[dict]:
    return yaml.safe_load(GLOSSARY.read_text(encoding="utf-8"))["terms"]


def _prose(text: str) -> str:
    """The unit without its code, math, roles and link targets (a term inside code is code, not prose)."""
    return LINK_TARGET.sub(" ", ROLE.sub(" ", CODE.sub(" ", MATH.sub(" ", text))))


def glossary_problems(english: str, chinese: str) -> list[str]:
    problems = []
    prose_en, prose_zh = _prose(english), _prose(chinese)
    for term in glossary():
        for wrong in term.get("avoid", []):
            if wrong in chinese and wrong not in english:  # the glossary page names the mistranslations it bans
                problems.append(f"glossary: {wrong!r} is a mistranslation of {term['en']!r}; write {term['zh']!r}")
        forms = term.get("forms") or [term["zh"]]
        for pattern in term.get("require", []):
            if re.search(pattern, prose_en, re.IGNORECASE) and not any(f.lower() in prose_zh.lower() for f in forms):
                problems.append(f"glossary: the English says {term['en']!r}; the Chinese must say "
                                + " or ".join(repr(f) for f in forms))
                break
    return problems


def problems(english: str, chinese: str, placeholders: bool = False) -> list[str]:
    """Everything wrong with `chinese` as the translation of `english` (empty: fine); `placeholders`: the unit is a
    feedback message, whose `{name}` fields are filled in after translation."""
    if not chinese:
        return ["untranslated"]
    found = []
    if chinese.count("\n") != english.count("\n"):
        found.append("a translation has the English's line breaks (a unit is one line; the unit is rebuilt into its "
                     "markdown)")
    want, got = protected(english, placeholders), protected(chinese, placeholders)
    missing, extra = want - got, got - want
    if missing:
        found.append("changed or missing: " + ", ".join(sorted(missing)))
    if extra:
        found.append("not in the English: " + ", ".join(sorted(extra)))
    # a copy is fine for a name or a shape, not for prose
    prose = english_words(PLACEHOLDER.sub(" ", english) if placeholders else english)
    if not CJK.search(chinese) and (prose > 4 or (chinese != english and prose > 0)):
        found.append("no Chinese in the translation")
    if _stray_stars(chinese) > _stray_stars(english):
        found.append("emphasis that does not render: a closing ** or * right after Chinese punctuation and before a "
                     "character does not close (CommonMark's flanking rule); move the punctuation outside the stars")
    found += glossary_problems(english, chinese)
    return found
