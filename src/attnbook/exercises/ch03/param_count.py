"""Checker for exercise 3.3, counting the parameters of a multi-head attention layer."""
from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from ..compare import generator
from ..guard import call
from ..hints import describe
from ..registry import exercise, Wrong
from ...models import params
from ...i18n import N_, _


INT_HINT = (N_("a parameter count is a whole number: use integer arithmetic (*, + and //), not / or math.pow, "
               "which always give floats"))


def _as_count(got, on: str) -> int:
    """A Python int from an int or a NumPy integer; else Wrong (a float, a tensor or an array is not an int)."""
    if got is None:
        raise Wrong(_("mha_param_count returned None for {on}", on=on), _("did you forget the `return` statement?"))
    if isinstance(got, numbers.Integral) and not isinstance(got, bool):  # int, numpy.int64, ...
        return int(got)
    if isinstance(got, Tensor) or (hasattr(got, "__array__") and not isinstance(got, numbers.Number)):
        kind = _("a tensor") if isinstance(got, Tensor) else _("a NumPy array")
        raise Wrong(_("mha_param_count returned {kind} for {on}; return an int", kind=kind, on=on),
                    _("count with plain Python integers, no tensors needed (int(t) turns a one-element tensor into "
                      "an int)"))
    if isinstance(got, numbers.Real) and not isinstance(got, bool):  # float, numpy.float64, ...
        value = float(got)
        whole = math.isfinite(value) and value.is_integer()
        shown = f"{value:.1f}" if whole and abs(value) < 1e16 else repr(value)
        raise Wrong(_("mha_param_count returned {shown} for {on}; return an int: {shown} is a float",
                      shown=shown, on=on)
                    + ("" if whole else _(" and not a whole number")), INT_HINT)
    raise Wrong(_("mha_param_count returned {describe_got} for {on}, expected an int",
                  describe_got=describe(got), on=on),
                _("return one whole number, the count"))


_COUNT_MISTAKES = [  # (hint, the count that mistake gives for d_model=d, n_heads=h, bias)
    (N_("you left out the output projection W_O: there are four d_model x d_model matrices (W_Q, W_K, W_V "
        "and W_O), each with its bias when bias=True"), lambda d, h, b: 3 * d * d + 3 * d * b),
    (N_("you left out the biases: with bias=True each of the four projections also has a bias vector of "
        "d_model numbers"), lambda d, h, b: 4 * d * d),
    (N_("you left out the output projection W_O and the biases"), lambda d, h, b: 3 * d * d),
    (N_("bias=False: the projections have no biases, only the four weight matrices"),
     lambda d, h, b: 4 * d * d + 4 * d),
    (N_("you counted one bias vector, but each of the four projections has its own: 4 d_model biases"),
     lambda d, h, b: 4 * d * d + d * b),
    (N_("you counted three bias vectors; W_O has a bias too: 4 d_model biases"), lambda d, h, b: 4 * d * d + 3 * d * b),
    (N_("you counted a bias of d_model per head; the biases of all heads together have d_model numbers "
        "per projection (d_head per head)"), lambda d, h, b: 4 * d * d + 4 * h * d * b),
    (N_("you counted a bias of d_model per head for W_Q, W_K and W_V; the heads' biases together have "
        "d_model numbers per projection"), lambda d, h, b: 4 * d * d + (3 * h * d + d) * b),
    (N_("you counted one bias number per head; a bias has one number per output feature, d_model per projection"),
     lambda d, h, b: 4 * d * d + 4 * h * b),
    (N_("a multi-head attention layer has no LayerNorm: count only the four projections and their biases"),
     lambda d, h, b: 4 * d * d + 4 * d * b + 2 * d),
    (N_("that is the count for d_model and n_heads swapped: the check calls mha_param_count(d_model, n_heads, "
        "bias=...), d_model first"), lambda d, h, b: 4 * h * h + 4 * h * b),
    (N_("you multiplied by n_heads: the heads share the four d_model x d_model matrices (each head uses "
        "d_head of their columns), so the count does not depend on n_heads"),
     lambda d, h, b: h * (4 * d * d + 4 * d * b)),
    (N_("you multiplied the weight matrices by n_heads: the heads share the four d_model x d_model matrices, "
        "so the count does not depend on n_heads"), lambda d, h, b: h * 4 * d * d + 4 * d * b),
    (N_("that counts one head only: its four matrices are d_model x d_head (with biases of d_head numbers); "
        "the n_heads heads together fill d_model x d_model matrices"), lambda d, h, b: 4 * (d + b) * (d // h)),
    (N_("that is 4 d_model^2 / n_heads weights, as if each projection were d_model x d_head (one head) or "
        "n_heads blocks of d_head x d_head; each head reads all d_model input features, and the heads together "
        "fill d_model x d_model matrices"), lambda d, h, b: 4 * d * (d // h) + 4 * d * b),
]


_COUNT_FORBIDDEN = [
    (name, N_("write the formula: count the weights and the biases of the four projections W_Q, W_K, W_V and W_O"))
    for name in dict.fromkeys((
        *(f"attnbook.models.params.{name}" for name in (*params.__all__, "_linear")),  # every function of params
        "attnbook.multihead.MultiHeadAttention",
        "attnbook.layers.EncoderBlock",
        "attnbook.layers.DecoderBlock",
        "torch.nn.MultiheadAttention",
        "torch.nn.modules.activation.MultiheadAttention",
        "torch.nn.Linear",
        "torch.nn.modules.linear.Linear",
        "torch.nn.modules.linear.NonDynamicallyQuantizableLinear",
        *(f"{owner}.{layer}" for owner in ("torch.nn", "torch.nn.modules.transformer")
          for layer in ("TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer"))
    ))
]


def mha_count_cases() -> list[tuple[int, int, bool | None]]:
    """(d_model, n_heads, bias) for 3.3 (None: bias left at its default): eight fixed layers, BERT-base's and
    GPT-3's among them, then two drawn anew on every run (a table of known layers does not do)."""
    g = generator(33)

    def drawn() -> tuple[int, int]:  # (d_model, n_heads), n_heads from 2 to 16 dividing d_model
        h = int(torch.randint(2, 17, (), generator=g))
        return h * int(torch.randint(2, 65, (), generator=g)), h

    return [(512, 8, None), (768, 12, True), (768, 12, False), (64, 1, True), (1024, 16, False),
            (12288, 96, True), (6, 3, True), (6, 3, False), (*drawn(), True), (*drawn(), False)]


@exercise("3.3", "Count the parameters of a multi-head attention layer", answer_name="mha_param_count",
          section="Counting parameters",
          references=("attnbook.models.params.mha_param_count",))
def check_mha_param_count(mha_param_count) -> str:
    """mha_param_count(d_model, n_heads, bias=True) -> 4 d^2 + 4 d (4 d^2 without bias), an int."""
    cases = mha_count_cases()
    runs = []  # (on, the learner's count, d, h, bias) of every case run
    for d, h, bias in cases:
        if bias is None:  # the default must be bias=True
            on = _("d_model={d}, n_heads={h} (bias left at its default, True)", d=d, h=h)
            kwargs, bias = {}, True
        else:
            on, kwargs = _("d_model={d}, n_heads={h}, bias={bias}", d=d, h=h, bias=bias), {"bias": bias}
        try:
            value = _as_count(call(mha_param_count, d, h, **kwargs, what="mha_param_count", on=on,
                                   forbid=_COUNT_FORBIDDEN), on)
        except Wrong:
            if any(v != 4 * dd * dd + 4 * dd * bb for _unused, v, dd, _unused, bb in runs):
                break  # an earlier count was wrong: report that one
            raise
        runs.append((on, value, d, h, bias))
    wrong = [r for r in runs if r[1] != 4 * r[2] * r[2] + 4 * r[2] * r[4]]  # W_Q, W_K, W_V, W_O and their biases
    if not wrong:
        return (_("right for {len_cases} layers, with and without biases, including BERT-base (768, 12) and "
                  "GPT-3 (12288, 96)", len_cases=len(cases)))
    on, value = wrong[0][:2]
    hint = next((hint for hint, f in _COUNT_MISTAKES if all(f(d, h, b) == v for _unused, v, d, h, b in runs)),
                _("count each of the four projections W_Q, W_K, W_V and W_O: its weight matrix (d_model x d_model) "
                  "and, when bias=True, its bias (d_model numbers)"))
    raise Wrong(_("mha_param_count returned {value:,} for {on}, which is not the number of parameters",
                  value=value, on=on), hint)


