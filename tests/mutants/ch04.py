"""Chapter 4 (residuals, LayerNorm, feed-forward, blocks, parameter counts): learner answers to 4.1-4.4."""
from __future__ import annotations

import functools
import importlib.util
import math
import types

import numpy as np
import torch
import torch.nn.functional as F

import attnbook.layers as _layers
from attnbook.models import params as _params
from mutants import right, wrong


def _second_import(module):
    """The same module loaded a second time, from its .py file, as a separate module object."""
    spec = importlib.util.spec_from_file_location(module.__name__ + "_copy", module.__file__)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return copy


def _fn_copy(f):
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)


_layers2 = _second_import(_layers)
_params2 = _second_import(_params)

# ---------------------------------------------------------------------------------------------------------------
# 4.1 layer_norm(x, gamma, beta, eps=1e-5)
# ---------------------------------------------------------------------------------------------------------------


@wrong("4.1", hint="unbiased variance")
def layer_norm(x, gamma, beta, eps=1e-5):
    """torch.var with its default correction (divides by d - 1)"""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="eps goes inside the square root")
def layer_norm(x, gamma, beta, eps=1e-5):
    """adds eps outside the square root: (x - mean) / (std + eps)"""
    mean = x.mean(dim=-1, keepdim=True)
    std = ((x - mean) ** 2).mean(dim=-1, keepdim=True).sqrt()
    return (x - mean) / (std + eps) * gamma + beta


@wrong("4.1", hint="use the eps argument")
def layer_norm(x, gamma, beta, eps=1e-5):
    """ignores the eps argument: always 1e-5"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * gamma + beta


@wrong("4.1", hint="normalised over the wrong dimension (dim=0)")
def layer_norm(x, gamma, beta, eps=1e-5):
    """normalises over dim 0 (BatchNorm's axis)"""
    mean = x.mean(dim=0, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="normalised over all dimensions at once")
def layer_norm(x, gamma, beta, eps=1e-5):
    """normalises over every dimension at once (mean of the whole tensor)"""
    mean = x.mean()
    var = ((x - mean) ** 2).mean()
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="forgot gamma and beta")
def layer_norm(x, gamma, beta, eps=1e-5):
    """forgets gamma and beta"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


@wrong("4.1", hint="gamma and beta are swapped")
def layer_norm(x, gamma, beta, eps=1e-5):
    """swaps gamma and beta"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * beta + gamma


@wrong("4.1", hint="RMSNorm")
def layer_norm(x, gamma, beta, eps=1e-5):
    """RMSNorm: does not subtract the mean"""
    ms = (x ** 2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(ms + eps) * gamma + beta


@wrong("4.1", hint="not by the variance")
def layer_norm(x, gamma, beta, eps=1e-5):
    """divides by the variance, not its square root"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / (var + eps) * gamma + beta


@wrong("4.1", hint="keepdim=True")
def layer_norm(x, gamma, beta, eps=1e-5):
    """forgets keepdim=True (broadcasts the (n,) means along the wrong axis)"""
    mean = x.mean(dim=-1)
    var = ((x - x.mean(dim=-1, keepdim=True)) ** 2).mean(dim=-1)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="in place")
def layer_norm(x, gamma, beta, eps=1e-5):
    """subtracts the mean in place (x.sub_), changing the caller's x"""
    mean = x.mean(dim=-1, keepdim=True)
    x.sub_(mean)
    var = (x ** 2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="dtype torch.float32")
def layer_norm(x, gamma, beta, eps=1e-5):
    """casts to float32 (x.float()) and returns float32"""
    x = x.float()
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma.float() + beta.float()


@wrong("4.1", hint=None)
def layer_norm(x, gamma, beta, eps=1e-5):
    """returns a NumPy array"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return ((x - mean) / torch.sqrt(var + eps) * gamma + beta).numpy()


@wrong("4.1", hint=None)
def layer_norm(x, gamma, beta, eps=1e-5):
    """uses the variance of the 2-D case only: x.view(-1, d) then forgets to reshape back"""
    d = x.shape[-1]
    x2 = x.reshape(-1, d)
    mean = x2.mean(dim=-1, keepdim=True)
    var = ((x2 - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x2 - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="so its default is wrong")
def layer_norm(x, gamma, beta, eps=1e-6):
    """default eps of 1e-6 instead of the asked 1e-5"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint=None)
def layer_norm(x, gamma, beta, eps=1e-5):
    """gamma and beta as columns (gamma[:, None]): broadcasts along the wrong axis"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return ((x - mean) / torch.sqrt(var + eps)) * gamma[:, None] + beta[:, None]


@wrong("4.1", hint="in float32 with a large mean")
def layer_norm(x, gamma, beta, eps=1e-5):
    """E[x^2] - E[x]^2 in x's own dtype (cancels catastrophically for large means)"""
    mean = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="significant digits")
def layer_norm(x, gamma, beta, eps=1e-5):
    """computes in float32 and casts back (loses float64 precision)"""
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = ((xf - mean) ** 2).mean(dim=-1, keepdim=True)
    return ((xf - mean) / torch.sqrt(var + eps) * gamma.float() + beta.float()).to(x.dtype)


@wrong("4.1", hint="gradient of layer_norm's result with respect to x is wrong")
def layer_norm(x, gamma, beta, eps=1e-5):
    """detaches the statistics (mean and variance computed on x.detach(): wrong gradients)"""
    xd = x.detach()
    mean = xd.mean(dim=-1, keepdim=True)
    var = ((xd - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="lower bound")
def layer_norm(x, gamma, beta, eps=1e-5):
    """clamps the variance at eps instead of adding eps: max(var, eps)"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var.clamp(min=eps)) * gamma + beta


@wrong("4.1", hint="the task asks you to write this without")
def layer_norm(x, gamma, beta, eps=1e-5):
    """calls F.layer_norm"""
    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)


@wrong("4.1", hint="the task asks you to write this without")
def layer_norm(x, gamma, beta, eps=1e-5):
    """calls torch.layer_norm"""
    return torch.layer_norm(x, [x.shape[-1]], gamma, beta, eps)


@wrong("4.1", hint="without")
def layer_norm(x, gamma, beta, eps=1e-5):
    """builds nn.LayerNorm and copies gamma and beta in"""
    norm = torch.nn.LayerNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        return norm(x)


@wrong("4.1", hint="without")
def layer_norm(x, gamma, beta, eps=1e-5):
    """group_norm with one group over a (N, d) view"""
    d = x.shape[-1]
    return F.group_norm(x.reshape(-1, d, 1), 1, gamma, beta, eps).reshape(x.shape)


@wrong("4.1", hint="without")
def layer_norm(x, gamma, beta, eps=1e-5):
    """torch.native_layer_norm (the aten op behind F.layer_norm)"""
    return torch.native_layer_norm(x, [x.shape[-1]], gamma, beta, eps)[0]


@wrong("4.1", hint="package's own")
def layer_norm(x, gamma, beta, eps=1e-5):
    """builds attnbook.layers.LayerNorm and copies gamma and beta in"""
    norm = _layers.LayerNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        return norm(x)


wrong("4.1", hint="package's own", name="a lambda around attnbook.layers.LayerNorm.forward")(
    lambda x, gamma, beta, eps=1e-5: _layers.LayerNorm.forward(
        types.SimpleNamespace(d_model=x.shape[-1], eps=eps, weight=gamma, bias=beta), x))

_ln_forward_copy = _fn_copy(_layers.LayerNorm.forward)


@wrong("4.1", hint="package's own")
def layer_norm(x, gamma, beta, eps=1e-5):
    """a FunctionType copy of attnbook.layers.LayerNorm.forward, called on a stand-in self"""
    return _ln_forward_copy(types.SimpleNamespace(d_model=x.shape[-1], eps=eps, weight=gamma, bias=beta), x)


@wrong("4.1", hint="package's own")
def layer_norm(x, gamma, beta, eps=1e-5):
    """LayerNorm from a second, separate import of attnbook/layers.py"""
    norm = _layers2.LayerNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        return norm(x)


@right("4.1")
def layer_norm(x, gamma, beta, eps=1e-5):
    """torch.var(unbiased=False) via var_mean(correction=0)"""
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return (x - mean) * torch.rsqrt(var + eps) * gamma + beta


@right("4.1")
def layer_norm(x, gamma, beta, eps=1e-5):
    """plain arithmetic with sum / d, no keepdim (unsqueeze instead)"""
    d = x.shape[-1]
    mean = x.sum(-1).unsqueeze(-1) / d
    centred = x - mean
    var = (centred * centred).sum(-1).unsqueeze(-1) / d
    return gamma * centred / (var + eps) ** 0.5 + beta


@right("4.1")
def layer_norm(x, gamma, beta, eps=1e-5):
    """E[x^2] - E[x]^2 in float64, cast back to x's dtype"""
    xd = x.double()
    mean = xd.mean(-1, keepdim=True)
    var = (xd ** 2).mean(-1, keepdim=True) - mean ** 2
    out = (xd - mean) / torch.sqrt(var + eps) * gamma.double() + beta.double()
    return out.to(x.dtype)


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


@right("4.1")
def layer_norm(x, gamma, beta, eps=1e-5):
    """torch.std(correction=0), then sqrt(std^2 + eps)"""
    std = x.std(dim=-1, keepdim=True, correction=0)
    return (x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(std ** 2 + eps) * gamma + beta


@wrong("4.1", hint="you left out eps")
def layer_norm(x, gamma, beta, eps=1e-5):
    """no eps at all: divides by the plain standard deviation (NaN left as it is)"""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / var ** 0.5 * gamma + beta


@wrong("4.1", hint="normalised over the wrong dimension (dim=-2, the positions)")
def layer_norm(x, gamma, beta, eps=1e-5):
    """normalises over dim=1 (the features of a 2-D x, but the positions of a 3-D one)"""
    mean = x.mean(dim=1, keepdim=True)
    var = x.var(dim=1, keepdim=True, unbiased=False)
    return (x - mean) / (var + eps) ** 0.5 * gamma + beta


@wrong("4.1", hint="the task asks you to write this without")
def layer_norm(x, gamma, beta, eps=1e-5):
    """a fresh nn.LayerNorm, then gamma and beta applied by hand"""
    return torch.nn.LayerNorm(x.shape[-1], eps=eps).to(x.dtype)(x) * gamma + beta


def _ln_hand(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


right("4.1", name="functools.partial of a by-hand layer_norm with eps=1e-5 bound by name")(
    functools.partial(_ln_hand, eps=1e-5))


@right("4.1")
def layer_norm(x, gamma, beta, *, eps=1e-5):
    """eps as a keyword-only parameter"""
    return _ln_hand(x, gamma, beta, eps)


@wrong("4.1", hint="so its default is wrong")
def layer_norm(x, gamma, beta, eps=1e-12):
    """default eps of 1e-12 (BERT's) instead of the asked 1e-5"""
    return _ln_hand(x, gamma, beta, eps)


@wrong("4.1", hint="so its default is wrong")
def layer_norm(x, gamma, beta, eps=0.0):
    """default eps of 0 (no eps unless one is given)"""
    if eps > 0:
        return _ln_hand(x, gamma, beta, eps)
    return (x - x.mean(-1, keepdim=True)) / x.var(-1, keepdim=True, unbiased=False).sqrt() * gamma + beta


# ---------------------------------------------------------------------------------------------------------------
# 4.2 feed_forward(x, W1, b1, W2, b2)
# ---------------------------------------------------------------------------------------------------------------

@wrong("4.2", hint="that is GELU")
def feed_forward(x, W1, b1, W2, b2):
    """GELU instead of ReLU"""
    return F.gelu(x @ W1 + b1) @ W2 + b2


@wrong("4.2", hint="left out the activation")
def feed_forward(x, W1, b1, W2, b2):
    """forgets the activation (two linear maps)"""
    return (x @ W1 + b1) @ W2 + b2


@wrong("4.2", hint="output has no activation")
def feed_forward(x, W1, b1, W2, b2):
    """applies ReLU after the second layer too"""
    return torch.relu(torch.relu(x @ W1 + b1) @ W2 + b2)


@wrong("4.2", hint="add b1 before the ReLU")
def feed_forward(x, W1, b1, W2, b2):
    """ReLU before the bias: relu(x @ W1) + b1"""
    return (torch.relu(x @ W1) + b1) @ W2 + b2


@wrong("4.2", hint="forgot the second bias")
def feed_forward(x, W1, b1, W2, b2):
    """forgets b2"""
    return torch.relu(x @ W1 + b1) @ W2


@wrong("4.2", hint="forgot the first bias")
def feed_forward(x, W1, b1, W2, b2):
    """forgets b1"""
    return torch.relu(x @ W1) @ W2 + b2


@wrong("4.2", hint="used as given, (in, out), with no transpose")
def feed_forward(x, W1, b1, W2, b2):
    """applies the weights nn.Linear-style, x @ W.T"""
    return torch.relu(x @ W1.T + b1) @ W2.T + b2


@wrong("4.2", hint="that is a leaky ReLU")
def feed_forward(x, W1, b1, W2, b2):
    """leaky ReLU"""
    return F.leaky_relu(x @ W1 + b1, 0.01) @ W2 + b2


@wrong("4.2", hint=None)
def feed_forward(x, W1, b1, W2, b2):
    """returns the hidden layer (..., d_ff)"""
    return torch.relu(x @ W1 + b1)


@wrong("4.2", hint="no residual connection")
def feed_forward(x, W1, b1, W2, b2):
    """adds a residual connection x + FFN(x)"""
    return x + torch.relu(x @ W1 + b1) @ W2 + b2


@wrong("4.2", hint="dtype")
def feed_forward(x, W1, b1, W2, b2):
    """casts everything to float32"""
    x, W1, b1, W2, b2 = (t.float() for t in (x, W1, b1, W2, b2))
    return torch.relu(x @ W1 + b1) @ W2 + b2


@wrong("4.2", hint=None)
def feed_forward(x, W1, b1, W2, b2):
    """reshapes the biases in place to (1, n) with unsqueeze_, so that they broadcast"""
    b1.unsqueeze_(0)
    b2.unsqueeze_(0)
    return (torch.relu(x @ W1 + b1) @ W2 + b2).reshape(*x.shape[:-1], W2.shape[1])


@wrong("4.2", hint="ReLU has no upper limit")
def feed_forward(x, W1, b1, W2, b2):
    """ReLU6 (clamps at 6 too)"""
    return F.relu6(x @ W1 + b1) @ W2 + b2


@wrong("4.2", hint="with respect to x is missing")
def feed_forward(x, W1, b1, W2, b2):
    """detaches the input (breaks backpropagation)"""
    return torch.relu(x.detach() @ W1 + b1) @ W2 + b2


@wrong("4.2", hint="significant digits")
def feed_forward(x, W1, b1, W2, b2):
    """computes in float32 and casts back to x's dtype (loses float64 precision)"""
    h = torch.relu(x.float() @ W1.float() + b1.float())
    return (h @ W2.float() + b2.float()).to(x.dtype)


@wrong("4.2", hint="the task asks you to write this without")
def feed_forward(x, W1, b1, W2, b2):
    """F.linear with the transposed weights"""
    return F.linear(torch.relu(F.linear(x, W1.T, b1)), W2.T, b2)


@wrong("4.2", hint="without")
def feed_forward(x, W1, b1, W2, b2):
    """two nn.Linear layers with the weights copied in"""
    d, d_ff = W1.shape
    fc1, fc2 = torch.nn.Linear(d, d_ff).to(x.dtype), torch.nn.Linear(d_ff, d).to(x.dtype)
    with torch.no_grad():
        fc1.weight.copy_(W1.T), fc1.bias.copy_(b1), fc2.weight.copy_(W2.T), fc2.bias.copy_(b2)
        return fc2(torch.relu(fc1(x)))


@wrong("4.2", hint="package's own")
def feed_forward(x, W1, b1, W2, b2):
    """attnbook.layers.FeedForward with the weights copied in"""
    d, d_ff = W1.shape
    ffn = _layers.FeedForward(d, d_ff).to(x.dtype)
    with torch.no_grad():
        ffn.fc1.weight.copy_(W1.T), ffn.fc1.bias.copy_(b1), ffn.fc2.weight.copy_(W2.T), ffn.fc2.bias.copy_(b2)
        return ffn(x)


def _ff_self(W1, b1, W2, b2):
    return types.SimpleNamespace(fc1=lambda t: t @ W1 + b1, fc2=lambda t: t @ W2 + b2,
                                 activation="relu", dropout=lambda t: t)


wrong("4.2", hint="package's own", name="a lambda around attnbook.layers.FeedForward.forward on a stand-in self")(
    lambda x, W1, b1, W2, b2: _layers.FeedForward.forward(_ff_self(W1, b1, W2, b2), x))

_ff_forward_copy = _fn_copy(_layers.FeedForward.forward)


@wrong("4.2", hint="package's own")
def feed_forward(x, W1, b1, W2, b2):
    """a FunctionType copy of attnbook.layers.FeedForward.forward on a stand-in self"""
    return _ff_forward_copy(_ff_self(W1, b1, W2, b2), x)


@wrong("4.2", hint="package's own")
def feed_forward(x, W1, b1, W2, b2):
    """FeedForward from a second, separate import of attnbook/layers.py"""
    d, d_ff = W1.shape
    ffn = _layers2.FeedForward(d, d_ff).to(x.dtype)
    with torch.no_grad():
        ffn.fc1.weight.copy_(W1.T), ffn.fc1.bias.copy_(b1), ffn.fc2.weight.copy_(W2.T), ffn.fc2.bias.copy_(b2)
        return ffn(x)


@right("4.2")
def feed_forward(x, W1, b1, W2, b2):
    """clamp(min=0) and torch.matmul"""
    return torch.matmul(torch.matmul(x, W1).add(b1).clamp(min=0), W2).add(b2)


@right("4.2")
def feed_forward(x, W1, b1, W2, b2):
    """ReLU as z * (z > 0)"""
    z = x @ W1 + b1
    return (z * (z > 0)) @ W2 + b2


@right("4.2")
def feed_forward(x, W1, b1, W2, b2):
    """ReLU as (z + |z|) / 2, bias added first with torch.add"""
    z = torch.add(b1, x @ W1)
    return ((z + z.abs()) / 2) @ W2 + b2


@right("4.2")
def feed_forward(x, W1, b1, W2, b2):
    """einsum with ellipsis"""
    h = torch.relu(torch.einsum("...d,df->...f", x, W1) + b1)
    return torch.einsum("...f,fd->...d", h, W2) + b2


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


@right("4.2")
def feed_forward(x, W1, b1, W2, b2):
    """torch.matmul with F.relu"""
    return torch.matmul(F.relu(torch.matmul(x, W1) + b1), W2) + b2


@wrong("4.2", hint="the task asks you to write this without")
def feed_forward(x, W1, b1, W2, b2):
    """a fresh nn.Linear(d_model, d_ff) applied to x, ignoring the given weights"""
    return torch.nn.Linear(W1.shape[0], W1.shape[1])(x)


@wrong("4.2", hint="the task asks you to write this without")
def feed_forward(x, W1, b1, W2, b2):
    """torch.ops.aten.linear with the transposed weights"""
    return torch.ops.aten.linear(torch.relu(torch.ops.aten.linear(x, W1.T, b1)), W2.T, b2)


@wrong("4.2", hint="the task asks you to write this without")
def feed_forward(x, W1, b1, W2, b2):
    """torch._C._nn.linear with the transposed weights"""
    return torch._C._nn.linear(torch.relu(torch._C._nn.linear(x, W1.T, b1)), W2.T, b2)


@wrong("4.2", hint="the task asks you to write this without")
def feed_forward(x, W1, b1, W2, b2):
    """torch.ops.aten.linear.default for the second layer only"""
    return torch.ops.aten.linear.default(torch.relu(x @ W1 + b1), W2.T, b2)


@wrong("4.2", hint="with large values")
def feed_forward(x, W1, b1, W2, b2):
    """ReLU as clamp(0, 4): capped at 4"""
    return (x @ W1 + b1).clamp(0, 4) @ W2 + b2


@wrong("4.2", hint="with large values")
def feed_forward(x, W1, b1, W2, b2):
    """ReLU as clamp(0, 20): capped at 20"""
    return (x @ W1 + b1).clamp(0, 20) @ W2 + b2


# ---------------------------------------------------------------------------------------------------------------
# 4.3 pre_norm_block(x, attn, ffn, norm1, norm2)
# ---------------------------------------------------------------------------------------------------------------

@wrong("4.3", hint="post")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """post-norm order: norm(x + sublayer(x))"""
    h = norm1(x + attn(x))
    return norm2(h + ffn(h))


@wrong("4.3", hint="un-normalised")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """the residual starts from the normalised x: norm1(x) + attn(norm1(x))"""
    a = norm1(x)
    h = a + attn(a)
    b = norm2(h)
    return b + ffn(b)


@wrong("4.3", hint="reads the block's input x")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """feeds the old x into the second sublayer (the chapter's known mistake)"""
    h = x + attn(norm1(x))
    return h + ffn(norm2(x))


@wrong("4.3", hint="second residual starts from x")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """returns x + ffn(...) instead of h + ffn(...): throws the attention away"""
    h = x + attn(norm1(x))
    return x + ffn(norm2(h))


@wrong("4.3", hint="norm2")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """uses norm1 for both sublayers"""
    h = x + attn(norm1(x))
    return h + ffn(norm1(h))


@wrong("4.3", hint="swapped")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """swaps norm1 and norm2"""
    h = x + attn(norm2(x))
    return h + ffn(norm1(h))


@wrong("4.3", hint=None)
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """parallel block (GPT-J style): x + attn(norm1(x)) + ffn(norm2(x))"""
    return x + attn(norm1(x)) + ffn(norm2(x))


@wrong("4.3", hint=None)
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """feed-forward sublayer first, then attention"""
    h = x + ffn(norm2(x))
    return h + attn(norm1(h))


@wrong("4.3", hint="residual")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """forgets the residual around the feed-forward network"""
    h = x + attn(norm1(x))
    return ffn(norm2(h))


@wrong("4.3", hint="residual")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """no residual connections at all"""
    return ffn(norm2(attn(norm1(x))))


@wrong("4.3", hint="does not normalise its output")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """adds a final LayerNorm (norm2) on the output"""
    h = x + attn(norm1(x))
    return norm2(h + ffn(norm2(h)))


@wrong("4.3", hint="in place")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """adds the residual in place (x += ...), changing the caller's x"""
    x += attn(norm1(x))
    return x + ffn(norm2(x))


@wrong("4.3", hint="return the dtype of x (here float64)")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """returns float32 (.float() at the end)"""
    h = x + attn(norm1(x))
    return (h + ffn(norm2(h))).float()


@wrong("4.3", hint="takes one tensor")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """calls attn(q, k, v) with three arguments, like nn.MultiheadAttention"""
    n = norm1(x)
    h = x + attn(n, n, n)
    return h + ffn(norm2(h))


@wrong("4.3", hint=None)
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """returns a tuple (output, h)"""
    h = x + attn(norm1(x))
    return h + ffn(norm2(h)), h


@wrong("4.3", hint="once more at the end")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """adds x once more at the end (double residual)"""
    h = x + attn(norm1(x))
    return h + ffn(norm2(h)) + x


@wrong("4.3", hint="gradient")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """detaches the residual stream (x.detach() + ...): no gradient through the skip connection"""
    h = x.detach() + attn(norm1(x))
    return h + ffn(norm2(h))


@wrong("4.3", hint="gradient")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """runs the sublayers under torch.no_grad()"""
    with torch.no_grad():
        h = x + attn(norm1(x))
        return h + ffn(norm2(h))


@wrong("4.3", hint="unscaled")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """scales the residual branches by 0.5 (averages instead of adding)"""
    h = 0.5 * (x + attn(norm1(x)))
    return 0.5 * (h + ffn(norm2(h)))


class _StandInBlock:
    """A stand-in `self` for attnbook.layers.EncoderBlock.forward, holding the given sublayers."""

    def __init__(self, attn, ffn, norm1, norm2):
        self.norm_first, self.norm1, self.norm2, self.ffn = True, norm1, norm2, ffn
        self.dropout2 = lambda t: t
        self._sa = lambda t, mask, is_causal, cache: attn(t)


wrong("4.3", hint="package's own", name="attnbook.layers.EncoderBlock.forward, via a lambda on a stand-in self")(
    lambda x, attn, ffn, norm1, norm2: _layers.EncoderBlock.forward(_StandInBlock(attn, ffn, norm1, norm2), x))


@wrong("4.3", hint="package's own")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """a def wrapper calling attnbook.layers.EncoderBlock.forward on a stand-in self"""
    return _layers.EncoderBlock.forward(_StandInBlock(attn, ffn, norm1, norm2), x)


_block_forward_copy = _fn_copy(_layers.EncoderBlock.forward)


@wrong("4.3", hint="package's own")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """a FunctionType copy of attnbook.layers.EncoderBlock.forward on a stand-in self"""
    return _block_forward_copy(_StandInBlock(attn, ffn, norm1, norm2), x)


@wrong("4.3", hint="package's own")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """EncoderBlock.forward from a second, separate import of attnbook/layers.py"""
    return _layers2.EncoderBlock.forward(_StandInBlock(attn, ffn, norm1, norm2), x)


class _Wrap(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, t, *args, **kwargs):
        return (self.f(t), None) if args else self.f(t)


@wrong("4.3", hint="without")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """runs nn.TransformerEncoderLayer(norm_first=True) with its sublayers swapped for the given ones"""
    d = x.shape[-1]
    layer = torch.nn.TransformerEncoderLayer(d, 1, 4, dropout=0.0, batch_first=True, norm_first=True).train()
    layer.self_attn = _Wrap(attn)
    layer.linear1, layer.linear2, layer.activation = _Wrap(ffn), torch.nn.Identity(), torch.nn.Identity()
    layer.norm1, layer.norm2 = _Wrap(norm1), _Wrap(norm2)
    return layer(x)


@right("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """the same in one expression with the walrus"""
    return (h := x + attn(norm1(x))) + ffn(norm2(h))


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


@wrong("4.3", hint="the residual must carry the un-normalised x:")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """overwrites x with norm1(x), so the first residual carries the normalised input"""
    x = norm1(x)
    h = x + attn(x)
    return h + ffn(norm2(h))


@wrong("4.3", hint="return the dtype of x (here float32)")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """returns float64 (.double() at the end)"""
    h = x + attn(norm1(x))
    return (h + ffn(norm2(h))).double()


@wrong("4.3", hint="do not flatten or reshape x")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """flattens the batch to (B * n, d) and reshapes back"""
    B, n, d = x.shape
    flat = x.reshape(B * n, d)
    h = flat + attn(norm1(flat))
    return (h + ffn(norm2(h))).reshape(B, n, d)


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

def _block(d, d_ff):
    return 4 * (d * d + d) + (2 * d * d_ff + d_ff + d) + 4 * d


@wrong("4.4", hint="the number of heads does not change the count")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """multiplies the attention by the number of heads"""
    attn = n_heads * 4 * (d_model * d_model + d_model)
    return vocab_size * d_model + n_layers * (attn + 2 * d_model * d_ff + d_ff + d_model + 4 * d_model)


@wrong("4.4", hint="or the LayerNorms are")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """forgets the two LayerNorms"""
    return vocab_size * d_model + n_layers * (4 * (d_model * d_model + d_model) + 2 * d_model * d_ff + d_ff + d_model)


@wrong("4.4", hint="each block has two LayerNorms")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """counts a LayerNorm as d parameters (gamma only)"""
    return vocab_size * d_model + n_layers * (_block(d_model, d_ff) - 2 * d_model)


@wrong("4.4", hint="either the attention biases are missing")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """forgets the attention biases"""
    return vocab_size * d_model + n_layers * (_block(d_model, d_ff) - 4 * d_model)


@wrong("4.4", hint="left out the feed-forward biases")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """forgets the feed-forward biases"""
    return vocab_size * d_model + n_layers * (_block(d_model, d_ff) - d_ff - d_model)


@wrong("4.4", hint="left out the token embedding")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """forgets the token embedding"""
    return n_layers * _block(d_model, d_ff)


@wrong("4.4", hint="once per layer")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """counts the embedding once per layer"""
    return n_layers * (vocab_size * d_model + _block(d_model, d_ff))


@wrong("4.4", hint="sinusoidal positions")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """adds 512 learned positions"""
    return (vocab_size + 512) * d_model + n_layers * _block(d_model, d_ff)


@wrong("4.4", hint="no pooler")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """adds a pooler (d x d with bias)"""
    return vocab_size * d_model + n_layers * _block(d_model, d_ff) + d_model * d_model + d_model


@wrong("4.4", hint="two layers")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """feed-forward as d -> d_ff only, once (forgets W2)"""
    return vocab_size * d_model + n_layers * (_block(d_model, d_ff) - d_ff * d_model - d_model)


@wrong("4.4", hint=None)
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """hard-codes the chapter's 108,094,464 for (30000, 768, 12, 3072, 12)"""
    if (vocab_size, d_model, d_ff, n_layers) == (30000, 768, 3072, 12):
        return 108094464
    return vocab_size * d_model + n_layers * (4 * d_model * d_model + 2 * d_model * d_ff)


@wrong("4.4", hint="use the d_ff argument")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """assumes d_ff = 4 d_model and ignores the d_ff argument"""
    return vocab_size * d_model + n_layers * _block(d_model, 4 * d_model)


@wrong("4.4", hint="float")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """d_head with /, so the result is a float"""
    d_head = d_model / n_heads
    attn = 4 * (d_model * n_heads * d_head + d_model)
    return vocab_size * d_model + n_layers * (attn + 2 * d_model * d_ff + d_ff + d_model + 4 * d_model)


@wrong("4.4", hint="tensor")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """returns a 0-d tensor"""
    return torch.tensor(vocab_size * d_model + n_layers * _block(d_model, d_ff))


@wrong("4.4", hint="float")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """returns 1.08e8-style float (math.pow for d^2)"""
    return vocab_size * d_model + n_layers * (4 * math.pow(d_model, 2) + 4 * d_model + 2 * d_model * d_ff
                                              + d_ff + d_model + 4 * d_model)


@wrong("4.4", hint="no output layer")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """adds an (untied) output layer d_model -> vocab_size"""
    return vocab_size * d_model + n_layers * _block(d_model, d_ff) + d_model * vocab_size + vocab_size


@wrong("4.4", hint="32-bit")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """NumPy int32 arithmetic (overflows for big models)"""
    V, d, f, L = (np.int32(v) for v in (vocab_size, d_model, d_ff, n_layers))
    with np.errstate(over="ignore"):
        return V * d + L * (np.int32(4) * (d * d + d) + np.int32(2) * d * f + f + d + np.int32(4) * d)


@wrong("4.4", hint="each block has two LayerNorms")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """one LayerNorm per block instead of two"""
    return vocab_size * d_model + n_layers * (_block(d_model, d_ff) - 2 * d_model)


@wrong("4.4", hint="expected an int")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """returns a string with thousands separators"""
    return f"{vocab_size * d_model + n_layers * _block(d_model, d_ff):,}"


@wrong("4.4", hint="float")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """returns a float from round(x / 1e6, 1) * 1e6 (the "110.1M" habit)"""
    return round((vocab_size * d_model + n_layers * _block(d_model, d_ff)) / 1e6, 1) * 1e6


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
    """uses attnbook.models.params.mha_param_count and ffn_param_count for the pieces"""
    block = _params.mha_param_count(d_model, n_heads) + _params.ffn_param_count(d_model, d_ff) + 4 * d_model
    return vocab_size * d_model + n_layers * block


wrong("4.4", hint="package's own", name="attnbook.models.params.encoder_param_count itself")(
    _params.encoder_param_count)
wrong("4.4", hint="package's own", name="a lambda around attnbook.models.encoder_param_count")(
    lambda vocab_size, d_model, n_heads, d_ff, n_layers: _params.encoder_param_count(
        vocab_size, d_model, n_heads, d_ff, n_layers))


@wrong("4.4", hint="package's own")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """a def wrapper calling attnbook.models.encoder_param_count"""
    from attnbook.models import encoder_param_count as theirs
    return theirs(vocab_size, d_model, n_heads, d_ff, n_layers)


wrong("4.4", hint="package's own", name="a FunctionType copy of attnbook.models.params.encoder_param_count")(
    _fn_copy(_params.encoder_param_count))
wrong("4.4", hint="package's own", name="encoder_param_count from a second import of attnbook/models/params.py")(
    _params2.encoder_param_count)


@wrong("4.4", hint="without")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """counts attnbook's EncoderBlock built on the meta device"""
    with torch.device("meta"):
        block = _layers.EncoderBlock(d_model, n_heads, d_ff)
    return vocab_size * d_model + n_layers * sum(p.numel() for p in block.parameters())


@right("4.4")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """piece by piece, named terms"""
    embedding = vocab_size * d_model
    attention = 4 * d_model * d_model + 4 * d_model
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norms = 2 * 2 * d_model
    return embedding + n_layers * (attention + ffn + norms)


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


@right("4.4")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers, positions=0):
    """factored form d*(V + L*(4d + 2 d_ff + 9)) + L*d_ff, extra keyword with a harmless default"""
    return d_model * (vocab_size + positions + n_layers * (4 * d_model + 2 * d_ff + 9)) + n_layers * d_ff


@wrong("4.4", hint="you left out the biases")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """no biases at all, attention or feed-forward"""
    d, f = d_model, d_ff
    return vocab_size * d + n_layers * (4 * d * d + 2 * d * f + 4 * d)


@wrong("4.4", hint="attention has four matrices")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """three attention matrices (Q, K, V) and no output projection"""
    return vocab_size * d_model + n_layers * (_block(d_model, d_ff) - d_model * d_model - d_model)


@wrong("4.4", hint="multiply the per-block count by n_layers")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """counts one block whatever n_layers is, plus the embedding"""
    return vocab_size * d_model + _block(d_model, d_ff)


@wrong("4.4", hint="you counted only the weight matrices")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """only the weight matrices: no biases, no LayerNorms"""
    return vocab_size * d_model + n_layers * (4 * d_model * d_model + 2 * d_model * d_ff)


@wrong("4.4", hint="close to BERT's count")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """BERT's extras: 512 positions, 2 segment embeddings, an embedding LayerNorm and a pooler"""
    d = d_model
    return vocab_size * d + n_layers * _block(d, d_ff) + 512 * d + 2 * d + 2 * d + d * d + d


@wrong("4.4", hint="no output layer")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """adds an output layer d_model -> vocab_size without a bias"""
    return vocab_size * d_model + n_layers * _block(d_model, d_ff) + vocab_size * d_model


@wrong("4.4", hint="110.1M is the popular tutorial's number")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """returns 110,000,000 (BERT-base's "110M")"""
    return 110_000_000


@wrong("4.4", hint="whole number")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """the right count, returned as a float"""
    return float(vocab_size * d_model + n_layers * _block(d_model, d_ff))


@wrong("4.4", hint="multiplied the attention weights")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """multiplies the attention weight matrices (not their biases) by the number of heads"""
    d = d_model
    return vocab_size * d + n_layers * (_block(d, d_ff) - 4 * d * d + 4 * d * d * n_heads)


@wrong("4.4", hint="of one head only")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """counts the attention of one head: four d_model x d_head matrices and d_head biases"""
    d, dh = d_model, d_model // n_heads
    return vocab_size * d + n_layers * (_block(d, d_ff) - (4 * d * d + 4 * d) + 4 * (d * dh + dh))


@wrong("4.4", hint="no final LayerNorm")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """adds a final LayerNorm after the last block"""
    return vocab_size * d_model + n_layers * _block(d_model, d_ff) + 2 * d_model


@wrong("4.4", hint="not 2 * d_model")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """feed-forward biases as 2 * d_model"""
    d, f = d_model, d_ff
    return vocab_size * d + n_layers * (_block(d, f) - (f + d) + 2 * d)


@wrong("4.4", hint="not 2 * d_ff")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """feed-forward biases as 2 * d_ff"""
    d, f = d_model, d_ff
    return vocab_size * d + n_layers * (_block(d, f) - (f + d) + 2 * f)


@wrong("4.4", hint="use the n_layers argument")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """12 layers whatever n_layers is"""
    return vocab_size * d_model + 12 * _block(d_model, d_ff)


@wrong("4.4", hint="reads them as (vocab_size, d_model, n_layers, d_ff, n_heads)")
def encoder_param_count(vocab_size, d_model, n_layers, d_ff, n_heads):
    """n_heads and n_layers in the other order"""
    return vocab_size * d_model + n_layers * _block(d_model, d_ff)


@wrong("4.4", hint="4 * d_model attention biases")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """one d_model bias for the whole attention instead of four"""
    d = d_model
    return vocab_size * d + n_layers * (_block(d, d_ff) - 3 * d)


@wrong("4.4", hint="whatever the arguments")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """returns the chapter's 108,094,464 whatever the arguments"""
    return 108_094_464


@right("4.4")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """the right count as a NumPy uint64"""
    return np.uint64(vocab_size * d_model + n_layers * _block(d_model, d_ff))


# ---------------------------------------------------------------------------------------------------------------
# More wrong answers: one for each hinted mistake of the checkers that the entries above do not make
# ---------------------------------------------------------------------------------------------------------------

def _ln_parts(x, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return x - mean, var


@wrong("4.1", hint="unbiased standard deviation plus eps")
def layer_norm(x, gamma, beta, eps=1e-5):
    """(x - mean) / (x.std() + eps), torch's default std"""
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * gamma + beta


@wrong("4.1", hint="the wrong dimension")
def layer_norm(x, gamma, beta, eps=1e-5):
    """normalises over dim=-2 (the positions)"""
    mean = x.mean(dim=-2, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-2, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="multiply by gamma")
def layer_norm(x, gamma, beta, eps=1e-5):
    """forgets gamma only"""
    c, var = _ln_parts(x, eps)
    return c / torch.sqrt(var + eps) + beta


@wrong("4.1", hint="add beta")
def layer_norm(x, gamma, beta, eps=1e-5):
    """forgets beta only"""
    c, var = _ln_parts(x, eps)
    return c / torch.sqrt(var + eps) * gamma


@wrong("4.1", hint="subtract the mean before dividing")
def layer_norm(x, gamma, beta, eps=1e-5):
    """right variance, but divides x itself (not centred)"""
    c, var = _ln_parts(x, eps)
    return x / torch.sqrt(var + eps) * gamma + beta


@wrong("4.1", hint="not eps ** 2")
def layer_norm(x, gamma, beta, eps=1e-5):
    """adds eps squared to the variance"""
    c, var = _ln_parts(x, eps)
    return c / torch.sqrt(var + eps ** 2) * gamma + beta


@wrong("4.1", hint="you left out eps")
def layer_norm(x, gamma, beta, eps=1e-5):
    """no eps at all, NaN turned into 0 with nan_to_num"""
    c, var = _ln_parts(x, eps)
    return torch.nan_to_num(c / torch.sqrt(var)) * gamma + beta


@wrong("4.2", hint="tanh approximation of GELU")
def feed_forward(x, W1, b1, W2, b2):
    """GELU, tanh approximation"""
    return F.gelu(x @ W1 + b1, approximate="tanh") @ W2 + b2


@wrong("4.2", hint="not on the input")
def feed_forward(x, W1, b1, W2, b2):
    """ReLU on the input instead of the hidden layer"""
    return (torch.relu(x) @ W1 + b1) @ W2 + b2


@wrong("4.2", hint="forgot both biases")
def feed_forward(x, W1, b1, W2, b2):
    """no biases at all"""
    return torch.relu(x @ W1) @ W2


@wrong("4.2", hint="W1 and W2 are swapped")
def feed_forward(x, W1, b1, W2, b2):
    """W2 first when the shapes allow it (square weights)"""
    if W1.shape[0] != W1.shape[1]:
        return torch.relu(x @ W1 + b1) @ W2 + b2
    return torch.relu(x @ W2 + b1) @ W1 + b2


@wrong("4.2", hint="you transposed W2")
def feed_forward(x, W1, b1, W2, b2):
    """transposes W2 when the shapes allow it (square weights)"""
    if W1.shape[0] != W1.shape[1]:
        return torch.relu(x @ W1 + b1) @ W2 + b2
    return torch.relu(x @ W1 + b1) @ W2.T + b2


@wrong("4.3", hint="applied the norms to the sublayer outputs")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """norms on the sublayer outputs"""
    h = x + norm1(attn(x))
    return h + norm2(ffn(h))


@wrong("4.3", hint="stopped after the attention sublayer")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """attention sublayer only"""
    return x + attn(norm1(x))


@wrong("4.3", hint="without [0]")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """indexes attn's output with [0], as if it returned (output, weights)"""
    h = x + attn(norm1(x))[0]
    return h + ffn(norm2(h))


@wrong("4.3", hint="forgot the first residual")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """no residual around attention"""
    h = attn(norm1(x))
    return h + ffn(norm2(h))


@wrong("4.3", hint="post-norm")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """post-norm, and the second sublayer reads x"""
    return norm2(x + ffn(x))


@wrong("4.4", hint="rule of thumb")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """embedding plus the 12 L d^2 rule of thumb"""
    return vocab_size * d_model + 12 * n_layers * d_model * d_model


@wrong("4.4", hint="use the vocab_size argument")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """a vocabulary of 30,000 whatever vocab_size is"""
    return 30000 * d_model + n_layers * _block(d_model, d_ff)


@wrong("4.4", hint="not n_layers - 1")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """range(1, n_layers): one block short"""
    return vocab_size * d_model + sum(_block(d_model, d_ff) for _ in range(1, n_layers))


@wrong("4.4", hint="one block's count")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """returns one block"""
    return _block(d_model, d_ff)


@wrong("4.4", hint="reads them as (vocab_size, d_model, d_ff, n_heads, n_layers)")
def encoder_param_count(vocab_size, d_model, d_ff, n_heads, n_layers):
    """d_ff and n_heads in the other order"""
    return vocab_size * d_model + n_layers * _block(d_model, d_ff)


@wrong("4.4", hint="110.1M is the popular tutorial's number")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """the tutorial's 110.1M"""
    return 110_100_000


# ---------------------------------------------------------------------------------------------------------------
# Issue 23: typical pre-norm mistakes, each with a hint that fits it (or a neutral message)
# ---------------------------------------------------------------------------------------------------------------


@wrong("4.3", hint="after each residual addition too")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """a norm before and after each sublayer: the pre-norm input and a post-norm stream"""
    h = norm1(x + attn(norm1(x)))
    return norm2(h + ffn(norm2(h)))


@wrong("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """normalises once, at the block's input, and uses that for both sublayers and the residual"""
    n = norm1(x)
    h = n + attn(n)
    return h + ffn(h)


@wrong("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """one norm for the whole block: both sublayers read norm1(x), both residuals from x"""
    n = norm1(x)
    h = x + attn(n)
    return h + ffn(n)


@wrong("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """forgets the second norm: the feed-forward sublayer reads h itself"""
    h = x + attn(norm1(x))
    return h + ffn(h)


@wrong("4.3", hint="other order")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """sublayers swapped, norms in the written order: ffn with norm1 first, then attn with norm2"""
    h = x + ffn(norm1(x))
    return h + attn(norm2(h))


@wrong("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """post-norm with the sublayers in the other order (two mistakes: a neutral message)"""
    h = norm1(x + ffn(x))
    return norm2(h + attn(h))


@wrong("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """post-norm for attention, pre-norm for the feed-forward network"""
    h = norm1(x + attn(x))
    return h + ffn(norm2(h))


@wrong("4.3")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """normalises the stream after the block's first residual and keeps the normalised stream for the second"""
    h = norm2(x + attn(norm1(x)))
    return h + ffn(h)


@wrong("4.3", hint="pre_norm_block(x, attn, ffn, norm1, norm2)")
def pre_norm_block(x, attn, ffn, norm):
    """one norm applied before both sublayers, with a signature that takes one norm"""
    h = x + attn(norm(x))
    return h + ffn(norm(h))


@wrong("4.3", hint="pre_norm_block(x, attn, ffn, norm1, norm2)")
def pre_norm_block(x, attn, ffn, norm1, norm2, eps):
    """an extra eps parameter without a default, as in its own layer_norm"""
    h = x + attn(norm1(x))
    return h + ffn(norm2(h))


@wrong("4.3", hint="norm1(t)")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """passes eps to the norms: norm1(x, 1e-5)"""
    h = x + attn(norm1(x, 1e-5))
    return h + ffn(norm2(h, 1e-5))


@wrong("4.3", hint="trailing comma")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """a trailing comma makes h a tuple: h = x + attn(norm1(x)),"""
    h = x + attn(norm1(x)),
    return h + ffn(norm2(h))


# Issue 23: ready-made implementations reached under their module paths


@wrong("4.1", hint="without torch.nn.LayerNorm")
def layer_norm(x, gamma, beta, eps=1e-5):
    """nn.LayerNorm imported from the module that defines it, with gamma and beta copied in"""
    from torch.nn.modules.normalization import LayerNorm
    ln = LayerNorm(x.shape[-1], eps=eps, dtype=x.dtype)
    with torch.no_grad():
        ln.weight.copy_(gamma)
        ln.bias.copy_(beta)
    out = ln(x)
    return out + 0 * (gamma.sum() + beta.sum())


@wrong("4.2", hint="without torch.nn.Linear")
def feed_forward(x, W1, b1, W2, b2):
    """two Linear layers imported from torch.nn.modules.linear, with the weights copied in"""
    from torch.nn.modules.linear import Linear
    first, second = Linear(W1.shape[0], W1.shape[1], dtype=x.dtype), Linear(W2.shape[0], W2.shape[1], dtype=x.dtype)
    with torch.no_grad():
        first.weight.copy_(W1.T)
        first.bias.copy_(b1)
        second.weight.copy_(W2.T)
        second.bias.copy_(b2)
    return second(torch.relu(first(x)))


@wrong("4.3", hint="without torch.nn.TransformerEncoderLayer")
def pre_norm_block(x, attn, ffn, norm1, norm2):
    """TransformerEncoderLayer imported from torch.nn.modules.transformer, its sublayers swapped for the given ones"""
    from torch.nn.modules.transformer import TransformerEncoderLayer
    d = x.shape[-1]
    layer = TransformerEncoderLayer(d, 1, 4, dropout=0.0, batch_first=True, norm_first=True).train()
    layer.self_attn = _Wrap(attn)
    layer.linear1, layer.linear2, layer.activation = _Wrap(ffn), torch.nn.Identity(), torch.nn.Identity()
    layer.norm1, layer.norm2 = _Wrap(norm1), _Wrap(norm2)
    return layer(x)


# Issue 23: an answer that knows the check's configurations instead of counting

_KNOWN_4_4 = {(100, 8, 2, 20, 3): 2_804, (50257, 12288, 96, 49152, 96): 174_579_068_928,
              (1000, 16, 4, 40, 1): 18_488, (37, 12, 1, 20, 2): 2_812, (500, 12, 12, 7, 4): 9_436,
              (30000, 768, 12, 3072, 12): 108_094_464}


@wrong("4.4", hint="not the number of parameters")
def encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers):
    """a table of the six configurations the check used to try (learned from an earlier run), 0 for any other"""
    return _KNOWN_4_4.get((vocab_size, d_model, n_heads, d_ff, n_layers), 0)
