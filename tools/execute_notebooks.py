"""Re-execute chapter notebooks in place so their committed outputs are fresh.

    python tools/execute_notebooks.py                     # every book/NN_*.ipynb
    python tools/execute_notebooks.py book/02_*.ipynb     # some of them

Run it after editing a chapter, then `python -m attnbook.student` to refresh the exercise versions
(`make notebooks` does both). Prints each chapter's wall time, which must stay under about 60 s.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def settle_carriage_returns(text: str) -> str:
    """What a terminal shows: on each line, only the text after its last carriage return (progress bars)."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def merge_streams(outputs: list) -> list:
    """Consecutive stream outputs of one stream as one, with carriage returns settled: a progress bar's hundreds
    of updates become its final state (smaller diffs, and one line on the website)."""
    merged: list = []
    for out in outputs:
        if out.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream" \
                and merged[-1].get("name") == out.get("name"):
            merged[-1]["text"] += out["text"]
        else:
            merged.append(out)
    for out in merged:
        if out.get("output_type") == "stream":
            out["text"] = settle_carriage_returns(out["text"])
    return merged


def execute(path: Path) -> float:
    """Execute `path` in a fresh kernel with the book folder as working directory; return seconds taken."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = KERNELSPEC
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    for cell in nb.cells:  # keep diffs small: no per-run timestamps
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return elapsed


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted(Path("book").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"{path}: {execute(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
