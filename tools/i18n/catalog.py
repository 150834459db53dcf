"""The translation catalogs: one gettext .po file per page under book/locale/<lang>/LC_MESSAGES/.

`template(source)` lists a page's units in reading order (see markdown.py); `update` merges a template into the
page's catalog with Babel, the way `msgmerge` does: a new English unit arrives untranslated, a changed one keeps
its old translation marked fuzzy, a removed one is dropped. `python -m tools.i18n check` then fails until every
entry is translated and none is fuzzy.
"""
from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

from .markdown import translate_code, translate_markdown

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
LOCALE = BOOK / "locale"
LANGUAGES = {"zh": "zh_Hans_CN"}
SITE = "_site"  # the catalog of the book's title, part captions and other site-wide text
MESSAGES = "messages"  # the catalog of exercise feedback: src/attnbook/locale/<lang>/LC_MESSAGES/attnbook.po
PACKAGE = ROOT / "src" / "attnbook"
FROM_BOOK = ("from the book: exercise title", "from the book: heading")


@dataclass(frozen=True)
class Unit:
    text: str
    kind: str
    where: str  # "cell 12", "line 3"


def pages() -> list[Path]:
    """Every English page that has a Chinese counterpart: the chapters, the appendix, the intro and the glossary."""
    return sorted(BOOK.glob("[0-9][0-9]_*.ipynb")) + sorted(BOOK.glob("appendix_*.ipynb")) + \
        [BOOK / "intro.md", BOOK / "glossary.md"]


def _collect(units: list[Unit], where: str):
    def tr(text: str, kind: str) -> str:
        units.append(Unit(text, kind, where))
        return text
    return tr


def notebook_units(path: Path) -> list[Unit]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    units: list[Unit] = []
    for index, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            translate_markdown(source, _collect(units, f"cell {index}"))
        elif cell["cell_type"] == "code":
            translate_code(source, _collect(units, f"cell {index}"))
            translate_metadata(cell.get("metadata", {}), _collect(units, f"cell {index}"))
    return units


BUTTON_LABELS = ("code_prompt_show", "code_prompt_hide")  # myst-nb's fold button of a hidden cell


def translate_metadata(metadata: dict, tr) -> dict:
    """The cell's metadata with the reader-visible labels in it translated."""
    mystnb = metadata.get("mystnb", {})
    for key in BUTTON_LABELS:
        if key in mystnb:
            mystnb[key] = tr(mystnb[key], "button label")
    return metadata


def site_units() -> list[Unit]:
    import yaml
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    units = [Unit(config["title"], "book title", "_config.yml")]
    units += [Unit(part["caption"], "part caption", "_toc.yml") for part in toc.get("parts", [])]
    return units


def message_units() -> list[Unit]:
    """Every string the package marks _("...") or N_("..."), then the exercises' titles and sections, which
    feedback shows and whose translations come from the book's own catalogs (so they match the headings)."""
    from babel.messages.extract import extract_from_file

    units = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        marked = extract_from_file("python", str(path), keywords={"_": None, "N_": None})
        for lineno, text, _comments, _context in marked:
            units.append(Unit(text, "message", f"{where} {lineno}"))
    import attnbook.exercises  # noqa: F401  (registers every exercise)
    from attnbook.exercises.registry import REGISTRY, id_key
    for key in sorted(REGISTRY, key=id_key):
        exercise = REGISTRY[key]
        units.append(Unit(exercise.title, FROM_BOOK[0], f"exercise {key}"))
        if exercise.section:
            units.append(Unit(exercise.section, FROM_BOOK[1], f"exercise {key}"))
    return units


def book_translation(text: str, kind: str, lang: str = "zh") -> str:
    """An exercise title's or a section heading's translation in the book's catalogs ("" if none yet)."""
    for page in pages():
        catalog = read(po_path(page, lang))
        for message in entries(catalog):
            if not message.string or message.fuzzy:
                continue
            if kind == FROM_BOOK[1] and message.id == text and "heading" in message.auto_comments:
                return message.string
            if kind == FROM_BOOK[0] and "exercise title" in message.auto_comments:
                number, _, title = message.id.partition(" · ")
                if title == text:
                    return message.string.split("·", 1)[-1].strip()
    return ""


def units_of(page: Path | str) -> list[Unit]:
    if page == SITE:
        return site_units()
    if page == MESSAGES:
        return message_units()
    page = Path(page)
    if page.suffix == ".ipynb":
        return notebook_units(page)
    units: list[Unit] = []
    translate_markdown(page.read_text(encoding="utf-8"), _collect(units, "text"))
    return units


def po_path(page: Path | str, lang: str = "zh") -> Path:
    if page == MESSAGES:
        return PACKAGE / "locale" / lang / "LC_MESSAGES" / "attnbook.po"
    name = SITE if page == SITE else Path(page).stem
    return LOCALE / lang / "LC_MESSAGES" / f"{name}.po"


def template(page: Path | str, lang: str = "zh") -> Catalog:
    catalog = Catalog(locale=LANGUAGES[lang], project="attnbook", charset="utf-8", fuzzy=False)
    source = SITE if page == SITE else "" if page == MESSAGES else Path(page).relative_to(ROOT).as_posix()
    for unit in units_of(page):
        if page == MESSAGES:
            where = (unit.where.split()[0], None)
        else:
            where = (source, int(unit.where.split()[-1]) if unit.where[-1].isdigit() else None)
        message = catalog.get(unit.text)
        if message is None:
            catalog.add(unit.text, "", locations=[where], auto_comments=[unit.kind])
        elif where not in message.locations:
            message.locations.append(where)
    return catalog


def read(path: Path) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, abort_invalid=True)


def write(catalog: Catalog, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=116, omit_header=False, ignore_obsolete=True, include_previous=True,
                 sort_output=False)
    # Babel stamps creation and revision dates; a catalog that did not change must not change on disk
    text = path.read_text(encoding="utf-8")
    text = re.sub(r'"(POT-Creation-Date|PO-Revision-Date): [^"]*\\n"\n', "", text)
    text = re.sub(r'"Generated-By: [^"]*\\n"\n', "", text)
    path.write_text(text, encoding="utf-8")


def update(page: Path | str, lang: str = "zh") -> tuple[Catalog, Catalog]:
    """Merge the page's current English units into its catalog (creating it); return (template, catalog)."""
    path = po_path(page, lang)
    tmpl = template(page, lang)
    if path.exists():
        catalog = read(path)
        catalog.update(tmpl, no_fuzzy_matching=False, update_header_comment=False, keep_user_comments=True)
    else:
        catalog = template(page, lang)
    catalog.obsolete.clear()
    if page == MESSAGES:  # titles and headings: the book's translation, whatever the catalog held
        for message in entries(catalog):
            kind = message.auto_comments[0] if message.auto_comments else ""
            if kind in FROM_BOOK:
                message.string = book_translation(message.id, kind, lang)
                message.flags.discard("fuzzy")
    write(catalog, path)
    if page == MESSAGES:
        compile_mo(path)
    return tmpl, read(path)


FIXED_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def stamped(catalog: Catalog) -> Catalog:
    """The catalog with fixed dates: Babel writes "now" into a compiled catalog's header otherwise, and the same
    catalog must compile to the same bytes (the check compares them)."""
    catalog.creation_date = catalog.revision_date = FIXED_DATE
    return catalog


def mo_bytes(path: Path) -> bytes:
    """The .po at `path` compiled (what gettext reads at run time)."""
    import io

    from babel.messages.mofile import write_mo
    buffer = io.BytesIO()
    write_mo(buffer, stamped(read(path)), use_fuzzy=False)
    return buffer.getvalue()


def compile_mo(path: Path) -> None:
    """Write the compiled catalog next to the .po."""
    path.with_suffix(".mo").write_bytes(mo_bytes(path))


def entries(catalog: Catalog) -> list:
    """The catalog's messages in file order, without the header."""
    return [m for m in catalog if m.id]


def lookup(catalog: Catalog):
    """A `tr` for the walkers: the translation of a unit (its English when the entry is missing or untranslated,
    which `check` reports)."""
    def tr(text: str, kind: str) -> str:
        message = catalog.get(text)
        if message is None or not message.string or message.fuzzy:
            return text
        return message.string
    return tr
