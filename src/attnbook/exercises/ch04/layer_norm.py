"""Checker for exercise 4.1, LayerNorm from scratch."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..compare import expect_input_dtype
from ..guard import call
from ..registry import exercise, NotAttempted, Wrong
from ..runs import Run, collect, compare_gradients, expect_shape, grad_inputs, observe_gradients, verdict
from ._shared import randn64, tolerance
from ...i18n import N_, _


NORMALISATION_ROUTINES = (  # every built-in normalisation; torch.ops.aten and torch._C._nn routes come with them
    "torch.nn.functional.layer_norm", "torch.nn.functional.group_norm", "torch.nn.functional.instance_norm",
    "torch.nn.functional.batch_norm", "torch.nn.functional.rms_norm", "torch.nn.functional.local_response_norm",
    "torch.nn.functional.normalize",
    "torch.layer_norm", "torch.native_layer_norm", "torch.group_norm", "torch.native_group_norm",
    "torch.instance_norm", "torch.batch_norm", "torch.native_batch_norm", "torch._native_batch_norm_legit",
    "torch._native_batch_norm_legit_no_training", "torch._batch_norm_impl_index", "torch.batch_norm_stats",
    "torch.batch_norm_elemt", "torch.cudnn_batch_norm", "torch.miopen_batch_norm", "torch.rms_norm",
    "torch._fused_rms_norm", "torch.ops.aten._batch_norm_with_update", "torch.ops.aten._batch_norm_no_update",
    "torch._VF.layer_norm", "torch._VF.group_norm", "torch._VF.instance_norm", "torch._VF.batch_norm",
    "torch._refs.native_layer_norm", "torch._refs.native_group_norm", "torch._refs._normalize",
    "torch._refs.nn.functional.layer_norm", "torch._refs.nn.functional.group_norm",
    "torch._decomp.decompositions.native_batch_norm", "torch._decomp.decompositions._native_batch_norm_legit",
    "torch._decomp.decompositions._fused_rms_norm",
    "torch.nn.LayerNorm", "torch.nn.GroupNorm", "torch.nn.RMSNorm", "torch.nn.LocalResponseNorm",
    "torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d", "torch.nn.SyncBatchNorm",
    "torch.nn.LazyBatchNorm1d", "torch.nn.LazyBatchNorm2d", "torch.nn.LazyBatchNorm3d",
    "torch.nn.InstanceNorm1d", "torch.nn.InstanceNorm2d", "torch.nn.InstanceNorm3d",
    "torch.nn.LazyInstanceNorm1d", "torch.nn.LazyInstanceNorm2d", "torch.nn.LazyInstanceNorm3d",
    "attnbook.layers.LayerNorm",
)
LAYER_NORM_FORBIDDEN = [(name, N_("no built-in normalisation routine here: compute the mean and the biased variance "
                                  "over the last dimension yourself, with tensor operations"))
                        for name in NORMALISATION_ROUTINES]

NO_EPS_HINT = (N_("you left out eps: divide by sqrt(var + eps), which also keeps a token whose features are all equal "
                  "from dividing 0 by 0"))
LN_RULE = (N_("each vector along the last dimension: subtract its mean, divide by sqrt(variance + eps) with the "
              "variance dividing by d, then multiply by gamma and add beta"))


def _norm_stats(x: Tensor, dims, correction: int = 0) -> tuple[Tensor, Tensor]:
    return x.mean(dim=dims, keepdim=True), x.var(dim=dims, keepdim=True, correction=correction)


def _gamma_beta(i: int, x: Tensor) -> tuple[Tensor, Tensor]:
    """Case i's random gamma (around 1) and beta, of shape (d,) in x's dtype."""
    d = x.size(-1)
    return randn64(d, seed=100 + i, dtype=x.dtype) + 1, randn64(d, seed=200 + i, dtype=x.dtype)


def _layer_norm_mistakes(x: Tensor, gamma: Tensor, beta: Tensor, eps: float) -> dict:
    """What common mistakes return on this input (in float64), keyed by the hint for each (first match wins)."""
    x, gamma, beta = x.double(), gamma.double(), beta.double()
    mean, var = _norm_stats(x, -1)
    centred = x - mean
    x_hat = centred / torch.sqrt(var + eps)
    out = {}
    if x.size(-1) > 1:
        out[_("you used the unbiased variance, which divides by d - 1 (the default of torch.var and torch.std); "
              "LayerNorm's variance divides by d")] = centred / torch.sqrt(x.var(-1, keepdim=True) + eps) * gamma + beta
        out[_("you divided by the unbiased standard deviation plus eps: LayerNorm divides by the square root of the "
              "biased variance (divide by d) plus eps")] = centred / (x.std(-1, keepdim=True) + eps) * gamma + beta
    for dims, name in (((0,), _("the wrong dimension (dim=0)")),
                       ((-2,), _("the wrong dimension (dim=-2, the positions)")),
                       (tuple(range(x.dim())), _("all dimensions at once"))):
        told = x.dim() >= 2 + (dims == (-2,))  # dim=-2 of a 2-D input is dim=0: told on 3-D inputs only
        m, v = _norm_stats(x, dims) if told else (None, None)
        out[_("you normalised over {name}; LayerNorm normalises each token over its own features, the last "
              "dimension (dim=-1, with keepdim=True)",
              name=name)] = (x - m) / torch.sqrt(v + eps) * gamma + beta if told else None
    out.update({
        _("eps goes inside the square root, added to the variance, not to the standard deviation"):
            centred / (torch.sqrt(var) + eps) * gamma + beta,
        NO_EPS_HINT: centred / torch.sqrt(var) * gamma + beta,  # refined by _eps_diagnosis: eps**2 looks the same
        _("use the eps argument of your function, not a fixed 1e-5"): centred / torch.sqrt(var + 1e-5) * gamma + beta,
        _("you forgot gamma and beta: after normalising, scale by gamma and shift by beta"): x_hat,
        _("you forgot to multiply by gamma, the scale of the normalised values"): x_hat + beta,
        _("you forgot to add beta, the shift of the normalised values"): x_hat * gamma,
        _("gamma and beta are swapped: gamma scales (multiply), beta shifts (add)"): x_hat * beta + gamma,
        _("you did not subtract the mean (that is RMSNorm): LayerNorm centres each vector on its mean first"):
            x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gamma + beta,
        _("subtract the mean before dividing (your variance is right, the numerator is not centred)"):
            x / torch.sqrt(var + eps) * gamma + beta,
        _("divide by the standard deviation sqrt(var + eps), not by the variance"):
            centred / (var + eps) * gamma + beta,
    })
    return out


def _eps_diagnosis(layer_norm, x: Tensor, gamma: Tensor, beta: Tensor, default_used: bool) -> str | None:
    """How `layer_norm`, wrong on `x`, uses eps: asked again on `x` with eps=1e-5 given by name (a wrong default),
    then on an input of the same shape where eps matters (variance about 0.01, eps=0.1). None if in no known way."""

    def run(t: Tensor, eps: float) -> Tensor | None:
        try:
            got = call(layer_norm, t, gamma, beta, eps=eps, what="layer_norm", forbid=LAYER_NORM_FORBIDDEN)
        except (Wrong, NotAttempted):
            return None
        ok = isinstance(got, Tensor) and tuple(got.shape) == tuple(t.shape) and got.is_floating_point()
        return got.detach().to(torch.float64) if ok else None

    def close(got: Tensor | None, t: Tensor, denominator: Tensor) -> bool:
        mean = t.mean(dim=-1, keepdim=True)
        want = ((t - mean) / torch.sqrt(denominator) * gamma + beta).to(torch.float64)
        atol, rtol = tolerance(t)
        return got is not None and torch.allclose(got, want, atol=atol, rtol=rtol)

    if default_used and close(run(x, 1e-5), x, _norm_stats(x, -1)[1] + 1e-5):
        return (_("with eps=1e-5 given by name your function is right, so its default is wrong: keep the signature "
                  "layer_norm(x, gamma, beta, eps=1e-5), PyTorch's default"))
    probe = randn64(*x.shape, seed=49, dtype=x.dtype) * 0.1 + 1  # variance about 0.01, well below eps = 0.1
    eps = 0.1
    got, var = run(probe, eps), _norm_stats(probe, -1)[1]
    for hint, denominator in {
        NO_EPS_HINT: var,
        _("add eps itself to the variance, not eps ** 2: sqrt(var + eps)"): var + eps ** 2,
        _("eps is added to the variance, not used as a lower bound for it: sqrt(var + eps), not "
          "sqrt(max(var, eps))"): var.clamp_min(eps),
    }.items():
        if close(got, probe, denominator):
            return hint
    return None


def _layer_norm_error_hint(message: str) -> str | None:
    if "must match the size" in message or "size of tensor" in message:
        return (_("two shapes do not line up. The mean and the variance need keepdim=True to broadcast against x "
                  "(x.mean(dim=-1, keepdim=True)), and gamma and beta, of shape (d,), broadcast over the last "
                  "dimension as they are: use them without reshaping"))
    if "unexpected keyword argument 'eps'" in message:
        return _("keep the signature layer_norm(x, gamma, beta, eps=1e-5): the check passes eps by name, eps=0.1")
    return None


@exercise("4.1", "LayerNorm from scratch", answer_name="layer_norm", section="Normalise each token over its features",
          references=("attnbook.layers.LayerNorm",))
def check_layer_norm(layer_norm) -> str:
    """layer_norm(x, gamma, beta, eps=1e-5) must equal nn.LayerNorm over the last dimension."""
    constant = randn64(3, 4, seed=46)
    constant[1] = 2.5  # token 1: every feature equal, so its variance is 0
    cases = [
        (_("x of shape (4, 6)"), randn64(4, 6, seed=41) * 2 + 1, None),
        (_("x of shape (2, 3, 5), a batch of sequences"), randn64(2, 3, 5, seed=42) * 3 - 2, None),
        (_("x of shape (8,), a single token"), randn64(8, seed=43) + 4, None),
        (_("x of shape (1, 1, 7), a batch of one sequence of one token"), randn64(1, 1, 7, seed=44), None),
        (_("x of shape (3, 5) whose features vary by about 0.01 (variance about 1e-4, not far above eps)"),
         randn64(3, 5, seed=45) * 0.01 + 1, None),
        (_("x of shape (3, 4) in which token 1 has all its features equal (variance 0)"), constant, None),
        (_("x of shape (2, 6) with eps=0.1"), randn64(2, 6, seed=47), 0.1),
        (_("x of shape (2, 3, 6) in float32 with a large mean (about 1000)"),
         randn64(2, 3, 6, seed=48, dtype=torch.float32) + 1000, None),
    ]

    def one(case, runs):
        i, (desc, x, eps) = case
        d = x.size(-1)
        gamma, beta = _gamma_beta(i, x)
        on = desc + _(" (and random gamma, beta of shape ({d},))", d=d)
        by_name = {} if eps is None else {"eps": eps}  # eps is a keyword with a default, as in the task
        args = (x, gamma, beta)
        observe = None
        if i == 0:  # the first case also backpropagates, to x, gamma and beta (checked once the values are right)
            leaves[:], args = grad_inputs(args, GRADS)
            observe = observe_gradients(leaves, GRADS, _layer_norm_ref)
        got = call(layer_norm, *args, **by_name, what="layer_norm", on=on, forbid=LAYER_NORM_FORBIDDEN,
                   explain=_layer_norm_error_hint, observe=observe)
        if observe is not None:
            got, grads[:] = got[0], [got[1]]
        outputs.append(got)
        eps_ = 1e-5 if eps is None else eps
        ref = nn.functional.layer_norm(x.double(), (d,), gamma.double(), beta.double(), eps_)  # PyTorch's own
        expect_input_dtype(got, x, what=_("your result"), on=on, same_shape=True)
        mistakes = _layer_norm_mistakes(x, gamma, beta, eps_)
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=on)
        # float32 keeps about 7 digits of x ~ 1000: the centred values keep about 4 (E[x^2] - E[x]^2 keeps none)
        return Run(on, got, ref, mistakes, *(tolerance(x) if x.dtype == torch.float64 else (1e-3, 1e-3)))

    leaves, outputs, grads = [], [], []
    runs = collect(enumerate(cases), one, all_cases=False)  # every call costs: stop at the first wrong one
    try:
        verdict(runs, what=_("your result"), rule=LN_RULE,
                nan_hint=_("a token whose features are all equal has variance 0: add eps inside the square root, "
                           "sqrt(var + eps), so that you never divide by 0"))
    except Wrong as e:
        # Where the variance is far above eps, no eps, eps ** 2 and max(var, eps) all look alike, and a wrong
        # default eps looks like a small error: ask an input where eps matters which one it is.
        i = next(k for k, r in enumerate(runs) if not r.right)
        _unused, x, eps = cases[i]
        hint = None
        if e.hint == NO_EPS_HINT or (e.hint == LN_RULE and eps is None):
            hint = _eps_diagnosis(layer_norm, x, *_gamma_beta(i, x), default_used=eps is None)
        if hint is None and e.hint == NO_EPS_HINT:
            hint = (_("on this input your result equals the one without eps, as if eps had no effect: LayerNorm "
                      "divides by sqrt(var + eps), eps added to the variance"))
        if hint is None:
            raise
        raise Wrong(e.message, hint) from None
    compare_gradients(outputs[0], grads[0], leaves, GRADS, _layer_norm_ref, what="layer_norm", on=runs[0].on)
    return _("matches nn.LayerNorm on {len_cases} inputs, including a single token, a zero-variance token and "
             "float32", len_cases=len(cases))


GRADS = {0: "x", 1: "gamma", 2: "beta"}


def _layer_norm_ref(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """Two-pass LayerNorm by hand (its backward needs no kernel set-up, unlike F.layer_norm's first call)."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps) * gamma + beta
