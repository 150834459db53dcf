"""One call that every chapter makes first: seeds, print options and plot style."""
from __future__ import annotations

import random

import numpy as np
import torch

from ._validate import require_int

__all__ = ["setup", "seed_everything", "glue"]


def seed_everything(seed: int = 0) -> None:
    """Seed Python's, NumPy's and PyTorch's random number generators."""
    require_int(seed, "seed", minimum=0)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def setup(seed: int = 0) -> None:
    """Seed everything, print tensors with 4 decimals, and use the book's plot style."""
    seed_everything(seed)
    torch.set_printoptions(precision=4, sci_mode=False, linewidth=100)
    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    import matplotlib as mpl

    mpl.rcParams.update(
        {
            "figure.figsize": (6.0, 3.6),
            "figure.dpi": 100,
            "axes.grid": False,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 10,
            "image.cmap": "viridis",
        }
    )


GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, value, display: bool = False) -> None:
    """Store `value` under `name` for the book's prose ({glue:text}`name:.2f`), in myst_nb.glue's format.

    Written here so that chapters run where myst-nb is not installed (Colab); a test checks the output
    matches myst_nb's own. Unlike myst_nb.glue, it does not also display the value unless `display=True`:
    the chapters print what they want shown.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
