"""Checker for exercise 7.2, the patch embedding as a convolution."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ...patches import patchify as _patchify
from ..compare import expect_close
from ..guard import call
from ..runs import Run, collect, expect_shape, verdict
from ..observe import Observer
from ..hints import describe
from ..registry import exercise, Wrong
from ...i18n import N_, _
from ._shared import TOLERANCE, dtype_first, expect_function, randn64, tolerance


CONV_FORBIDDEN = [
    (name, N_("reorder the weight into the Conv2d kernel yourself, and copy it into an nn.Conv2d you create"))
    for name in ("attnbook.patches.unpatchify",  # unpatchify(weight[:, None], P, P, P) is the kernel, ready-made
                 "transformers.models.*.unpatchify")  # ViTMAEForPreTraining.unpatchify: the same, in transformers
]


def _conv_weight(weight: Tensor, C: int, P: int) -> Tensor:
    """The Conv2d kernel (D, C, P, P) equal to a Linear weight (D, P*P*C) whose columns are (row, col, channel)."""
    return weight.reshape(weight.size(0), P, P, C).permute(0, 3, 1, 2)  # (D, P, P, C) -> (D, C, P, P)


_KERNEL_RULE = (N_("the weight's columns run over the patch's pixel rows, then its pixel columns, then the channels "
                   "(innermost); Conv2d's kernel is (output, channel, pixel row, pixel column)"))


def _conv_weight_mistakes(weight: Tensor, C: int, P: int) -> dict[str, Tensor]:
    D = weight.size(0)
    return {
        _("a plain reshape to (D, C, P, P) reads the columns as if they were ordered (channel, row, column), but "
          "patchify orders them (row, column, channel), channels innermost: split them in that order, then permute "
          "the channel axis to where Conv2d wants it"): weight.reshape(D, C, P, P),
        _("the rows and columns of your kernel are swapped: Conv2d wants (output, channel, pixel row, pixel column)"):
            weight.reshape(D, P, P, C).permute(0, 3, 2, 1),
        _("weight is already (d_model, P*P*C), the (out_features, in_features) layout of nn.Linear: do not "
          "transpose it before reshaping"): weight.t().reshape(D, P, P, C).permute(0, 3, 1, 2),
        _("transposing and then reshaping to (D, C, P, P) mixes up every axis: weight is (d_model, P*P*C) with "
          "columns ordered (row, column, channel)"): weight.t().reshape(D, C, P, P),
    }


def _conv_error_hint(message: str) -> str | None:
    if "leaf Variable that requires grad" in message:
        return (_("copy into the parameters inside `with torch.no_grad():` (conv.weight.copy_(...), "
                  "conv.bias.copy_(bias)), or assign new parameters made from copies: nn.Parameter(t.clone()); "
                  "without .clone(), a parameter made from weight or bias, or from a reshape or permute of it, "
                  "shares the caller's tensor"))
    if "must match the size of tensor" in message or "doesn't match the broadcast shape" in message:
        return (_("nn.Conv2d takes in_channels (C, the image channels) first and out_channels (D, d_model) second, "
                  "both worked out from weight's shape and patch_size (not fixed numbers); its weight has shape "
                  "(D, C, P, P) and its bias (D,): reorder weight (D, P*P*C) into that shape before copying it in"))
    return None


def _pair(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


def _check_conv_structure(conv, C: int, P: int, D: int, on: str) -> None:
    """Wrong unless `conv` is an nn.Conv2d(C, D, kernel_size=P, stride=P) with a bias, no padding or dilation."""
    if isinstance(conv, Tensor):
        hint = (_("that tensor looks like the kernel: copy it into the weight of an nn.Conv2d you create (and bias "
                  "into its bias), and return the convolution") if tuple(conv.shape) == (D, C, P, P) else
                _("return an nn.Conv2d you create, with the weights copied in"))
        raise Wrong(_("patch_embedding_as_conv returned a tensor of shape {tuple_conv_shape} on {on}, expected "
                      "an nn.Conv2d", tuple_conv_shape=tuple(conv.shape), on=on), hint)
    if conv is None:
        raise Wrong(_("patch_embedding_as_conv returned None on {on}, expected an nn.Conv2d", on=on),
                    _("did you forget `return conv`?"))
    if not isinstance(conv, nn.Conv2d):
        raise Wrong(_("patch_embedding_as_conv returned {describe_conv} on {on}, expected an nn.Conv2d",
                      describe_conv=describe(conv), on=on),
                    _("return the convolution module itself, an nn.Conv2d with the weights copied in"))
    got = (conv.in_channels, conv.out_channels)
    if got != (C, D):
        hint = (_("in_channels and out_channels are swapped: nn.Conv2d(in_channels=C, out_channels=D, ...)")
                if got == (D, C) else
                _("in_channels is the number of image channels C, which you work out from weight's shape and "
                  "patch_size (a patch vector holds P*P*C values), and out_channels is d_model, weight's first size"))
        raise Wrong(_("your Conv2d has in_channels={in_channels} and out_channels={out_channels} on {on}, "
                      "expected in_channels={C} (image channels) and out_channels={D} (d_model)",
                      in_channels=conv.in_channels, out_channels=conv.out_channels, on=on, C=C, D=D), hint)
    if _pair(conv.kernel_size) != (P, P):
        raise Wrong(_("your Conv2d has kernel_size={pair_conv_kernel_size} on {on}, expected ({P}, {P})",
                      pair_conv_kernel_size=_pair(conv.kernel_size), on=on, P=P),
                    _("kernel_size=patch_size: each output position must see exactly one P x P patch"))
    if _pair(conv.stride) != (P, P):
        hint = (_("with stride 1 the kernel slides one pixel at a time, so the windows overlap and there are "
                  "(H-P+1)(W-P+1) outputs instead of one per patch: stride=patch_size")
                if _pair(conv.stride) == (1, 1) else
                _("stride=patch_size: the kernel must jump a whole patch at a time, so the windows tile the image"))
        raise Wrong(_("your Conv2d has stride={pair_conv_stride} on {on}, expected ({P}, {P})",
                      pair_conv_stride=_pair(conv.stride), on=on, P=P), hint)
    if conv.padding not in ("valid", (0, 0), 0) or _pair(conv.dilation) != (1, 1) or conv.groups != 1:
        raise Wrong(_("your Conv2d has padding={padding!r}, dilation={dilation}, groups={groups} on {on}, "
                      "expected no padding, dilation 1 and groups 1",
                      padding=conv.padding, dilation=conv.dilation, groups=conv.groups, on=on),
                    _("keep nn.Conv2d's defaults for padding, dilation and groups: patches do not overlap or skip pixels"))
    if conv.bias is None:
        raise Wrong(_("your Conv2d has no bias on {on}", on=on),
                    _("the linear projection adds `bias`: create the Conv2d with bias=True (the default) and copy "
                      "`bias` into conv.bias"))
    if tuple(conv.weight.shape) != (D, C, P, P):
        raise Wrong(_("your Conv2d's weight has shape {tuple_conv_weight_shape} on {on}, expected ({D}, {C}, "
                      "{P}, {P})", tuple_conv_weight_shape=tuple(conv.weight.shape), on=on, D=D, C=C, P=P),
                    _("Conv2d kernels are (out_channels, in_channels, P, P)"))


def _check_conv_dtype(conv: nn.Conv2d, dtype: torch.dtype, on: str) -> None:
    """Wrong unless the Conv2d's parameters have the dtype of `weight` (copy_ would round float64 silently)."""
    for name, param in (("weight", conv.weight), ("bias", conv.bias)):
        if param.dtype != dtype:
            raise Wrong(_("your Conv2d's {name} has dtype {dtype} on {on}, expected {dtype2}, the dtype of "
                          "`weight`", name=name, dtype=param.dtype, on=on, dtype2=dtype),
                        _("create the convolution in the dtype of the weights you copy into it (dtype=weight.dtype). "
                          "Without dtype= it is "
                          "float32, and copy_ silently rounds float64 weights; a fixed dtype=torch.float64 is wrong "
                          "for float32 weights"))


def _storage_span(t) -> tuple[int, int] | None:
    """The range of memory addresses [start, end) of the storage under the tensor `t`, or None (no tensor, or an
    empty storage)."""
    if not isinstance(t, Tensor):
        return None
    try:
        storage = t.untyped_storage()
        start, size = storage.data_ptr(), storage.nbytes()
    except Exception:  # noqa: BLE001 - a tensor without a readable storage shares nothing we can see
        return None
    return (start, start + size) if size else None


class SharedParameters(Observer):
    """[[parameter, argument], ...]: the parameters of the returned module (`parameters`, by name) whose storage
    overlaps the storage of an argument (`arguments`, {name: position}): a parameter made from a view of an input
    (reshape, permute, nn.Parameter(t), .data = t) instead of a copy."""

    def __init__(self, parameters: list[str], arguments: dict[str, int]):
        self.params = {"parameters": list(parameters), "arguments": dict(arguments)}

    def read(self, output, args, kwargs):
        parameters = getattr(output, "_parameters", None) if isinstance(output, nn.Module) else None
        if not isinstance(parameters, dict):
            return []
        shared = []
        for name in self.params["parameters"]:
            span = _storage_span(parameters.get(name))
            if span is None:
                continue
            for arg_name, position in sorted(self.params["arguments"].items(), key=lambda item: item[1]):
                other = _storage_span(args[position]) if position < len(args) else None
                if other is not None and span[0] < other[1] and other[0] < span[1]:
                    shared.append([name, arg_name])
        return shared


def _check_bias_and_output(conv, shared, weight: Tensor, bias: Tensor, shape, P: int, dtype, on: str, *,
                           seed: int) -> None:
    """Wrong unless conv's bias is `bias`, its parameters are its own (`shared`: what SharedParameters read beside
    the call), and conv(images) equals patchify(images) @ weight.T + bias (its weight already checked)."""
    got_bias = conv.bias.detach()
    dtype_first(got_bias, bias, "weight", _("your Conv2d's bias"), on)
    if not torch.allclose(got_bias.double(), bias.double(), **tolerance(dtype)):
        hint = (_("your bias is all zeros: copy `bias` into conv.bias") if not got_bias.any() else
                _("nn.Conv2d starts with a random bias of its own: copy `bias` into conv.bias"))
        raise Wrong(_("your Conv2d's bias is not `bias` on {on}", on=on), hint)
    if shared:
        name, arg_name = shared[0]
        raise Wrong(_("your Conv2d's {name} shares its memory with the `{arg_name}` you were given on {on}: changing "
                      "one changes the other, so training the convolution would change the Linear layer's "
                      "{arg_name} too", name=name, arg_name=arg_name, on=on),
                    _("copy the values into the Conv2d, as the task says: reshape, permute, view, .contiguous(), "
                      ".detach(), .data = t and nn.Parameter(t) keep t's memory. Copy with conv.weight.copy_(...) "
                      "and conv.bias.copy_(bias) inside `with torch.no_grad():`, or wrap a copy: "
                      "nn.Parameter(t.clone())"))
    images = randn64(*shape, seed=seed, dtype=dtype)  # (B, C, H, W)
    with torch.no_grad():
        out = call(conv, images, what=_("your Conv2d"), on=_("images of shape {shape}", shape=shape))  # (B, D, H/P, W/P)
    expected = _patchify(images.double(), P) @ weight.double().T + bias.double()  # (B, N, D)
    if not isinstance(out, Tensor) or out.dim() != 4:
        raise Wrong(_("your Conv2d returned {describe_out} on images of shape {shape}, expected a 4-D tensor",
                      describe_out=describe(out), shape=shape),
                    _("return an ordinary nn.Conv2d, without changing its forward"))
    out_tol = 1e-4 if dtype == torch.float32 else TOLERANCE[dtype]  # float32 sums of P*P*C products
    expect_close(out.flatten(2).transpose(1, 2), expected, what="conv(images).flatten(2).transpose(1, 2)",
                 on=_("images of shape {shape} and {on}", shape=shape, on=on), atol=out_tol, rtol=out_tol)


@exercise("7.2", "The patch embedding as a convolution", answer_name="patch_embedding_as_conv",
          section="Patchify plus a matrix is a convolution",
          references=("attnbook.patches.PatchEmbedding.to_conv", "attnbook.patches.PatchEmbedding.from_conv",
                      "attnbook.patches.PatchEmbedding"))
def check_patch_embedding_as_conv(patch_embedding_as_conv) -> str:
    """patch_embedding_as_conv(weight, bias, patch_size) -> nn.Conv2d equal to patchify(images) @ weight.T + bias."""
    cases = [  # (C, P, D, image shape, dtype): RGB first, where every weight-layout mistake changes the result
        (3, 2, 8, (2, 3, 4, 6), torch.float32),
        (2, 3, 5, (1, 2, 6, 9), torch.float64),
        (1, 4, 6, (2, 1, 8, 4), torch.float32),
        (4, 1, 3, (2, 4, 3, 2), torch.float64),
    ]
    expect_function(patch_embedding_as_conv, "patch_embedding_as_conv", CONV_FORBIDDEN)

    def one(case, runs: list[Run]) -> Run:
        i, (C, P, D, shape, dtype) = case
        weight = randn64(D, P * P * C, seed=720 + i, dtype=dtype)  # (D, P*P*C), channels innermost
        bias = randn64(D, seed=730 + i, dtype=dtype) + 1.0  # (D,), far from 0
        kind = "float32" if dtype == torch.float32 else "float64"
        on = _("{kind} weight ({D}, {p_p_c}) for d_model={D}, C={C}, patch_size={P}, and bias ({D},)",
               kind=kind, D=D, p_p_c=P * P * C, C=C, P=P)
        conv, shared = call(patch_embedding_as_conv, weight, bias, P, what="patch_embedding_as_conv", on=on,
                            forbid=CONV_FORBIDDEN, explain=_conv_error_hint,
                            observe=SharedParameters(["weight", "bias"], {"weight": 0, "bias": 1}))
        _check_conv_structure(conv, C, P, D, on)
        _check_conv_dtype(conv, dtype, on)
        kernel = _conv_weight(weight, C, P)  # (D, C, P, P)
        mistakes = _conv_weight_mistakes(weight, C, P)
        dtype_first(conv.weight.detach(), kernel, "weight", _("your Conv2d's weight"), on)  # no float32 on the way
        got = expect_shape(conv.weight.detach(), kernel, mistakes, runs, what=_("your Conv2d's weight"), on=on)
        run = Run(on, got, kernel, mistakes, *tolerance(dtype).values())
        if run.right:
            _check_bias_and_output(conv, shared, weight, bias, shape, P, dtype, on, seed=740 + i)
        return run

    verdict(collect(enumerate(cases), one), what=_("your Conv2d's weight"), rule=_KERNEL_RULE)
    return (_("the Conv2d equals patchify(images) @ weight.T + bias on {len_cases} inputs, from 1 to 4 channels, "
              "patch sizes 1 to 4, in float32 and float64", len_cases=len(cases)))
