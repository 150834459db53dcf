"""Checkers for chapter 4, residual connections, LayerNorm and the Transformer block."""
from __future__ import annotations

import functools
import itertools

import torch
from torch import Tensor, nn

from ..layers import EncoderBlock, LayerNorm
from .runs import (GRAD_HINT, Run, collect, compare_gradients, expect_gradients, expect_shape, grad_inputs,
                   verdict)
from .compare import expect_int, randn
from .guard import call
from .registry import exercise, NotAttempted, Wrong

_ATOL64, _RTOL64 = 1e-8, 1e-7  # float64 inputs: tight enough to tell eps inside the sqrt from eps outside it


_randn = functools.partial(randn, dtype=torch.float64)


def _randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Random values for every parameter: torch's ones and zeros would hide a forgotten gamma, beta or bias."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    return module


def _tolerance(x: Tensor) -> tuple[float, float]:
    """(atol, rtol) for a result in x's dtype."""
    return (_ATOL64, _RTOL64) if x.dtype == torch.float64 else (1e-5, 1e-4)


def _expect_dtype(got, x: Tensor, what: str, on: str) -> None:
    """Wrong if `got` is a floating-point tensor of the right shape but another dtype than the input `x`."""
    if (isinstance(got, Tensor) and got.is_floating_point() and tuple(got.shape) == tuple(x.shape)
            and got.dtype != x.dtype):
        name = str(x.dtype).removeprefix("torch.")
        raise Wrong(f"{what} has dtype {got.dtype} on {on}, expected {x.dtype} like the input",
                    f"return the dtype of x (here {name}): no .float(), .double() or .half() casts, and no "
                    "constants of another dtype")


# ---------------------------------------------------------------------------------------------------------
# 4.1  LayerNorm from scratch
# ---------------------------------------------------------------------------------------------------------

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
LAYER_NORM_FORBIDDEN = [(name, "no built-in normalisation routine here: compute the mean and the biased variance "
                                "over the last dimension yourself, with tensor operations")
                        for name in NORMALISATION_ROUTINES]

NO_EPS_HINT = ("you left out eps: divide by sqrt(var + eps), which also keeps a token whose features are all equal "
               "from dividing 0 by 0")
LN_RULE = ("each vector along the last dimension: subtract its mean, divide by sqrt(variance + eps) with the variance "
           "dividing by d, then multiply by gamma and add beta")


def _norm_stats(x: Tensor, dims, correction: int = 0) -> tuple[Tensor, Tensor]:
    return x.mean(dim=dims, keepdim=True), x.var(dim=dims, keepdim=True, correction=correction)


def _layer_norm_mistakes(x: Tensor, gamma: Tensor, beta: Tensor, eps: float) -> dict:
    """What common mistakes return on this input (in float64), keyed by the hint for each (first match wins)."""
    x, gamma, beta = x.double(), gamma.double(), beta.double()
    mean, var = _norm_stats(x, -1)
    centred = x - mean
    x_hat = centred / torch.sqrt(var + eps)
    out = {}
    if x.size(-1) > 1:
        out["you used the unbiased variance, which divides by d - 1 (the default of torch.var and torch.std); "
            "LayerNorm's variance divides by d"] = centred / torch.sqrt(x.var(-1, keepdim=True) + eps) * gamma + beta
        out["you divided by the unbiased standard deviation plus eps: LayerNorm divides by the square root of the "
            "biased variance (divide by d) plus eps"] = centred / (x.std(-1, keepdim=True) + eps) * gamma + beta
    for dims, name in (((0,), "the wrong dimension (dim=0)"), ((-2,), "the wrong dimension (dim=-2, the positions)"),
                       (tuple(range(x.dim())), "all dimensions at once")):
        told = x.dim() >= 2 + (dims == (-2,))  # dim=-2 of a 2-D input is dim=0: told on 3-D inputs only
        m, v = _norm_stats(x, dims) if told else (None, None)
        out[f"you normalised over {name}; LayerNorm normalises each token over its own features, the last "
            "dimension (dim=-1, with keepdim=True)"] = (x - m) / torch.sqrt(v + eps) * gamma + beta if told else None
    out.update({
        "eps goes inside the square root, added to the variance, not to the standard deviation":
            centred / (torch.sqrt(var) + eps) * gamma + beta,
        NO_EPS_HINT: centred / torch.sqrt(var) * gamma + beta,  # refined by _eps_diagnosis: eps**2 looks the same
        "use the eps argument of your function, not a fixed 1e-5": centred / torch.sqrt(var + 1e-5) * gamma + beta,
        "you forgot gamma and beta: after normalising, scale by gamma and shift by beta": x_hat,
        "you forgot to multiply by gamma, the scale of the normalised values": x_hat + beta,
        "you forgot to add beta, the shift of the normalised values": x_hat * gamma,
        "gamma and beta are swapped: gamma scales (multiply), beta shifts (add)": x_hat * beta + gamma,
        "you did not subtract the mean (that is RMSNorm): LayerNorm centres each vector on its mean first":
            x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gamma + beta,
        "subtract the mean before dividing (your variance is right, the numerator is not centred)":
            x / torch.sqrt(var + eps) * gamma + beta,
        "divide by the standard deviation sqrt(var + eps), not by the variance": centred / (var + eps) * gamma + beta,
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
        atol, rtol = _tolerance(t)
        return got is not None and torch.allclose(got, want, atol=atol, rtol=rtol)

    if default_used and close(run(x, 1e-5), x, _norm_stats(x, -1)[1] + 1e-5):
        return ("with eps=1e-5 given by name your function is right, so its default is wrong: keep the signature "
                "layer_norm(x, gamma, beta, eps=1e-5), PyTorch's default")
    probe = _randn(*x.shape, seed=49, dtype=x.dtype) * 0.1 + 1  # variance about 0.01, well below eps = 0.1
    eps = 0.1
    got, var = run(probe, eps), _norm_stats(probe, -1)[1]
    for hint, denominator in {
        NO_EPS_HINT: var,
        "add eps itself to the variance, not eps ** 2: sqrt(var + eps)": var + eps ** 2,
        "eps is added to the variance, not used as a lower bound for it: sqrt(var + eps), not "
        "sqrt(max(var, eps))": var.clamp_min(eps),
    }.items():
        if close(got, probe, denominator):
            return hint
    return None


def _layer_norm_error_hint(message: str) -> str | None:
    if "must match the size" in message or "size of tensor" in message:
        return ("two shapes do not line up. The mean and the variance need keepdim=True to broadcast against x "
                "(x.mean(dim=-1, keepdim=True)), and gamma and beta, of shape (d,), broadcast over the last "
                "dimension as they are: use them without reshaping")
    if "unexpected keyword argument 'eps'" in message:
        return "keep the signature layer_norm(x, gamma, beta, eps=1e-5): the check passes eps by name, eps=0.1"
    return None


@exercise("4.1", "LayerNorm from scratch", section="Normalise each token over its features",
          references=("attnbook.layers.LayerNorm",))
def check_layer_norm(layer_norm) -> str:
    """layer_norm(x, gamma, beta, eps=1e-5) must equal nn.LayerNorm over the last dimension."""
    constant = _randn(3, 4, seed=46)
    constant[1] = 2.5  # token 1: every feature equal, so its variance is 0
    cases = [
        ("x of shape (4, 6)", _randn(4, 6, seed=41) * 2 + 1, None),
        ("x of shape (2, 3, 5), a batch of sequences", _randn(2, 3, 5, seed=42) * 3 - 2, None),
        ("x of shape (8,), a single token", _randn(8, seed=43) + 4, None),
        ("x of shape (1, 1, 7), a batch of one sequence of one token", _randn(1, 1, 7, seed=44), None),
        ("x of shape (3, 5) whose features vary by about 0.01 (variance about 1e-4, not far above eps)",
         _randn(3, 5, seed=45) * 0.01 + 1, None),
        ("x of shape (3, 4) in which token 1 has all its features equal (variance 0)", constant, None),
        ("x of shape (2, 6) with eps=0.1", _randn(2, 6, seed=47), 0.1),
        ("x of shape (2, 3, 6) in float32 with a large mean (about 1000)",
         _randn(2, 3, 6, seed=48, dtype=torch.float32) + 1000, None),
    ]

    def one(case, runs):
        i, (desc, x, eps) = case
        d = x.size(-1)
        gamma, beta = _randn(d, seed=100 + i, dtype=x.dtype) + 1, _randn(d, seed=200 + i, dtype=x.dtype)
        on = desc + f" (and random gamma, beta of shape ({d},))"
        by_name = {} if eps is None else {"eps": eps}  # eps is a keyword with a default, as in the task
        args = (x, gamma, beta)
        if i == 0:  # the first case also backpropagates, to x, gamma and beta (checked once the values are right)
            leaves[:], args = grad_inputs(args, GRADS)
        got = call(layer_norm, *args, **by_name, what="layer_norm", on=on, forbid=LAYER_NORM_FORBIDDEN,
                   explain=_layer_norm_error_hint)
        outputs.append(got)
        eps_ = 1e-5 if eps is None else eps
        ref = nn.functional.layer_norm(x.double(), (d,), gamma.double(), beta.double(), eps_)  # PyTorch's own
        _expect_dtype(got, x, "your result", on)
        mistakes = _layer_norm_mistakes(x, gamma, beta, eps_)
        got = expect_shape(got, ref, mistakes, runs, what="your result", on=on)
        # float32 keeps about 7 digits of x ~ 1000: the centred values keep about 4 (E[x^2] - E[x]^2 keeps none)
        return Run(on, got, ref, mistakes, *(_tolerance(x) if x.dtype == torch.float64 else (1e-3, 1e-3)))

    leaves, outputs = [], []
    runs = collect(enumerate(cases), one, all_cases=False)  # every call costs: stop at the first wrong one
    try:
        verdict(runs, what="your result", rule=LN_RULE,
                nan_hint="a token whose features are all equal has variance 0: add eps inside the square root, "
                         "sqrt(var + eps), so that you never divide by 0")
    except Wrong as e:
        # Where the variance is far above eps, no eps, eps ** 2 and max(var, eps) all look alike, and a wrong
        # default eps looks like a small error: ask an input where eps matters which one it is.
        i = next(k for k, r in enumerate(runs) if not r.right)
        _, x, eps = cases[i]
        if e.hint in (NO_EPS_HINT, LN_RULE):
            d = x.size(-1)
            gamma, beta = _randn(d, seed=100 + i, dtype=x.dtype) + 1, _randn(d, seed=200 + i, dtype=x.dtype)
            hint = _eps_diagnosis(layer_norm, x, gamma, beta, default_used=eps is None) if (
                e.hint == NO_EPS_HINT or eps is None) else None
            if hint is None and e.hint == NO_EPS_HINT:
                hint = ("on this input your result equals the one without eps, as if eps had no effect: LayerNorm "
                        "divides by sqrt(var + eps), eps added to the variance")
            if hint is not None:
                raise Wrong(e.message, hint) from None
        raise
    compare_gradients(outputs[0], leaves, GRADS, _layer_norm_ref, what="layer_norm", on=runs[0].on)
    return f"matches nn.LayerNorm on {len(cases)} inputs, including a single token, a zero-variance token and float32"


GRADS = {0: "x", 1: "gamma", 2: "beta"}


def _layer_norm_ref(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """Two-pass LayerNorm by hand (its backward needs no kernel set-up, unlike F.layer_norm's first call)."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps) * gamma + beta


# ---------------------------------------------------------------------------------------------------------
# 4.2  The position-wise feed-forward network
# ---------------------------------------------------------------------------------------------------------

FFN_FORBIDDEN = [(name, "write both layers yourself, with @ and the bias additions")
                 for name in ("attnbook.layers.FeedForward", "torch.nn.functional.linear", "torch.nn.Linear",
                              "torch.nn.functional.bilinear")]


def _ffn_mistakes(x: Tensor, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor) -> dict:
    x, W1, b1, W2, b2 = (t.double() for t in (x, W1, b1, W2, b2))
    relu, gelu, F = torch.relu, torch.nn.functional.gelu, torch.nn.functional
    z = x @ W1 + b1  # (..., d_ff)
    out = {
        "that is GELU; this exercise uses ReLU, the original paper's activation": gelu(z) @ W2 + b2,
        "that is the tanh approximation of GELU; this exercise uses ReLU": gelu(z, approximate="tanh") @ W2 + b2,
        "that is a leaky ReLU; ReLU is max(0, z), exactly 0 for every negative z": F.leaky_relu(z) @ W2 + b2,
        "ReLU has no upper limit: max(0, z), not relu6 or a clamp with a maximum": F.relu6(z) @ W2 + b2,
        "the ReLU comes only between the two layers: the second layer's output has no activation":
            relu(relu(z) @ W2 + b2),
        "you left out the activation: without a ReLU between them, the two layers collapse into one linear map":
            z @ W2 + b2,
        "you forgot the first bias b1, added before the ReLU": relu(x @ W1) @ W2 + b2,
        "you forgot the second bias b2, added after the second matrix product": relu(z) @ W2,
        "you forgot both biases, b1 and b2": relu(x @ W1) @ W2,
        "add b1 before the ReLU, not after it": (relu(x @ W1) + b1) @ W2 + b2,
        "the ReLU acts on the hidden layer (after W1 and b1), not on the input": (relu(x) @ W1 + b1) @ W2 + b2,
        "the feed-forward network has no residual connection of its own: return its output alone (the block adds "
        "the residual around it)": x + relu(z) @ W2 + b2,
    }
    if W1.size(0) == W1.size(1):  # square matrices: a transpose or a swap runs and gives a wrong answer
        transposed = ("W1 and W2 are given as (in, out), so they are used as given, with no transpose (nn.Linear "
                      "stores (out, in); these are already the other way round)")
        out[transposed] = relu(x @ W1.T + b1) @ W2.T + b2
        out[transposed + " (you transposed W1)"] = relu(x @ W1.T + b1) @ W2 + b2
        out[transposed + " (you transposed W2)"] = relu(z) @ W2.T + b2
        out["W1 and W2 are swapped: W1 (d, d_ff) comes first, then W2 (d_ff, d)"] = relu(x @ W2 + b1) @ W1 + b2
    return out


def _ffn_error_hint(message: str) -> str | None:
    if any(s in message for s in ("cannot be multiplied", "size mismatch", "must match the size", "size of tensor")):
        return ("follow the shapes: x is (..., d), W1 (d, d_ff), b1 (d_ff,), W2 (d_ff, d) and b2 (d,). W1 comes "
                "first, and both are used as given, (in, out), with no transpose")
    return None


@exercise("4.2", "The position-wise feed-forward network", section="The position-wise feed-forward network",
          references=("attnbook.layers.FeedForward",))
def check_feed_forward(feed_forward) -> str:
    """feed_forward(x, W1, b1, W2, b2) must equal relu(x @ W1 + b1) @ W2 + b2 on several shapes."""
    cases = [  # (description, shape of x, d_ff, scale of x)
        ("x of shape (5, 4) with d=4, d_ff=8", (5, 4), 8, 1.0),
        ("x of shape (2, 3, 6), a batch of sequences, with d=6, d_ff=10", (2, 3, 6), 10, 1.0),
        ("x of shape (3, 5) with square weights, d = d_ff = 5", (3, 5), 5, 1.0),
        ("x of shape (7,), a single token, with d=7, d_ff=3 (d_ff smaller than d)", (7,), 3, 1.0),
        ("x of shape (1, 1, 4), a batch of one token, with d=4, d_ff=16", (1, 1, 4), 16, 1.0),
        ("x of shape (4, 6) with large values, so that the hidden pre-activations x @ W1 + b1 reach about 40, "
         "with d=6, d_ff=12", (4, 6), 12, 20.0),
        ("x of shape (2, 3, 4) in float32 with d=4, d_ff=8", (2, 3, 4), 8, 1.0),
    ]
    def one(case, runs):
        i, (desc, shape, d_ff, scale) = case
        dtype = torch.float32 if "float32" in desc else torch.float64
        d = shape[-1]
        x = _randn(*shape, seed=50 + i, dtype=dtype) * scale
        W1, b1 = _randn(d, d_ff, seed=60 + i, dtype=dtype) / d ** 0.5, _randn(d_ff, seed=70 + i, dtype=dtype) * 0.5
        W2, b2 = _randn(d_ff, d, seed=80 + i, dtype=dtype) / d_ff ** 0.5, _randn(d, seed=90 + i, dtype=dtype) * 0.5
        on = f"{desc} (W1 {tuple(W1.shape)}, b1 ({d_ff},), W2 {tuple(W2.shape)}, b2 ({d},))"
        got = call(feed_forward, x, W1, b1, W2, b2, what="feed_forward", on=on, forbid=FFN_FORBIDDEN,
                   explain=_ffn_error_hint)
        ref = _ffn_ref(x, W1, b1, W2, b2)  # (..., d)
        _expect_dtype(got, x, "your result", on)
        mistakes = _ffn_mistakes(x, W1, b1, W2, b2)
        got = expect_shape(got, ref, mistakes, runs, what="your result", on=on)
        return Run(on, got, ref, mistakes, *_tolerance(x))

    verdict(collect(enumerate(cases), one), what="your result",
            rule="the result is ReLU(x W1 + b1) W2 + b2, the weights used as given, (in, out)")
    x, W1, b1, W2, b2 = (_randn(*s, seed=k) for k, s in enumerate([(5, 4), (4, 8), (8,), (8, 4), (4,)]))
    expect_gradients(feed_forward, (x, W1, b1, W2, b2), {0: "x", 1: "W1", 2: "b1", 3: "W2", 4: "b2"}, _ffn_ref,
                     what="feed_forward", on=cases[0][0], forbid=FFN_FORBIDDEN)
    return (f"matches relu(x @ W1 + b1) @ W2 + b2 on {len(cases)} inputs, including a single token, d_ff < d and "
            "large hidden values")


def _ffn_ref(x, W1, b1, W2, b2):
    return (x.double() @ W1.double() + b1.double()).clamp(min=0) @ W2.double() + b2.double()


# ---------------------------------------------------------------------------------------------------------
# 4.3  A pre-norm block from its sublayers
# ---------------------------------------------------------------------------------------------------------

BLOCK_FORBIDDEN = [
    (name, "compose the four callables yourself, in the order of the pre-norm diagram")
    for name in ("attnbook.layers.EncoderBlock", "torch.nn.TransformerEncoderLayer")
]


def _block_mistakes(x: Tensor, attn, ffn, norm1, norm2) -> dict[str, Tensor]:
    """What common mistakes return on this input; each hint names the mistake and the rule, not the answer."""
    y = norm1(x)
    a_y, a_x, a_n2 = attn(y), attn(x), attn(norm2(x))  # the attention outputs the mistakes share
    h, z, post_h, half = x + a_y, y + a_y, norm1(x + a_x), 0.5 * (x + a_y)
    out = h + ffn(norm2(h))
    post = ("that is a post-norm block, which normalises after each residual addition; a pre-norm block normalises "
            "only the input of each sublayer and adds the sublayer's output to the un-normalised stream")
    order = "the sublayers come in the other order: attention first, then the feed-forward network, each with its norm"
    return {
        post: norm2(post_h + ffn(post_h)),
        post + " (your second sublayer also reads x instead of h, so the attention output is lost)": norm2(x + ffn(x)),
        post + " (your second residual also starts from x instead of h)": norm2(x + ffn(post_h)),
        "the feed-forward sublayer reads the block's input x: it must read h, the output of the first sublayer "
        "block (attention with its residual), through its own norm": h + ffn(norm2(x)),
        "the second residual starts from x: it must start from h, the output of the first sublayer block; as "
        "written, the attention output never reaches the result": x + ffn(norm2(h)),
        "you forgot the first residual connection: the attention sublayer's output is added to the block's input x":
            a_y + ffn(norm2(a_y)),
        "you forgot the second residual connection: the feed-forward sublayer's output is added to its input "
        "stream h": ffn(norm2(h)),
        "you forgot both residual connections: each sublayer's output is added to the stream it read from":
            ffn(norm2(a_y)),
        "you applied the norms to the sublayer outputs; in a pre-norm block each norm normalises the input of its "
        "sublayer": (x + norm1(a_x)) + norm2(ffn(x + norm1(a_x))),
        "the residual must carry the un-normalised x: normalise only what goes into attn": z + ffn(norm2(z)),
        "the residuals must carry the un-normalised stream: normalise only what goes into each sublayer":
            norm2(z) + ffn(norm2(z)),
        "the second residual must carry the un-normalised h: normalise only what goes into ffn":
            norm2(h) + ffn(norm2(h)),
        "you used norm1 twice: the feed-forward sublayer has its own norm, norm2": h + ffn(norm1(h)),
        "norm1 and norm2 are swapped: norm1 belongs to the attention sublayer, norm2 to the feed-forward sublayer":
            (x + a_n2) + ffn(norm1(x + a_n2)),
        order: (x + ffn(norm1(x))) + attn(norm2(x + ffn(norm1(x)))),
        order + " (yours have the right norms)": (x + ffn(norm2(x))) + attn(norm1(x + ffn(norm2(x)))),
        "you stopped after the attention sublayer: the block goes on with the feed-forward sublayer and its own "
        "residual connection": h,
        "attn returns one tensor, not an (output, weights) tuple: use its result as it is, without [0]":
            (x + a_y[0]) + ffn(norm2(x + a_y[0])),
        "you added the block's input x once more at the end: each residual connection adds a sublayer's output "
        "once, to the stream it read from": out + x,
        "a pre-norm block does not normalise its output: the norms only normalise what goes into the sublayers":
            norm2(out),
        "the residual connections add the sublayer's output to the stream as it is, unscaled (no averaging)":
            0.5 * (half + ffn(norm2(half))),
    }


def _block_error_hint(message: str) -> str | None:
    if "attn takes one tensor of shape (batch, n, d)" in message or "must have shape (batch, seq" in message:
        return ("keep x as it is, (batch, n, d): attention mixes the positions within each sequence, so do not "
                "flatten or reshape x (to (batch * n, d)) before calling attn")
    if "TypeError" in message and ("positional argument" in message or "takes" in message):
        return ("each of attn, ffn, norm1 and norm2 takes one tensor of shape (batch, n, d) and returns one: call "
                "attn with the normalised tensor alone, not attn(q, k, v)")
    if "not subscriptable" in message or "tuple" in message:
        return "attn returns one tensor (not an (output, weights) tuple): use its result directly"
    return None


def _named(fn, name: str, three_d: bool = False):
    """`fn` as a plain function called `name` (what error messages and repr show), taking one tensor; with
    `three_d`, it refuses anything but a (batch, n, d) tensor, as attention does."""

    def sublayer(t):
        if three_d and isinstance(t, Tensor) and t.dim() != 3:
            raise ValueError(f"{name} takes one tensor of shape (batch, n, d), got shape {tuple(t.shape)}")
        return fn(t)

    sublayer.__name__ = sublayer.__qualname__ = name
    return sublayer


def _block_from(block: EncoderBlock) -> tuple:
    """(attn, ffn, norm1, norm2) of a pre-norm EncoderBlock, as one-tensor functions with readable names."""
    return (_named(lambda t: block.self_attn(t, t, t)[0], "attn", three_d=True), _named(block.ffn, "ffn"),
            _named(block.norm1, "norm1"), _named(block.norm2, "norm2"))


def _block_cases():
    """(description, x, attn, ffn, norm1, norm2, reference) for 4.3."""
    cases = []
    # 1. the package's own pieces: reference = the package's pre-norm EncoderBlock
    block = _randomize_(EncoderBlock(8, 2, 16, norm_first=True).double(), seed=31).eval()
    x = _randn(2, 5, 8, seed=32)
    with torch.no_grad():
        ref = block(x)
    cases.append(("x of shape (2, 5, 8) with attn = multi-head self-attention (2 heads), ffn = a ReLU feed-forward "
                  "network 8 -> 16 -> 8, and two LayerNorms with different random gamma and beta",
                  x, *_block_from(block), ref))
    # 2. plain functions that mix positions, batch of one
    A, B, C = _randn(4, 4, seed=33), _randn(4, 6, seed=34), _randn(6, 4, seed=35)
    norm_a, norm_b = _randomize_(LayerNorm(4).double(), seed=36), _randomize_(LayerNorm(4).double(), seed=37)
    x = _randn(1, 3, 4, seed=38)

    def mix(t):
        return torch.softmax(t @ t.transpose(-2, -1), dim=-1) @ t @ A  # (B, n, 4): every position sees the others

    def mlp(t):
        return torch.tanh(t @ B) @ C  # (B, n, 4)

    cases.append(("x of shape (1, 3, 4) with attn(t) = softmax(t t^T) t A, ffn(t) = tanh(t B) C, and two "
                  "LayerNorms", x, _named(mix, "attn", three_d=True), _named(mlp, "ffn"), _named(norm_a, "norm1"),
                  _named(norm_b, "norm2"), None))
    # 3. one token per sequence, odd width
    block3 = _randomize_(EncoderBlock(6, 3, 5, norm_first=True).double(), seed=39).eval()
    x = _randn(3, 1, 6, seed=40)
    cases.append(("x of shape (3, 1, 6), one token per sequence, with attention (3 heads), a feed-forward network "
                  "6 -> 5 -> 6 and two LayerNorms", x, *_block_from(block3), None))
    # 4. float32: the result keeps the input's dtype
    block4 = _randomize_(EncoderBlock(6, 2, 12, norm_first=True), seed=41).eval()
    x = _randn(2, 4, 6, seed=42, dtype=torch.float32)
    cases.append(("x of shape (2, 4, 6) in float32, with attention (2 heads), a feed-forward network 6 -> 12 -> 6 "
                  "and two LayerNorms, all in float32", x, *_block_from(block4), None))
    return cases


@exercise("4.3", "A pre-norm block from its sublayers", section="Pre-norm: GPT-2 and most modern models",
          references=("attnbook.layers.EncoderBlock",))
def check_pre_norm_block(pre_norm_block) -> str:
    """pre_norm_block(x, attn, ffn, norm1, norm2) must equal the pre-norm EncoderBlock made of these pieces."""
    cases = _block_cases()

    def one(case, runs):
        desc, x, attn, ffn, norm1, norm2, ref = case
        with torch.no_grad():
            ref = _block_ref(x, attn, ffn, norm1, norm2) if ref is None else ref  # (B, n, d)
            mistakes = _block_mistakes(x, attn, ffn, norm1, norm2)
            got = call(pre_norm_block, x, attn, ffn, norm1, norm2, what="pre_norm_block", on=desc,
                       forbid=BLOCK_FORBIDDEN, explain=_block_error_hint)
        _expect_dtype(got, x, "your result", desc)
        got = expect_shape(got, ref, mistakes, runs, what="your result", on=desc)
        return Run(desc, got, ref, mistakes, *_tolerance(x))

    verdict(collect(cases, one), what="your result",
            rule="the attention sublayer reads norm1 of the stream and adds its output to the stream; then the "
                 "feed-forward sublayer does the same with norm2")
    desc, x, *sublayers, _ = cases[0]
    expect_gradients(pre_norm_block, (x, *sublayers), {0: "x"}, _block_ref, what="pre_norm_block", on=desc,
                     forbid=BLOCK_FORBIDDEN, explain=_block_error_hint,
                     hint="the gradient must reach x through every path, the residual connections (the skip paths) "
                          "included: " + GRAD_HINT.split(": ", 1)[1])
    return (f"the pre-norm block is right on {len(cases)} inputs, including a batch of one, one token per sequence "
            "and float32")


def _block_ref(x, attn, ffn, norm1, norm2):
    h = x + attn(norm1(x))  # (B, n, d)
    return h + ffn(norm2(h))


# ---------------------------------------------------------------------------------------------------------
# 4.4  The encoder's parameter count
# ---------------------------------------------------------------------------------------------------------

COUNT_HELPERS = ("count_parameters", "mha_param_count", "ffn_param_count", "layer_norm_param_count",
                 "encoder_block_param_count", "encoder_param_count", "bert_param_count", "gpt_param_count", "_linear")
COUNT_FORBIDDEN = [
    (name, "count with a formula, piece by piece: the weights and biases of each piece, from the arguments")
    for name in (*(f"attnbook.models.params.{helper}" for helper in COUNT_HELPERS),
                 "torch.nn.Module.__init__",  # building any module, which is how a model is counted
                 "torch.nn.Module.parameters", "torch.nn.Module.named_parameters", "torch.nn.Module.state_dict",
                 "torch.nn.Module.modules", "torch.nn.Module.named_modules", "torch.nn.Module.children",
                 "torch.nn.Module.named_children")
]
ARGUMENTS = ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers")


def _reference_count(vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> int:
    """Count a real stack: nn.Embedding and n_layers nn.TransformerEncoderLayer (on the meta device: no memory)."""
    with torch.device("meta"):
        embedding = nn.Embedding(vocab_size, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, batch_first=True)
    return embedding.weight.numel() + n_layers * sum(p.numel() for p in layer.parameters())


def _formula(V: int, d: int, h: int, f: int, L: int) -> int:
    """The right count, for reading the learner's arguments in another order (see _count_mistakes)."""
    return V * d + L * (4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d)


def _count_mistakes(V: int, d: int, h: int, f: int, L: int) -> dict[str, int]:
    """What common counting mistakes give, keyed by the hint for each (first match wins)."""
    emb, attn, ffn, norms = V * d, 4 * d * d + 4 * d, 2 * d * f + f + d, 4 * d
    block = attn + ffn + norms
    right, dh = emb + L * block, d // h
    heads = ("; the number of heads does not change the count: the heads are slices of the same four d_model x "
             "d_model projections")
    ffn_b = "the feed-forward biases are d_ff for the first layer and d_model for the second, not 2 * "
    rule = ("12 * n_layers * d_model^2 is a rule of thumb for large models with d_ff = 4 * d_model: it leaves out "
            "the biases and the LayerNorms. Count each piece exactly, with the d_ff argument")
    out = "the encoder has no output layer: count the token embedding once, and no vocab_size x d_model head"
    blocks = {  # what one block counts, for the mistakes inside a block
        "you left out the biases: every Linear layer from a to b features has a*b weights and b biases":
            4 * d * d + 2 * d * f + norms,
        "you counted only the weight matrices: add the biases (one per output feature of every Linear layer) and "
        "the two LayerNorms of each block (d_model scales gamma and d_model shifts beta each)": 4 * d * d + 2 * d * f,
        "your count is 4 * d_model short in every block: either the attention biases are missing (W_q, W_k, W_v "
        "and W_o each have d_model) or the LayerNorms are (two per block, gamma and beta of d_model each)":
            4 * d * d + ffn + norms,
        "you left out the feed-forward biases: d_ff for the first layer and d_model for the second":
            attn + 2 * d * f + norms,
        ffn_b + "d_model": attn + 2 * d * f + 2 * d + norms,
        ffn_b + "d_ff": attn + 2 * d * f + 2 * f + norms,
        "each block has two LayerNorms, each with 2 * d_model parameters (gamma and beta): 4 * d_model per block":
            attn + ffn + 2 * d,
        "each block has two LayerNorms, not three: 4 * d_model per block": attn + ffn + 6 * d,
        "attention has four matrices, W_q, W_k, W_v and the output projection W_o, each d_model x d_model with "
        "d_model biases": 3 * d * d + 3 * d + ffn + norms,
        "you multiplied the attention by n_heads" + heads: h * attn + ffn + norms,
        "you multiplied W_q, W_k and W_v by n_heads" + heads: h * (3 * d * d + 3 * d) + d * d + d + ffn + norms,
        "you multiplied the attention weights by n_heads" + heads: 4 * (h * d * d + d) + ffn + norms,
        "you counted the projections of one head only" + heads: 4 * (d * dh + dh) + ffn + norms,
        "you counted the weights of one head only" + heads: 4 * (d * dh + d) + ffn + norms,
        "you counted W_q, W_k and W_v of one head only" + heads: 3 * (d * dh + dh) + d * d + d + ffn + norms,
        "use the d_ff argument for the feed-forward width, not 4 * d_model": attn + 8 * d * d + 5 * d + norms,
        "the feed-forward network has two layers, d_model -> d_ff and d_ff -> d_model": attn + d * f + f + norms,
        "the feed-forward network has two layers, d_model -> d_ff and d_ff -> d_model, each with its own weights":
            attn + d * f + f + d + norms,
        "W_q, W_k, W_v and W_o each have d_model biases: 4 * d_model attention biases per block, not d_model":
            4 * d * d + d + ffn + norms,
        "W_q, W_k, W_v and W_o each have d_model biases, the output projection W_o too": 4 * d * d + 3 * d + ffn + norms,
    }
    mistakes = {hint: emb + L * count for hint, count in blocks.items()}
    mistakes.update({
        "this encoder uses sinusoidal positions, which have no parameters: no learned positions": right + 512 * d,
        "that is close to BERT's count: this encoder has no learned positions, token types, embedding LayerNorm "
        "or pooler": right + 512 * d + 4 * d + d * d + d,
        "this encoder has no pooler (BERT's d_model x d_model layer with biases on top)": right + d * d + d,
        "this encoder has no final LayerNorm (pre-norm models add one after the last block) and no token-type "
        "embeddings: 2 * d_model too many": right + 2 * d,
        out: right + V * d, out + " (nor its vocab_size biases)": right + V * d + V,
        "you left out the token embedding": right - emb,
        "count the token embedding once, not once per layer": L * (emb + block),
        "multiply the per-block count by n_layers: every block has its own weights": emb + block,
        "you returned one block's count: the encoder is the token embedding plus n_layers blocks": block,
        "count n_layers blocks, not n_layers - 1": emb + (L - 1) * block,
        rule: emb + 12 * L * d * d, rule + ", and add the token embedding": 12 * L * d * d,
        "use the vocab_size argument: you counted a vocabulary of 30,000 whatever vocab_size is": 30000 * d + L * block,
        "use the n_layers argument: you counted 12 blocks whatever n_layers is": emb + 12 * block,
        "you return the chapter encoder's count whatever the arguments: compute it from vocab_size, d_model, d_ff "
        "and n_layers": 108_094_464,
        "the count overflowed a 32-bit integer (at most 2,147,483,647): count with Python ints or 64-bit integers, "
        "not np.int32 or torch.int32": (right + 2**31) % 2**32 - 2**31,
    })
    args = (V, d, h, f, L)
    for order in list(itertools.permutations(range(5)))[1:]:  # the arguments read in another order
        names = [ARGUMENTS[order.index(k)] for k in range(5)]
        mistakes.setdefault(
            "your count is right for the arguments in another order: the check calls encoder_param_count("
            f"{', '.join(ARGUMENTS)}) in this order, and your function reads them as ({', '.join(names)})",
            _formula(*(args[i] for i in order)))
    return mistakes


def _call_count(encoder_param_count, config: tuple, on: str) -> int:
    try:
        got = call(encoder_param_count, *config, what="encoder_param_count", on=on, forbid=COUNT_FORBIDDEN)
    except Wrong as e:
        if "torch.nn.Module.__init__" in e.message:  # say it in the task's words
            raise Wrong(f"encoder_param_count built a torch.nn.Module on {on}: the task asks you to count with a "
                        "formula, without building a model", COUNT_FORBIDDEN[0][1]) from None
        raise
    return expect_int(got, what="encoder_param_count", on=on, numpy_ok=True,
                      hint="a count is a whole number: use integer arithmetic (// instead of /, no ** 0.5, no 1e6)")


@exercise("4.4", "The encoder's parameter count", section="The whole encoder",
          references=("attnbook.models.params.encoder_param_count",))
def check_encoder_param_count(encoder_param_count) -> str:
    """encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers) must equal a real stack's count."""
    configs = [
        (100, 8, 2, 20, 3),
        (50257, 12288, 96, 49152, 96),  # GPT-3's size: about 175 billion, beyond a 32-bit integer
        (1000, 16, 4, 40, 1),
        (37, 12, 1, 20, 2),
        (500, 12, 12, 7, 4),
        (30000, 768, 12, 3072, 12),
    ]
    answers = []  # (configuration, the learner's count, the right count)
    for config in configs:
        on = ", ".join(f"{name}={value}" for name, value in zip(ARGUMENTS, config))
        try:
            got = _call_count(encoder_param_count, config, on)
        except Wrong:
            if any(g != e for _, g, e in answers):  # an earlier configuration was already wrong: report that
                break
            raise
        answers.append((config, got, _reference_count(*config)))
    wrong = [(config, got, expected) for config, got, expected in answers if got != expected]
    if not wrong:
        return (f"right on {len(configs)} configurations, including the chapter's encoder "
                f"({_reference_count(*configs[-1]):,} parameters)")
    config, got, expected = wrong[0]
    if got in (110_100_000, 110_000_000):
        hint = ("110.1M is the popular tutorial's number for the big model, not a count of this model's "
                "parameters: add up the pieces")
    else:  # a mistake is named only if it explains the count on every configuration tried
        tables = [_count_mistakes(*c) for c, _, _ in answers]
        hint = next((hint for hint in tables[0] if all(t.get(hint) == g for t, (_, g, _) in zip(tables, answers))),
                    "count each piece of every block from the arguments: the attention projections, the two "
                    "feed-forward layers and the two LayerNorms, each with its weights and biases")
    raise Wrong(f"encoder_param_count({', '.join(map(str, config))}) returned {got:,}, which is not the number of "
                "parameters of this encoder", hint)
