"""Tests of attnbook.plotting on the non-interactive Agg backend."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from attnbook.masks import causal_mask, padding_mask  # noqa: E402
from attnbook.plotting import plot_attention, plot_mask  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def texts(labels):
    return [t.get_text() for t in labels]


def weights(q_len, k_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(q_len, k_len, generator=g), dim=-1)


# ----------------------------------------------------------------------------------------------------------
# plot_attention
# ----------------------------------------------------------------------------------------------------------


def test_plot_attention_returns_axes_with_token_labels():
    q_tokens, k_tokens = ["the", "cat", "sat"], ["<s>", "the", "cat", "sat"]
    w = weights(3, 4)
    ax = plot_attention(w, q_tokens, k_tokens, title="head 0")
    assert isinstance(ax, Axes)
    assert texts(ax.get_xticklabels()) == k_tokens
    assert texts(ax.get_yticklabels()) == q_tokens
    assert ax.get_title() == "head 0"
    assert np.allclose(np.asarray(ax.images[0].get_array()), w.numpy())
    ax.figure.canvas.draw()  # renders without error


def test_plot_attention_without_labels_uses_indices():
    ax = plot_attention(weights(2, 3))
    assert texts(ax.get_xticklabels()) == ["0", "1", "2"]
    assert texts(ax.get_yticklabels()) == ["0", "1"]


def test_plot_attention_annotates_small_matrices_with_values():
    w = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    ax = plot_attention(w)
    assert sorted(texts(ax.texts)) == sorted(["0.25", "0.75", "1.00", "0.00"])
    assert len(plot_attention(w, annotate=False).texts) == 0
    assert len(plot_attention(weights(11, 11)).texts) == 0  # default: only up to 10x10
    assert len(plot_attention(weights(11, 11), annotate=True).texts) == 121


def test_plot_attention_draws_on_a_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    ax = plot_attention(weights(2, 2), ["a", "b"], ["c", "d"], ax=right)
    assert ax is right
    assert len(left.images) == 0 and len(right.images) == 1


def test_plot_attention_accepts_leading_size_one_dims_and_grad_tensors():
    w = weights(3, 4)[None, None].requires_grad_()
    ax = plot_attention(w, list("abc"), list("wxyz"))
    assert np.asarray(ax.images[0].get_array()).shape == (3, 4)
    assert texts(ax.get_xticklabels()) == list("wxyz")


def test_plot_attention_labels_are_stringified():
    ax = plot_attention(weights(2, 2), [1, 2], (3.5, "x"))
    assert texts(ax.get_yticklabels()) == ["1", "2"]
    assert texts(ax.get_xticklabels()) == ["3.5", "x"]


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((weights(3, 4), ["a", "b"], None), {}, ValueError, "query_labels"),
        ((weights(3, 4), None, ["a", "b", "c"]), {}, ValueError, "key_labels"),
        ((weights(3, 4), ["a", "b", "c", "d"], ["a", "b", "c"]), {}, ValueError, "query_labels"),
        ((weights(3, 4), "abc", None), {}, TypeError, "query_labels"),
        ((weights(3, 4), None, "abcd"), {}, TypeError, "key_labels"),
        ((weights(3, 4), None, 4), {}, TypeError, "key_labels"),
        (([[0.5, 0.5]],), {}, TypeError, "weights"),
        ((np.ones((2, 2)),), {}, TypeError, "weights"),
        ((torch.ones(4),), {}, ValueError, "weights"),
        ((torch.ones(2, 3, 4),), {}, ValueError, "weights"),
    ],
)
def test_plot_attention_argument_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        plot_attention(*args, **kwargs)


# ----------------------------------------------------------------------------------------------------------
# plot_mask
# ----------------------------------------------------------------------------------------------------------


def test_plot_mask_returns_axes_with_token_labels():
    tokens = ["I", "like", "tea", "<pad>"]
    mask = causal_mask(4)
    ax = plot_mask(mask, labels=tokens, title="causal")
    assert isinstance(ax, Axes)
    assert texts(ax.get_xticklabels()) == tokens
    assert texts(ax.get_yticklabels()) == tokens
    assert ax.get_title() == "causal"
    assert np.array_equal(np.asarray(ax.images[0].get_array()), mask.float().numpy())
    ax.figure.canvas.draw()


def test_plot_mask_rectangular_labels_are_the_keys():
    ax = plot_mask(causal_mask(2, 3), labels=["a", "b", "c"])
    assert texts(ax.get_xticklabels()) == ["a", "b", "c"]
    assert texts(ax.get_yticklabels()) == ["0", "1"]


def test_plot_mask_without_labels_and_padding_mask_shape():
    ax = plot_mask(padding_mask([3])[:, None, None, :])  # (1, 1, 1, 3) -> (1, 3)
    assert np.asarray(ax.images[0].get_array()).shape == (1, 3)
    assert texts(ax.get_xticklabels()) == ["0", "1", "2"]


def test_plot_mask_draws_on_a_given_axes():
    fig, ax0 = plt.subplots()
    assert plot_mask(causal_mask(3), ax=ax0) is ax0


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((causal_mask(3),), {"labels": ["a", "b"]}, ValueError, "labels"),
        ((causal_mask(2, 3),), {"labels": ["a", "b"]}, ValueError, "labels"),
        ((causal_mask(3),), {"labels": "abc"}, TypeError, "labels"),
        ((causal_mask(3).float(),), {}, TypeError, "mask"),
        ((causal_mask(3).long(),), {}, TypeError, "mask"),
        (([[True, False]],), {}, TypeError, "mask"),
        ((torch.ones(3, dtype=torch.bool),), {}, ValueError, "mask"),
        ((torch.ones(2, 2, 2, dtype=torch.bool),), {}, ValueError, "mask"),
    ],
)
def test_plot_mask_argument_errors(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        plot_mask(*args, **kwargs)
