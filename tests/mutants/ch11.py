"""Chapter 11 (the modern block): learner answers to 11.1 (rms_norm), 11.2 (swiglu) and 11.3 (modern_block).

11.3's answers call the learner's earlier functions; here those are module-level helpers (`_attention`,
`_split_heads`, ...), written as a learner would have written them in chapters 2, 3, 5 and 10, plus their 11.1 and
11.2 answers (`_rms_norm`, `_swiglu`). The helpers have names of their own, because every `@wrong`/`@right`
function below rebinds the name it is defined under.
"""
from __future__ import annotations

import importlib.util
import math
import sys
import types

import torch
import torch.nn.functional as F

import attnbook.models.llama as _llama
from attnbook import multihead as _multihead
from attnbook import positional as _positional
from mutants import right, value, wrong


def _second_import(module):
    """The same module loaded a second time, from its .py file, as a separate module object."""
    spec = importlib.util.spec_from_file_location(module.__name__ + "_copy", module.__file__)
    copy = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = copy  # a dataclass looks its module up while the class is made
    try:
        spec.loader.exec_module(copy)
    finally:
        del sys.modules[spec.name]
    return copy


def _fn_copy(f):
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)


_llama2 = _second_import(_llama)

# ---------------------------------------------------------------------------------------------------------------
# 11.1 rms_norm(x, weight, eps=1e-6)
# ---------------------------------------------------------------------------------------------------------------


@wrong("11.1", hint="that is LayerNorm")
def rms_norm(x, weight, eps=1e-6):
    """subtracts the mean and divides by the standard deviation (LayerNorm with weight as gamma)"""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight


@wrong("11.1", hint="eps goes inside the square root")
def rms_norm(x, weight, eps=1e-6):
    """adds eps outside the square root: x / (rms + eps)"""
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


@wrong("11.1", hint="you left out eps")
def rms_norm(x, weight, eps=1e-6):
    """no eps at all (NaN on an all-zero token)"""
    return x / x.pow(2).mean(-1, keepdim=True).sqrt() * weight


@wrong("11.1", hint="use the eps argument")
def rms_norm(x, weight, eps=1e-6):
    """ignores the eps argument: always 1e-6"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


@wrong("11.1", hint="not 1e-5")
def rms_norm(x, weight, eps=1e-5):
    """LayerNorm's default eps, 1e-5, instead of 1e-6"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@wrong("11.1", hint="default eps=1e-6")
def rms_norm(x, weight, eps=1e-8):
    """a default eps of 1e-8 instead of 1e-6"""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@wrong("11.1", hint="tiny values")
def rms_norm(x, weight, eps=1e-6):
    """adds eps only where the mean square is large (where it makes no difference)"""
    ms = x.pow(2).mean(-1, keepdim=True)
    return x / torch.sqrt(torch.where(ms > 1e-3, ms + eps, ms)) * weight


@wrong("11.1", hint="you forgot the weight")
def rms_norm(x, weight, eps=1e-6):
    """forgets to multiply by weight"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


@wrong("11.1", hint="Gemma")
def rms_norm(x, weight, eps=1e-6):
    """scales by (1 + weight), Gemma's convention"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight)


@wrong("11.1", hint="it is not added")
def rms_norm(x, weight, eps=1e-6):
    """adds the weight like a bias"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) + weight


@wrong("11.1", hint="the wrong dimension (dim=0)")
def rms_norm(x, weight, eps=1e-6):
    """mean over dim 0 (BatchNorm's axis)"""
    return x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * weight


@wrong("11.1", hint="all dimensions at once")
def rms_norm(x, weight, eps=1e-6):
    """mean of the squares of the whole tensor"""
    return x * torch.rsqrt(x.pow(2).mean() + eps) * weight


@wrong("11.1", hint="you summed the squares")
def rms_norm(x, weight, eps=1e-6):
    """divides by the length of the vector (sum of squares, not mean)"""
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight


@wrong("11.1", hint="not by mean(x**2) + eps itself")
def rms_norm(x, weight, eps=1e-6):
    """divides by the mean square, forgetting the square root"""
    return x / (x.pow(2).mean(-1, keepdim=True) + eps) * weight


@wrong("11.1", hint="standard deviation")
def rms_norm(x, weight, eps=1e-6):
    """divides x (not centred) by the standard deviation: torch.var instead of the mean square"""
    return x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * weight


@wrong("11.1", hint="mean of |x|")
def rms_norm(x, weight, eps=1e-6):
    """divides by the mean absolute value"""
    return x / (x.abs().mean(-1, keepdim=True) + eps) * weight


@wrong("11.1", hint="lower bound")
def rms_norm(x, weight, eps=1e-6):
    """clamps the mean square at eps instead of adding eps"""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True).clamp(min=eps)) * weight


@wrong("11.1", hint="keepdim")
def rms_norm(x, weight, eps=1e-6):
    """forgets keepdim=True"""
    return x / torch.sqrt(x.pow(2).mean(-1) + eps) * weight


@wrong("11.1", hint="without torch.nn.functional.rms_norm")
def rms_norm(x, weight, eps=1e-6):
    """torch.nn.functional.rms_norm"""
    return F.rms_norm(x, x.shape[-1:], weight, eps)


@wrong("11.1", hint="without torch.nn.RMSNorm")
def rms_norm(x, weight, eps=1e-6):
    """torch.nn.RMSNorm with the weight copied in"""
    norm = torch.nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm(x)


@wrong("11.1", hint="without torch.nn.functional.normalize")
def rms_norm(x, weight, eps=1e-6):
    """F.normalize (unit length) times sqrt(d)"""
    return F.normalize(x, dim=-1) * x.shape[-1] ** 0.5 * weight


@wrong("11.1", hint="without torch.nn.functional.layer_norm")
def rms_norm(x, weight, eps=1e-6):
    """the layer_norm trick: [x, -x] has mean 0 and variance mean(x**2)"""
    both = torch.cat([x, -x], dim=-1)
    return F.layer_norm(both, both.shape[-1:], eps=eps)[..., : x.shape[-1]] * weight


@wrong("11.1", hint="package's own")
def rms_norm(x, weight, eps=1e-6):
    """the package's RMSNorm module, with the weight copied in"""
    norm = _llama.RMSNorm(x.shape[-1], eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm(x)


value("11.1", _llama.RMSNorm, right=False, hint="package's own", name="the package's RMSNorm class itself")


_rms_forward_copy = _fn_copy(_llama.RMSNorm.forward)


class _StandInNorm:
    def __init__(self, weight, eps):
        self.weight, self.eps, self.d_model = weight, eps, weight.shape[0]


@wrong("11.1", hint="package's own")
def rms_norm(x, weight, eps=1e-6):
    """a FunctionType copy of attnbook.models.llama.RMSNorm.forward on a stand-in self"""
    return _rms_forward_copy(_StandInNorm(weight, eps), x)


@wrong("11.1", hint="package's own")
def rms_norm(x, weight, eps=1e-6):
    """RMSNorm.forward from a second, separate import of attnbook/models/llama.py"""
    return _llama2.RMSNorm.forward(_StandInNorm(weight, eps), x)


@wrong("11.1", hint="dtype torch.float32")
def rms_norm(x, weight, eps=1e-6):
    """returns float32 for a float64 input"""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


@wrong("11.1", hint="relative 1e-12")
def rms_norm(x, weight, eps=1e-6):
    """computes in float32 and casts back"""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


@wrong("11.1", hint="in place")
def rms_norm(x, weight, eps=1e-6):
    """divides x in place"""
    x /= torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * weight


@wrong("11.1", hint="gradient")
def rms_norm(x, weight, eps=1e-6):
    """detaches the root mean square"""
    return x / torch.sqrt(x.detach().pow(2).mean(-1, keepdim=True) + eps) * weight


@wrong("11.1", hint="with respect to weight is missing")
def rms_norm(x, weight, eps=1e-6):
    """detaches the weight"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.detach()


@wrong("11.1", hint="expected a torch.Tensor")
def rms_norm(x, weight, eps=1e-6):
    """returns a NumPy array"""
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight).numpy()


@right("11.1")
def rms_norm(x, weight, eps=1e-6):
    """rsqrt of the mean of x * x"""
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


@right("11.1")
def rms_norm(x, weight, eps=1e-6):
    """from the vector's length: ||x|| / sqrt(d) with torch.linalg.vector_norm"""
    d = x.shape[-1]
    rms = torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d + eps)
    return weight * (x / rms)


@right("11.1")
def rms_norm(x, weight, eps=1e-6):
    """in float64, cast back to x's dtype (as Llama computes in a wider dtype)"""
    h = x.to(torch.float64)
    h = h / (h.pow(2).mean(-1, keepdim=True) + eps) ** 0.5
    return (h * weight.to(torch.float64)).to(x.dtype)


@right("11.1")
def rms_norm(x, weight, eps=1e-6):
    """einsum for the sum of squares, divided by d"""
    ms = torch.einsum("...d,...d->...", x, x)[..., None] / x.shape[-1]
    return torch.div(x, torch.sqrt(ms + eps)).mul(weight)


@right("11.1")
def rms_norm(x, weight, eps: float = 1e-6, dim: int = -1):
    """an extra dim argument with the right default"""
    return x / x.square().mean(dim, keepdim=True).add(eps).sqrt() * weight


@right("11.1")
def rms_norm(x, weight, eps=1e-6):
    """the textbook form: x / sqrt(mean(x * x) + eps) * weight"""
    return x / (x * x).mean(dim=-1, keepdim=True).add(eps) ** 0.5 * weight


@right("11.1")
def rms_norm(x, weight, eps=1e-6):
    """off by a factor 1 + 3e-13 on float64 inputs (within the promised relative 1e-12)"""
    out = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight
    return out * (1 + 3e-13) if x.dtype == torch.float64 else out


@right("11.1")
def rms_norm(x, weight, eps=1e-6):
    """off by a factor 1 - 3e-13 on float64 inputs (within the promised relative 1e-12)"""
    out = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight
    return out * (1 - 3e-13) if x.dtype == torch.float64 else out


# ---------------------------------------------------------------------------------------------------------------
# 11.2 swiglu(x, W_gate, W_up, W_down)
# ---------------------------------------------------------------------------------------------------------------


@wrong("11.2", hint="gate and up are swapped")
def swiglu(x, W_gate, W_up, W_down):
    """SiLU on the up branch instead of the gate"""
    return (F.silu(x @ W_up) * (x @ W_gate)) @ W_down


@wrong("11.2", hint="before the product")
def swiglu(x, W_gate, W_up, W_down):
    """SiLU applied to the product of the two branches"""
    return F.silu((x @ W_gate) * (x @ W_up)) @ W_down


@wrong("11.2", hint="only the gate branch")
def swiglu(x, W_gate, W_up, W_down):
    """SiLU on both branches"""
    return (F.silu(x @ W_gate) * F.silu(x @ W_up)) @ W_down


@wrong("11.2", hint="ReGLU")
def swiglu(x, W_gate, W_up, W_down):
    """ReLU as the gate's activation"""
    return (torch.relu(x @ W_gate) * (x @ W_up)) @ W_down


@wrong("11.2", hint="GEGLU")
def swiglu(x, W_gate, W_up, W_down):
    """GELU as the gate's activation"""
    return (F.gelu(x @ W_gate) * (x @ W_up)) @ W_down


@wrong("11.2", hint="GLU (a sigmoid gate)")
def swiglu(x, W_gate, W_up, W_down):
    """sigmoid as the gate (the original GLU)"""
    return (torch.sigmoid(x @ W_gate) * (x @ W_up)) @ W_down


@wrong("11.2", hint="left out the up branch")
def swiglu(x, W_gate, W_up, W_down):
    """a plain SiLU network: no up branch"""
    return F.silu(x @ W_gate) @ W_down


@wrong("11.2", hint="left out the activation")
def swiglu(x, W_gate, W_up, W_down):
    """no activation: a bilinear product"""
    return ((x @ W_gate) * (x @ W_up)) @ W_down


@wrong("11.2", hint="not added")
def swiglu(x, W_gate, W_up, W_down):
    """adds the gate to the up branch instead of multiplying"""
    return (F.silu(x @ W_gate) + x @ W_up) @ W_down


@wrong("11.2", hint="forgot the down projection")
def swiglu(x, W_gate, W_up, W_down):
    """forgets W_down (returns the d_ff-wide hidden layer)"""
    return F.silu(x @ W_gate) * (x @ W_up)


@wrong("11.2", hint="after the down projection")
def swiglu(x, W_gate, W_up, W_down):
    """SiLU after W_down"""
    return F.silu(((x @ W_gate) * (x @ W_up)) @ W_down)


@wrong("11.2", hint="with no transpose")
def swiglu(x, W_gate, W_up, W_down):
    """applies the weights as nn.Linear does, x @ W.T"""
    return (F.silu(x @ W_gate.T) * (x @ W_up.T)) @ W_down.T


@wrong("11.2", hint="no residual connection of its own")
def swiglu(x, W_gate, W_up, W_down):
    """adds the input back (a residual inside the FFN)"""
    return x + (F.silu(x @ W_gate) * (x @ W_up)) @ W_down


@wrong("11.2", hint="without torch.nn.functional.linear")
def swiglu(x, W_gate, W_up, W_down):
    """F.linear with transposed weights"""
    return F.linear(F.silu(F.linear(x, W_gate.T)) * F.linear(x, W_up.T), W_down.T)


@wrong("11.2", hint="without torch.nn.Linear")
def swiglu(x, W_gate, W_up, W_down):
    """a fresh nn.Linear layer in place of the network (the given weights unused)"""
    return torch.nn.Linear(W_gate.shape[0], W_down.shape[1], bias=False).to(x.dtype)(x)


@wrong("11.2", hint="package's own")
def swiglu(x, W_gate, W_up, W_down):
    """the package's SwiGLU with the weights copied in"""
    ffn = _llama.SwiGLU(W_gate.shape[0], W_gate.shape[1]).to(x.dtype)
    with torch.no_grad():
        ffn.gate_proj.weight.copy_(W_gate.T)
        ffn.up_proj.weight.copy_(W_up.T)
        ffn.down_proj.weight.copy_(W_down.T)
    return ffn(x)


class _StandInFFN:
    def __init__(self, W_gate, W_up, W_down):
        self.gate_proj = lambda t: t @ W_gate
        self.up_proj = lambda t: t @ W_up
        self.down_proj = lambda t: t @ W_down


@wrong("11.2", hint="package's own")
def swiglu(x, W_gate, W_up, W_down):
    """SwiGLU.forward from a second import, on a stand-in self"""
    return _llama2.SwiGLU.forward(_StandInFFN(W_gate, W_up, W_down), x)


@wrong("11.2", hint="dtype")
def swiglu(x, W_gate, W_up, W_down):
    """returns float32 for float64 inputs"""
    x, W_gate, W_up, W_down = x.float(), W_gate.float(), W_up.float(), W_down.float()
    return (F.silu(x @ W_gate) * (x @ W_up)) @ W_down


@wrong("11.2", hint="gradient")
def swiglu(x, W_gate, W_up, W_down):
    """detaches the gate"""
    return (F.silu(x @ W_gate).detach() * (x @ W_up)) @ W_down


@wrong("11.2", hint="expected a torch.Tensor")
def swiglu(x, W_gate, W_up, W_down):
    """returns a tuple (output, hidden)"""
    hidden = F.silu(x @ W_gate) * (x @ W_up)
    return hidden @ W_down, hidden


@right("11.2")
def swiglu(x, W_gate, W_up, W_down):
    """SiLU written as z * sigmoid(z)"""
    z = x @ W_gate
    return (z * torch.sigmoid(z) * (x @ W_up)) @ W_down


@right("11.2")
def swiglu(x, W_gate, W_up, W_down):
    """einsum for the three products"""
    gate = F.silu(torch.einsum("...d,df->...f", x, W_gate))
    up = torch.einsum("...d,df->...f", x, W_up)
    return torch.einsum("...f,fd->...d", gate * up, W_down)


@right("11.2")
def swiglu(x, W_gate, W_up, W_down):
    """one matmul for both branches, then chunk"""
    both = x @ torch.cat([W_gate, W_up], dim=-1)  # (..., 2 d_ff)
    gate, up = both.chunk(2, dim=-1)
    return torch.matmul(F.silu(gate) * up, W_down)


@right("11.2")
def swiglu(x, W_gate, W_up, W_down):
    """F.glu on [g * u, g]: g * u * sigmoid(g)"""
    g, u = x @ W_gate, x @ W_up
    return F.glu(torch.cat([g * u, g], dim=-1), dim=-1) @ W_down


@right("11.2")
def swiglu(x, W_gate, W_up, W_down, act=F.silu):
    """the activation as an extra default argument"""
    return (act(x @ W_gate) * (x @ W_up)) @ W_down


@right("11.2")
def swiglu(x, W_gate, W_up, W_down):
    """torch.matmul for every product"""
    return torch.matmul(F.silu(torch.matmul(x, W_gate)) * torch.matmul(x, W_up), W_down)


# ---------------------------------------------------------------------------------------------------------------
# 11.3 modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0)
# The learner's earlier answers, as helpers
# ---------------------------------------------------------------------------------------------------------------


def _attention(q, k, v, mask=None):
    """2.2"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights


def _split_heads(x, n_heads):
    """3.1"""
    B, n, d = x.shape
    return x.view(B, n, n_heads, d // n_heads).transpose(1, 2)


def _merge_heads(x):
    """3.4"""
    B, h, n, d = x.shape
    return x.transpose(1, 2).reshape(B, n, h * d)


def _apply_rope(x, positions, base=10000.0):
    """5.3 with a base, its angles in float64 as the cell before 11.3 asks"""
    d = x.shape[-1]
    theta = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * theta
    emb = torch.cat([angles, angles], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos().to(x.dtype) + torch.cat([-x2, x1], dim=-1) * emb.sin().to(x.dtype)


def _apply_rope32(x, positions, base=10000.0):
    """5.3 with a base, its angles in float32 (5.3 accepts that: right to about 1e-6, not to 1e-12)"""
    d = x.shape[-1]
    theta = 1.0 / base ** (torch.arange(0, d, 2).float() / d)
    angles = positions.float()[:, None] * theta
    emb = torch.cat([angles, angles], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos().to(x.dtype) + torch.cat([-x2, x1], dim=-1) * emb.sin().to(x.dtype)


def _repeat_kv(x, n_rep):
    """10.2"""
    return x.repeat_interleave(n_rep, dim=1)


def _rms_norm(x, weight, eps=1e-6):
    """11.1"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _swiglu(x, W_gate, W_up, W_down):
    """11.2"""
    return (F.silu(x @ W_gate) * (x @ W_up)) @ W_down


def _layer_norm(x, gamma, beta, eps=1e-5):
    """4.1"""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def _attn_sublayer(a, w, n_heads, n_kv_heads, rope_base, rope_q=True, rope_k=True, rope_v=False, repeat=None,
                   mask="causal", positions=None):
    """The attention sublayer on the normalised stream a, with switches for the mistakes below."""
    T = a.size(1)
    positions = torch.arange(T) if positions is None else positions
    q = _split_heads(a @ w["W_q"], n_heads)
    k = _split_heads(a @ w["W_k"], n_kv_heads)
    v = _split_heads(a @ w["W_v"], n_kv_heads)
    q = _apply_rope(q, positions, rope_base) if rope_q else q
    k = _apply_rope(k, positions, rope_base) if rope_k else k
    v = _apply_rope(v, positions, rope_base) if rope_v else v
    n_rep = n_heads // n_kv_heads
    repeat = repeat or _repeat_kv
    k, v = repeat(k, n_rep), repeat(v, n_rep)
    allowed = torch.ones(T, T, dtype=torch.bool)
    allowed = {"causal": allowed.tril(), "future": allowed.triu(), "none": None}[mask]
    y, _ = _attention(q, k, v, allowed)
    return _merge_heads(y) @ w["W_o"]


def _block(x, w, n_heads, n_kv_heads, rope_base=10000.0, **kw):
    h = x + _attn_sublayer(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base, **kw)
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="post-norm")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """post-norm: normalises after each residual addition"""
    w = weights
    h = _rms_norm(x + _attn_sublayer(x, w, n_heads, n_kv_heads, rope_base), w["norm1"])
    return _rms_norm(h + _swiglu(h, w["W_gate"], w["W_up"], w["W_down"]), w["norm2"])


@wrong("11.3", hint="RoPE is missing")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """forgets RoPE"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, rope_q=False, rope_k=False)


@wrong("11.3", hint="you rotated v too")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """rotates the values too"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, rope_v=True)


@wrong("11.3", hint="rotated only q")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """rotates q but not k"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, rope_k=False)


@wrong("11.3", hint="you rotated only k")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """rotates k but not q"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, rope_q=False)


@wrong("11.3", hint="tiled order")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """repeats the kv heads with Tensor.repeat (kv0, kv1, kv0, kv1)"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, repeat=lambda t, n: t.repeat(1, n, 1, 1))


@wrong("11.3", hint="the causal mask is missing")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """no causal mask"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, mask="none")


@wrong("11.3", hint="see the future")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the mask built with triu (each position sees the future)"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, mask="future")


@wrong("11.3", hint="forgot the first residual")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """forgets the residual around attention"""
    w = weights
    h = _attn_sublayer(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="forgot the second residual")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """forgets the residual around the feed-forward network"""
    w = weights
    h = x + _attn_sublayer(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="reads the block's input x")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """a parallel block: the feed-forward sublayer reads x"""
    w = weights
    h = x + _attn_sublayer(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return h + _swiglu(_rms_norm(x, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="LayerNorm")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the chapter 4 layer_norm (weight as gamma, zero beta) instead of rms_norm"""
    w = weights
    zero = torch.zeros_like(w["norm1"])
    h = x + _attn_sublayer(_layer_norm(x, w["norm1"], zero), w, n_heads, n_kv_heads, rope_base)
    return h + _swiglu(_layer_norm(h, w["norm2"], zero), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="does not normalise its output")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """adds a final RMSNorm (norm2) on the output"""
    return _rms_norm(_block(x, weights, n_heads, n_kv_heads, rope_base), weights["norm2"])


@wrong("11.3", hint="pass rope_base to apply_rope")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """ignores rope_base: apply_rope's default base"""
    return _block(x, weights, n_heads, n_kv_heads)


@wrong("11.3", hint="forgot the output projection")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """forgets W_o"""
    w = dict(weights, W_o=torch.eye(x.shape[-1], dtype=x.dtype))
    return _block(x, w, n_heads, n_kv_heads, rope_base)


@wrong("11.3", hint="per head")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """rotates q and k over the whole width, before split_heads"""
    w = weights
    T = x.size(1)
    pos = torch.arange(T)
    a = _rms_norm(x, w["norm1"])
    q = _split_heads(_apply_rope(a @ w["W_q"], pos, rope_base), n_heads)
    k = _split_heads(_apply_rope(a @ w["W_k"], pos, rope_base), n_kv_heads)
    v = _split_heads(a @ w["W_v"], n_kv_heads)
    n_rep = n_heads // n_kv_heads
    y, _ = _attention(q, _repeat_kv(k, n_rep), _repeat_kv(v, n_rep), torch.ones(T, T, dtype=torch.bool).tril())
    h = x + _merge_heads(y) @ w["W_o"]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="swapped")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """norm1 and norm2 swapped"""
    w = dict(weights, norm1=weights["norm2"], norm2=weights["norm1"])
    return _block(x, w, n_heads, n_kv_heads, rope_base)


@wrong("11.3", hint="tuple")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """forgets that attention returns (output, weights)"""
    w = weights
    T = x.size(1)
    pos = torch.arange(T)
    a = _rms_norm(x, w["norm1"])
    q = _apply_rope(_split_heads(a @ w["W_q"], n_heads), pos, rope_base)
    k = _apply_rope(_split_heads(a @ w["W_k"], n_kv_heads), pos, rope_base)
    v = _split_heads(a @ w["W_v"], n_kv_heads)
    n_rep = n_heads // n_kv_heads
    y = _attention(q, _repeat_kv(k, n_rep), _repeat_kv(v, n_rep), torch.ones(T, T, dtype=torch.bool).tril())
    h = x + _merge_heads(y) @ w["W_o"]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="repeat k and v")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """forgets to repeat the kv heads (fails once n_kv_heads < n_heads)"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, repeat=lambda t, n: t)


@wrong("11.3", hint="package's own")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's LlamaBlock with the weights copied in"""
    w = weights
    block = _llama.LlamaBlock(x.shape[-1], n_heads, n_kv_heads, w["W_gate"].shape[1], rope_base).to(x.dtype)
    with torch.no_grad():
        block.norm1.weight.copy_(w["norm1"])
        block.norm2.weight.copy_(w["norm2"])
        for mine, name in (("W_q", "q_proj"), ("W_k", "k_proj"), ("W_v", "v_proj"), ("W_o", "out_proj")):
            getattr(block.self_attn, name).weight.copy_(w[mine].T)
        for mine, name in (("W_gate", "gate_proj"), ("W_up", "up_proj"), ("W_down", "down_proj")):
            getattr(block.ffn, name).weight.copy_(w[mine].T)
    return block(x)


value("11.3", _llama.LlamaBlock, right=False, hint="package's own", name="the package's LlamaBlock class itself")


class _StandInBlock:
    """A stand-in `self` for LlamaBlock.forward, holding the learner's own sublayers."""

    def __init__(self, w, n_heads, n_kv_heads, rope_base):
        self.norm1 = lambda t: _rms_norm(t, w["norm1"])
        self.norm2 = lambda t: _rms_norm(t, w["norm2"])
        self.self_attn = lambda t: _attn_sublayer(t, w, n_heads, n_kv_heads, rope_base)
        self.ffn = lambda t: _swiglu(t, w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="package's own")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """LlamaBlock.forward from a second import, on a stand-in self of the learner's own sublayers"""
    return _llama2.LlamaBlock.forward(_StandInBlock(weights, n_heads, n_kv_heads, rope_base), x)


@wrong("11.3", hint="without torch.nn.functional.scaled_dot_product_attention")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """PyTorch's scaled_dot_product_attention with enable_gqa instead of the learner's attention"""
    w = weights
    T = x.size(1)
    pos = torch.arange(T)
    a = _rms_norm(x, w["norm1"])
    q = _apply_rope(_split_heads(a @ w["W_q"], n_heads), pos, rope_base)
    k = _apply_rope(_split_heads(a @ w["W_k"], n_kv_heads), pos, rope_base)
    v = _split_heads(a @ w["W_v"], n_kv_heads)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    h = x + _merge_heads(y) @ w["W_o"]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="without attnbook.positional.apply_rope")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's apply_rope instead of the learner's"""
    w = weights
    T = x.size(1)
    a = _rms_norm(x, w["norm1"])
    q = _positional.apply_rope(_split_heads(a @ w["W_q"], n_heads), base=rope_base)
    k = _positional.apply_rope(_split_heads(a @ w["W_k"], n_kv_heads), base=rope_base)
    v = _split_heads(a @ w["W_v"], n_kv_heads)
    n_rep = n_heads // n_kv_heads
    y, _ = _attention(q, _repeat_kv(k, n_rep), _repeat_kv(v, n_rep), torch.ones(T, T, dtype=torch.bool).tril())
    h = x + _merge_heads(y) @ w["W_o"]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="without attnbook.multihead.repeat_kv")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's repeat_kv instead of the learner's"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, repeat=_multihead.repeat_kv)


@wrong("11.3", hint="dtype")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """returns float32 for float64 inputs"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base).float()


@wrong("11.3", hint="gradient")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """runs under torch.no_grad()"""
    with torch.no_grad():
        return _block(x, weights, n_heads, n_kv_heads, rope_base)


@wrong("11.3", hint="in place")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """adds the first residual in place, x += ..."""
    w = weights
    x += _attn_sublayer(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return x + _swiglu(_rms_norm(x, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the learner's helpers, in the order of the task"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base)


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """positions starting at 7: every offset is the same, so every score is"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, positions=torch.arange(x.size(1)) + 7)


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """one query head at a time, each reading kv head j // n_rep, RoPE after picking the kv head"""
    w = weights
    T, d = x.size(1), x.size(-1)
    pos = torch.arange(T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    a = _rms_norm(x, w["norm1"])
    q = _split_heads(a @ w["W_q"], n_heads)
    k = _split_heads(a @ w["W_k"], n_kv_heads)
    v = _split_heads(a @ w["W_v"], n_kv_heads)
    n_rep = n_heads // n_kv_heads
    outs = []
    for j in range(n_heads):
        qj = _apply_rope(q[:, j:j + 1], pos, rope_base)
        kj = _apply_rope(k[:, j // n_rep:j // n_rep + 1], pos, rope_base)
        outs.append(_attention(qj, kj, v[:, j // n_rep:j // n_rep + 1], causal)[0])
    h = x + _merge_heads(torch.cat(outs, dim=1)) @ w["W_o"]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """expand-and-reshape repeat (10.2's way), a loop over the two sublayers"""
    w = weights

    def repeat(t, n_rep):
        B, n_kv, S, dh = t.shape
        return t[:, :, None].expand(B, n_kv, n_rep, S, dh).reshape(B, n_kv * n_rep, S, dh)

    sublayers = [
        (w["norm1"], lambda a: _attn_sublayer(a, w, n_heads, n_kv_heads, rope_base, repeat=repeat)),
        (w["norm2"], lambda a: _swiglu(a, w["W_gate"], w["W_up"], w["W_down"])),
    ]
    for weight, sublayer in sublayers:
        x = x + sublayer(_rms_norm(x, weight))
    return x


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base: float = 10000.0, eps: float = 1e-6):
    """an extra eps argument with the right default; rotated keys computed after repeating"""
    w = weights
    T = x.shape[1]
    pos = torch.arange(T)
    a = _rms_norm(x, w["norm1"], eps)
    n_rep = n_heads // n_kv_heads
    q = _apply_rope(_split_heads(a @ w["W_q"], n_heads), pos, rope_base)
    k = _apply_rope(_repeat_kv(_split_heads(a @ w["W_k"], n_kv_heads), n_rep), pos, rope_base)
    v = _repeat_kv(_split_heads(a @ w["W_v"], n_kv_heads), n_rep)
    y = _attention(q, k, v, torch.ones(T, T, dtype=torch.bool).tril())[0]
    h = torch.add(x, _merge_heads(y) @ w["W_o"])
    return torch.add(h, _swiglu(_rms_norm(h, w["norm2"], eps), w["W_gate"], w["W_up"], w["W_down"]))



@wrong("11.3", hint="eps=1e-5")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """RMSNorms with eps=1e-5, as the chapter's Hugging Face config (a learner trial's find)"""
    w = weights
    a = _rms_norm(x, w["norm1"], eps=1e-5)
    h = x + _attn_sublayer(a, w, n_heads, n_kv_heads, rope_base)
    return h + _swiglu(_rms_norm(h, w["norm2"], eps=1e-5), w["W_gate"], w["W_up"], w["W_down"])


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """pops every weight out of the dict it was given (a learner trial's find: the check crashed)"""
    w = {name: weights.pop(name) for name in list(weights)}
    return _block(x, w, n_heads, n_kv_heads, rope_base)


# ---------------------------------------------------------------------------------------------------------------
# Issue 23, round three: library building blocks (transformers, torch, the package), precision, misleading and
# missing hints. Chapter 11 imports transformers, so a learner has its Llama pieces at hand.
# ---------------------------------------------------------------------------------------------------------------

import warnings  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import transformers  # noqa: E402
    from transformers.models.llama import modeling_llama as _hf  # noqa: E402


def _hf_config(x, weights, n_heads, n_kv_heads, rope_base=10000.0, eps=1e-6):
    """A transformers LlamaConfig of the block's sizes (eager attention)."""
    return transformers.LlamaConfig(hidden_size=x.shape[-1], num_attention_heads=n_heads,
                                    num_key_value_heads=n_kv_heads, intermediate_size=weights["W_gate"].shape[1],
                                    rope_theta=rope_base, rms_norm_eps=eps, attn_implementation="eager")


# 11.1 -----------------------------------------------------------------------------------------------------------

@wrong("11.1", hint="without transformers.models.llama.modeling_llama.LlamaRMSNorm")
def rms_norm(x, weight, eps=1e-6):
    """Hugging Face's LlamaRMSNorm with the weight copied in"""
    norm = _hf.LlamaRMSNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm(x)


@wrong("11.1", hint="without transformers.models.llama.modeling_llama.LlamaRMSNorm")
def rms_norm(x, weight, eps=1e-6):
    """LlamaRMSNorm imported inside the function, its forward on a stand-in self"""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    return LlamaRMSNorm.forward(types.SimpleNamespace(weight=weight, variance_epsilon=eps), x)


@wrong("11.1", hint="without transformers.models.mistral.modeling_mistral.MistralRMSNorm")
def rms_norm(x, weight, eps=1e-6):
    """another model's copy of the same RMSNorm, Mistral's, imported inside the function"""
    from transformers.models.mistral.modeling_mistral import MistralRMSNorm

    norm = MistralRMSNorm(x.shape[-1], eps=eps).to(x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm(x)


@wrong("11.1", hint="without torch.rms_norm")
def rms_norm(x, weight, eps=1e-6):
    """torch.rms_norm"""
    return torch.rms_norm(x, [x.shape[-1]], weight, eps)


@wrong("11.1", hint="relative 1e-12")
def rms_norm(x, weight, eps=1e-6):
    """right up to a factor 1 + 1e-5 (a constant written with too few digits)"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight * (1 + 1e-5)


@wrong("11.1", hint="relative 1e-12")
def rms_norm(x, weight, eps=1e-6):
    """off by a factor 1 + 3e-11 on float64 inputs (just outside the promised relative 1e-12)"""
    out = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight
    return out * (1 + 3e-11) if x.dtype == torch.float64 else out


@wrong("11.1", hint="relative 1e-12")
def rms_norm(x, weight, eps=1e-6):
    """the root mean square through a float32 detour, the rest in x's dtype"""
    ms = x.float().pow(2).mean(-1, keepdim=True).to(x.dtype)
    return x / torch.sqrt(ms + eps) * weight


@wrong("11.1", hint="dim=1 of a batch (batch, n, d), the positions")
def rms_norm(x, weight, eps=1e-6):
    """mean over dim=1 (the last dimension of a (n, d) sequence only)"""
    return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + eps) * weight


@wrong("11.1", hint="which every one of them has")
def rms_norm(x, weight, eps=1e-6):
    """mean over dim=2, written for a batch (batch, n, d)"""
    return x * torch.rsqrt(x.pow(2).mean(dim=2, keepdim=True) + eps) * weight


@wrong("11.1", hint="x.shape[-1]")
def rms_norm(x, weight, eps=1e-6):
    """the sum of squares divided by x.shape[1], the d of a (n, d) sequence"""
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / x.shape[1] + eps) * weight


# 11.2 -----------------------------------------------------------------------------------------------------------

@wrong("11.2", hint="without transformers.models.llama.modeling_llama.LlamaMLP")
def swiglu(x, W_gate, W_up, W_down):
    """Hugging Face's LlamaMLP with the weights copied in"""
    config = transformers.LlamaConfig(hidden_size=W_gate.shape[0], intermediate_size=W_gate.shape[1],
                                      num_attention_heads=1, num_key_value_heads=1)
    mlp = _hf.LlamaMLP(config).to(x.dtype)
    with torch.no_grad():
        mlp.gate_proj.weight.copy_(W_gate.T)
        mlp.up_proj.weight.copy_(W_up.T)
        mlp.down_proj.weight.copy_(W_down.T)
    return mlp(x)


@wrong("11.2", hint="without transformers.models.llama.modeling_llama.LlamaMLP")
def swiglu(x, W_gate, W_up, W_down):
    """LlamaMLP.forward imported inside the function, on a stand-in self holding the products"""
    from transformers.models.llama.modeling_llama import LlamaMLP

    stand_in = types.SimpleNamespace(gate_proj=lambda t: t @ W_gate, up_proj=lambda t: t @ W_up,
                                     down_proj=lambda t: t @ W_down, act_fn=F.silu)
    return LlamaMLP.forward(stand_in, x)


@wrong("11.2", hint="same precedence")
def swiglu(x, W_gate, W_up, W_down):
    """operator precedence: silu(x @ W_gate) * x @ W_up is (silu(x @ W_gate) * x) @ W_up"""
    return (F.silu(x @ W_gate) * x @ W_up) @ W_down


@wrong("11.2", hint="same precedence")
def swiglu(x, W_gate, W_up, W_down):
    """operator precedence, in one line: silu(x @ W_gate) * x @ W_up @ W_down"""
    return F.silu(x @ W_gate) * x @ W_up @ W_down


@wrong("11.2", hint="same precedence")
def swiglu(x, W_gate, W_up, W_down):
    """x @ W_gate * W_up: the up branch multiplies the weight W_up, not x @ W_up"""
    return (F.silu(x @ W_gate) * W_up) @ W_down


@wrong("11.2", hint="relative 1e-12")
def swiglu(x, W_gate, W_up, W_down):
    """in float32, cast back to x's dtype"""
    xf, g, u, dn = x.float(), W_gate.float(), W_up.float(), W_down.float()
    return ((F.silu(xf @ g) * (xf @ u)) @ dn).to(x.dtype)


@wrong("11.2", hint="relative 1e-12")
def swiglu(x, W_gate, W_up, W_down):
    """right up to a factor 1 + 1e-5"""
    return (F.silu(x @ W_gate) * (x @ W_up)) @ W_down * (1 + 1e-5)


@right("11.2")
def swiglu(x, W_gate, W_up, W_down):
    """torch.tensordot over the feature axis for the three products"""
    g = torch.tensordot(x, W_gate, dims=1)
    u = torch.tensordot(x, W_up, dims=1)
    return torch.tensordot(F.silu(g) * u, W_down, dims=1)


# 11.3 -----------------------------------------------------------------------------------------------------------

def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def _qkv(x, w, n_heads, n_kv_heads):
    """rms_norm(x, norm1) and the three projections split into heads (not rotated)."""
    a = _rms_norm(x, w["norm1"])
    return (_split_heads(a @ w["W_q"], n_heads), _split_heads(a @ w["W_k"], n_kv_heads),
            _split_heads(a @ w["W_v"], n_kv_heads))


def _finish(x, w, y):
    """The rest of the block from the attention output y (B, h, T, d_head)."""
    h = x + _merge_heads(y) @ w["W_o"]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


def _rope_block(x, w, n_heads, n_kv_heads, rotate, T=None, mask_T=None):
    """The block with q and k turned by rotate(q, k, positions) -> (q, k) at positions 0..T-1 (T = x.size(1) unless
    given), and a causal mask of mask_T (T unless given) positions."""
    T = x.size(1) if T is None else T
    q, k, v = _qkv(x, w, n_heads, n_kv_heads)
    q, k = rotate(q, k, torch.arange(T))
    n_rep = n_heads // n_kv_heads
    y, _ = _attention(q, _repeat_kv(k, n_rep), _repeat_kv(v, n_rep), _causal(T if mask_T is None else mask_T))
    return _finish(x, w, y)


def _with_norm(x, w, n_heads, n_kv_heads, rope_base, make):
    """The block with the norm layer make(d, dtype) holding norm1 and norm2 in place of the learner's rms_norm."""
    def norm(t, weight):
        layer = make(t.shape[-1], t.dtype)
        with torch.no_grad():
            layer.weight.copy_(weight)
        return layer(t)

    h = x + _attn_sublayer(norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return h + _swiglu(norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


def _with_ffn(x, w, n_heads, n_kv_heads, rope_base, ffn):
    """The block with the feed-forward module ffn (nn.Linear layers gate_proj, up_proj, down_proj) holding the
    weights in place of the learner's swiglu."""
    with torch.no_grad():
        for mine, name in (("W_gate", "gate_proj"), ("W_up", "up_proj"), ("W_down", "down_proj")):
            getattr(ffn, name).weight.copy_(w[mine].T)
    h = x + _attn_sublayer(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return h + ffn(_rms_norm(h, w["norm2"]))


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.eager_attention_forward")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's eager_attention_forward (it repeats the kv heads itself) with an additive causal mask"""
    w, T = weights, x.size(1)
    q, k, v = _qkv(x, w, n_heads, n_kv_heads)
    pos = torch.arange(T)
    q, k = _apply_rope(q, pos, rope_base), _apply_rope(k, pos, rope_base)
    stand_in = types.SimpleNamespace(num_key_value_groups=n_heads // n_kv_heads, training=False)
    bias = torch.zeros(T, T, dtype=x.dtype).masked_fill(~_causal(T), float("-inf"))
    y, _ = _hf.eager_attention_forward(stand_in, q, k, v, bias, scaling=q.size(-1) ** -0.5)
    return _finish(x, w, y.transpose(1, 2))


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.LlamaRMSNorm")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's LlamaRMSNorm as the two norms"""
    return _with_norm(x, weights, n_heads, n_kv_heads, rope_base,
                      lambda d, dtype: _hf.LlamaRMSNorm(d, eps=1e-6).to(dtype))


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.apply_rotary_pos_emb")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's apply_rotary_pos_emb with cos and sin computed by hand"""
    def rotate(q, k, pos):
        d_head = q.size(-1)
        angles = pos.double()[:, None] * rope_base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
        emb = torch.cat([angles, angles], dim=-1)[None]  # (1, T, d_head)
        return _hf.apply_rotary_pos_emb(q, k, emb.cos().to(x.dtype), emb.sin().to(x.dtype))

    return _rope_block(x, weights, n_heads, n_kv_heads, rotate)


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.rotate_half")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the learner's RoPE built on Hugging Face's rotate_half"""
    def rotate(q, k, pos):
        d_head = q.size(-1)
        angles = pos.double()[:, None] * rope_base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
        emb = torch.cat([angles, angles], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        return q * cos + _hf.rotate_half(q) * sin, k * cos + _hf.rotate_half(k) * sin

    return _rope_block(x, weights, n_heads, n_kv_heads, rotate)


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.repeat_kv")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's repeat_kv instead of the learner's"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, repeat=_hf.repeat_kv)


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.repeat_kv")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's repeat_kv, imported inside the function"""
    from transformers.models.llama.modeling_llama import repeat_kv

    return _block(x, weights, n_heads, n_kv_heads, rope_base, repeat=repeat_kv)


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.LlamaMLP")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's LlamaMLP as the feed-forward sublayer"""
    mlp = _hf.LlamaMLP(_hf_config(x, weights, n_heads, n_kv_heads, rope_base)).to(x.dtype)
    return _with_ffn(x, weights, n_heads, n_kv_heads, rope_base, mlp)


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.LlamaRotaryEmbedding")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """cos and sin from Hugging Face's LlamaRotaryEmbedding, applied by hand"""
    def rotate(q, k, pos):
        rotary = _hf.LlamaRotaryEmbedding(_hf_config(x, weights, n_heads, n_kv_heads, rope_base))
        cos, sin = rotary(x, pos[None])
        rot = lambda t: torch.cat([-t[..., t.size(-1) // 2:], t[..., : t.size(-1) // 2]], dim=-1)  # noqa: E731
        return q * cos[:, None] + rot(q) * sin[:, None], k * cos[:, None] + rot(k) * sin[:, None]

    return _rope_block(x, weights, n_heads, n_kv_heads, rotate)


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.LlamaAttention")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's LlamaAttention with the weights copied in"""
    w, T = weights, x.size(1)
    config = _hf_config(x, w, n_heads, n_kv_heads, rope_base)
    attn = _hf.LlamaAttention(config, layer_idx=0).to(x.dtype)
    with torch.no_grad():
        for mine, name in (("W_q", "q_proj"), ("W_k", "k_proj"), ("W_v", "v_proj"), ("W_o", "o_proj")):
            getattr(attn, name).weight.copy_(w[mine].T)
    d_head = x.size(-1) // n_heads
    angles = torch.arange(T, dtype=torch.float64)[:, None] * rope_base ** (
        -torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    emb = torch.cat([angles, angles], dim=-1)[None]
    bias = torch.zeros(T, T, dtype=x.dtype).masked_fill(~_causal(T), float("-inf"))
    y, _ = attn(_rms_norm(x, w["norm1"]), (emb.cos().to(x.dtype), emb.sin().to(x.dtype)), bias)
    h = x + y
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.LlamaDecoderLayer")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's whole LlamaDecoderLayer with the weights copied in"""
    w, T = weights, x.size(1)
    config = _hf_config(x, w, n_heads, n_kv_heads, rope_base)
    layer = _hf.LlamaDecoderLayer(config, 0).to(x.dtype)
    with torch.no_grad():
        layer.input_layernorm.weight.copy_(w["norm1"])
        layer.post_attention_layernorm.weight.copy_(w["norm2"])
        for mine, name in (("W_q", "q_proj"), ("W_k", "k_proj"), ("W_v", "v_proj"), ("W_o", "o_proj")):
            getattr(layer.self_attn, name).weight.copy_(w[mine].T)
        for mine, name in (("W_gate", "gate_proj"), ("W_up", "up_proj"), ("W_down", "down_proj")):
            getattr(layer.mlp, name).weight.copy_(w[mine].T)
    cos, sin = _hf.LlamaRotaryEmbedding(config)(x, torch.arange(T)[None])
    bias = torch.zeros(T, T, dtype=x.dtype).masked_fill(~_causal(T), float("-inf"))
    return layer(x, attention_mask=bias, position_embeddings=(cos, sin))


@wrong("11.3", hint="without torch.nn.functional.rms_norm")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """torch.nn.functional.rms_norm as the two norms"""
    w = weights
    norm = lambda t, g: F.rms_norm(t, t.shape[-1:], g, 1e-6)  # noqa: E731
    h = x + _attn_sublayer(norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return h + _swiglu(norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="without torch.nn.RMSNorm")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """torch.nn.RMSNorm with the weights copied in"""
    return _with_norm(x, weights, n_heads, n_kv_heads, rope_base,
                      lambda d, dtype: torch.nn.RMSNorm(d, eps=1e-6, dtype=dtype))


@wrong("11.3", hint="without attnbook.models.llama.RMSNorm")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's RMSNorm module as the two norms"""
    return _with_norm(x, weights, n_heads, n_kv_heads, rope_base, lambda d, dtype: _llama.RMSNorm(d, 1e-6).to(dtype))


@wrong("11.3", hint="without attnbook.models.llama.SwiGLU")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's SwiGLU module as the feed-forward sublayer"""
    ffn = _llama.SwiGLU(x.shape[-1], weights["W_gate"].shape[1]).to(x.dtype)
    return _with_ffn(x, weights, n_heads, n_kv_heads, rope_base, ffn)


@wrong("11.3", hint="without attnbook.models.llama.LlamaAttention")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's LlamaAttention with the weights copied in"""
    w = weights
    attn = _llama.LlamaAttention(x.shape[-1], n_heads, n_kv_heads, rope_base).to(x.dtype)
    with torch.no_grad():
        for mine, name in (("W_q", "q_proj"), ("W_k", "k_proj"), ("W_v", "v_proj"), ("W_o", "out_proj")):
            getattr(attn, name).weight.copy_(w[mine].T)
    h = x + attn(_rms_norm(x, w["norm1"]))
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="without attnbook.multihead.split_heads")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's split_heads and merge_heads instead of the learner's"""
    w, T = weights, x.size(1)
    a = _rms_norm(x, w["norm1"])
    pos = torch.arange(T)
    q = _apply_rope(_multihead.split_heads(a @ w["W_q"], n_heads), pos, rope_base)
    k = _apply_rope(_multihead.split_heads(a @ w["W_k"], n_kv_heads), pos, rope_base)
    v = _multihead.split_heads(a @ w["W_v"], n_kv_heads)
    n_rep = n_heads // n_kv_heads
    y, _ = _attention(q, _repeat_kv(k, n_rep), _repeat_kv(v, n_rep), _causal(T))
    h = x + _multihead.merge_heads(y) @ w["W_o"]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


# precision: float64 inputs are checked to a relative 1e-12

@wrong("11.3", hint="relative 1e-12")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """right up to a factor 1 + 1e-5"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base) * (1 + 1e-5)


@wrong("11.3", hint="relative 1e-12")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the whole block in float32 on float64 inputs, cast back"""
    w = {k: v.float() for k, v in weights.items()}
    return _block(x.float(), w, n_heads, n_kv_heads, rope_base).to(x.dtype)


@wrong("11.3", hint="RoPE's angles in float64")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the chapter 5 apply_rope kept as it was, its angles in float32 (the cell before 11.3 asks for float64)"""
    return _rope_block(x, weights, n_heads, n_kv_heads,
                       lambda q, k, pos: (_apply_rope32(q, pos, rope_base), _apply_rope32(k, pos, rope_base)))


# T read from the wrong dimension

@wrong("11.3", hint="x.shape[1]")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """T read from x.shape[0], the batch size"""
    T = x.shape[0]
    return _rope_block(x, weights, n_heads, n_kv_heads,
                       lambda q, k, pos: (_apply_rope(q, pos, rope_base), _apply_rope(k, pos, rope_base)), T=T)


@wrong("11.3", hint="x.shape[1]")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """T = len(x), the batch size; the mask built from it"""
    T = len(x)
    return _rope_block(x, weights, n_heads, n_kv_heads,
                       lambda q, k, pos: (_apply_rope(q, pos, rope_base), _apply_rope(k, pos, rope_base)), mask_T=T)


# wrong output shapes

@wrong("11.3", hint="every position")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """returns the last position only, (B, d), as a generation step would use it"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base)[:, -1]


@wrong("11.3", hint="batch dimension")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """squeezes the result: (T, d) when the batch has one sequence"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base).squeeze()


@wrong("11.3", hint="(B, T, d)")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """flattens the positions for the feed-forward network and returns (B * T, d)"""
    w = weights
    h = x + _attn_sublayer(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    flat = h.reshape(-1, h.size(-1))
    return flat + _swiglu(_rms_norm(flat, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="merge_heads")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """returns the attention output per head, (B, n_heads, T, d_head), before merging"""
    w, T = weights, x.size(1)
    q, k, v = _qkv(x, w, n_heads, n_kv_heads)
    pos = torch.arange(T)
    q, k = _apply_rope(q, pos, rope_base), _apply_rope(k, pos, rope_base)
    n_rep = n_heads // n_kv_heads
    return _attention(q, _repeat_kv(k, n_rep), _repeat_kv(v, n_rep), _causal(T))[0]


# the rope helper and its base

@wrong("11.3", hint="rope_base")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """calls apply_rope without base: its default 10000 where the check passes rope_base"""
    return _rope_block(x, weights, n_heads, n_kv_heads, lambda q, k, pos: (_apply_rope(q, pos), _apply_rope(k, pos)))


def _rope_no_base(x, positions):
    """the chapter 5 apply_rope as it was, with no base parameter"""
    return _apply_rope(x, positions)


@wrong("11.3", hint="base parameter")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """calls the chapter 5 apply_rope, which has no base parameter, with base=rope_base (a TypeError)"""
    return _rope_block(x, weights, n_heads, n_kv_heads,
                       lambda q, k, pos: (_rope_no_base(q, pos, base=rope_base), _rope_no_base(k, pos, base=rope_base)))


def _rope_fixed_base(x, positions, base=10000.0):
    """a chapter 5 apply_rope given a base parameter that it never uses (10000 stays written inside)"""
    return _apply_rope(x, positions, 10000.0)


@wrong("11.3", hint="uses its base")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """passes rope_base to an apply_rope that ignores its base parameter"""
    return _rope_block(x, weights, n_heads, n_kv_heads, lambda q, k, pos: (
        _rope_fixed_base(q, pos, base=rope_base), _rope_fixed_base(k, pos, base=rope_base)))


def _rope_adjacent(x, positions, base=10000.0):
    """RoPE on adjacent pairs (x_0, x_1), (x_2, x_3), ... (GPT-J, RoFormer), angles in float64"""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * theta
    c, s = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)


def _rope_backwards(x, positions, base=10000.0):
    """rotate_half written as (x_2, -x_1): every pair turns by -angle"""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * theta
    emb = torch.cat([angles, angles], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos().to(x.dtype) + torch.cat([x2, -x1], dim=-1) * emb.sin().to(x.dtype)


def _rope_theta_i(x, positions, base=10000.0):
    """theta_i = base^(-i/d) for pair i (exponents stepping by 1/d, not 2/d)"""
    d = x.shape[-1]
    theta = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    angles = positions.double()[:, None] * theta
    emb = torch.cat([angles, angles], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos().to(x.dtype) + torch.cat([-x2, x1], dim=-1) * emb.sin().to(x.dtype)


@wrong("11.3", hint="rotates adjacent pairs")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """RoPE on adjacent pairs instead of the rotate-half pairs (i, i + d_head/2) (a learner trial)"""
    return _rope_block(x, weights, n_heads, n_kv_heads,
                       lambda q, k, pos: (_rope_adjacent(q, pos, rope_base), _rope_adjacent(k, pos, rope_base)))


@wrong("11.3", hint="turns every pair the wrong way")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """RoPE turning the other way (the sign of sin flipped) (a learner trial)"""
    return _rope_block(x, weights, n_heads, n_kv_heads,
                       lambda q, k, pos: (_rope_backwards(q, pos, rope_base), _rope_backwards(k, pos, rope_base)))


@wrong("11.3", hint="exponents step by 2/d_head")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """RoPE with theta_i = base^(-i/d_head) (a learner trial)"""
    return _rope_block(x, weights, n_heads, n_kv_heads,
                       lambda q, k, pos: (_rope_theta_i(q, pos, rope_base), _rope_theta_i(k, pos, rope_base)))


@wrong("11.3", hint="same base")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """passes rope_base when rotating q but not when rotating k"""
    return _rope_block(x, weights, n_heads, n_kv_heads,
                       lambda q, k, pos: (_apply_rope(q, pos, base=rope_base), _apply_rope(k, pos)))


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """sin and cos of float64 angles built once, shared by q and k; 2.2's attention with an additive mask"""
    w, T = weights, x.size(1)
    q, k, v = _qkv(x, w, n_heads, n_kv_heads)
    d_head = q.size(-1)
    inv = torch.pow(torch.tensor(rope_base, dtype=torch.float64), -torch.arange(0, d_head, 2).double() / d_head)
    ang = torch.outer(torch.arange(T).double(), inv).repeat(1, 2)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    half = d_head // 2
    rot = lambda t: torch.cat([-t[..., half:], t[..., :half]], dim=-1)  # noqa: E731
    q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
    n_rep = n_heads // n_kv_heads
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    bias = torch.zeros(T, T, dtype=x.dtype).masked_fill(~_causal(T), float("-inf"))
    y = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head) + bias, dim=-1) @ v
    return _finish(x, w, y)
