"""Tests of attnbook.notebook: setup/seed_everything, and glue against myst_nb's own glue."""
from __future__ import annotations

import random

import matplotlib as mpl
import numpy as np
import pytest
import torch

from attnbook import notebook
from attnbook.notebook import glue, seed_everything, setup

GLUE_PREFIX = "application/papermill.record/"  # written out here, not imported from the package


@pytest.fixture
def restore_global_state():
    """setup() changes process-wide state: put the RNGs, print options and rcParams back afterwards."""
    py_state, np_state, torch_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    opts = torch._tensor_str.PRINT_OPTS
    torch_opts = dict(
        precision=opts.precision, threshold=opts.threshold, edgeitems=opts.edgeitems,
        linewidth=opts.linewidth, sci_mode=opts.sci_mode,
    )
    with np.printoptions(), mpl.rc_context():
        yield
    torch.set_printoptions(**torch_opts)
    random.setstate(py_state)
    np.random.set_state(np_state)
    torch.set_rng_state(torch_state)


# ----------------------------------------------------------------------------------------------------------
# seeds
# ----------------------------------------------------------------------------------------------------------


def _draws():
    return torch.randn(5), np.random.rand(3), random.random()


@pytest.mark.parametrize("fn", [setup, seed_everything])
def test_seeding_makes_draws_reproducible(fn, restore_global_state):
    fn(123)
    a = _draws()
    fn(123)
    b = _draws()
    fn(124)
    c = _draws()
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]
    assert not torch.equal(a[0], c[0]) and not np.array_equal(a[1], c[1]) and a[2] != c[2]


@pytest.mark.parametrize("fn", [setup, seed_everything])
def test_seeding_equals_seeding_each_library_by_hand(fn, restore_global_state):
    fn(7)
    ours = _draws()
    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    ref = _draws()
    assert torch.equal(ours[0], ref[0]) and np.array_equal(ours[1], ref[1]) and ours[2] == ref[2]


def test_default_seed_is_zero(restore_global_state):
    setup()
    a = _draws()
    seed_everything(0)
    assert torch.equal(a[0], _draws()[0])


@pytest.mark.parametrize("fn", [setup, seed_everything])
@pytest.mark.parametrize(
    "seed, exc", [(-1, ValueError), (1.0, TypeError), ("0", TypeError), (True, TypeError), (None, TypeError)]
)
def test_seed_argument_errors(fn, seed, exc, restore_global_state):
    with pytest.raises(exc, match="seed"):
        fn(seed)


# ----------------------------------------------------------------------------------------------------------
# print options and plot style
# ----------------------------------------------------------------------------------------------------------


def test_setup_sets_torch_print_options(restore_global_state):
    torch.set_printoptions(profile="default")
    setup()
    text = repr(torch.tensor([1 / 3, 2e-6, 1234.5]))
    assert "0.3333" in text and "0.33333" not in text  # 4 decimals
    assert "e" not in text.replace("tensor", "")  # no scientific notation
    long = str(torch.arange(30, dtype=torch.float32))  # 30 numbers of ~9 chars: one line needs linewidth ~100
    assert max(len(line) for line in long.splitlines()) <= 100
    assert max(len(line) for line in long.splitlines()) > 80


def test_setup_sets_numpy_print_options(restore_global_state):
    setup()
    opts = np.get_printoptions()
    assert opts["precision"] == 4
    assert opts["suppress"] is True
    assert opts["linewidth"] == 100
    assert np.array2string(np.array([1 / 3, 1e-8])) == "[0.3333 0.    ]"


def test_setup_sets_plot_style(restore_global_state):
    setup()
    assert list(mpl.rcParams["figure.figsize"]) == [6.0, 3.6]
    assert mpl.rcParams["figure.dpi"] == 100
    assert mpl.rcParams["axes.grid"] is False
    assert mpl.rcParams["axes.spines.top"] is False
    assert mpl.rcParams["axes.spines.right"] is False
    assert mpl.rcParams["font.size"] == 10
    assert mpl.rcParams["image.cmap"] == "viridis"


# ----------------------------------------------------------------------------------------------------------
# glue: the same display messages as myst_nb.glue
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ipython_shell(tmp_path_factory):
    """A real IPython shell (display() only publishes rich output when one exists), kept out of ~/.ipython."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    if InteractiveShell.initialized():
        yield InteractiveShell.instance()
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
        config = Config()
        config.HistoryManager.enabled = False
        shell = InteractiveShell.instance(config=config)
        try:
            yield shell
        finally:
            InteractiveShell.clear_instance()


def _published(fn, *args, **kwargs):
    """Call fn and return the (data, metadata) of every display message it published."""
    from IPython.utils.capture import capture_output

    with capture_output(stdout=False, stderr=False, display=True) as captured:
        fn(*args, **kwargs)
    return [(out.data, out.metadata) for out in captured.outputs]


class _Rich:
    """An object with several representations, one of them carrying metadata."""

    def __repr__(self):
        return "Rich()"

    def _repr_html_(self):
        return "<b>rich</b>"

    def _repr_latex_(self):
        return r"$\alpha$"

    def _repr_json_(self):
        return {"a": 1}, {"expanded": True}


VALUES = {
    "float": 0.123456789,
    "int": 42,
    "str": "attention",
    "list": [1, 2.5, "x"],
    "tensor": torch.tensor([[0.25, 0.75], [1.0, 0.0]]),
    "ndarray": np.arange(6).reshape(2, 3),
    "rich": _Rich(),
}


@pytest.mark.parametrize("display", [False, True])
@pytest.mark.parametrize("key", list(VALUES))
def test_glue_publishes_what_myst_nb_glue_publishes(ipython_shell, key, display):
    myst_glue = pytest.importorskip("myst_nb").glue
    value = VALUES[key]
    ours = _published(glue, "the_name", value, display=display)
    theirs = _published(myst_glue, "the_name", value, display=display)
    assert len(ours) == 1
    assert ours == theirs


def test_glue_hidden_message_by_hand(ipython_shell):
    (msg,) = _published(glue, "acc", 0.5)
    assert msg == (
        {GLUE_PREFIX + "text/plain": "0.5"},
        {"scrapbook": {"name": "acc", "mime_prefix": GLUE_PREFIX}},
    )


def test_glue_displayed_message_by_hand(ipython_shell):
    (msg,) = _published(glue, "acc", 0.5, display=True)
    assert msg == ({"text/plain": "0.5"}, {"scrapbook": {"name": "acc", "mime_prefix": ""}})


def test_glue_rich_object_keeps_every_mime_type_and_its_metadata(ipython_shell):
    (msg,) = _published(glue, "r", _Rich())
    data, metadata = msg
    assert data == {
        GLUE_PREFIX + "text/plain": "Rich()",
        GLUE_PREFIX + "text/html": "<b>rich</b>",
        GLUE_PREFIX + "text/latex": r"$\alpha$",
        GLUE_PREFIX + "application/json": {"a": 1},
    }
    assert metadata == {"application/json": {"expanded": True}, "scrapbook": {"name": "r", "mime_prefix": GLUE_PREFIX}}


def test_glue_prefix_constant():
    assert notebook.GLUE_PREFIX == GLUE_PREFIX


@pytest.mark.parametrize("name", ["", None, 3, b"name", ["name"]])
def test_glue_name_errors(name):
    with pytest.raises(TypeError, match="name"):
        glue(name, 1.0)
