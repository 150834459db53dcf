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
from mutants import right, wrong


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


@wrong("11.1", hint="left out eps")
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


@wrong("11.1", hint="forgot the weight")
def rms_norm(x, weight, eps=1e-6):
    """forgets to multiply by weight"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


@wrong("11.1", hint="Gemma")
def rms_norm(x, weight, eps=1e-6):
    """scales by (1 + weight), Gemma's convention"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight)


@wrong("11.1", hint="not added")
def rms_norm(x, weight, eps=1e-6):
    """adds the weight like a bias"""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) + weight


@wrong("11.1", hint="wrong dimension (dim=0)")
def rms_norm(x, weight, eps=1e-6):
    """mean over dim 0 (BatchNorm's axis)"""
    return x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + eps) * weight


@wrong("11.1", hint="all dimensions at once")
def rms_norm(x, weight, eps=1e-6):
    """mean of the squares of the whole tensor"""
    return x * torch.rsqrt(x.pow(2).mean() + eps) * weight


@wrong("11.1", hint="summed the squares")
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


@wrong("11.1", hint="dtype")
def rms_norm(x, weight, eps=1e-6):
    """returns float32 for a float64 input"""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


@wrong("11.1", hint="significant digits")
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


@wrong("11.2", hint="down projection")
def swiglu(x, W_gate, W_up, W_down):
    """forgets W_down (returns the d_ff-wide hidden layer)"""
    return F.silu(x @ W_gate) * (x @ W_up)


@wrong("11.2", hint="after the down projection")
def swiglu(x, W_gate, W_up, W_down):
    """SiLU after W_down"""
    return F.silu(((x @ W_gate) * (x @ W_up)) @ W_down)


@wrong("11.2", hint="no transpose")
def swiglu(x, W_gate, W_up, W_down):
    """applies the weights as nn.Linear does, x @ W.T"""
    return (F.silu(x @ W_gate.T) * (x @ W_up.T)) @ W_down.T


@wrong("11.2", hint="residual")
def swiglu(x, W_gate, W_up, W_down):
    """adds the input back (a residual inside the FFN)"""
    return x + (F.silu(x @ W_gate) * (x @ W_up)) @ W_down


@wrong("11.2", hint="without torch.nn.functional.linear")
def swiglu(x, W_gate, W_up, W_down):
    """F.linear with transposed weights"""
    return F.linear(F.silu(F.linear(x, W_gate.T)) * F.linear(x, W_up.T), W_down.T)


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
    """5.3 with a base (angles in float32, as many learners write it: right to about 1e-6)"""
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


@wrong("11.3", hint="rotated v too")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """rotates the values too"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, rope_v=True)


@wrong("11.3", hint="rotated only q")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """rotates q but not k"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, rope_k=False)


@wrong("11.3", hint="tiled order")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """repeats the kv heads with Tensor.repeat (kv0, kv1, kv0, kv1)"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, repeat=lambda t, n: t.repeat(1, n, 1, 1))


@wrong("11.3", hint="causal mask is missing")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """no causal mask"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, mask="none")


@wrong("11.3", hint="see the future")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the mask built with triu (each position sees the future)"""
    return _block(x, weights, n_heads, n_kv_heads, rope_base, mask="future")


@wrong("11.3", hint="first residual")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """forgets the residual around attention"""
    w = weights
    h = _attn_sublayer(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


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


@wrong("11.3", hint="use the rope_base argument")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """ignores rope_base: apply_rope's default base"""
    return _block(x, weights, n_heads, n_kv_heads)


@wrong("11.3", hint="output projection")
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
    """the learner's helpers, in the order of the task (RoPE angles in float32)"""
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
