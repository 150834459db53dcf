"""Chapter 4 (residuals, LayerNorm, feed-forward, blocks, parameter counts): learner answers to 4.1-4.4, one table
per exercise; most rows are the exercise's learner template (`ln`, `ff`, `pnb`, `epc`) with one mistake switched
on."""
from __future__ import annotations

import functools
import math
import types

import numpy as np
import torch
import torch.nn.functional as F

import attnbook.layers as _layers
from attnbook.models import params as _params
from mutants import RIGHT, WRONG, fresh_import, function_copy, right, table, wrong

_layers2, _params2 = fresh_import(_layers, "layers_ch04"), fresh_import(_params, "params_ch04")


class _Wrap(torch.nn.Module):
    """A module around a plain function: what a learner puts into a torch layer in place of its own sublayers."""

    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, t, *args, **kwargs):
        return (self.f(t), None) if args else self.f(t)


# ---------------------------------------------------------------------------------------------------------------
# 4.1 layer_norm(x, gamma, beta, eps=1e-5)
# ---------------------------------------------------------------------------------------------------------------

_DENOMINATORS = {  # ln's eps_at: what the centred x is divided by, from the variance v
    "inside": lambda v, eps: torch.sqrt(v + eps), "outside": lambda v, eps: torch.sqrt(v) + eps,
    "squared": lambda v, eps: torch.sqrt(v + eps ** 2), "clamp": lambda v, eps: torch.sqrt(v.clamp(min=eps)),
    "maximum": lambda v, eps: torch.sqrt(torch.maximum(v, torch.full_like(v, eps))),
    "no root": lambda v, eps: v + eps, "none": lambda v, eps: torch.sqrt(v),
}
_AFFINE = {  # ln's affine: how gamma and beta apply to the normalised x
    "both": lambda x, g, b: x * g + b, "none": lambda x, g, b: x, "no gamma": lambda x, g, b: x + b,
    "no beta": lambda x, g, b: x * g, "swapped": lambda x, g, b: x * b + g,
    "columns": lambda x, g, b: x * g[:, None] + b[:, None],
}


def ln(var="biased", dim=-1, keepdim=True, centre="both", eps_at="inside", fixed_eps=None, default_eps=1e-5,
       affine="both", in_place=False, detach=False, compute_in=None, cast_back=False):
    """4.1's learner template: a layer_norm with the named mistakes switched on (the defaults: a right answer).
    var: "biased", "unbiased" (torch.var's default, divides by d - 1) or "moments" (E[x^2] - E[x]^2); dim: the
    dimension normalised over (None: all at once); keepdim=False: the mean and variance lose their dimension;
    centre: "both", "variance" (x itself divided) or "none" (RMSNorm); eps_at and affine: keys of _DENOMINATORS
    and _AFFINE; fixed_eps: a number used instead of the eps argument; default_eps: eps's default; in_place:
    x.sub_(mean); detach: the statistics from x.detach(); compute_in: a dtype that x, gamma and beta are cast to
    first; cast_back: the result cast back to x's dtype."""
    def layer_norm(x, gamma, beta, eps=default_eps):
        eps = eps if fixed_eps is None else fixed_eps
        dtype = x.dtype
        if compute_in is not None:
            x, gamma, beta = x.to(compute_in), gamma.to(compute_in), beta.to(compute_in)

        def average(t):
            return t.mean() if dim is None else t.mean(dim=dim, keepdim=True)

        stats = x.detach() if detach else x
        mean = 0 if centre == "none" else average(stats)
        centred = x.sub_(mean) if in_place else stats - mean
        if var == "unbiased":
            v = stats.var(dim=dim, keepdim=True)
        elif var == "moments":
            v = average(stats * stats) - mean * mean
        else:
            v = average(centred ** 2)
        numerator = centred if in_place else (x if centre == "variance" else x - mean)
        if not keepdim:  # the statistics lose their dimension and broadcast along the wrong axis
            numerator, v = x - x.mean(dim=dim), v.squeeze(dim)
        out = _AFFINE[affine](numerator / _DENOMINATORS[eps_at](v, eps), gamma, beta)
        return out.to(dtype) if cast_back else out
    return layer_norm


def _copied_in(norm_class, x, gamma, beta, eps):
    """A norm module of `norm_class` built for x, with gamma and beta copied in, run on x."""
    norm = norm_class(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        return norm(x)


def _stand_in_norm(x, gamma, beta, eps):
    return types.SimpleNamespace(d_model=x.shape[-1], eps=eps, weight=gamma, bias=beta)


_ln_forward_copy = function_copy(_layers.LayerNorm.forward, "forward")


@right("4.1")  # the first right answer (the generated entries are named after it), so registered before the table
def layer_norm(x, gamma, beta, eps=1e-5):
    """torch.var(unbiased=False) via var_mean(correction=0)"""
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return (x - mean) * torch.rsqrt(var + eps) * gamma + beta


table("4.1", [
    ("torch.var with its default correction (divides by d - 1)", "unbiased variance", ln(var="unbiased")),
    ("(x - mean) / (x.std() + eps), torch's default std", "unbiased standard deviation plus eps",
     ln(var="unbiased", eps_at="outside")),
    ("adds eps outside the square root: (x - mean) / (std + eps)", "eps goes inside the square root",
     ln(eps_at="outside")),
    ("ignores the eps argument: always 1e-5", "use the eps argument", ln(fixed_eps=1e-5)),
    ("normalises over dim 0 (BatchNorm's axis)", "normalised over the wrong dimension (dim=0)", ln(dim=0)),
    ("normalises over dim=1 (the features of a 2-D x, but the positions of a 3-D one)",
     "normalised over the wrong dimension (dim=-2, the positions)", ln(dim=1)),
    ("normalises over dim=-2 (the positions)", "the wrong dimension", ln(dim=-2)),
    ("normalises over every dimension at once (mean of the whole tensor)", "normalised over all dimensions at once",
     ln(dim=None)),
    ("forgets keepdim=True (broadcasts the (n,) means along the wrong axis)", "keepdim=True", ln(keepdim=False)),
    ("forgets gamma and beta", "forgot gamma and beta", ln(affine="none")),
    ("forgets gamma only", "multiply by gamma", ln(affine="no gamma")),
    ("forgets beta only", "add beta", ln(affine="no beta")),
    ("swaps gamma and beta", "gamma and beta are swapped", ln(affine="swapped")),
    ("gamma and beta as columns (gamma[:, None]): broadcasts along the wrong axis", WRONG, ln(affine="columns")),
    ("RMSNorm: does not subtract the mean", "RMSNorm", ln(centre="none")),
    ("right variance, but divides x itself (not centred)", "subtract the mean before dividing",
     ln(centre="variance")),
    ("divides by the variance, not its square root", "not by the variance", ln(eps_at="no root")),
    ("adds eps squared to the variance", "not eps ** 2", ln(eps_at="squared")),
    ("clamps the variance at eps instead of adding eps: max(var, eps)", "lower bound", ln(eps_at="clamp")),
    ("no eps at all: divides by the plain standard deviation (NaN left as it is)", "you left out eps",
     ln(eps_at="none")),
    ("no eps at all, NaN turned into 0 with nan_to_num", "you left out eps",
     lambda x, gamma, beta, eps=1e-5: torch.nan_to_num(ln(eps_at="none", affine="none")(x, gamma, beta)) * gamma
     + beta),
    ("default eps of 1e-6 instead of the asked 1e-5", "so its default is wrong", ln(default_eps=1e-6)),
    ("default eps of 1e-12 (BERT's) instead of the asked 1e-5", "so its default is wrong", ln(default_eps=1e-12)),
    ("default eps of 0 (no eps unless one is given)", "so its default is wrong", ln(default_eps=0.0)),
    ("subtracts the mean in place (x.sub_), changing the caller's x", "in place", ln(in_place=True)),
    ("casts to float32 (x.float()) and returns float32", "dtype torch.float32", ln(compute_in=torch.float32)),
    ("returns float64 (.double() at the end)",
     "return the dtype of x (here float32): no .float(), .double() or .half() casts",
     lambda x, gamma, beta, eps=1e-5: ln()(x, gamma, beta, eps).double()),
    ("returns float16 (.half() at the end)",
     "return the dtype of x (here float64): no .float(), .double() or .half() casts",
     lambda x, gamma, beta, eps=1e-5: ln()(x, gamma, beta, eps).half()),
    ("returns float32 (.float() at the end)",
     "return the dtype of x (here float64): no .float(), .double() or .half() casts",
     lambda x, gamma, beta, eps=1e-5: ln()(x, gamma, beta, eps).float()),
    ("computes in float32 and casts back (loses float64 precision)", "significant digits",
     ln(compute_in=torch.float32, cast_back=True)),
    ("E[x^2] - E[x]^2 in x's own dtype (cancels catastrophically for large means)", "in float32 with a large mean",
     ln(var="moments")),
    ("detaches the statistics (mean and variance computed on x.detach(): wrong gradients)",
     "gradient of layer_norm's result with respect to x is wrong", ln(detach=True)),
    ("returns a NumPy array", WRONG, lambda x, gamma, beta, eps=1e-5: ln()(x, gamma, beta, eps).numpy()),
    ("uses the variance of the 2-D case only: x.view(-1, d) then forgets to reshape back", WRONG,
     lambda x, gamma, beta, eps=1e-5: ln()(x.reshape(-1, x.shape[-1]), gamma, beta, eps)),
    ("gamma and beta reshaped to columns with reshape(-1, 1)",
     "gamma and beta, of shape (d,), broadcast over the last dimension as they are: use them without reshaping",
     lambda x, gamma, beta, eps=1e-5: ln(affine="none")(x, gamma, beta, eps) * gamma.reshape(-1, 1)
     + beta.reshape(-1, 1)),
    ("max(var, eps) with torch.maximum", "not used as a lower bound",
     ln(eps_at="maximum")),
    ("calls F.layer_norm", "the task asks you to write this without",
     lambda x, gamma, beta, eps=1e-5: F.layer_norm(x, x.shape[-1:], gamma, beta, eps)),
    ("calls torch.layer_norm", "the task asks you to write this without",
     lambda x, gamma, beta, eps=1e-5: torch.layer_norm(x, [x.shape[-1]], gamma, beta, eps)),
    ("torch.native_layer_norm (the aten op behind F.layer_norm)", "without",
     lambda x, gamma, beta, eps=1e-5: torch.native_layer_norm(x, [x.shape[-1]], gamma, beta, eps)[0]),
    ("group_norm with one group over a (N, d) view", "without",
     lambda x, gamma, beta, eps=1e-5: F.group_norm(x.reshape(-1, x.shape[-1], 1), 1, gamma, beta, eps).reshape(
         x.shape)),
    ("builds nn.LayerNorm and copies gamma and beta in", "without",
     lambda x, gamma, beta, eps=1e-5: _copied_in(torch.nn.LayerNorm, x, gamma, beta, eps)),
    ("a fresh nn.LayerNorm, then gamma and beta applied by hand", "the task asks you to write this without",
     lambda x, gamma, beta, eps=1e-5: torch.nn.LayerNorm(x.shape[-1], eps=eps).to(x.dtype)(x) * gamma + beta),
    ("builds attnbook.layers.LayerNorm and copies gamma and beta in", "package's own",
     lambda x, gamma, beta, eps=1e-5: _copied_in(_layers.LayerNorm, x, gamma, beta, eps)),
    ("LayerNorm from a second, separate import of attnbook/layers.py", "package's own",
     lambda x, gamma, beta, eps=1e-5: _copied_in(_layers2.LayerNorm, x, gamma, beta, eps)),
    ("a lambda around attnbook.layers.LayerNorm.forward", "package's own",
     lambda x, gamma, beta, eps=1e-5: _layers.LayerNorm.forward(_stand_in_norm(x, gamma, beta, eps), x)),
    ("a FunctionType copy of attnbook.layers.LayerNorm.forward, called on a stand-in self", "package's own",
     lambda x, gamma, beta, eps=1e-5: _ln_forward_copy(_stand_in_norm(x, gamma, beta, eps), x)),
    ("E[x^2] - E[x]^2 in float64, cast back to x's dtype", RIGHT,
     ln(var="moments", compute_in=torch.float64, cast_back=True)),
    ("torch.std(correction=0), then sqrt(std^2 + eps)", RIGHT,
     lambda x, gamma, beta, eps=1e-5: (x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(
         x.std(dim=-1, keepdim=True, correction=0) ** 2 + eps) * gamma + beta),
    ("functools.partial of a by-hand layer_norm with eps=1e-5 bound by name", RIGHT, functools.partial(ln(), eps=1e-5)),
    ("eps as a keyword-only parameter", RIGHT, lambda x, gamma, beta, *, eps=1e-5: ln()(x, gamma, beta, eps)),
])


@wrong("4.1", hint="calls attnbook.layers.LayerNorm")
def layer_norm(x, gamma, beta, eps=1e-5):
    """imports attnbook.layers.LayerNorm inside the function, then applies gamma and beta by hand"""
    from attnbook.layers import LayerNorm
    return LayerNorm(x.shape[-1], eps).to(x.dtype)(x) * gamma + beta


@wrong("4.1", hint="without torch.nn.LayerNorm")
def layer_norm(x, gamma, beta, eps=1e-5):
    """nn.LayerNorm imported from the module that defines it, with gamma and beta copied in"""
    from torch.nn.modules.normalization import LayerNorm
    return _copied_in(LayerNorm, x, gamma, beta, eps) + 0 * (gamma.sum() + beta.sum())


@right("4.1")
def layer_norm(x, gamma, beta, eps=1e-5):
    """plain arithmetic with sum / d, no keepdim (unsqueeze instead)"""
    d = x.shape[-1]
    mean = x.sum(-1).unsqueeze(-1) / d
    centred = x - mean
    var = (centred * centred).sum(-1).unsqueeze(-1) / d
    return gamma * centred / (var + eps) ** 0.5 + beta


@wrong("4.1", hint="gradient")
def layer_norm(x, gamma, beta, eps=1e-5, *, dim=-1):
    """a Python loop over the vectors of a flattened view, extra keyword, math.sqrt(float(v))

    Flipped from right to wrong: float(v) takes the variance out of the autograd graph, so the gradient with
    respect to x misses the path through the variance (the task now says the check backpropagates)."""
    d = x.shape[-1]
    rows = x.reshape(-1, d)
    out = torch.empty_like(rows)
    for i in range(rows.shape[0]):
        r = rows[i]
        m = r.mean()
        v = ((r - m) ** 2).sum() / d
        out[i] = (r - m) / math.sqrt(float(v) + eps) * gamma + beta
    return out.reshape(x.shape)


@right("4.1")
def layer_norm(x, gamma, beta, eps=1e-5, *, dim=-1):
    """a Python loop over the vectors of a flattened view with torch.sqrt, stacked, extra keyword"""
    d = x.shape[-1]
    rows = x.reshape(-1, d)
    out = []
    for r in rows:
        m = r.mean()
        v = ((r - m) ** 2).sum() / d
        out.append((r - m) / torch.sqrt(v + eps) * gamma + beta)
    return torch.stack(out).reshape(x.shape)


# ---------------------------------------------------------------------------------------------------------------
# 4.2 feed_forward(x, W1, b1, W2, b2)
# ---------------------------------------------------------------------------------------------------------------

def ff(act=torch.relu, act_at="hidden", forget=(), transpose=(), swap=False, only_square=False, residual=False,
       hidden_only=False, detach=False, compute_in=None, cast_back=False):
    """4.2's learner template: relu(x @ W1 + b1) @ W2 + b2 with the named mistakes switched on (the defaults: a
    right answer). act_at: where the activation goes; forget: pieces left out ("b1", "b2", "activation");
    transpose: weights used transposed; swap: W2 first; only_square: the swap or transpose only where the shapes
    allow it (square weights), right elsewhere; compute_in: a dtype every input is cast to first."""
    def feed_forward(x, W1, b1, W2, b2):
        dtype = x.dtype
        if compute_in is not None:
            x, W1, b1, W2, b2 = (t.to(compute_in) for t in (x, W1, b1, W2, b2))
        if not only_square or W1.shape[0] == W1.shape[1]:
            W1, W2 = (W2, W1) if swap else (W1, W2)
            W1, W2 = W1.T if "W1" in transpose else W1, W2.T if "W2" in transpose else W2
        b1, b2 = 0 if "b1" in forget else b1, 0 if "b2" in forget else b2
        inp, f = x.detach() if detach else x, (lambda z: z) if "activation" in forget else act
        if act_at == "input":
            h = f(inp) @ W1 + b1
        elif act_at == "before bias":
            h = f(inp @ W1) + b1
        else:
            h = f(inp @ W1 + b1)
        if hidden_only:
            return h
        out = act(h @ W2 + b2) if act_at == "hidden and output" else h @ W2 + b2
        out = x + out if residual else out
        return out.to(dtype) if cast_back else out
    return feed_forward


def _linear_copy(x, W1, b1, W2, b2, linear=torch.nn.Linear):
    """Two `linear` layers (nn.Linear) with the weights copied in, run on x."""
    d, d_ff = W1.shape
    fc1, fc2 = linear(d, d_ff).to(x.dtype), linear(d_ff, d).to(x.dtype)
    with torch.no_grad():
        fc1.weight.copy_(W1.T), fc1.bias.copy_(b1), fc2.weight.copy_(W2.T), fc2.bias.copy_(b2)
        return fc2(torch.relu(fc1(x)))


def _package_ffn(layers, x, W1, b1, W2, b2):
    """FeedForward of the module `layers` with the weights copied in, run on x."""
    d, d_ff = W1.shape
    ffn = layers.FeedForward(d, d_ff).to(x.dtype)
    with torch.no_grad():
        ffn.fc1.weight.copy_(W1.T), ffn.fc1.bias.copy_(b1), ffn.fc2.weight.copy_(W2.T), ffn.fc2.bias.copy_(b2)
        return ffn(x)


def _ff_self(W1, b1, W2, b2):
    return types.SimpleNamespace(fc1=lambda t: t @ W1 + b1, fc2=lambda t: t @ W2 + b2,
                                 activation="relu", dropout=lambda t: t)


_ff_forward_copy = function_copy(_layers.FeedForward.forward, "forward")

table("4.2", [
    ("GELU instead of ReLU", "that is GELU", ff(act=F.gelu)),
    ("GELU, tanh approximation", "tanh approximation of GELU", ff(act=lambda z: F.gelu(z, approximate="tanh"))),
    ("leaky ReLU", "that is a leaky ReLU", ff(act=lambda z: F.leaky_relu(z, 0.01))),
    ("ReLU6 (clamps at 6 too)", "ReLU has no upper limit", ff(act=F.relu6)),
    ("ReLU as clamp(0, 4): capped at 4", "with large values", ff(act=lambda z: z.clamp(0, 4))),
    ("ReLU as clamp(0, 20): capped at 20", "with large values", ff(act=lambda z: z.clamp(0, 20))),
    ("forgets the activation (two linear maps)", "left out the activation", ff(forget={"activation"})),
    ("applies ReLU after the second layer too", "output has no activation", ff(act_at="hidden and output")),
    ("ReLU before the bias: relu(x @ W1) + b1", "add b1 before the ReLU", ff(act_at="before bias")),
    ("ReLU on the input instead of the hidden layer", "not on the input", ff(act_at="input")),
    ("forgets b2", "forgot the second bias", ff(forget={"b2"})),
    ("forgets b1", "forgot the first bias", ff(forget={"b1"})),
    ("no biases at all", "forgot both biases", ff(forget={"b1", "b2"})),
    ("applies the weights nn.Linear-style, x @ W.T", "used as given, (in, out), with no transpose",
     ff(transpose={"W1", "W2"})),
    ("transposes W1 when the shapes allow it (square weights)", "you transposed W1",
     ff(transpose={"W1"}, only_square=True)),
    ("transposes W2 when the shapes allow it (square weights)", "you transposed W2",
     ff(transpose={"W2"}, only_square=True)),
    ("W2 first when the shapes allow it (square weights)", "W1 and W2 are swapped", ff(swap=True, only_square=True)),
    ("W2 first whatever the shapes", "W1 comes first", ff(swap=True)),
    ("returns the hidden layer (..., d_ff)", WRONG, ff(hidden_only=True)),
    ("adds a residual connection x + FFN(x)", "no residual connection", ff(residual=True)),
    ("casts everything to float32", "dtype", ff(compute_in=torch.float32)),
    ("computes in float32 and casts back to x's dtype (loses float64 precision)", "significant digits",
     ff(compute_in=torch.float32, cast_back=True)),
    ("detaches the input (breaks backpropagation)", "with respect to x is missing", ff(detach=True)),
    ("F.linear with the transposed weights", "the task asks you to write this without",
     lambda x, W1, b1, W2, b2: F.linear(torch.relu(F.linear(x, W1.T, b1)), W2.T, b2)),
    ("torch.ops.aten.linear with the transposed weights", "the task asks you to write this without",
     lambda x, W1, b1, W2, b2: torch.ops.aten.linear(torch.relu(torch.ops.aten.linear(x, W1.T, b1)), W2.T, b2)),
    ("torch._C._nn.linear with the transposed weights", "the task asks you to write this without",
     lambda x, W1, b1, W2, b2: torch._C._nn.linear(torch.relu(torch._C._nn.linear(x, W1.T, b1)), W2.T, b2)),
    ("torch.ops.aten.linear.default for the second layer only", "the task asks you to write this without",
     lambda x, W1, b1, W2, b2: torch.ops.aten.linear.default(torch.relu(x @ W1 + b1), W2.T, b2)),
    ("a fresh nn.Linear(d_model, d_ff) applied to x, ignoring the given weights",
     "the task asks you to write this without", lambda x, W1, b1, W2, b2: torch.nn.Linear(W1.shape[0], W1.shape[1])(x)),
    ("two nn.Linear layers with the weights copied in", "without", _linear_copy),
    ("attnbook.layers.FeedForward with the weights copied in", "package's own",
     lambda x, W1, b1, W2, b2: _package_ffn(_layers, x, W1, b1, W2, b2)),
    ("FeedForward from a second, separate import of attnbook/layers.py", "package's own",
     lambda x, W1, b1, W2, b2: _package_ffn(_layers2, x, W1, b1, W2, b2)),
    ("a lambda around attnbook.layers.FeedForward.forward on a stand-in self", "package's own",
     lambda x, W1, b1, W2, b2: _layers.FeedForward.forward(_ff_self(W1, b1, W2, b2), x)),
    ("a FunctionType copy of attnbook.layers.FeedForward.forward on a stand-in self", "package's own",
     lambda x, W1, b1, W2, b2: _ff_forward_copy(_ff_self(W1, b1, W2, b2), x)),
    ("clamp(min=0) and torch.matmul", RIGHT,
     lambda x, W1, b1, W2, b2: torch.matmul(torch.matmul(x, W1).add(b1).clamp(min=0), W2).add(b2)),
    ("ReLU as z * (z > 0)", RIGHT, ff(act=lambda z: z * (z > 0))),
    ("einsum with ellipsis", RIGHT,
     lambda x, W1, b1, W2, b2: torch.einsum("...f,fd->...d", torch.relu(torch.einsum("...d,df->...f", x, W1) + b1),
                                            W2) + b2),
    ("torch.matmul with F.relu", RIGHT,
     lambda x, W1, b1, W2, b2: torch.matmul(F.relu(torch.matmul(x, W1) + b1), W2) + b2),
])


@wrong("4.2", hint="calls attnbook.layers.FeedForward")
def feed_forward(x, W1, b1, W2, b2):
    """imports attnbook.layers.FeedForward inside the function and runs a fresh one"""
    from attnbook.layers import FeedForward
    return FeedForward(W1.shape[0], W1.shape[1]).to(x.dtype)(x)


@wrong("4.2", hint="without torch.nn.Linear")
def feed_forward(x, W1, b1, W2, b2):
    """two Linear layers imported from torch.nn.modules.linear, with the weights copied in"""
    from torch.nn.modules.linear import Linear
    return _linear_copy(x, W1, b1, W2, b2, Linear)


@wrong("4.2", hint=None)
def feed_forward(x, W1, b1, W2, b2):
    """reshapes the biases in place to (1, n) with unsqueeze_, so that they broadcast"""
    b1.unsqueeze_(0)
    b2.unsqueeze_(0)
    return (torch.relu(x @ W1 + b1) @ W2 + b2).reshape(*x.shape[:-1], W2.shape[1])


@wrong("4.2", hint="changed its input `W1` in place")
def feed_forward(x, W1, b1, W2, b2):
    """doubles W1 in place (W1.mul_(2.0)) and divides the product by 2 again"""
    W1.mul_(2.0)
    return torch.relu(x @ W1 / 2 + b1) @ W2 + b2


@right("4.2")
def feed_forward(x, W1, b1, W2, b2):
    """ReLU as (z + |z|) / 2, bias added first with torch.add"""
    z = torch.add(b1, x @ W1)
    return ((z + z.abs()) / 2) @ W2 + b2


@right("4.2")
def feed_forward(x, W1, b1, W2, b2):
    """flatten to 2-D, torch.addmm, reshape back"""
    d = x.shape[-1]
    flat = x.reshape(-1, d)
    h = torch.addmm(b1, flat, W1).relu()
    return torch.addmm(b2, h, W2).reshape(*x.shape[:-1], W2.shape[1])


@right("4.2")
def feed_forward(x, W1, b1, W2, b2, activation=torch.relu):
    """ReLU as max(z, 0) with torch.where, activation as an extra default argument"""
    z = x @ W1 + b1
    h = activation(z) if activation is not torch.relu else torch.where(z > 0, z, torch.zeros_like(z))
    return h @ W2 + b2


# ---------------------------------------------------------------------------------------------------------------
# 4.3 pre_norm_block(x, attn, ffn, norm1, norm2)
# ---------------------------------------------------------------------------------------------------------------

def pnb(order=("attn", "ffn"), norms=("norm1", "norm2"), norm_at="input", skip1="x", second_reads="h", skip2="h",
        final_norm=False):
    """4.3's learner template: h = x + attn(norm1(x)); return h + ffn(norm2(h)), with the named mistakes switched
    on (the defaults: a right answer). order: the sublayers in the order they run; norms: the norm before each
    ("-": none); norm_at: what is normalised, the sublayers' "input" (pre-norm; the knobs below apply to it
    only), the residual "sum" (post-norm), each sublayer's "output", or "input and sum"; skip1, skip2: what each
    residual adds to (None: no residual; "normalised": that sublayer's normalised input); second_reads: what the
    second norm reads ("normalised": the first sublayer's normalised input again, with no second norm)."""
    def pre_norm_block(x, attn, ffn, norm1, norm2):
        first, second = ({"attn": attn, "ffn": ffn}[name] for name in order)
        n1, n2 = ({"norm1": norm1, "norm2": norm2, "-": lambda t: t}[name] for name in norms)
        if norm_at == "sum":
            h = n1(x + first(x))
            return n2(h + second(h))
        if norm_at == "output":
            h = x + n1(first(x))
            return h + n2(second(h))
        if norm_at == "input and sum":
            h = n1(x + first(n1(x)))
            return n2(h + second(n2(h)))
        a = n1(x)
        h = first(a)
        if skip1 == "x":
            h = x + h
        elif skip1 == "normalised":
            h = a + h
        elif skip1 == "detached":
            h = x.detach() + h
        b = a if second_reads == "normalised" else n2(x if second_reads == "x" else h)
        out = second(b)
        if skip2 is not None:
            out = {"h": h, "x": x, "normalised": b}[skip2] + out
        return norm2(out) if final_norm else out
    return pre_norm_block


class _StandInBlock:
    """A stand-in `self` for attnbook.layers.EncoderBlock.forward, holding the given sublayers."""

    def __init__(self, attn, ffn, norm1, norm2):
        self.norm_first, self.norm1, self.norm2, self.ffn = True, norm1, norm2, ffn
        self.dropout2 = lambda t: t
        self._sa = lambda t, mask, is_causal, cache: attn(t)


def _in_torch_layer(layer_class, x, attn, ffn, norm1, norm2):
    """A pre-norm layer of `layer_class` (nn.TransformerEncoderLayer) with its sublayers swapped for the given
    ones, run on x."""
    layer = layer_class(x.shape[-1], 1, 4, dropout=0.0, batch_first=True, norm_first=True).train()
    layer.self_attn = _Wrap(attn)
    layer.linear1, layer.linear2, layer.activation = _Wrap(ffn), torch.nn.Identity(), torch.nn.Identity()
    layer.norm1, layer.norm2 = _Wrap(norm1), _Wrap(norm2)
    return layer(x)


def _from_transformer_module(x, attn, ffn, norm1, norm2):
    from torch.nn.modules.transformer import TransformerEncoderLayer
    return _in_torch_layer(TransformerEncoderLayer, x, attn, ffn, norm1, norm2)


_block_forward_copy = function_copy(_layers.EncoderBlock.forward, "forward")

table("4.3", [
    ("post-norm order: norm(x + sublayer(x))", "that is a post-norm block", pnb(norm_at="sum")),
    ("post-norm with the sublayers in the other order (two mistakes: a neutral message)", WRONG,
     pnb(norm_at="sum", order=("ffn", "attn"))),
    ("post-norm, and the second sublayer reads x", "post-norm",
     lambda x, attn, ffn, norm1, norm2: norm2(x + ffn(x))),
    ("norms on the sublayer outputs", "applied the norms to the sublayer outputs", pnb(norm_at="output")),
    ("a norm before and after each sublayer: the pre-norm input and a post-norm stream",
     "after each residual addition too", pnb(norm_at="input and sum")),
    ("the residual starts from the normalised x: norm1(x) + attn(norm1(x))", "un-normalised",
     pnb(skip1="normalised", skip2="normalised")),
    ("overwrites x with norm1(x), so the first residual carries the normalised input",
     "the residual must carry the un-normalised x:", pnb(skip1="normalised")),
    ("normalises once, at the block's input, and uses that for both sublayers and the residual", WRONG,
     pnb(skip1="normalised", norms=("norm1", "-"))),
    ("normalises the stream after the block's first residual and keeps the normalised stream for the second", WRONG,
     pnb(skip2="normalised")),
    ("feeds the old x into the second sublayer (the chapter's known mistake)", "reads the block's input x",
     pnb(second_reads="x")),
    ("one norm for the whole block: both sublayers read norm1(x), both residuals from x", WRONG,
     pnb(second_reads="normalised")),
    ("parallel block (GPT-J style): x + attn(norm1(x)) + ffn(norm2(x))", WRONG,
     lambda x, attn, ffn, norm1, norm2: x + attn(norm1(x)) + ffn(norm2(x))),
    ("returns x + ffn(...) instead of h + ffn(...): throws the attention away", "second residual starts from x",
     pnb(skip2="x")),
    ("uses norm1 for both sublayers", "you used norm1 twice", pnb(norms=("norm1", "norm1"))),
    ("swaps norm1 and norm2", "swapped", pnb(norms=("norm2", "norm1"))),
    ("forgets the second norm: the feed-forward sublayer reads h itself", WRONG, pnb(norms=("norm1", "-"))),
    ("feed-forward sublayer first, then attention", WRONG, pnb(order=("ffn", "attn"), norms=("norm2", "norm1"))),
    ("sublayers swapped, norms in the written order: ffn with norm1 first, then attn with norm2", "other order",
     pnb(order=("ffn", "attn"))),
    ("no residual around attention", "forgot the first residual", pnb(skip1=None)),
    ("forgets the residual around the feed-forward network", "you forgot the second residual connection",
     pnb(skip2=None)),
    ("no residual connections at all", "residual", pnb(skip1=None, skip2=None)),
    ("attention sublayer only", "stopped after the attention sublayer",
     lambda x, attn, ffn, norm1, norm2: x + attn(norm1(x))),
    ("adds a final LayerNorm (norm2) on the output", "does not normalise its output", pnb(final_norm=True)),
    ("adds x once more at the end (double residual)", "once more at the end",
     lambda x, attn, ffn, norm1, norm2: pnb()(x, attn, ffn, norm1, norm2) + x),
    ("detaches the residual stream (x.detach() + ...): no gradient through the skip connection",
     "through every path, the residual connections (the skip paths) included", pnb(skip1="detached")),
    ("returns float32 (.float() at the end)", "return the dtype of x (here float64)",
     lambda x, attn, ffn, norm1, norm2: pnb()(x, attn, ffn, norm1, norm2).float()),
    ("returns float64 (.double() at the end)", "return the dtype of x (here float32)",
     lambda x, attn, ffn, norm1, norm2: pnb()(x, attn, ffn, norm1, norm2).double()),
    ("calls attn(q, k, v) with three arguments, like nn.MultiheadAttention", "takes one tensor",
     lambda x, attn, ffn, norm1, norm2: pnb()(x, lambda t: attn(t, t, t), ffn, norm1, norm2)),
    ("calls attn(y, y, y): the error names the sublayer attn, not a function local to the check",
     "attn() takes 1 positional argument but 3 were given",
     lambda x, attn, ffn, norm1, norm2: pnb()(x, lambda t: attn(t, t, t), ffn, norm1, norm2)),
    ("indexes attn's output with [0], as if it returned (output, weights)", "without [0]",
     lambda x, attn, ffn, norm1, norm2: pnb()(x, lambda t: attn(t)[0], ffn, norm1, norm2)),
    ("passes eps to the norms: norm1(x, 1e-5)", "norm1(t)",
     lambda x, attn, ffn, norm1, norm2: pnb()(x, attn, ffn, lambda t: norm1(t, 1e-5), lambda t: norm2(t, 1e-5))),
    ("flattens the batch to (B * n, d) and reshapes back", "do not flatten or reshape x",
     lambda x, attn, ffn, norm1, norm2: pnb()(x.reshape(-1, x.shape[-1]), attn, ffn, norm1, norm2).reshape(x.shape)),
    ("runs nn.TransformerEncoderLayer(norm_first=True) with its sublayers swapped for the given ones", "without",
     lambda x, attn, ffn, norm1, norm2: _in_torch_layer(torch.nn.TransformerEncoderLayer, x, attn, ffn, norm1, norm2)),
    ("TransformerEncoderLayer imported from torch.nn.modules.transformer, its sublayers swapped for the given ones",
     "without torch.nn.TransformerEncoderLayer", _from_transformer_module),
    ("attnbook.layers.EncoderBlock.forward, via a lambda on a stand-in self", "package's own",
     lambda x, attn, ffn, norm1, norm2: _layers.EncoderBlock.forward(_StandInBlock(attn, ffn, norm1, norm2), x)),
    ("a FunctionType copy of attnbook.layers.EncoderBlock.forward on a stand-in self", "package's own",
     lambda x, attn, ffn, norm1, norm2: _block_forward_copy(_StandInBlock(attn, ffn, norm1, norm2), x)),
    ("EncoderBlock.forward from a second, separate import of attnbook/layers.py", "package's own",
     lambda x, attn, ffn, norm1, norm2: _layers2.EncoderBlock.forward(_StandInBlock(attn, ffn, norm1, norm2), x)),
    ("post-norm for attention, pre-norm for the feed-forward network", WRONG,
     lambda x, attn, ffn, norm1, norm2: (h := norm1(x + attn(x))) + ffn(norm2(h))),
    ("scales the residual branches by 0.5 (averages instead of adding)", "unscaled",
     lambda x, attn, ffn, norm1, norm2: 0.5 * ((h := 0.5 * (x + attn(norm1(x)))) + ffn(norm2(h)))),
    ("returns a tuple (output, h)", WRONG,
     lambda x, attn, ffn, norm1, norm2: ((h := x + attn(norm1(x))) + ffn(norm2(h)), h)),
    ("runs the sublayers under torch.no_grad()", "gradient", torch.no_grad()(pnb())),
    ("the same in one expression with the walrus", RIGHT,
     lambda x, attn, ffn, norm1, norm2: (h := x + attn(norm1(x))) + ffn(norm2(h))),
])


@wrong("4.3", hint="calls attnbook.layers.EncoderBlock")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """imports attnbook.layers.EncoderBlock inside the function and runs a fresh pre-norm one"""
    from attnbook.layers import EncoderBlock
    return EncoderBlock(x.shape[-1], 1, 4, norm_first=True).to(x.dtype)(x)


@wrong("4.3", hint="pre_norm_block(x, attn, ffn, norm1, norm2)")
def pre_norm_block(x, attn, ffn, norm):
    """one norm applied before both sublayers, with a signature that takes one norm"""
    return pnb()(x, attn, ffn, norm, norm)


@wrong("4.3", hint="pre_norm_block(x, attn, ffn, norm1, norm2)")
def pre_norm_block(x, attn, ffn, norm1, norm2, eps):
    """an extra eps parameter without a default, as in its own layer_norm"""
    return pnb()(x, attn, ffn, norm1, norm2)


@wrong("4.3", hint="package's own")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """a def wrapper calling attnbook.layers.EncoderBlock.forward on a stand-in self"""
    return _layers.EncoderBlock.forward(_StandInBlock(attn, ffn, norm1, norm2), x)


@wrong("4.3", hint="in place")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """adds the residual in place (x += ...), changing the caller's x"""
    x += attn(norm1(x))
    return x + ffn(norm2(x))


@wrong("4.3", hint="trailing comma")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """a trailing comma makes h a tuple: h = x + attn(norm1(x)),"""
    h = x + attn(norm1(x)),
    return h + ffn(norm2(h))


@right("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """a loop over (norm, sublayer) pairs"""
    for norm, sub in ((norm1, attn), (norm2, ffn)):
        x = x + sub(norm(x))
    return x


@right("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2, dropout=None):
    """torch.add with an optional dropout argument that defaults to none"""
    drop = dropout or (lambda t: t)
    h = torch.add(x, drop(attn(norm1(x))))
    return torch.add(h, drop(ffn(norm2(h))))


@right("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """clones x first and adds in place to the clone"""
    h = x.clone()
    h += attn(norm1(h))
    h += ffn(norm2(h))
    return h


@right("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """one sequence at a time (kept 3-D), concatenated"""
    out = []
    for i in range(len(x)):
        s = x[i:i + 1]
        h = s + attn(norm1(s))
        out.append(h + ffn(norm2(h)))
    return torch.cat(out)


# ---------------------------------------------------------------------------------------------------------------
# 4.4 encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers)
# ---------------------------------------------------------------------------------------------------------------

def epc(embedding="once", positions=0, vocab=None, heads=None, matrices=4, attn_biases=None, square="d * d",
        ffn_layers=2, ffn_width=None, ffn_biases="d_ff + d_model", norms=2, norm_size=2, layers="n_layers",
        extra=None, returns=None):
    """4.4's learner template: the count piece by piece, in named terms, with the named mistakes switched on (the
    defaults: a right answer). positions: learned positions added to the embedding; vocab: a vocabulary size used
    instead of the argument; heads: how n_heads wrongly enters the attention; matrices, attn_biases: the
    attention's weight matrices and bias vectors; norms, norm_size: LayerNorms per block and parameters per
    d_model in each; layers: a number of blocks used instead of n_layers; extra: a piece that is not there;
    returns: what the count is returned as (float, torch.tensor, ...)."""
    def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
        d, V = d_model, vocab_size if vocab is None else vocab
        f = 4 * d_model if ffn_width == "4 * d_model" else d_ff
        d_squared = d * d if square == "d * d" else math.pow(d, 2)
        d_head = d / n_heads if heads == "d_head with /" else d // n_heads
        n_biases = matrices if attn_biases is None else attn_biases
        attention = matrices * d_squared + n_biases * d
        if heads == "times attention":
            attention = n_heads * attention
        elif heads == "times weights":
            attention = matrices * d_squared * n_heads + n_biases * d
        elif heads == "one head":
            attention = 4 * (d * d_head + d_head)
        elif heads == "d_head with /":
            attention = 4 * (d * n_heads * d_head + d)
        ffn = 2 * d * f + {"d_ff + d_model": f + d, "none": 0, "2 * d_model": 2 * d, "2 * d_ff": 2 * f}[ffn_biases]
        if ffn_layers == 1:
            ffn = d * f + f
        block = attention + ffn + norms * norm_size * d
        embedded = (V + positions) * d
        if embedding == "per layer":
            total = n_layers * (embedded + block)
        elif layers == "range(1, n_layers)":
            total = embedded + sum(block for _ in range(1, n_layers))
        else:
            n_blocks = {"n_layers": n_layers, "one": 1}.get(layers, layers)
            total = (0 if embedding == "none" else embedded) + n_blocks * block
        total += {None: 0, "pooler": d * d + d, "output layer": V * d + V, "output layer without bias": V * d,
                  "final LayerNorm": 2 * d, "BERT's extras": 512 * d + 2 * d + 2 * d + d * d + d}[extra]
        return total if returns is None else returns(total)
    return encoder_param_count


def always(n):
    """An encoder_param_count that returns n whatever the arguments."""
    return lambda vocab_size, d_model, n_heads, d_ff, n_layers: n


_KNOWN_4_4 = {(100, 8, 2, 20, 3): 2_804, (50257, 12288, 96, 49152, 96): 174_579_068_928,
              (1000, 16, 4, 40, 1): 18_488, (37, 12, 1, 20, 2): 2_812, (500, 12, 12, 7, 4): 9_436,
              (30000, 768, 12, 3072, 12): 108_094_464}


table("4.4", [
    ("multiplies the attention by the number of heads", "the number of heads does not change the count",
     epc(heads="times attention")),
    ("multiplies the attention weight matrices (not their biases) by the number of heads",
     "multiplied the attention weights", epc(heads="times weights")),
    ("counts the attention of one head: four d_model x d_head matrices and d_head biases", "of one head only",
     epc(heads="one head")),
    ("d_head with /, so the result is a float", "float", epc(heads="d_head with /")),
    ("three attention matrices (Q, K, V) and no output projection", "attention has four matrices", epc(matrices=3)),
    ("forgets the attention biases", "either the attention biases are missing", epc(attn_biases=0)),
    ("one d_model bias for the whole attention instead of four", "4 * d_model attention biases", epc(attn_biases=1)),
    ("forgets the feed-forward biases", "left out the feed-forward biases", epc(ffn_biases="none")),
    ("feed-forward biases as 2 * d_model", "not 2 * d_model", epc(ffn_biases="2 * d_model")),
    ("feed-forward biases as 2 * d_ff", "not 2 * d_ff", epc(ffn_biases="2 * d_ff")),
    ("no biases at all, attention or feed-forward", "you left out the biases", epc(attn_biases=0, ffn_biases="none")),
    ("only the weight matrices: no biases, no LayerNorms", "you counted only the weight matrices",
     epc(attn_biases=0, ffn_biases="none", norms=0)),
    ("feed-forward as d -> d_ff only, once (forgets W2)", "two layers", epc(ffn_layers=1)),
    ("assumes d_ff = 4 d_model and ignores the d_ff argument", "use the d_ff argument", epc(ffn_width="4 * d_model")),
    ("forgets the two LayerNorms", "or the LayerNorms are", epc(norms=0)),
    ("counts a LayerNorm as d parameters (gamma only)", "each block has two LayerNorms", epc(norm_size=1)),
    ("one LayerNorm per block instead of two", "each block has two LayerNorms", epc(norms=1)),
    ("forgets the token embedding", "left out the token embedding", epc(embedding="none")),
    ("counts the embedding once per layer", "once per layer", epc(embedding="per layer")),
    ("adds 512 learned positions", "sinusoidal positions", epc(positions=512)),
    ("a vocabulary of 30,000 whatever vocab_size is", "use the vocab_size argument", epc(vocab=30000)),
    ("counts one block whatever n_layers is, plus the embedding", "multiply the per-block count by n_layers",
     epc(layers="one")),
    ("12 layers whatever n_layers is", "use the n_layers argument", epc(layers=12)),
    ("range(1, n_layers): one block short", "not n_layers - 1", epc(layers="range(1, n_layers)")),
    ("returns one block", "one block's count", epc(embedding="none", layers="one")),
    ("adds a pooler (d x d with bias)", "no pooler", epc(extra="pooler")),
    ("adds an (untied) output layer d_model -> vocab_size", "no output layer", epc(extra="output layer")),
    ("adds an output layer d_model -> vocab_size without a bias", "no output layer",
     epc(extra="output layer without bias")),
    ("adds a final LayerNorm after the last block", "no final LayerNorm", epc(extra="final LayerNorm")),
    ("BERT's extras: 512 positions, 2 segment embeddings, an embedding LayerNorm and a pooler",
     "close to BERT's count", epc(extra="BERT's extras")),
    ("returns 1.08e8-style float (math.pow for d^2)", "float", epc(square="math.pow")),
    ("the right count, returned as a float", "whole number", epc(returns=float)),
    ("returns a float from round(x / 1e6, 1) * 1e6 (the \"110.1M\" habit)", "float",
     epc(returns=lambda n: round(n / 1e6, 1) * 1e6)),
    ("returns a 0-d tensor", "expected an int", epc(returns=torch.tensor)),
    ("returns a string with thousands separators", "expected an int", epc(returns="{:,}".format)),
    ("embedding plus the 12 L d^2 rule of thumb", "rule of thumb",
     lambda vocab_size, d_model, n_heads, d_ff, n_layers: vocab_size * d_model + 12 * n_layers * d_model * d_model),
    ("returns 110,000,000 (BERT-base's \"110M\")", "110.1M is the popular tutorial's number", always(110_000_000)),
    ("the tutorial's 110.1M", "110.1M is the popular tutorial's number", always(110_100_000)),
    ("returns the chapter's 108,094,464 whatever the arguments", "whatever the arguments", always(108_094_464)),
    ("hard-codes the chapter's 108,094,464 for (30000, 768, 12, 3072, 12)", WRONG,
     lambda vocab_size, d_model, n_heads, d_ff, n_layers: 108094464
     if (vocab_size, d_model, d_ff, n_layers) == (30000, 768, 3072, 12)
     else vocab_size * d_model + n_layers * (4 * d_model * d_model + 2 * d_model * d_ff)),
    ("builds one nn.TransformerEncoderLayer with real weights (no meta device) and multiplies its count",
     "without building a model", lambda vocab_size, d_model, n_heads, d_ff, n_layers: vocab_size * d_model
     + n_layers * sum(p.numel() for p in torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff).parameters())),
    ("a table of the six configurations the check used to try (learned from an earlier run), 0 for any other",
     "not the number of parameters",
     lambda vocab_size, d_model, n_heads, d_ff, n_layers: _KNOWN_4_4.get((vocab_size, d_model, n_heads, d_ff,
                                                                          n_layers), 0)),
    ("n_heads and n_layers in the other order", "reads them as (vocab_size, d_model, n_layers, d_ff, n_heads)",
     lambda vocab_size, d_model, n_layers, d_ff, n_heads: epc()(vocab_size, d_model, n_heads, d_ff, n_layers)),
    ("d_ff and n_heads in the other order", "reads them as (vocab_size, d_model, d_ff, n_heads, n_layers)",
     lambda vocab_size, d_model, d_ff, n_heads, n_layers: epc()(vocab_size, d_model, n_heads, d_ff, n_layers)),
    ("attnbook.models.params.encoder_param_count itself", "package's own", _params.encoder_param_count),
    ("a lambda around attnbook.models.encoder_param_count", "package's own",
     lambda vocab_size, d_model, n_heads, d_ff, n_layers: _params.encoder_param_count(
         vocab_size, d_model, n_heads, d_ff, n_layers)),
    ("a FunctionType copy of attnbook.models.params.encoder_param_count", "package's own",
     function_copy(_params.encoder_param_count, "encoder_param_count")),
    ("encoder_param_count from a second import of attnbook/models/params.py", "package's own",
     _params2.encoder_param_count),
    ("uses attnbook.models.params.mha_param_count and ffn_param_count for the pieces", "without",
     lambda vocab_size, d_model, n_heads, d_ff, n_layers: vocab_size * d_model + n_layers * (
         _params.mha_param_count(d_model, n_heads) + _params.ffn_param_count(d_model, d_ff) + 4 * d_model)),
    ("piece by piece, named terms", RIGHT, epc()),
    ("the right count as a NumPy uint64", RIGHT, epc(returns=np.uint64)),
    ("factored form d*(V + L*(4d + 2 d_ff + 9)) + L*d_ff, extra keyword with a harmless default", RIGHT,
     lambda vocab_size, d_model, n_heads, d_ff, n_layers, positions=0:
     d_model * (vocab_size + positions + n_layers * (4 * d_model + 2 * d_ff + 9)) + n_layers * d_ff),
])


@wrong("4.4", hint="32-bit")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """NumPy int32 arithmetic (overflows for big models)"""
    V, d, f, L = (np.int32(v) for v in (vocab_size, d_model, d_ff, n_layers))
    with np.errstate(over="ignore"):
        return V * d + L * (np.int32(4) * (d * d + d) + np.int32(2) * d * f + f + d + np.int32(4) * d)


@wrong("4.4", hint="encoder_param_count(50257, 12288, 96, 49152, 96) returned -1,514,590,208, which is not the "
                   "number of parameters of this encoder. Hint: the count overflowed a 32-bit integer")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """int32 arithmetic with the d_model terms gathered, told by its count on the GPT-3-sized configuration"""
    V, d, f, L = (np.int32(v) for v in (vocab_size, d_model, d_ff, n_layers))
    with np.errstate(over="ignore"):
        return V * d + L * (np.int32(4) * d * d + np.int32(9) * d + np.int32(2) * d * f + f)


@wrong("4.4", hint="package's own")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """a def wrapper calling attnbook.models.encoder_param_count"""
    from attnbook.models import encoder_param_count as theirs
    return theirs(vocab_size, d_model, n_heads, d_ff, n_layers)


@wrong("4.4", hint="without")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """builds the model from nn.Embedding and nn.TransformerEncoderLayer on the meta device and counts"""
    with torch.device("meta"):
        mods = [torch.nn.Embedding(vocab_size, d_model)] + [
            torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, batch_first=True) for _ in range(n_layers)]
    return sum(p.numel() for m in mods for p in m.parameters())


@wrong("4.4", hint="without")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """builds one nn.TransformerEncoderLayer and multiplies its count"""
    with torch.device("meta"):
        layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff)
    return vocab_size * d_model + n_layers * sum(p.numel() for p in layer.parameters())


@wrong("4.4", hint="without")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """counts attnbook's EncoderBlock built on the meta device"""
    with torch.device("meta"):
        block = _layers.EncoderBlock(d_model, n_heads, d_ff)
    return vocab_size * d_model + n_layers * sum(p.numel() for p in block.parameters())


@right("4.4")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """a loop over layers adding up (in, out, bias) shapes"""
    total = vocab_size * d_model
    for _ in range(n_layers):
        for n_in, n_out in [(d_model, d_model)] * 4 + [(d_model, d_ff), (d_ff, d_model)]:
            total += n_in * n_out + n_out
        total += 2 * (d_model + d_model)
    return total


@right("4.4")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """a NumPy integer from np.prod and np.sum"""
    shapes = [(d_model, d_model)] * 4 + [(d_model,)] * 4 + [(d_model, d_ff), (d_ff,), (d_ff, d_model), (d_model,)]
    shapes += [(d_model,)] * 4
    block = np.sum([np.prod(s, dtype=np.int64) for s in shapes], dtype=np.int64)
    return np.int64(vocab_size) * d_model + np.int64(n_layers) * block
