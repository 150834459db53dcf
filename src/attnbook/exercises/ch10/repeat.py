"""Checker for exercise 10.2, repeat_kv for grouped-query attention: each kv head repeated n_rep times in a row,
without the package's or transformers' repeat_kv."""
from __future__ import annotations

import importlib
import re
import sys

import torch
from torch import Tensor

from ...multihead import repeat_kv as _repeat_kv
from ..ch08._shared import code_names
from ..compare import expect_tensor, generator
from ..guard import call
from ..registry import exercise, Wrong
from ..runs import Run, collect, expect_shape, verdict
from ...i18n import N_, _


_REPEAT_INSTEAD = (N_("build it yourself from the tensor operations the task lists (indexing, expand, reshape, "
                      "repeat_interleave)"))


def repeat_kv_forbidden(fn) -> list[tuple[str, str]]:
    """The package's repeat_kv and every `repeat_kv` of `transformers`, wherever the learner imports it from.

    A "*" pattern catches the functions of modules that the learner's code imports while it runs; the loaded
    modules' functions are also patched by name, so that passing one of them itself is recognised too.
    Importing all of transformers' models would take seconds, so only modules already loaded count, plus the
    modules the learner's own code imports (loaded here first).
    """
    for name in code_names(fn):
        if name.startswith("transformers.models."):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - not importable here, so not callable by the learner either
                pass
    paths = ["attnbook.multihead.repeat_kv", "transformers.*.repeat_kv"]
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("transformers.") and module is not None and callable(
                vars(module).get("repeat_kv")):  # vars(): no lazy import triggered
            paths.append(f"{module_name}.repeat_kv")
    return [(p, _REPEAT_INSTEAD) for p in paths]


def _kv_input(B: int, n_kv: int, S: int, d: int, seed: int, dtype=torch.float32, transposed: bool = False) -> Tensor:
    """(B, n_kv, S, d) with random entries (new ones on every pass of the check); `transposed` makes it as
    split_heads does (not contiguous)."""
    g = generator(seed)
    if transposed:
        return torch.randn(B, S, n_kv, d, generator=g).to(dtype).transpose(1, 2)  # (B, n_kv, S, d), a view
    return torch.randn(B, n_kv, S, d, generator=g).to(dtype)


def _repeat_mistakes(x: Tensor, n_rep: int) -> dict[str, Tensor]:
    """The outputs of common mistakes on x, keyed by their hint (wrong shapes are matched by shape)."""
    B, n_kv, S, d = x.shape
    out = {
        _("your heads come out in the tiled order kv0, kv1, kv0, kv1, ... (what x.repeat(1, n_rep, 1, 1) gives); "
          "repeat each kv head n_rep times in a row, kv0, kv0, kv1, kv1, ..., so that query heads 0..n_rep-1 share "
          "kv head 0, as the model was trained"): x.repeat(1, n_rep, 1, 1),
    }
    for dim, name in ((0, _("the batch")), (2, _("the sequence")), (3, _("the features (d_head)"))):
        wrong = x.repeat_interleave(n_rep, dim=dim)
        if wrong.shape != (B, n_kv * n_rep, S, d):
            out[_("you repeated along dim {dim}, {name}; repeat the heads, dim 1", dim=dim, name=name)] = wrong
    return out


def _check_head_count(got: Tensor, x: Tensor, n_rep: int, desc: str) -> None:
    """Wrong with a specific hint when only the number of heads (dim 1) of the result is wrong."""
    B, n_kv, S, d = x.shape
    if got.dim() != 4 or got.size(0) != B or tuple(got.shape[2:]) != (S, d) or got.size(1) == n_kv * n_rep:
        return
    heads = got.size(1)
    if heads == n_kv:
        hint = _("your result has the {n_kv} heads of x: repeat each of them n_rep={n_rep} times",
                 n_kv=n_kv, n_rep=n_rep)
    elif heads == n_rep or heads == (n_rep // n_kv) * n_kv:
        hint = (_("the result has n_kv_heads · n_rep heads: n_rep is how many query heads share each kv head, not "
                  "the total number of query heads"))
    else:
        hint = _("each of the n_kv_heads heads appears n_rep times, so the result has n_kv_heads · n_rep heads")
    raise Wrong(_("your result has shape {tuple_got_shape} on {desc}, expected {b_n_kv_n_rep_s_d}",
                  tuple_got_shape=tuple(got.shape), desc=desc, b_n_kv_n_rep_s_d=(B, n_kv * n_rep, S, d)), hint)


def _repeat_explainer(x: Tensor):
    """explain= for call on input x: hints for the errors of expand and view (ERROR_HINTS' view hint is about
    transpose, which fits a non-contiguous x but not the zero strides of an expanded tensor)."""

    def explain(message: str) -> str | None:
        if re.search(r"expanded size of the tensor .* must match the existing size", message):
            return (_("expand can only stretch a dimension of size 1: insert one after the heads, expand that, then "
                      "reshape"))
        if "view size is not compatible with input tensor's size and stride" in message:
            if x.is_contiguous():
                return (_("expand makes a view with zero strides (nothing is copied), and .view() cannot merge a "
                          "zero-stride dimension with another: use .reshape(), which copies when it must"))
            return (_("this x is not contiguous (it was made by transposing, as split_heads does), and expand makes "
                      "zero strides: .view() cannot merge such dimensions; use .reshape(), which copies when it must"))
        if re.search(r"cannot reshape tensor of 0 elements .* -1 .* ambiguous", message):
            return (_("an empty x has 0 elements, so reshape cannot work out a -1: write every size, the heads as "
                      "n_kv_heads * n_rep"))
        return None

    return explain


_REPEAT_RULE = (N_("query head j reads kv head j // n_rep: each kv head appears n_rep times in a row, in order, and "
                   "the values are copied exactly"))


@exercise("10.2", "repeat_kv for grouped-query attention", answer_name="repeat_kv", section="MHA, GQA and MQA",
          references=("attnbook.multihead.repeat_kv",))
def check_repeat_kv(repeat_kv) -> str:
    """repeat_kv(x, n_rep): (B, n_kv, S, d) -> (B, n_kv * n_rep, S, d), each kv head n_rep times in a row."""
    cases = [
        (_("x of shape (2, 3, 5, 4) and n_rep=2"), _kv_input(2, 3, 5, 4, seed=1), 2),
        (_("a batch of 1: x of shape (1, 2, 4, 8) and n_rep=4 (8 query heads share 2 kv heads)"),
         _kv_input(1, 2, 4, 8, seed=2), 4),
        (_("n_rep=1 (multi-head attention: nothing to repeat), x of shape (2, 4, 3, 6)"),
         _kv_input(2, 4, 3, 6, seed=3), 1),
        (_("float64 x of shape (2, 2, 7, 3), not contiguous (made by transposing (2, 7, 2, 3), as split_heads does), "
           "and n_rep=3"), _kv_input(2, 2, 7, 3, seed=4, dtype=torch.float64, transposed=True), 3),
        (_("float16 x of shape (2, 4, 3, 8), a half-precision cache as on a GPU, and n_rep=2"),
         _kv_input(2, 4, 3, 8, seed=7, dtype=torch.float16), 2),
        (_("multi-query attention: x of shape (3, 1, 6, 4) and n_rep=8"), _kv_input(3, 1, 6, 4, seed=5), 8),
        (_("an empty cache: x of shape (1, 2, 0, 4) and n_rep=2"), _kv_input(1, 2, 0, 4, seed=6), 2),
    ]
    def one(case, runs: list[Run]) -> Run:
        desc, x, n_rep = case
        got = call(repeat_kv, x, n_rep, what="repeat_kv", on=desc, forbid=repeat_kv_forbidden, reload=True,
                   explain=_repeat_explainer(x))
        expected = _repeat_kv(x, n_rep)  # (B, n_kv * n_rep, S, d)
        got = expect_tensor(got, what=_("your result"), on=desc, finite=False)
        _check_head_count(got, x, n_rep, desc)
        if got.shape == expected.shape and got.dtype != x.dtype:
            raise Wrong(_("your result has dtype {dtype} on {desc}, expected {dtype2} (the dtype of x)",
                          dtype=got.dtype, desc=desc, dtype2=x.dtype),
                        _("only copy the numbers: no .float() or .double(), and nothing that mixes x with a tensor "
                          "of another dtype (torch.ones or torch.zeros without dtype=x.dtype make float32)"))
        mistakes = _repeat_mistakes(x, n_rep)
        return Run(desc, expect_shape(got, expected, mistakes, runs, what=_("your result"), on=desc), expected,
                   mistakes, 0.0, 0.0)

    verdict(collect(cases, one), what=_("your result"), rule=_REPEAT_RULE)
    return (_("right on {len_cases} inputs, including n_rep=1, multi-query attention, float16, a non-contiguous "
              "input and an empty cache", len_cases=len(cases)))
