"""Checker for exercise 7.3, prepending the class token and adding the positions."""
from __future__ import annotations

import functools
import re

import torch
from torch import Tensor

from ..compare import generator
from ..guard import call
from ..runs import Run, collect, expect_like, shape_hint, verdict
from ..observe import Backward, Nothing
from ..registry import exercise, Wrong
from ...i18n import N_, _
from ._shared import DTYPE_HINT, dtype_first, expect_function, randn64, tolerance


CLS_FORBIDDEN = [("attnbook.models.vit.ViT.embed", N_("build the tokens yourself from x, cls and pos"))]


_CLS_RULE = N_("token 0 of each image is cls plus pos[:, 0]; token i + 1 is patch i of x plus pos[:, i + 1]")


def _cls_mistakes(x: Tensor, cls: Tensor, pos: Tensor) -> dict[str, Tensor]:
    B, N, D = x.shape
    c = cls.expand(B, 1, D)  # (B, 1, D)
    return {
        _("the class token goes first, at position 0, in front of the patches, not after them"):
            torch.cat([x, c], dim=1) + pos,
        _("you added the positions before the concatenation, rows 0 .. N - 1 to the patches and the last row to the "
          "class token; row 0 of pos (pos[:, 0]) is the class token's and row i + 1 is patch i's"):
            torch.cat([c + pos[:, N:], x + pos[:, :N]], dim=1),
        _("you added the positions to the patches before the concatenation, so the class token got no position: "
          "concatenate first, then add all of pos (the class token's position is pos[:, 0])"):
            torch.cat([c, x + pos[:, 1:]], dim=1),
        _("patch i must get pos[:, i + 1]: position 0 belongs to the class token. Concatenate first, then add pos"):
            torch.cat([c, x + pos[:, :-1]], dim=1),
        _("patch i must get pos[:, i + 1], not pos[:, i]: position 0 belongs to the class token alone. Concatenate "
          "first, then add all of pos"): torch.cat([c + pos[:, :1], x + pos[:, :-1]], dim=1),
        _("you added the positions twice: add pos once, after the concatenation"): torch.cat([c, x], dim=1) + 2 * pos,
        _("you forgot the positions: add pos after the concatenation"): torch.cat([c, x], dim=1),
        _("you added cls to the patches as well: the class token joins the sequence only as the extra token in "
          "front; the patch tokens stay x, plus their positions"): torch.cat([c, x + c], dim=1) + pos,
        _("you added cls to every token, the class token included, on top of prepending it: the class token joins "
          "the sequence only as the extra token in front; add pos, not cls, to all the tokens"):
            torch.cat([c, x], dim=1) + c + pos,
        _("the positions belong to the tokens in order: add pos as it is, not flipped or shuffled"):
            torch.cat([c, x], dim=1) + pos.flip(1),
        _("you added only pos[:, :1], the class token's position, to every token: add all of pos, row t to token t"):
            torch.cat([c, x], dim=1) + pos[:, :1],
        _("every image of your result holds the first image's patches: each image keeps its own patches"):
            (torch.cat([cls, x[:1]], dim=1) + pos).expand(B, N + 1, D),
        _("your result has twice the features and N tokens: you joined cls and x along the features; the class token "
          "is a token of its own, joined along the token axis (dim=1)"): torch.cat([c.expand(B, N, D), x], dim=-1),
    }


def _token_count_hint(got, x: Tensor, cls: Tensor, pos: Tensor) -> str | None:
    """A hint for a result with N tokens instead of N + 1 (the class token overwrote or was added to a patch)."""
    B, N, D = x.shape
    if not isinstance(got, Tensor) or tuple(got.shape) != (B, N, D) or not got.is_floating_point():
        return None
    g = got.detach().double()
    x, cls, pos = x.detach().double(), cls.detach().double(), pos.detach().double()
    overwritten = torch.cat([cls.expand(B, 1, D), x[:, 1:]], dim=1)  # (B, N, D): patch 0 replaced by cls
    for p in (pos[:, 1:], pos[:, :N], torch.zeros_like(pos[:, 1:])):
        if torch.allclose(g, overwritten + p, atol=1e-5, rtol=1e-5):
            return (_("you overwrote the first patch with the class token, so that patch is lost: the class token is "
                      "an extra token, in front of all N patches: don't overwrite one, the result has N + 1 tokens"))
        if torch.allclose(g, x + cls + p, atol=1e-5, rtol=1e-5):
            return (_("you added cls to every patch instead of putting it in front as a token of its own: the result "
                      "has N + 1 tokens"))
    return (_("your result has N tokens, one per patch; the encoder gets N + 1: the class token in front of all N "
              "patches (concatenate it, don't overwrite a patch or add it to them), then add pos, whose N + 1 rows "
              "are one per token"))


_FIXED_SIZE = (N_("a size in your code is fixed in advance: the batch size B, the number of patches N and the features "
                  "D all come from x's shape (B, N, D); cls is expanded over the batch only (-1 keeps a size), and "
                  "pos is added whole, without slicing it"))


def _cls_error_hint(message: str, x: Tensor) -> str | None:
    m = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                  r"dimension (\d+)", message)
    if m and m.group(3) == "1" and abs(int(m.group(1)) - int(m.group(2))) == 1:
        return (_("pos has N + 1 rows, one per token including the class token (row 0 is the class token's): "
                  "concatenate first, then add all of pos to the (B, N + 1, D) result, without slicing it"))
    if m or "The expanded size of the tensor" in message:
        return _FIXED_SIZE
    if "leaf Variable that requires grad" in message:
        return (_("do not change x, cls or pos in place (x += ..., x[...] = ...): they are the model's tokens and "
                  "parameters; build a new tensor with torch.cat and +"))
    m = re.search(r"Sizes of tensors must match except in dimension (-?\d+)\. Expected size (\d+) but got size "
                  r"(\d+)", message)
    if m:
        B, N, D = x.shape
        dim, a, b = (int(g) for g in m.groups())
        if dim != 1:
            return (_("you joined cls and x along dim {dim}: the class token is one more token, so join them along "
                      "the token axis, dim 1 (cls expanded is (B, 1, D) and x is (B, N, D): they differ only in dim 1)",
                      dim=dim))
        if (a == B) != (b == B) and D not in (a, b):  # along dim 1, the batch sizes differ
            other = b if a == B else a  # the class token's batch size
            if other == 1:
                return (_("cls has batch size 1 and x has batch size B: expand cls over the batch (Tensor.expand) "
                          "to x's own batch size, x.size(0), not a fixed number, before joining it to x"))
            return (_("your class tokens have batch size {other} and x has batch size {B}: expand cls to x's own "
                      "batch size, x.size(0), not a fixed number, before joining it to x", other=other, B=B))
        return _FIXED_SIZE
    if "Sizes of tensors must match except in dimension" in message:
        return _FIXED_SIZE
    if "Tensors must have same number of dimensions" in message:
        return _("cls is (1, 1, D), already 3-D like x: concatenate it along dim=1 without squeezing it")
    return None


def _check_gradients(got: Tensor, grads, x: Tensor, cls: Tensor, pos: Tensor, on: str) -> None:
    """Wrong unless the gradient of got.sum() (`grads`, what the Backward observer saw) reaches x, cls and pos with
    the right values (B for cls and pos)."""
    hint = (_("cls and pos are learned parameters of the ViT, and x comes from the patch embedding: they learn only "
              "if the gradient flows back to them. Do not use .detach(), .data, torch.no_grad() or copies made with "
              "torch.tensor(...); build the result from x, cls and pos with torch.cat and +"))
    if grads is None:
        raise Wrong(_("no gradient flows back through your result on {on}", on=on), hint)
    if isinstance(grads, str):
        raise Wrong(_("backward through your result raised {grads} on {on}", grads=grads, on=on), hint) from None
    B = x.size(0)
    for name, t, per_element in (("cls", cls, B), ("pos", pos, B), ("x", x, 1)):
        grad = grads.get(name)
        if grad is None or not grad.abs().any():
            raise Wrong(_("no gradient reached `{name}` through your result on {on}", name=name, on=on), hint)
        if not torch.allclose(grad, torch.full_like(t, float(per_element))):
            raise Wrong(_("the gradient of your result's sum with respect to `{name}` is not {per_element} in "
                          "every entry on {on}", name=name, per_element=per_element, on=on),
                        _("every token gets each value once: cls once per image (expand, not a copy per patch), "
                          "pos once per image, x once"))


def cls_cases() -> list[tuple[int, int, int, torch.dtype, bool]]:
    """(batch, n_patches, d_model, dtype, whether x, cls and pos require grad) of every case, the sizes drawn from
    the run's seed (`generator`), so that no size can be known in advance: a batch of one, several images, a
    single patch, float32, inputs that require grad, and one size at a time beyond the usual ones (more images
    than a batch of 256, more patches than ViT-Base's 196 or 256, more features than its 768), so that a size
    fixed in the code fails, as a slice or as a shape. The last case has the sizes of the second, with other
    values: the second pass of a check (`compare.fresh_values`) draws other sizes, so this repeat is what shows an
    answer that remembers its results by shape."""
    g = generator(750)
    draw = lambda low, high: int(torch.randint(low, high + 1, (), generator=g))  # noqa: E731
    f32, f64 = torch.float32, torch.float64
    cases = [
        (1, draw(2, 6), draw(4, 8), f64, False),
        (draw(3, 5), draw(18, 40), draw(6, 10), f64, False),  # more patches than the chapter's 16 (+ 1)
        (2, 1, draw(3, 6), f64, False),
        (4, draw(7, 12), draw(10, 14), f32, False),
        (2, draw(3, 6), draw(4, 8), f64, True),
        (draw(257, 300), 2, 3, f64, False),
        (1, draw(257, 300), 3, f64, False),
        (1, 2, draw(769, 800), f64, False),
    ]
    return cases + [cases[1]]


@exercise("7.3", "Prepend the class token, add the positions", answer_name="prepend_cls",
          section="The class token and the positions",
          references=("attnbook.models.vit.ViT.embed",))
def check_prepend_cls(prepend_cls) -> str:
    """prepend_cls(x, cls, pos) -> torch.cat([cls expanded over the batch, x], dim=1) + pos."""
    cases = cls_cases()
    expect_function(prepend_cls, "prepend_cls", CLS_FORBIDDEN)

    def one(case, runs: list[Run]) -> Run:
        i, (B, N, D, dtype, grad) = case
        x = randn64(B, N, D, seed=750 + i, dtype=dtype)  # (B, N, D)
        cls = randn64(1, 1, D, seed=760 + i, dtype=dtype) + 2.0  # (1, 1, D), unlike any patch
        pos = randn64(1, N + 1, D, seed=770 + i, dtype=dtype)  # (1, N + 1, D)
        kind = "float32" if dtype == torch.float32 else "float64"
        on = (_("{kind} x of shape ({B}, {N}, {D}) (batch {B}, {N} patches), cls (1, 1, {D}) and pos (1, {n_1}, {D})",
                kind=kind, B=B, N=N, D=D, n_1=N + 1) if N > 1 else
              _("{kind} x of shape ({B}, {N}, {D}) (batch {B}, one patch), cls (1, 1, {D}) and pos (1, {n_1}, {D})",
                kind=kind, B=B, N=N, D=D, n_1=N + 1))
        on += _(", all three requiring grad (as in a ViT)") if grad else ""
        if (B, N, D, dtype) in [c[:4] for c in cases[:i]]:
            on += _(", the shapes of an earlier input with other values")
        expected = torch.cat([cls.expand(B, 1, D), x], dim=1) + pos  # (B, N + 1, D)
        mistakes = _cls_mistakes(x, cls, pos)
        for t in (x, cls, pos):
            t.requires_grad_(grad)
        got, grads = call(prepend_cls, x, cls, pos, what="prepend_cls", on=on, forbid=CLS_FORBIDDEN,
                          explain=functools.partial(_cls_error_hint, x=x),
                          observe=Backward({"x": 0, "cls": 1, "pos": 2}) if grad else Nothing())
        hint = _token_count_hint(got, x, cls, pos)
        if hint is None and isinstance(got, Tensor) and tuple(got.shape) != tuple(expected.shape):
            hint = shape_hint(got, mistakes, runs) or (
                _FIXED_SIZE if got.dim() == 3 else _("return one tensor (B, N + 1, D): the class token and the N "
                                                     "patch tokens of each image"))
        if hint is not None:
            raise Wrong(_("your result has shape {tuple_got_shape} on {on}, expected {tuple_expected_shape}",
                          tuple_got_shape=tuple(got.shape), on=on, tuple_expected_shape=tuple(expected.shape)), hint)
        dtype_first(got, expected, "x", _("your result"), on)
        got = expect_like(got, expected, mistakes, runs, what=_("your result"), on=on, dtype=dtype, input_name="x",
                          dtype_hint=DTYPE_HINT)
        run = Run(on, got, expected, mistakes, *tolerance(dtype).values())
        if grad and run.right:
            _check_gradients(got, grads, x, cls, pos, on)
        return run

    verdict(collect(enumerate(cases), one), what=_("your result"), rule=_CLS_RULE)
    return (_("right on {len_cases} inputs, including a batch of one, a single patch, float32 and float64, more "
              "images, patches and features than the usual sizes, and the gradients reach x, cls and pos",
              len_cases=len(cases)))
