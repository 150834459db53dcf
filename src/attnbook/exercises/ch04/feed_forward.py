"""Checker for exercise 4.2, the position-wise feed-forward network."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import expect_input_dtype
from ..guard import call
from ..registry import exercise
from ..runs import Run, collect, expect_gradients, expect_shape, verdict
from ._shared import randn64, tolerance
from ...i18n import N_, _


FFN_FORBIDDEN = [(name, N_("write both layers yourself, with @ and the bias additions"))
                 for name in ("attnbook.layers.FeedForward", "torch.nn.functional.linear", "torch.nn.Linear",
                              "torch.nn.functional.bilinear")]


def _ffn_mistakes(x: Tensor, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor) -> dict:
    x, W1, b1, W2, b2 = (t.double() for t in (x, W1, b1, W2, b2))
    relu, gelu, F = torch.relu, torch.nn.functional.gelu, torch.nn.functional
    z = x @ W1 + b1  # (..., d_ff)
    out = {
        _("that is GELU; this exercise uses ReLU, the original paper's activation"): gelu(z) @ W2 + b2,
        _("that is the tanh approximation of GELU; this exercise uses ReLU"): gelu(z, approximate="tanh") @ W2 + b2,
        _("that is a leaky ReLU; ReLU is max(0, z), exactly 0 for every negative z"): F.leaky_relu(z) @ W2 + b2,
        _("ReLU has no upper limit: max(0, z), not relu6 or a clamp with a maximum"): F.relu6(z) @ W2 + b2,
        _("the ReLU comes only between the two layers: the second layer's output has no activation"):
            relu(relu(z) @ W2 + b2),
        _("you left out the activation: without a ReLU between them, the two layers collapse into one linear map"):
            z @ W2 + b2,
        _("you forgot the first bias b1, added before the ReLU"): relu(x @ W1) @ W2 + b2,
        _("you forgot the second bias b2, added after the second matrix product"): relu(z) @ W2,
        _("you forgot both biases, b1 and b2"): relu(x @ W1) @ W2,
        _("add b1 before the ReLU, not after it"): (relu(x @ W1) + b1) @ W2 + b2,
        _("the ReLU acts on the hidden layer (after W1 and b1), not on the input"): (relu(x) @ W1 + b1) @ W2 + b2,
        _("the feed-forward network has no residual connection of its own: return its output alone (the block adds "
          "the residual around it)"): x + relu(z) @ W2 + b2,
    }
    if W1.size(0) == W1.size(1):  # square matrices: a transpose or a swap runs and gives a wrong answer
        transposed = (_("W1 and W2 are given as (in, out), so they are used as given, with no transpose (nn.Linear "
                        "stores (out, in); these are already the other way round)"))
        out[transposed] = relu(x @ W1.T + b1) @ W2.T + b2
        out[transposed + _(" (you transposed W1)")] = relu(x @ W1.T + b1) @ W2 + b2
        out[transposed + _(" (you transposed W2)")] = relu(z) @ W2.T + b2
        out[_("W1 and W2 are swapped: W1 (d, d_ff) comes first, then W2 (d_ff, d)")] = relu(x @ W2 + b1) @ W1 + b2
    return out


def _ffn_error_hint(message: str) -> str | None:
    # PyTorch's own (English) error texts
    if any(s in message for s in ("cannot be multiplied", "size mismatch", "must match the size", "size of tensor")):
        return (_("follow the shapes: x is (..., d), W1 (d, d_ff), b1 (d_ff,), W2 (d_ff, d) and b2 (d,). W1 comes "
                  "first, and both are used as given, (in, out), with no transpose"))
    return None


@exercise("4.2", "The position-wise feed-forward network", answer_name="feed_forward",
          section="The position-wise feed-forward network",
          references=("attnbook.layers.FeedForward",))
def check_feed_forward(feed_forward) -> str:
    """feed_forward(x, W1, b1, W2, b2) must equal relu(x @ W1 + b1) @ W2 + b2 on several shapes."""
    cases = [  # (description, shape of x, d_ff, scale of x)
        (_("x of shape (5, 4) with d=4, d_ff=8"), (5, 4), 8, 1.0),
        (_("x of shape (2, 3, 6), a batch of sequences, with d=6, d_ff=10"), (2, 3, 6), 10, 1.0),
        (_("x of shape (3, 5) with square weights, d = d_ff = 5"), (3, 5), 5, 1.0),
        (_("x of shape (7,), a single token, with d=7, d_ff=3 (d_ff smaller than d)"), (7,), 3, 1.0),
        (_("x of shape (1, 1, 4), a batch of one token, with d=4, d_ff=16"), (1, 1, 4), 16, 1.0),
        (_("x of shape (4, 6) with large values, so that the hidden pre-activations x @ W1 + b1 reach about 40, "
           "with d=6, d_ff=12"), (4, 6), 12, 20.0),
        (N_("x of shape (2, 3, 4) in float32 with d=4, d_ff=8"), (2, 3, 4), 8, 1.0),
    ]
    def one(case, runs):
        i, (desc, shape, d_ff, scale) = case
        dtype = torch.float32 if "float32" in desc else torch.float64  # desc: the English (N_), translated where shown
        d = shape[-1]
        x = randn64(*shape, seed=50 + i, dtype=dtype) * scale
        W1, b1 = randn64(d, d_ff, seed=60 + i, dtype=dtype) / d ** 0.5, randn64(d_ff, seed=70 + i, dtype=dtype) * 0.5
        W2, b2 = randn64(d_ff, d, seed=80 + i, dtype=dtype) / d_ff ** 0.5, randn64(d, seed=90 + i, dtype=dtype) * 0.5
        on = _("{desc} (W1 {w1}, b1 ({d_ff},), W2 {w2}, b2 ({d},))", desc=_(desc), w1=tuple(W1.shape), d_ff=d_ff,
               w2=tuple(W2.shape), d=d)
        got = call(feed_forward, x, W1, b1, W2, b2, what="feed_forward", on=on, forbid=FFN_FORBIDDEN,
                   explain=_ffn_error_hint)
        ref = _ffn_ref(x, W1, b1, W2, b2)  # (..., d)
        expect_input_dtype(got, x, what=_("your result"), on=on, same_shape=True)
        mistakes = _ffn_mistakes(x, W1, b1, W2, b2)
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=on)
        return Run(on, got, ref, mistakes, *tolerance(x))

    verdict(collect(enumerate(cases), one), what=_("your result"),
            rule=_("the result is ReLU(x W1 + b1) W2 + b2, the weights used as given, (in, out)"))
    x, W1, b1, W2, b2 = (randn64(*s, seed=k) for k, s in enumerate([(5, 4), (4, 8), (8,), (8, 4), (4,)]))
    expect_gradients(feed_forward, (x, W1, b1, W2, b2), {0: "x", 1: "W1", 2: "b1", 3: "W2", 4: "b2"}, _ffn_ref,
                     what="feed_forward", on=cases[0][0], forbid=FFN_FORBIDDEN)
    return (_("matches relu(x @ W1 + b1) @ W2 + b2 on {len_cases} inputs, including a single token, d_ff < d and "
              "large hidden values", len_cases=len(cases)))


def _ffn_ref(x, W1, b1, W2, b2):
    return (x.double() @ W1.double() + b1.double()).clamp(min=0) @ W2.double() + b2.double()
