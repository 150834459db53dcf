"""Sphinx extension for the book: drop nbval's marker comments from code cells on the website.

`# NBVAL_IGNORE_OUTPUT` (alone on the first line of a cell) tells nbval not to compare that cell's output. It is
for the test run, not for readers, so the website shows the cell without it; Jupyter and Colab show the
notebook as committed.
"""
from __future__ import annotations

import json

MARKERS = {"# NBVAL_IGNORE_OUTPUT", "# NBVAL_CHECK_OUTPUT", "# NBVAL_RAISES_EXCEPTION", "# NBVAL_SKIP"}


def strip_markers(source: str) -> str:
    """The notebook JSON `source` with every line that is exactly an nbval marker removed from code cells."""
    nb = json.loads(source)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        text = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        kept = [line for line in text.split("\n") if line.strip() not in MARKERS]
        cell["source"] = "\n".join(kept)
    return json.dumps(nb)


def _on_source_read(app, docname: str, source: list[str]) -> None:
    if str(app.env.doc2path(docname)).endswith(".ipynb"):
        source[0] = strip_markers(source[0])


def setup(app):
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
