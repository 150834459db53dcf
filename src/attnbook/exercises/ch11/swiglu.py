"""Checker for exercise 11.2, the SwiGLU feed-forward network."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..ch05._shared import import_transformers_first
from ..compare import expect_input_dtype
from ..guard import call
from ..registry import exercise
from ..runs import Run, collect, expect_gradients, expect_shape, verdict
from ._shared import F64, HF_MLPS, PRECISION_HINT, near, randn64, tolerance, transformers_pieces
from ...i18n import N_, _

_SWIGLU_INSTEAD = N_("write the three products yourself, with @, as the weights are given (in, out)")
SWIGLU_FORBIDDEN = [(name, _SWIGLU_INSTEAD)
                    for name in ("torch.nn.functional.linear", "torch.nn.Linear", "torch.nn.functional.bilinear",
                                 "attnbook.layers.FeedForward", "attnbook.models.moe.SwiGLUExperts")]


def swiglu_forbidden(fn) -> list[tuple[str, str]]:
    """SWIGLU_FORBIDDEN and the feed-forward network (the MLP) of every loaded transformers model (LlamaMLP, ...),
    each named where the learner would import it from. SiLU itself is allowed (the task says so)."""
    return SWIGLU_FORBIDDEN + [(path, _SWIGLU_INSTEAD) for path in transformers_pieces(HF_MLPS)]

SWIGLU_RULE = (N_("the result is (silu(x @ W_gate) * (x @ W_up)) @ W_down: SiLU on the gate branch only, multiplied "
                  "element by element with the up branch, then the down projection, the weights used as given"))


def _swiglu_mistakes(x: Tensor, W_gate: Tensor, W_up: Tensor, W_down: Tensor) -> dict:
    """What common mistakes return on this input (float64), keyed by the hint (the first that fits every case)."""
    x, Wg, Wu, Wd = (t.to(F64) for t in (x, W_gate, W_up, W_down))
    g, u = x @ Wg, x @ Wu  # (..., d_ff) each
    silu = F.silu
    return {
        _("gate and up are swapped: SiLU goes on x @ W_gate, the gate, and multiplies x @ W_up, which stays linear"):
            (silu(u) * g) @ Wd,
        _("SiLU acts on the gate branch alone, before the product: silu(x @ W_gate) * (x @ W_up), not "
          "silu((x @ W_gate) * (x @ W_up))"): silu(g * u) @ Wd,
        _("only the gate branch goes through SiLU; the up branch x @ W_up stays linear"): (silu(g) * silu(u)) @ Wd,
        _("that is ReGLU (ReLU as the gate's activation); SwiGLU uses SiLU, z * sigmoid(z), which is smooth and "
          "lets small negative values through"): (torch.relu(g) * u) @ Wd,
        _("that is GEGLU (GELU as the gate's activation); SwiGLU uses SiLU, z * sigmoid(z)"): (F.gelu(g) * u) @ Wd,
        _("that is GEGLU with the tanh approximation of GELU; SwiGLU uses SiLU, z * sigmoid(z)"):
            (F.gelu(g, approximate="tanh") * u) @ Wd,
        _("that is GLU (a sigmoid gate); SwiGLU's gate is SiLU, z * sigmoid(z): the sigmoid times z itself"):
            (torch.sigmoid(g) * u) @ Wd,
        _("you left out the up branch: the gate silu(x @ W_gate) multiplies x @ W_up, element by element"):
            silu(g) @ Wd,
        _("you left out the gate: silu(x @ W_gate) multiplies the up branch x @ W_up"): silu(u) @ Wd,
        _("you left out the activation: the gate is silu(x @ W_gate), not x @ W_gate"): (g * u) @ Wd,
        _("the gate multiplies the up branch (element by element); it is not added to it"): (silu(g) + u) @ Wd,
        _("the activation goes on the gate branch, before W_down, not after the down projection"):
            silu((g * u) @ Wd),
        _("you forgot the down projection: multiply the gated (..., d_ff) tensor by W_down to come back to d"):
            silu(g) * u,
        _("the feed-forward network has no residual connection of its own: return its output alone (the block adds "
          "the residual around it)"): x + (silu(g) * u) @ Wd,
    }


def _swiglu_error_hint(message: str) -> str | None:
    # PyTorch's own (English) error texts. An element-wise operation that does not line up is never a transpose
    # (every product with a weight is a matrix product): the gate and the up branch, both (..., d_ff), are the only
    # two tensors multiplied element by element, and a missing bracket is what usually breaks one of them.
    if "must match the size" in message or "size of tensor" in message:
        return (_("an element-wise operation met two tensors whose shapes do not line up. The gate silu(x @ W_gate) "
                  "and the up branch x @ W_up are both (..., d_ff) and are multiplied element by element, before "
                  "W_down. Mind the brackets: @ and * have the same precedence and group from the left, so "
                  "silu(x @ W_gate) * x @ W_up means (silu(x @ W_gate) * x) @ W_up"))
    if any(s in message for s in ("cannot be multiplied", "size mismatch")):
        return (_("follow the shapes: x is (..., d), W_gate and W_up (d, d_ff), W_down (d_ff, d). All three are used "
                  "as given, x @ W_gate, with no transpose (nn.Linear stores (out, in); these are (in, out))"))
    return None


@exercise("11.2", "The SwiGLU feed-forward network", answer_name="swiglu",
          section="SwiGLU: a gated feed-forward network",
          references=("attnbook.models.llama.SwiGLU",))
def check_swiglu(swiglu) -> str:
    """swiglu(x, W_gate, W_up, W_down) must equal (silu(x @ W_gate) * (x @ W_up)) @ W_down."""
    cases = [  # (description, shape of x, d_ff, scale of x); d_ff is never d, so a transposed weight cannot fit
        (_("x of shape (5, 4) with d=4, d_ff=6"), (5, 4), 6, 1.0),
        (_("x of shape (2, 3, 6), a batch of sequences, with d=6, d_ff=16"), (2, 3, 6), 16, 1.0),
        (_("x of shape (7,), a single token, with d=7, d_ff=3 (d_ff smaller than d)"), (7,), 3, 1.0),
        (_("x of shape (4, 8) with large values, so that the gate's pre-activations x @ W_gate reach about 10, with "
           "d=8, d_ff=12"), (4, 8), 12, 5.0),
        (N_("x of shape (2, 3, 4) in float32 with d=4, d_ff=10"), (2, 3, 4), 10, 1.0),
    ]

    def one(case, runs):
        i, (desc, shape, d_ff, scale) = case
        dtype = torch.float32 if "float32" in desc else F64  # desc: the English (N_), translated where shown
        d = shape[-1]
        x = randn64(*shape, seed=140 + i, dtype=dtype) * scale
        W_gate = randn64(d, d_ff, seed=150 + i, dtype=dtype) / d ** 0.5
        W_up = randn64(d, d_ff, seed=160 + i, dtype=dtype) / d ** 0.5
        W_down = randn64(d_ff, d, seed=170 + i, dtype=dtype) / d_ff ** 0.5
        on = _("{desc} (W_gate and W_up {tuple_w_gate_shape}, W_down {tuple_w_down_shape})",
               desc=_(desc), tuple_w_gate_shape=tuple(W_gate.shape), tuple_w_down_shape=tuple(W_down.shape))
        got = call(swiglu, x, W_gate, W_up, W_down, what="swiglu", on=on, forbid=swiglu_forbidden,
                   explain=_swiglu_error_hint, prepare=import_transformers_first)
        ref = _swiglu_ref(x, W_gate, W_up, W_down)  # (..., d), float64
        expect_input_dtype(got, x, what=_("your result"), on=on)
        mistakes = _swiglu_mistakes(x, W_gate, W_up, W_down)
        mistakes[_(PRECISION_HINT)] = near(ref)  # last: any mistake above that fits is the better hint
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=on)
        return Run(on, got, ref, mistakes, *tolerance(x))

    verdict(collect(enumerate(cases), one), what=_("your result"), rule=SWIGLU_RULE)
    x, Wg, Wu, Wd = (randn64(*s, seed=180 + k) for k, s in enumerate([(5, 4), (4, 6), (4, 6), (6, 4)]))
    expect_gradients(swiglu, (x, Wg, Wu, Wd), {0: "x", 1: "W_gate", 2: "W_up", 3: "W_down"}, _swiglu_ref,
                     what="swiglu", on=cases[0][0], forbid=swiglu_forbidden)
    return (_("matches (silu(x @ W_gate) * (x @ W_up)) @ W_down on {len_cases} inputs (float64 to a relative 1e-12), "
              "including a single token, d_ff < d, large gate values and float32", len_cases=len(cases)))


def _swiglu_ref(x, W_gate, W_up, W_down):
    x, W_gate, W_up, W_down = (t.to(F64) for t in (x, W_gate, W_up, W_down))
    g = x @ W_gate
    return (g * torch.sigmoid(g) * (x @ W_up)) @ W_down
