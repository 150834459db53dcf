"""The Chinese edition's tools (run from the repository root).

    python -m tools.i18n update            # merge the English into the catalogs (new → untranslated, changed → fuzzy)
    python -m tools.i18n todo 03_multi_head [--all]   # the entries still to translate, numbered, in the fill format
    python -m tools.i18n fill 03_multi_head FILE      # put translations into the catalog from a file in the fill format
    python -m tools.i18n build             # write book/zh/ (notebooks, pages, _toc.yml, _config.yml) from the catalogs
    python -m tools.i18n execute [4 ...]   # build, run the Chinese notebooks for their feedback cells' outputs, build
    python -m tools.i18n check             # what CI runs: catalogs current, complete, not fuzzy, valid, glossary obeyed,
                                           # and book/zh/ equal to what `build` would write

The fill format: an entry starts with a line `@@ N #key` as `todo` prints it (the key, a fingerprint of the English,
finds the entry even if the numbers moved; words after it are ignored), and its translation is the text up to the
next `@@` line (one line; blank lines around it are ignored).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from . import catalog as cat
from . import checks, edition


def _page(name: str) -> Path | str:
    if name in (cat.SITE, cat.MESSAGES):
        return name
    for page in cat.pages():
        if page.stem == name or page.name == name or str(page).endswith(name):
            return page
    raise SystemExit(f"no page {name!r}; pages: {', '.join(p.stem for p in cat.pages())}, {cat.SITE}")


def all_pages() -> list:
    return cat.pages() + [cat.SITE, cat.MESSAGES]


def cmd_update(args) -> int:
    for page in [_page(p) for p in args.pages] or all_pages():
        _, catalog = cat.update(page)
        todo = [m for m in cat.entries(catalog) if not m.string or m.fuzzy]
        print(f"{cat.po_path(page).relative_to(cat.ROOT)}: {len(cat.entries(catalog))} entries, "
              f"{len(todo)} to translate")
    return 0


def cmd_todo(args) -> int:
    catalog = cat.read(cat.po_path(_page(args.page)))
    for number, message in enumerate(cat.entries(catalog), 1):
        if args.only and not any(re.search(args.only, str(loc[0])) for loc in message.locations):
            continue
        if args.all or not message.string or message.fuzzy:
            kind = message.auto_comments[0] if message.auto_comments else ""
            state = " fuzzy" if message.fuzzy else ""
            where = f" {message.locations[0][0]}" if args.where and message.locations else ""
            print(f"@@ {number} #{key(message.id)} [{kind}{state}]{where}\n{message.id}")
            if message.fuzzy and message.string:
                print(f"(previous translation: {message.string})")
            print()
    return 0


def key(text: str) -> str:
    """A short fingerprint of an entry's English: a fill file finds its entry by it even after the numbers moved."""
    import hashlib
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def parse_fill(text: str) -> list[tuple[int, str | None, str]]:
    """(number, fingerprint or None, translation) for every entry of a fill file."""
    found = []
    for block in re.split(r"^@@ ", text, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        words = head.split()
        fingerprint = words[1][1:] if len(words) > 1 and words[1].startswith("#") else None
        found.append((int(words[0]), fingerprint, body.strip()))
    return found


def cmd_fill(args) -> int:
    page = _page(args.page)
    path = cat.po_path(page)
    catalog = cat.read(path)
    messages = cat.entries(catalog)
    by_key = {key(m.id): m for m in messages}
    bad = 0
    for number, fingerprint, text in parse_fill(Path(args.file).read_text(encoding="utf-8")):
        message = by_key.get(fingerprint) if fingerprint else messages[number - 1]
        if message is None:
            bad += 1
            print(f"@@ {number} #{fingerprint}: no entry with this English any more (run todo again)")
            continue
        message.string = text
        message.flags.discard("fuzzy")
        message.previous_id = []
        for problem in checks.problems(message.id, text, placeholders=page == cat.MESSAGES):
            bad += 1
            print(f"@@ {number}: {problem}\n   {message.id[:150]}")
    if args.dry_run:
        print(f"{bad} problems (nothing stored: --dry-run)")
        return 1 if bad else 0
    cat.write(catalog, path)
    if page == cat.MESSAGES:
        cat.compile_mo(path)
    left = sum(1 for m in cat.entries(cat.read(path)) if not m.string or m.fuzzy)
    print(f"{path.relative_to(cat.ROOT)}: {bad} problems, {left} entries left to translate")
    return 1 if bad else 0


def cmd_build(args) -> int:
    for path, text in edition.generate().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(cat.ROOT)}")
    subprocess.run([sys.executable, "-m", "attnbook.student", "--book", str(edition.ZH)], check=True)
    return 0


def cmd_execute(args) -> int:
    cmd_build(args)
    notebooks = sorted(str(p) for p in edition.ZH.glob("*.ipynb") if _chosen(p.stem, args.pages))
    if not notebooks:
        print(f"no Chinese notebook matches {' '.join(args.pages)}")
        return 1
    subprocess.run([sys.executable, str(cat.ROOT / "tools" / "execute_notebooks.py"), *notebooks], check=True)
    return cmd_build(args)  # back to the English outputs everywhere but the feedback cells


def _chosen(stem: str, pages: list[str]) -> bool:
    """Whether the notebook `stem` ("04_residual_layernorm") is one of `pages` (stems or chapter numbers); all
    when none is given."""
    return not pages or any(stem == p or (p.isdigit() and stem.startswith(f"{int(p):02d}_")) for p in pages)


def catalog_problems(page) -> list[str]:
    """Entries of the page's catalog that are missing, stale, untranslated, fuzzy or invalid."""
    path = cat.po_path(page)
    name = path.relative_to(cat.ROOT) if path.is_relative_to(cat.ROOT) else path
    if not path.exists():
        return [f"{name}: missing (run python -m tools.i18n update)"]
    catalog = cat.read(path)
    wanted = [m.id for m in cat.entries(cat.template(page))]
    have = [m.id for m in cat.entries(catalog)]
    found = []
    for missing in [w for w in wanted if w not in set(have)]:
        found.append(f"{name}: English changed or added, not in the catalog (run python -m tools.i18n update): "
                     f"{missing[:120]!r}")
    for stale in [h for h in have if h not in set(wanted)]:
        found.append(f"{name}: entry no longer in the English (run python -m tools.i18n update): {stale[:120]!r}")
    if page == cat.MESSAGES:
        mo = path.with_suffix(".mo")
        if not mo.exists() or mo.read_bytes() != cat.mo_bytes(path):
            found.append(f"{mo.relative_to(cat.ROOT)}: not compiled from the .po "
                         "(run python -m tools.i18n update messages)")
        for message in cat.entries(catalog):
            kind = message.auto_comments[0] if message.auto_comments else ""
            if kind in cat.FROM_BOOK and message.string != cat.book_translation(message.id, kind):
                found.append(f"{name}: {kind} {message.id!r} differs from the book's translation "
                             "(run python -m tools.i18n update messages)")
    for number, message in enumerate(cat.entries(catalog), 1):
        if message.fuzzy:
            found.append(f"{name} @@ {number}: fuzzy (the English changed; check the translation): "
                         f"{message.id[:120]!r}")
        for problem in checks.problems(message.id, message.string, placeholders=page == cat.MESSAGES):
            found.append(f"{name} @@ {number}: {problem}: {message.id[:120]!r}")
    return found


def cmd_check(args) -> int:
    found = [p for page in all_pages() for p in catalog_problems(page)]
    generated = edition.generate()
    for path, text in generated.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            found.append(f"{path.relative_to(cat.ROOT)}: differs from what python -m tools.i18n build writes")
    stray = set(edition.ZH.glob("*.ipynb")) | set(edition.ZH.glob("*.md"))
    for path in sorted(stray - set(generated)):
        found.append(f"{path.relative_to(cat.ROOT)}: has no English source")
    for line in found:
        print(line)
    print(f"{len(found)} problems in the Chinese edition" if found else "Chinese edition: complete and current")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.i18n", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("update")
    p.add_argument("pages", nargs="*")
    p.set_defaults(run=cmd_update)
    p = sub.add_parser("todo")
    p.add_argument("page")
    p.add_argument("--all", action="store_true")
    p.add_argument("--where", action="store_true", help="show the file each entry comes from")
    p.add_argument("--only", help="only entries from files matching this regular expression")
    p.set_defaults(run=cmd_todo)
    p = sub.add_parser("fill")
    p.add_argument("page")
    p.add_argument("file")
    p.add_argument("--dry-run", action="store_true", help="check the translations, store nothing")
    p.set_defaults(run=cmd_fill)
    sub.add_parser("build").set_defaults(run=cmd_build)
    p = sub.add_parser("execute")
    p.add_argument("pages", nargs="*", help="only these notebooks: stems (04_residual_layernorm) or chapter numbers")
    p.set_defaults(run=cmd_execute)
    sub.add_parser("check").set_defaults(run=cmd_check)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
