"""Checker for exercise 11.1, RMSNorm from scratch."""
from __future__ import annotations

import re

import torch
from torch import Tensor

from ..ch05._shared import import_transformers_first
from ..compare import expect_input_dtype
from ..guard import call
from ..registry import exercise
from ..runs import Run, collect, expect_gradients, expect_shape, verdict
from ._shared import F64, HF_NORMS, PRECISION_HINT, near, randn64, tolerance, transformers_pieces
from ...i18n import N_, _

NORMALISATION_ROUTINES = (  # torch's normalisations (op_aliases adds their torch.ops.aten and torch._C routes)
    "torch.nn.functional.rms_norm", "torch.rms_norm", "torch._fused_rms_norm", "torch.nn.RMSNorm",
    "torch._decomp.decompositions._fused_rms_norm",
    "torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm", "torch._VF.layer_norm",
    "torch._refs.native_layer_norm", "torch._refs.nn.functional.layer_norm", "torch.nn.LayerNorm",
    "torch.nn.functional.group_norm", "torch.group_norm", "torch.native_group_norm", "torch.nn.GroupNorm",
    "torch.nn.functional.instance_norm", "torch.instance_norm", "torch.nn.functional.batch_norm", "torch.batch_norm",
    "torch.nn.functional.normalize", "torch._refs._normalize", "torch.nn.functional.local_response_norm",
    "attnbook.layers.LayerNorm",
)
_RMS_INSTEAD = (N_("no built-in normalisation routine here: compute the mean of the squares over the last dimension "
                   "yourself, with tensor operations"))
RMS_FORBIDDEN = [(name, _RMS_INSTEAD) for name in NORMALISATION_ROUTINES]


def rms_norm_forbidden(fn) -> list[tuple[str, str]]:
    """RMS_FORBIDDEN and the RMSNorm of every loaded transformers model (LlamaRMSNorm, MistralRMSNorm, T5LayerNorm,
    ...), each named where the learner would import it from."""
    return RMS_FORBIDDEN + [(path, _RMS_INSTEAD) for path in transformers_pieces(HF_NORMS)]


RMS_RULE = (N_("each vector along the last dimension is divided by sqrt(mean(x**2) + eps), its root mean square with "
               "eps inside the square root, then multiplied by weight; nothing is subtracted and nothing is added"))
EPS_HINT = (N_("eps goes inside the square root, added to the mean of the squares: x / sqrt(mean(x**2) + eps), not "
               "x / (sqrt(mean(x**2)) + eps)"))


def _rms(x: Tensor, dims=(-1,), eps: float = 1e-6) -> Tensor:
    return torch.sqrt((x * x).mean(dim=dims, keepdim=True) + eps)


def _rms_mistakes(x: Tensor, weight: Tensor, eps: float, eps_given: bool) -> dict:
    """What common mistakes return on this input (float64), keyed by the hint (the first that fits every case wins).
    A value of None: the mistake cannot be told on this input (it fits whatever the answer returned)."""
    x, w = x.to(F64), weight.to(F64)
    ms = (x * x).mean(dim=-1, keepdim=True)
    rms = torch.sqrt(ms + eps)
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    out = {
        _("you subtracted the mean: that is LayerNorm. RMSNorm divides x itself by its root mean square, "
          "sqrt(mean(x**2) + eps), with no centring (and no bias)"): (x - mean) / torch.sqrt(var + eps) * w,
        _("do not subtract the mean: RMSNorm divides x itself, not x - mean, by sqrt(mean(x**2) + eps)"):
            (x - mean) / rms * w,
        _("you divided by the standard deviation (the variance around the mean); RMSNorm divides by the root mean "
          "square, sqrt(mean(x**2) + eps), the mean of the squares of x itself"): x / torch.sqrt(var + eps) * w,
        EPS_HINT: x / (torch.sqrt(ms) + eps) * w,
        _("you left out eps: divide by sqrt(mean(x**2) + eps), which also keeps a token whose features are all 0 from "
          "dividing 0 by 0"): x / torch.sqrt(ms) * w,
        _("add eps itself inside the square root, not eps ** 2"): x / torch.sqrt(ms + eps ** 2) * w,
        _("eps is added to the mean of the squares, not used as a lower bound for it: sqrt(mean(x**2) + eps), not "
          "sqrt(max(mean(x**2), eps))"): x / torch.sqrt(ms.clamp_min(eps)) * w,
        _("use the eps argument of your function, not a fixed 1e-6: the check passes eps=0.1 by name"):
            x / torch.sqrt(ms + 1e-6) * w if eps_given else None,
        _("keep the default eps=1e-6 (Llama's RMSNorm), not 1e-5 (LayerNorm's)"):
            None if eps_given else x / torch.sqrt(ms + 1e-5) * w,
        _("keep the default eps=1e-6 (Llama's RMSNorm), not 1e-8"):
            None if eps_given else x / torch.sqrt(ms + 1e-8) * w,
        _("divide by the square root of mean(x**2) + eps, not by mean(x**2) + eps itself"): x / (ms + eps) * w,
        _("divide by the root mean square: you multiplied by it"): x * rms * w,
        _("you used the mean of |x|; RMSNorm divides by the root mean square, sqrt(mean(x**2) + eps)"):
            x / (x.abs().mean(dim=-1, keepdim=True) + eps) * w,
        _("you summed the squares (the length of the vector); RMSNorm takes their mean, dividing the sum by d"):
            x / torch.sqrt((x * x).sum(dim=-1, keepdim=True) + eps) * w,
        _("you forgot the weight: multiply the normalised x by weight, feature by feature"): x / rms,
        _("the weight multiplies (it is a scale), it is not added"): x / rms + w,
        _("the weight multiplies as it is: x / rms * weight. Scaling by (1 + weight) is Gemma's variant, whose "
          "weights are stored minus 1"): x / rms * (1 + w),
        _("RMSNorm returns only the normalised, scaled x: do not add x back (the block adds the residual)"):
            x + x / rms * w,
    }
    for dims, name in (((0,), _("the wrong dimension (dim=0)")),
                       ((-2,), _("the wrong dimension (dim=1 of a batch (batch, n, d), the positions)")),
                       (tuple(range(x.dim())), _("all dimensions at once"))):
        told = x.dim() >= 2 + (dims == (-2,))  # dim=-2 of a 2-D input is dim=0: told on 3-D inputs only
        out[_("you normalised over {name}; RMSNorm normalises each token over its own features, the last "
              "dimension (dim=-1, with keepdim=True)", name=name)] = x / _rms(x, dims, eps) * w if told else None
    for k in (0, 1):  # d read from a fixed place of the shape: right for one input dimension only
        told = x.dim() > k and x.shape[k] != x.shape[-1]
        out[_("the mean divides the sum of the squares by d, the size of the last dimension, x.shape[-1]; you "
              "divided by x.shape[{k}]", k=k)] = \
            x / torch.sqrt((x * x).sum(dim=-1, keepdim=True) / x.shape[k] + eps) * w if told else None
    return out


def _rms_error_hint(message: str) -> str | None:
    if re.search(r"Dimension out of range|dim=-?\d+ is out of range", message):
        return (_("x may be a single token (d,), a sequence (n, d) or a batch (batch, n, d): take the mean over "
                  "dim=-1, the last dimension, which every one of them has (a fixed dim=1 or dim=2 exists only on "
                  "some of them)"))
    if "tuple index out of range" in message:
        return (_("x may be a single token of shape (d,), which has one dimension only: read d as x.shape[-1], the "
                  "size of the last dimension, or let mean(dim=-1) divide by it"))
    if "must match the size" in message or "size of tensor" in message:
        return (_("two shapes do not line up. The mean of the squares needs keepdim=True to broadcast against x "
                  "(mean(dim=-1, keepdim=True)), and weight, of shape (d,), broadcasts over the last dimension as it "
                  "is: use it without reshaping"))
    if "unexpected keyword argument 'eps'" in message:
        return _("keep the signature rms_norm(x, weight, eps=1e-6): the check passes eps by name, eps=0.1")
    return None


def _rms_cases() -> list[tuple[str, Tensor, float | None]]:
    """(description, x, eps or None for the default). Every x has a mean far from 0, so that LayerNorm's centring
    shows; one has a mean square near eps, so that where eps goes shows with the default eps too."""
    zeros = randn64(3, 4, seed=116) + 1.5
    zeros[1] = 0.0  # token 1: every feature 0
    return [
        (_("x of shape (4, 6) with a mean of about 2"), randn64(4, 6, seed=111) * 1.5 + 2, None),
        (_("x of shape (2, 3, 8), a batch of sequences, with a mean of about -1"), randn64(2, 3, 8, seed=112) * 2 - 1,
         None),
        (_("x of shape (8,), a single token"), randn64(8, seed=113) + 3, None),
        (_("x of shape (3, 5) with tiny values (mean square about 2e-6, close to eps = 1e-6)"),
         (randn64(3, 5, seed=114) + 1) * 1e-3, None),
        (_("x of shape (3, 4) in which token 1 has every feature 0"), zeros, None),
        (_("x of shape (2, 6) with eps=0.1"), randn64(2, 6, seed=115) * 0.5 + 0.3, 0.1),
        (_("x of shape (2, 3, 6) in float32"), randn64(2, 3, 6, seed=117, dtype=torch.float32) + 1, None),
    ]


@exercise("11.1", "RMSNorm from scratch", answer_name="rms_norm", section="RMSNorm: LayerNorm without the mean",
          references=("attnbook.models.llama.RMSNorm",))
def check_rms_norm(rms_norm) -> str:
    """rms_norm(x, weight, eps=1e-6) must equal x / sqrt(mean(x**2, -1) + eps) * weight."""
    cases = _rms_cases()

    def one(case, runs):
        i, (desc, x, eps) = case
        d = x.size(-1)
        weight = randn64(d, seed=130 + i, dtype=x.dtype) * 0.5 + 1
        on = desc + _(" (and a random weight of shape ({d},))", d=d)
        by_name = {} if eps is None else {"eps": eps}  # eps is a keyword with a default, as in the task
        got = call(rms_norm, x, weight, **by_name, what="rms_norm", on=on, forbid=rms_norm_forbidden,
                   explain=_rms_error_hint, prepare=import_transformers_first)
        eps_ = 1e-6 if eps is None else eps
        ref = _rms_ref(x.to(F64), weight.to(F64), eps_)
        expect_input_dtype(got, x, what=_("your result"), on=on)
        mistakes = _rms_mistakes(x, weight, eps_, eps is not None)
        mistakes[_(PRECISION_HINT)] = near(ref)  # last: any mistake above that fits is the better hint
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=on)
        return Run(on, got, ref, mistakes, *tolerance(x))

    runs = collect(enumerate(cases), one)
    verdict(runs, what=_("your result"), rule=RMS_RULE,
            nan_hint=_("a token whose features are all 0 has mean square 0: add eps inside the square root, "
                       "sqrt(mean(x**2) + eps), so that you never divide by 0"))
    x, weight = randn64(4, 6, seed=111) * 1.5 + 2, randn64(6, seed=130) * 0.5 + 1
    expect_gradients(rms_norm, (x, weight), {0: "x", 1: "weight"}, _rms_ref, what="rms_norm", on=cases[0][0],
                     forbid=rms_norm_forbidden)
    return (_("matches RMSNorm on {len_cases} inputs (float64 to a relative 1e-12), including a single token, an "
              "all-zero token, a mean square close to eps, eps=0.1 and float32", len_cases=len(cases)))


def _rms_ref(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight
