"""Chapter 11 (the modern block): learner answers to 11.1 (rms_norm), 11.2 (swiglu) and 11.3 (modern_block), one
table per exercise (most rows are the exercise's learner template, `rn`, `sg` or `mb`, with one mistake switched on).

11.3's answers call the learner's earlier functions; here those are module-level helpers (`_attention`,
`_split_heads`, ...), written as a learner would have written them in chapters 2, 3, 5 and 10, plus their 11.1 and
11.2 answers (`_rms_norm`, `_swiglu`). The helpers have names of their own, because every `@wrong`/`@right`
function below rebinds the name it is defined under.
"""
from __future__ import annotations

import functools
import math
import types
import warnings

import torch
import torch.nn.functional as F

import attnbook.models.llama as _llama
import attnbook.models.moe as _moe
import attnbook.models.rope_scaling as _rope_scaling
from attnbook import multihead as _multihead
from attnbook import positional as _positional
from mutants import RIGHT, fresh_import, function_copy, table, right, wrong

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import transformers  # chapter 11 imports transformers, so a learner has its Llama pieces at hand
    from transformers.models.llama import modeling_llama as _hf


_llama2 = fresh_import(_llama, "llama_ch11")
# The block's weights by the modules that hold them, in transformers' Llama pieces and in attnbook's
_HF_ATTENTION = {"W_q": "q_proj", "W_k": "k_proj", "W_v": "v_proj", "W_o": "o_proj"}
_OUR_ATTENTION = {**_HF_ATTENTION, "W_o": "out_proj"}
_MLP = {"W_gate": "gate_proj", "W_up": "up_proj", "W_down": "down_proj"}
_HF_LAYER = {"norm1": "input_layernorm", "norm2": "post_attention_layernorm",
             **{k: "self_attn." + v for k, v in _HF_ATTENTION.items()}, **{k: "mlp." + v for k, v in _MLP.items()}}
_OUR_BLOCK = {"norm1": "norm1", "norm2": "norm2", **{k: "self_attn." + v for k, v in _OUR_ATTENTION.items()},
              **{k: "ffn." + v for k, v in _MLP.items()}}


def _holding(module, w, names):
    """`module` with the weights w copied in: names maps a key of w to the dotted path of a submodule, whose weight
    gets the matrix transposed (nn.Linear stores (out, in), the task gives (in, out)) or the norm weight as it is."""
    with torch.no_grad():
        for key, path in names.items():
            t = w[key]
            functools.reduce(getattr, path.split("."), module).weight.copy_(t.T if t.dim() == 2 else t)
    return module


def _hf_config(x, weights, n_heads, n_kv_heads, rope_base=10000.0, eps=1e-6):
    """A transformers LlamaConfig of the block's sizes (eager attention)."""
    return transformers.LlamaConfig(hidden_size=x.shape[-1], num_attention_heads=n_heads,
                                    num_key_value_heads=n_kv_heads, intermediate_size=weights["W_gate"].shape[1],
                                    rope_theta=rope_base, rms_norm_eps=eps, attn_implementation="eager")


# 11.1 rms_norm(x, weight, eps=1e-6) ------------------------------------------------------------------------------

def rn(*, centre=False, reduce="mean", dim=-1, keepdim=True, eps_at="inside", default_eps=1e-6, scale="weight",
       detach=None):
    """11.1's learner template: x * rsqrt(mean(x * x, dim=-1, keepdim=True) + eps) * weight (the defaults: a right
    answer). Knobs: centre (True: x minus its mean first, LayerNorm), reduce ("sum": the sum of the squares), dim
    (of the mean; None: the whole tensor), keepdim, eps_at (a key of _NORMALISED), default_eps (the signature's
    default eps), scale ("none", "1 + weight", "+ weight": added like a bias), detach ("rms", "weight")."""

    def rms_norm(x, weight, eps=default_eps):
        if centre:
            x = x - x.mean(dim=-1, keepdim=True)
        squares = x.detach() * x.detach() if detach == "rms" else x * x
        ms = squares.mean() if dim is None else getattr(squares, reduce)(dim=dim, keepdim=keepdim)
        out = _NORMALISED[eps_at](x, ms, eps)
        if scale == "none":
            return out
        if scale == "1 + weight":
            return out * (1 + weight)
        if scale == "+ weight":
            return out + weight
        return out * (weight.detach() if detach == "weight" else weight)

    return rms_norm


_NORMALISED = {  # rn's eps_at: x normalised by its mean square ms, with eps put there
    "inside": lambda x, ms, eps: x * torch.rsqrt(ms + eps), "outside": lambda x, ms, eps: x / (ms.sqrt() + eps),
    "none": lambda x, ms, eps: x / ms.sqrt(), "1e-6": lambda x, ms, eps: x * torch.rsqrt(ms + 1e-6),  # eps ignored
    "where large": lambda x, ms, eps: x / torch.sqrt(torch.where(ms > 1e-3, ms + eps, ms)),  # where it does nothing
    "clamp": lambda x, ms, eps: x / torch.sqrt(ms.clamp(min=eps)), "no sqrt": lambda x, ms, eps: x / (ms + eps),
}


def norm_layer(make):
    """An rms_norm that normalises with the layer make(d, eps, dtype), its weight copied in (a library's norm in
    place of the learner's own)."""

    def rms_norm(x, weight, eps=1e-6):
        layer = make(x.shape[-1], eps, x.dtype)
        with torch.no_grad():
            layer.weight.copy_(weight)
        return layer(x)

    return rms_norm


_rms_forward_copy = function_copy(_llama.RMSNorm.forward, "forward")


class _StandInNorm:
    def __init__(self, weight, eps):
        self.weight, self.eps, self.d_model = weight, eps, weight.shape[0]


table("11.1", [
    ("rsqrt of the mean of x * x", RIGHT, rn()),
    ("subtracts the mean and divides by the standard deviation (LayerNorm with weight as gamma)", "that is LayerNorm",
     rn(centre=True)),
    ("LayerNorm, named on the first input", "on x of shape (4, 6) with a mean of about 2 (and a random weight of "
     "shape (6,)). Hint: you subtracted the mean: that is LayerNorm", rn(centre=True)),
    ("adds eps outside the square root: x / (rms + eps)", "eps goes inside the square root", rn(eps_at="outside")),
    ("no eps at all (NaN on an all-zero token)", "you left out eps", rn(eps_at="none")),
    ("ignores the eps argument: always 1e-6", "use the eps argument", rn(eps_at="1e-6")),
    ("adds eps only where the mean square is large (where it makes no difference)", "tiny values",
     rn(eps_at="where large")),
    ("clamps the mean square at eps instead of adding eps", "lower bound", rn(eps_at="clamp")),
    ("divides by the mean square, forgetting the square root", "not by mean(x**2) + eps itself",
     rn(eps_at="no sqrt")),
    ("LayerNorm's default eps, 1e-5, instead of 1e-6", "not 1e-5", rn(default_eps=1e-5)),
    ("a default eps of 1e-8 instead of 1e-6", "default eps=1e-6", rn(default_eps=1e-8)),
    ("forgets to multiply by weight", "you forgot the weight", rn(scale="none")),
    ("scales by (1 + weight), Gemma's convention", "Gemma", rn(scale="1 + weight")),
    ("adds the weight like a bias", "it is not added", rn(scale="+ weight")),
    ("mean over dim 0 (BatchNorm's axis)", "the wrong dimension (dim=0)", rn(dim=0)),
    ("mean over dim=1 (the last dimension of a (n, d) sequence only)", "dim=1 of a batch (batch, n, d), the positions",
     rn(dim=1)),
    ("mean over dim=2, written for a batch (batch, n, d)", "which every one of them has", rn(dim=2)),
    ("mean of the squares of the whole tensor", "all dimensions at once", rn(dim=None)),
    ("forgets keepdim=True", "keepdim", rn(keepdim=False)),
    ("divides by the length of the vector (sum of squares, not mean)", "you summed the squares", rn(reduce="sum")),
    ("the sum of squares divided by x.shape[1], the d of a (n, d) sequence", "x.shape[-1]",
     lambda x, weight, eps=1e-6: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / x.shape[1] + eps) * weight),
    ("divides x (not centred) by the standard deviation: torch.var instead of the mean square", "standard deviation",
     lambda x, weight, eps=1e-6: x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * weight),
    ("divides by the mean absolute value", "mean of |x|",
     lambda x, weight, eps=1e-6: x / (x.abs().mean(-1, keepdim=True) + eps) * weight),
    ("detaches the root mean square", "gradient", rn(detach="rms")),
    ("detaches the weight", "with respect to weight is missing", rn(detach="weight")),
    ("returns float32 for a float64 input", "dtype torch.float32",
     lambda x, weight, eps=1e-6: rn()(x.float(), weight.float(), eps)),
    ("computes in float32 and casts back", "relative 1e-12",
     lambda x, weight, eps=1e-6: rn()(x.float(), weight.float(), eps).to(x.dtype)),
    ("right up to a factor 1 + 1e-5 (a constant written with too few digits)", "relative 1e-12",
     lambda x, weight, eps=1e-6: rn()(x, weight, eps) * (1 + 1e-5)),
    ("off by a factor 1 + 3e-11 on float64 inputs (just outside the promised relative 1e-12)", "relative 1e-12",
     lambda x, weight, eps=1e-6: rn()(x, weight, eps) * (1 + 3e-11 if x.dtype == torch.float64 else 1)),
    ("the root mean square through a float32 detour, the rest in x's dtype", "relative 1e-12",
     lambda x, weight, eps=1e-6: x / torch.sqrt(x.float().pow(2).mean(-1, keepdim=True).to(x.dtype) + eps) * weight),
    ("returns a NumPy array", "expected a torch.Tensor", lambda x, weight, eps=1e-6: rn()(x, weight, eps).numpy()),
    ("torch.nn.functional.rms_norm", "without torch.nn.functional.rms_norm",
     lambda x, weight, eps=1e-6: F.rms_norm(x, x.shape[-1:], weight, eps)),
    ("torch.rms_norm", "without torch.rms_norm",
     lambda x, weight, eps=1e-6: torch.rms_norm(x, [x.shape[-1]], weight, eps)),
    ("torch.nn.RMSNorm with the weight copied in", "without torch.nn.RMSNorm",
     norm_layer(lambda d, eps, dtype: torch.nn.RMSNorm(d, eps=eps, dtype=dtype))),
    ("F.normalize (unit length) times sqrt(d)", "without torch.nn.functional.normalize",
     lambda x, weight, eps=1e-6: F.normalize(x, dim=-1) * x.shape[-1] ** 0.5 * weight),
    ("the layer_norm trick: [x, -x] has mean 0 and variance mean(x**2)", "without torch.nn.functional.layer_norm",
     lambda x, weight, eps=1e-6: F.layer_norm(both := torch.cat([x, -x], dim=-1), both.shape[-1:], eps=eps)[
         ..., : x.shape[-1]] * weight),
    ("Hugging Face's LlamaRMSNorm with the weight copied in",
     "without transformers.models.llama.modeling_llama.LlamaRMSNorm",
     norm_layer(lambda d, eps, dtype: _hf.LlamaRMSNorm(d, eps=eps).to(dtype))),
    ("the package's RMSNorm module, with the weight copied in", "package's own",
     norm_layer(lambda d, eps, dtype: _llama.RMSNorm(d, eps).to(dtype))),
    ("the package's RMSNorm class itself", "package's own", _llama.RMSNorm),
    ("a FunctionType copy of attnbook.models.llama.RMSNorm.forward on a stand-in self", "package's own",
     lambda x, weight, eps=1e-6: _rms_forward_copy(_StandInNorm(weight, eps), x)),
    ("RMSNorm.forward from a second, separate import of attnbook/models/llama.py", "package's own",
     lambda x, weight, eps=1e-6: _llama2.RMSNorm.forward(_StandInNorm(weight, eps), x)),
    ("from the vector's length: ||x|| / sqrt(d) with torch.linalg.vector_norm", RIGHT,
     lambda x, weight, eps=1e-6: weight * (x / torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2
                                                          / x.shape[-1] + eps))),
    ("in float64, cast back to x's dtype (as Llama computes in a wider dtype)", RIGHT,
     lambda x, weight, eps=1e-6: rn()(x.double(), weight.double(), eps).to(x.dtype)),
    ("einsum for the sum of squares, divided by d", RIGHT,
     lambda x, weight, eps=1e-6: torch.div(x, torch.sqrt(torch.einsum("...d,...d->...", x, x)[..., None]
                                                         / x.shape[-1] + eps)).mul(weight)),
    ("an extra dim argument with the right default", RIGHT,
     lambda x, weight, eps=1e-6, dim=-1: x / x.square().mean(dim, keepdim=True).add(eps).sqrt() * weight),
    ("the textbook form: x / sqrt(mean(x * x) + eps) * weight", RIGHT,
     lambda x, weight, eps=1e-6: x / (x * x).mean(dim=-1, keepdim=True).add(eps) ** 0.5 * weight),
    ("off by a factor 1 + 3e-13 on float64 inputs (within the promised relative 1e-12)", RIGHT,
     lambda x, weight, eps=1e-6: rn()(x, weight, eps) * (1 + 3e-13 if x.dtype == torch.float64 else 1)),
    ("off by a factor 1 - 3e-13 on float64 inputs (within the promised relative 1e-12)", RIGHT,
     lambda x, weight, eps=1e-6: rn()(x, weight, eps) * (1 - 3e-13 if x.dtype == torch.float64 else 1)),
])


@wrong("11.1", hint="in place")
def rms_norm(x, weight, eps=1e-6):
    """divides x in place"""
    x /= torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * weight


@wrong("11.1", hint="without transformers.models.llama.modeling_llama.LlamaRMSNorm")
def rms_norm(x, weight, eps=1e-6):
    """LlamaRMSNorm imported inside the function, its forward on a stand-in self"""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    return LlamaRMSNorm.forward(types.SimpleNamespace(weight=weight, variance_epsilon=eps), x)


@wrong("11.1", hint="without transformers.models.mistral.modeling_mistral.MistralRMSNorm")
def rms_norm(x, weight, eps=1e-6):
    """another model's copy of the same RMSNorm, Mistral's, imported inside the function"""
    from transformers.models.mistral.modeling_mistral import MistralRMSNorm
    return norm_layer(lambda d, eps, dtype: MistralRMSNorm(d, eps=eps).to(dtype))(x, weight, eps)


# 11.2 swiglu(x, W_gate, W_up, W_down) ----------------------------------------------------------------------------

def sg(*, act=F.silu, on="gate", combine="times", up=True, down=True, transpose=False, residual=False):
    """11.2's learner template: (silu(x @ W_gate) * (x @ W_up)) @ W_down (the defaults: a right answer). Knobs: act
    (the activation; None: none), on (where it is applied: "up", "both" branches, "product", "after down"), combine
    ("plus": the branches added), up (False: no up branch), down (False: no down projection), transpose (True:
    x @ W.T, as nn.Linear does), residual (True: the input added back)."""

    def swiglu(x, W_gate, W_up, W_down):
        if transpose:
            W_gate, W_up, W_down = W_gate.T, W_up.T, W_down.T
        activate = act or (lambda t: t)
        gate, value = x @ W_gate, x @ W_up
        if on in ("gate", "both"):
            gate = activate(gate)
        if on in ("up", "both"):
            value = activate(value)
        if not up:
            hidden = gate
        else:
            hidden = gate + value if combine == "plus" else gate * value
        if on == "product":
            hidden = activate(hidden)
        out = hidden @ W_down if down else hidden
        if on == "after down":
            out = activate(out)
        return x + out if residual else out

    return swiglu


def ffn_module(make):
    """A swiglu that runs the module make(d, d_ff, dtype), its gate_proj, up_proj and down_proj holding the weights
    (a library's feed-forward network in place of the learner's own)."""

    def swiglu(x, W_gate, W_up, W_down):
        weights = {"W_gate": W_gate, "W_up": W_up, "W_down": W_down}
        return _holding(make(W_gate.shape[0], W_gate.shape[1], x.dtype), weights, _MLP)(x)

    return swiglu


class _StandInFFN:
    def __init__(self, W_gate, W_up, W_down):
        self.gate_proj = lambda t: t @ W_gate
        self.up_proj = lambda t: t @ W_up
        self.down_proj = lambda t: t @ W_down


def _one_expert(x, W_gate, W_up, W_down):
    """SwiGLUExperts(1, d, d_ff) with the (in, out) weights transposed into its (out, in) stacks, expert 0 for all"""
    experts = _moe.SwiGLUExperts(1, W_gate.shape[0], W_gate.shape[1]).to(x.dtype)
    with torch.no_grad():
        experts.gate_proj.copy_(W_gate.T[None])
        experts.up_proj.copy_(W_up.T[None])
        experts.down_proj.copy_(W_down.T[None])
    return experts(x, 0)


table("11.2", [
    ("SiLU written as z * sigmoid(z)", RIGHT, sg(act=lambda z: z * torch.sigmoid(z))),
    ("SiLU on the up branch instead of the gate", "gate and up are swapped", sg(on="up")),
    ("SiLU applied to the product of the two branches", "before the product", sg(on="product")),
    ("SiLU on both branches", "only the gate branch", sg(on="both")),
    ("SiLU after W_down", "after the down projection", sg(on="after down")),
    ("ReLU as the gate's activation", "ReGLU", sg(act=torch.relu)),
    ("GELU as the gate's activation", "GEGLU", sg(act=F.gelu)),
    ("sigmoid as the gate (the original GLU)", "GLU (a sigmoid gate)", sg(act=torch.sigmoid)),
    ("no activation: a bilinear product", "left out the activation", sg(act=None)),
    ("a plain SiLU network: no up branch", "left out the up branch", sg(up=False)),
    ("adds the gate to the up branch instead of multiplying", "not added", sg(combine="plus")),
    ("forgets W_down (returns the d_ff-wide hidden layer)", "forgot the down projection", sg(down=False)),
    ("applies the weights as nn.Linear does, x @ W.T", "with no transpose", sg(transpose=True)),
    ("adds the input back (a residual inside the FFN)", "no residual connection of its own", sg(residual=True)),
    ("operator precedence: silu(x @ W_gate) * x @ W_up is (silu(x @ W_gate) * x) @ W_up", "same precedence",
     lambda x, W_gate, W_up, W_down: (F.silu(x @ W_gate) * x @ W_up) @ W_down),
    ("operator precedence, in one line: silu(x @ W_gate) * x @ W_up @ W_down", "same precedence",
     lambda x, W_gate, W_up, W_down: F.silu(x @ W_gate) * x @ W_up @ W_down),
    ("x @ W_gate * W_up: the up branch multiplies the weight W_up, not x @ W_up", "same precedence",
     lambda x, W_gate, W_up, W_down: (F.silu(x @ W_gate) * W_up) @ W_down),
    ("detaches the gate", "gradient",
     lambda x, W_gate, W_up, W_down: (F.silu(x @ W_gate).detach() * (x @ W_up)) @ W_down),
    ("returns a tuple (output, hidden)", "expected a torch.Tensor",
     lambda x, W_gate, W_up, W_down: (sg()(x, W_gate, W_up, W_down), sg(down=False)(x, W_gate, W_up, W_down))),
    ("returns float32 for float64 inputs", "dtype",
     lambda x, W_gate, W_up, W_down: sg()(x.float(), W_gate.float(), W_up.float(), W_down.float())),
    ("in float32, cast back to x's dtype", "relative 1e-12",
     lambda x, W_gate, W_up, W_down: sg()(x.float(), W_gate.float(), W_up.float(), W_down.float()).to(x.dtype)),
    ("right up to a factor 1 + 1e-5", "relative 1e-12",
     lambda x, W_gate, W_up, W_down: sg()(x, W_gate, W_up, W_down) * (1 + 1e-5)),
    ("F.linear with transposed weights", "without torch.nn.functional.linear",
     lambda x, W_gate, W_up, W_down: F.linear(F.silu(F.linear(x, W_gate.T)) * F.linear(x, W_up.T), W_down.T)),
    ("a fresh nn.Linear layer in place of the network (the given weights unused)", "without torch.nn.Linear",
     lambda x, W_gate, W_up, W_down: torch.nn.Linear(W_gate.shape[0], W_down.shape[1], bias=False).to(x.dtype)(x)),
    ("Hugging Face's LlamaMLP with the weights copied in", "without transformers.models.llama.modeling_llama.LlamaMLP",
     ffn_module(lambda d, d_ff, dtype: _hf.LlamaMLP(transformers.LlamaConfig(
         hidden_size=d, intermediate_size=d_ff, num_attention_heads=1, num_key_value_heads=1)).to(dtype))),
    ("the package's SwiGLU with the weights copied in", "package's own",
     ffn_module(lambda d, d_ff, dtype: _llama.SwiGLU(d, d_ff).to(dtype))),
    ("one expert of the package's mixture-of-experts SwiGLUExperts, the weights copied in",
     "without attnbook.models.moe.SwiGLUExperts", _one_expert),
    ("SwiGLU.forward from a second import, on a stand-in self", "package's own",
     lambda x, W_gate, W_up, W_down: _llama2.SwiGLU.forward(_StandInFFN(W_gate, W_up, W_down), x)),
    ("einsum for the three products", RIGHT,
     lambda x, W_gate, W_up, W_down: torch.einsum("...f,fd->...d", F.silu(torch.einsum("...d,df->...f", x, W_gate))
                                                  * torch.einsum("...d,df->...f", x, W_up), W_down)),
    ("the activation as an extra default argument", RIGHT,
     lambda x, W_gate, W_up, W_down, act=F.silu: (act(x @ W_gate) * (x @ W_up)) @ W_down),
    ("torch.matmul for every product", RIGHT,
     lambda x, W_gate, W_up, W_down: torch.matmul(F.silu(torch.matmul(x, W_gate)) * torch.matmul(x, W_up), W_down)),
    ("torch.tensordot over the feature axis for the three products", RIGHT,
     lambda x, W_gate, W_up, W_down: torch.tensordot(F.silu(torch.tensordot(x, W_gate, dims=1))
                                                     * torch.tensordot(x, W_up, dims=1), W_down, dims=1)),
])


@right("11.2")
def swiglu(x, W_gate, W_up, W_down):
    """one matmul for both branches, then chunk"""
    gate, up = (x @ torch.cat([W_gate, W_up], dim=-1)).chunk(2, dim=-1)  # (..., 2 d_ff) in two
    return torch.matmul(F.silu(gate) * up, W_down)


@right("11.2")
def swiglu(x, W_gate, W_up, W_down):
    """F.glu on [g * u, g]: g * u * sigmoid(g)"""
    g, u = x @ W_gate, x @ W_up
    return F.glu(torch.cat([g * u, g], dim=-1), dim=-1) @ W_down


@wrong("11.2", hint="without transformers.models.llama.modeling_llama.LlamaMLP")
def swiglu(x, W_gate, W_up, W_down):
    """LlamaMLP.forward imported inside the function, on a stand-in self holding the products"""
    from transformers.models.llama.modeling_llama import LlamaMLP

    stand_in = types.SimpleNamespace(gate_proj=lambda t: t @ W_gate, up_proj=lambda t: t @ W_up,
                                     down_proj=lambda t: t @ W_down, act_fn=F.silu)
    return LlamaMLP.forward(stand_in, x)


# 11.3 modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0): the learner's earlier answers, as helpers

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


def ar(*, angles=torch.float64, pairs="half", turn=1, step=2):
    """5.3's apply_rope(x, positions, base) with a base, as the cell before 11.3 asks, and the mistakes a learner
    may have left in it (the defaults: right, its angles in float64). angles: the dtype the angles are computed
    in (float32: right to about 1e-6, as 5.3 accepts, not to 1e-12); pairs="adjacent": (x_0, x_1), (x_2, x_3),
    ... (GPT-J, RoFormer); turn=-1: rotate_half written as (x_2, -x_1), every pair turned by -angle; step=1:
    theta_i = base^(-i/d), the exponents stepping by 1/d, not 2/d."""

    def apply_rope(x, positions, base=10000.0):
        d = x.shape[-1]
        a = positions.to(angles)[:, None] * base ** (-torch.arange(0, step * (d // 2), step, dtype=angles) / d)
        if pairs == "adjacent":
            c, s, even, odd = a.cos().to(x.dtype), a.sin().to(x.dtype), x[..., 0::2], x[..., 1::2]
            return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)
        emb = torch.cat([a, a], dim=-1)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * emb.cos().to(x.dtype) + turn * torch.cat([-x2, x1], dim=-1) * emb.sin().to(x.dtype)

    return apply_rope


_apply_rope = ar()


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


def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def _cos_sin(positions, d, base, dtype):
    """cos and sin of cat(angles, angles), the angles in float64, cast to dtype"""
    angles = positions.double()[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _attn(a, w, n_heads, n_kv_heads, rope_base, *, rotate="qk", rope=None, base="both", start=0, split_first=True,
          split=_split_heads, repeat=_repeat_kv, merge=_merge_heads, mask="causal", batch_as_T=None, unpack=True,
          w_o=True):
    """The learner's attention sublayer on the normalised stream a: q, k and v projected and split into heads, q
    and k turned by apply_rope at positions 0..T-1 with base=rope_base, the kv heads repeated, causal attention, the
    heads merged and projected by W_o (the defaults: right). Knobs: rotate (which of q, k, v are turned), rope,
    split, repeat, merge (the learner's other apply_rope, split_heads, ...), base ("none": apply_rope's default
    base; "q": rope_base passed when turning q only), start (the first position), split_first (False: q and k
    turned over the whole width, then split), mask ("none"; "future": built with triu), batch_as_T (the batch size
    taken for T: "both": for the positions and the mask; "mask": for the mask), unpack (False: attention's
    (output, weights) used as its output), w_o (False: no output projection)."""
    T = a.size(1)
    positions = torch.arange(len(a) if batch_as_T == "both" else T) + start
    turn = rope or _apply_rope
    q, k, v = a @ w["W_q"], a @ w["W_k"], a @ w["W_v"]
    if not split_first:
        q, k = turn(q, positions, base=rope_base), turn(k, positions, base=rope_base)
    q, k, v = split(q, n_heads), split(k, n_kv_heads), split(v, n_kv_heads)
    if split_first and "q" in rotate:
        q = turn(q, positions) if base == "none" else turn(q, positions, base=rope_base)
    if split_first and "k" in rotate:
        k = turn(k, positions, base=rope_base) if base == "both" else turn(k, positions)
    if "v" in rotate:
        v = turn(v, positions, base=rope_base)
    n_rep = n_heads // n_kv_heads
    k, v = repeat(k, n_rep), repeat(v, n_rep)
    T_mask = T if batch_as_T is None else len(a)
    allowed = torch.ones(T_mask, T_mask, dtype=torch.bool)
    allowed = {"causal": allowed.tril(), "future": allowed.triu(), "none": None}[mask]
    y = _attention(q, k, v, allowed)
    y = merge(y[0] if unpack else y)
    return y @ w["W_o"] if w_o else y


def _rope_scaled(x, positions, base=10000.0):
    """RoPE by the package's long-context helper, apply_scaled_rope, with the plain frequencies base^(-2i/d)"""
    inv_freq = base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
    return _rope_scaling.apply_scaled_rope(x, inv_freq, positions=positions)


def mb(*, norm=None, ffn=None, post_norm=False, first_residual=True, second_residual=True, ffn_reads="h",
       final_norm=False, swap_norms=False, **attention):
    """11.3's learner template: modern_block from the learner's earlier answers (the helpers above): h = x +
    attention(rms_norm(x, norm1)), out = h + swiglu(rms_norm(h, norm2)) (the defaults: a right answer). Knobs: norm
    (another rms_norm), ffn (another swiglu), post_norm (True: normalises after each residual addition),
    first_residual and second_residual (False: left out), ffn_reads ("x": the feed-forward sublayer reads the
    block's input, a parallel block), final_norm (True: norm2 again on the output), swap_norms (True: norm1 and
    norm2 swapped); the other knobs go to the attention sublayer, `_attn`."""

    def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
        w = dict(weights, norm1=weights["norm2"], norm2=weights["norm1"]) if swap_norms else weights
        normalise, feed_forward = norm or _rms_norm, ffn or _swiglu
        if post_norm:
            h = normalise(x + _attn(x, w, n_heads, n_kv_heads, rope_base, **attention), w["norm1"])
            return normalise(h + feed_forward(h, w["W_gate"], w["W_up"], w["W_down"]), w["norm2"])
        attended = _attn(normalise(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base, **attention)
        h = x + attended if first_residual else attended
        fed = feed_forward(normalise(h if ffn_reads == "h" else x, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])
        out = h + fed if second_residual else fed
        return normalise(out, w["norm2"]) if final_norm else out

    return modern_block


# apply_rope as the learner may have left it, or got it wrong, in chapter 5

def unfinished_rope(x, positions, base=10000.0):
    """the chapter 5 cell as the notebook gives it, never filled in"""
    raise NotImplementedError("replace this line with your code")


def _rope_no_base(x, positions):
    """the chapter 5 apply_rope as it was, with no base parameter"""
    return _apply_rope(x, positions)


def _rope_fixed_base(x, positions, base=10000.0):
    """a chapter 5 apply_rope given a base parameter that it never uses (10000 stays written inside)"""
    return _apply_rope(x, positions, 10000.0)


def _rope_hf_rotate_half(x, positions, base=10000.0):
    """the learner's RoPE built on Hugging Face's rotate_half"""
    cos, sin = _cos_sin(positions, x.shape[-1], base, x.dtype)
    return x * cos + _hf.rotate_half(x) * sin


def _rope_hf_apply(x, positions, base=10000.0):
    """Hugging Face's apply_rotary_pos_emb with cos and sin computed by hand"""
    cos, sin = _cos_sin(positions, x.shape[-1], base, x.dtype)
    return _hf.apply_rotary_pos_emb(x, x, cos[None], sin[None])[0]


def _rope_hf_rotary(x, positions, base=10000.0):
    """cos and sin from Hugging Face's LlamaRotaryEmbedding, applied by hand"""
    config = transformers.LlamaConfig(hidden_size=x.shape[-1], num_attention_heads=1, rope_theta=base)
    cos, sin = _hf.LlamaRotaryEmbedding(config)(x, positions[None])
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return x * cos[:, None] + torch.cat([-x2, x1], dim=-1) * sin[:, None]


class _StandInBlock:
    """A stand-in `self` for LlamaBlock.forward, holding the learner's own sublayers."""

    def __init__(self, w, n_heads, n_kv_heads, rope_base):
        self.norm1 = lambda t: _rms_norm(t, w["norm1"])
        self.norm2 = lambda t: _rms_norm(t, w["norm2"])
        self.self_attn = lambda t: _attn(t, w, n_heads, n_kv_heads, rope_base)
        self.ffn = lambda t: _swiglu(t, w["W_gate"], w["W_up"], w["W_down"])


table("11.3", [
    ("the learner's helpers, in the order of the task", RIGHT, mb()),
    ("positions starting at 7: every offset is the same, so every score is", RIGHT, mb(start=7)),
    ("pops every weight out of the dict it was given (a learner trial's find: the check crashed)", RIGHT,
     lambda x, weights, n_heads, n_kv_heads, rope_base=10000.0:
         mb()(x, {name: weights.pop(name) for name in list(weights)}, n_heads, n_kv_heads, rope_base)),
    ("post-norm: normalises after each residual addition", "post-norm", mb(post_norm=True)),
    ("forgets the residual around attention", "forgot the first residual", mb(first_residual=False)),
    ("forgets the residual around the feed-forward network", "forgot the second residual", mb(second_residual=False)),
    ("a parallel block: the feed-forward sublayer reads x", "reads the block's input x", mb(ffn_reads="x")),
    ("adds a final RMSNorm (norm2) on the output", "does not normalise its output", mb(final_norm=True)),
    ("norm1 and norm2 swapped", "swapped", mb(swap_norms=True)),
    ("the chapter 4 layer_norm (weight as gamma, zero beta) instead of rms_norm", "LayerNorm",
     mb(norm=lambda x, weight: _layer_norm(x, weight, torch.zeros_like(weight)))),
    ("RMSNorms with eps=1e-5, as the chapter's Hugging Face config (a learner trial's find)", "eps=1e-5",
     mb(norm=lambda x, weight: _rms_norm(x, weight, eps=1e-5))),
    ("forgets RoPE", "RoPE is missing", mb(rotate="")),
    ("rotates the values too", "you rotated v too", mb(rotate="qkv")),
    ("rotates q but not k", "rotated only q", mb(rotate="q")),
    ("rotates k but not q", "you rotated only k", mb(rotate="k")),
    ("rotates q and k over the whole width, before split_heads", "per head", mb(split_first=False)),
    ("ignores rope_base: apply_rope's default base", "pass rope_base to apply_rope", mb(base="none")),
    ("passes rope_base when rotating q but not when rotating k", "same base", mb(base="q")),
    ("calls the chapter 5 apply_rope, which has no base parameter, with base=rope_base (a TypeError)",
     "base parameter", mb(rope=_rope_no_base)),
    ("passes rope_base to an apply_rope that ignores its base parameter", "uses its base", mb(rope=_rope_fixed_base)),
    ("RoPE on adjacent pairs instead of the rotate-half pairs (i, i + d_head/2) (a learner trial)",
     "rotates adjacent pairs", mb(rope=ar(pairs="adjacent"))),
    ("RoPE turning the other way (the sign of sin flipped) (a learner trial)", "turns every pair the wrong way",
     mb(rope=ar(turn=-1))),
    ("RoPE with theta_i = base^(-i/d_head) (a learner trial)", "exponents step by 2/d_head", mb(rope=ar(step=1))),
    ("the chapter 5 apply_rope kept as it was, its angles in float32 (the cell before 11.3 asks for float64)",
     "RoPE's angles in float64", mb(rope=ar(angles=torch.float32))),
    ("repeats the kv heads with Tensor.repeat (kv0, kv1, kv0, kv1)", "tiled order",
     mb(repeat=lambda t, n_rep: t.repeat(1, n_rep, 1, 1))),
    ("Tensor.repeat's tiled order, named on the first grouped-query input (multi-head inputs cannot tell the orders "
     "apart)", "n_kv_heads=2 (grouped-query: 2 query heads per kv head), d_ff=40 (weights: norm1 (16,), W_q (16, 16), "
     "W_k (16, 8), W_v (16, 8), W_o (16, 16), norm2 (16,), W_gate (16, 40), W_up (16, 40), W_down (40, 16)). Hint: "
     "your kv heads come out in the tiled order", mb(repeat=lambda t, n_rep: t.repeat(1, n_rep, 1, 1))),
    ("an earlier answer still a stub: apply_rope left as unfinished_rope",
     "unfinished_rope, which still raises NotImplementedError", mb(rope=unfinished_rope)),
    ("forgets to repeat the kv heads (fails once n_kv_heads < n_heads)", "repeat k and v",
     mb(repeat=lambda t, n_rep: t)),
    ("no causal mask", "the causal mask is missing", mb(mask="none")),
    ("the mask built with triu (each position sees the future)", "see the future", mb(mask="future")),
    ("T read from x.shape[0], the batch size", "x.shape[1]", mb(batch_as_T="both")),
    ("T = len(x), the batch size; the mask built from it", "x.shape[1]", mb(batch_as_T="mask")),
    ("forgets that attention returns (output, weights)", "tuple", mb(unpack=False)),
    ("forgets W_o", "forgot the output projection", mb(w_o=False)),
    ("returns float32 for float64 inputs", "dtype",
     lambda x, weights, n_heads, n_kv_heads, rope_base=10000.0: mb()(x, weights, n_heads, n_kv_heads,
                                                                     rope_base).float()),
    ("right up to a factor 1 + 1e-5", "relative 1e-12",
     lambda x, weights, n_heads, n_kv_heads, rope_base=10000.0: mb()(x, weights, n_heads, n_kv_heads, rope_base)
     * (1 + 1e-5)),
    ("the whole block in float32 on float64 inputs, cast back", "relative 1e-12",
     lambda x, weights, n_heads, n_kv_heads, rope_base=10000.0:
         mb()(x.float(), {k: v.float() for k, v in weights.items()}, n_heads, n_kv_heads, rope_base).to(x.dtype)),
    ("returns the last position only, (B, d), as a generation step would use it", "every position",
     lambda x, weights, n_heads, n_kv_heads, rope_base=10000.0: mb()(x, weights, n_heads, n_kv_heads,
                                                                     rope_base)[:, -1]),
    ("squeezes the result: (T, d) when the batch has one sequence", "batch dimension",
     lambda x, weights, n_heads, n_kv_heads, rope_base=10000.0: mb()(x, weights, n_heads, n_kv_heads,
                                                                     rope_base).squeeze()),
    ("runs under torch.no_grad()", "gradient", torch.no_grad()(mb())),
    ("torch.nn.functional.rms_norm as the two norms", "without torch.nn.functional.rms_norm",
     mb(norm=lambda x, weight: F.rms_norm(x, x.shape[-1:], weight, 1e-6))),
    ("torch.nn.RMSNorm with the weights copied in", "without torch.nn.RMSNorm",
     mb(norm=norm_layer(lambda d, eps, dtype: torch.nn.RMSNorm(d, eps=eps, dtype=dtype)))),
    ("the package's RMSNorm module as the two norms", "without attnbook.models.llama.RMSNorm",
     mb(norm=norm_layer(lambda d, eps, dtype: _llama.RMSNorm(d, eps).to(dtype)))),
    ("Hugging Face's LlamaRMSNorm as the two norms", "without transformers.models.llama.modeling_llama.LlamaRMSNorm",
     mb(norm=norm_layer(lambda d, eps, dtype: _hf.LlamaRMSNorm(d, eps=eps).to(dtype)))),
    ("the package's SwiGLU module as the feed-forward sublayer", "without attnbook.models.llama.SwiGLU",
     mb(ffn=ffn_module(lambda d, d_ff, dtype: _llama.SwiGLU(d, d_ff).to(dtype)))),
    ("Hugging Face's LlamaMLP as the feed-forward sublayer",
     "without transformers.models.llama.modeling_llama.LlamaMLP",
     mb(ffn=ffn_module(lambda d, d_ff, dtype: _hf.LlamaMLP(transformers.LlamaConfig(
         hidden_size=d, intermediate_size=d_ff, num_attention_heads=1, num_key_value_heads=1)).to(dtype)))),
    ("the package's apply_rope instead of the learner's", "without attnbook.positional.apply_rope",
     mb(rope=_positional.apply_rope)),
    ("RoPE through the package's apply_scaled_rope (chapter 11's RoPE scaling) with unscaled frequencies",
     "without attnbook.models.rope_scaling.apply_scaled_rope", mb(rope=_rope_scaled)),
    ("the package's split_heads and merge_heads instead of the learner's", "without attnbook.multihead.split_heads",
     mb(split=_multihead.split_heads, merge=_multihead.merge_heads)),
    ("the package's repeat_kv instead of the learner's", "without attnbook.multihead.repeat_kv",
     mb(repeat=_multihead.repeat_kv)),
    ("Hugging Face's repeat_kv instead of the learner's", "without transformers.models.llama.modeling_llama.repeat_kv",
     mb(repeat=_hf.repeat_kv)),
    ("the learner's RoPE built on Hugging Face's rotate_half",
     "without transformers.models.llama.modeling_llama.rotate_half", mb(rope=_rope_hf_rotate_half)),
    ("Hugging Face's apply_rotary_pos_emb with cos and sin computed by hand",
     "without transformers.models.llama.modeling_llama.apply_rotary_pos_emb", mb(rope=_rope_hf_apply)),
    ("cos and sin from Hugging Face's LlamaRotaryEmbedding, applied by hand",
     "without transformers.models.llama.modeling_llama.LlamaRotaryEmbedding", mb(rope=_rope_hf_rotary)),
    ("the package's LlamaBlock class itself", "package's own", _llama.LlamaBlock),
    ("LlamaBlock.forward from a second import, on a stand-in self of the learner's own sublayers", "package's own",
     lambda x, weights, n_heads, n_kv_heads, rope_base=10000.0:
         _llama2.LlamaBlock.forward(_StandInBlock(weights, n_heads, n_kv_heads, rope_base), x)),
])


def _qkv(x, w, n_heads, n_kv_heads):
    """rms_norm(x, norm1) and the three projections split into heads (not rotated)."""
    a = _rms_norm(x, w["norm1"])
    return (_split_heads(a @ w["W_q"], n_heads), _split_heads(a @ w["W_k"], n_kv_heads),
            _split_heads(a @ w["W_v"], n_kv_heads))


def _finish(x, w, y):
    """The rest of the block from the attention output y (B, h, T, d_head)."""
    h = x + _merge_heads(y) @ w["W_o"]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """one query head at a time, each reading kv head j // n_rep, RoPE after picking the kv head"""
    w, T = weights, x.size(1)
    q, k, v = _qkv(x, w, n_heads, n_kv_heads)
    pos, n_rep = torch.arange(T), n_heads // n_kv_heads
    outs = []
    for j in range(n_heads):
        qj = _apply_rope(q[:, j:j + 1], pos, rope_base)
        kj = _apply_rope(k[:, j // n_rep:j // n_rep + 1], pos, rope_base)
        outs.append(_attention(qj, kj, v[:, j // n_rep:j // n_rep + 1], _causal(T))[0])
    return _finish(x, w, torch.cat(outs, dim=1))


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """expand-and-reshape repeat (10.2's way), a loop over the two sublayers"""
    w = weights

    def repeat(t, n_rep):
        B, n_kv, S, dh = t.shape
        return t[:, :, None].expand(B, n_kv, n_rep, S, dh).reshape(B, n_kv * n_rep, S, dh)

    sublayers = [
        (w["norm1"], lambda a: _attn(a, w, n_heads, n_kv_heads, rope_base, repeat=repeat)),
        (w["norm2"], lambda a: _swiglu(a, w["W_gate"], w["W_up"], w["W_down"])),
    ]
    for weight, sublayer in sublayers:
        x = x + sublayer(_rms_norm(x, weight))
    return x


@right("11.3")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base: float = 10000.0, eps: float = 1e-6):
    """an extra eps argument with the right default; rotated keys computed after repeating"""
    w, T = weights, x.shape[1]
    pos, n_rep = torch.arange(T), n_heads // n_kv_heads
    a = _rms_norm(x, w["norm1"], eps)
    q = _apply_rope(_split_heads(a @ w["W_q"], n_heads), pos, rope_base)
    k = _apply_rope(_repeat_kv(_split_heads(a @ w["W_k"], n_kv_heads), n_rep), pos, rope_base)
    v = _repeat_kv(_split_heads(a @ w["W_v"], n_kv_heads), n_rep)
    h = torch.add(x, _merge_heads(_attention(q, k, v, _causal(T))[0]) @ w["W_o"])
    return torch.add(h, _swiglu(_rms_norm(h, w["norm2"], eps), w["W_gate"], w["W_up"], w["W_down"]))


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


@wrong("11.3", hint="in place")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """adds the first residual in place, x += ..."""
    w = weights
    x += _attn(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    return x + _swiglu(_rms_norm(x, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="(B, T, d)")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """flattens the positions for the feed-forward network and returns (B * T, d)"""
    w = weights
    h = x + _attn(_rms_norm(x, w["norm1"]), w, n_heads, n_kv_heads, rope_base)
    flat = h.reshape(-1, h.size(-1))
    return flat + _swiglu(_rms_norm(flat, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="merge_heads")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """returns the attention output per head, (B, n_heads, T, d_head), before merging"""
    T = x.size(1)
    q, k, v = _qkv(x, weights, n_heads, n_kv_heads)
    q, k = _apply_rope(q, torch.arange(T), rope_base), _apply_rope(k, torch.arange(T), rope_base)
    n_rep = n_heads // n_kv_heads
    return _attention(q, _repeat_kv(k, n_rep), _repeat_kv(v, n_rep), _causal(T))[0]


@wrong("11.3", hint="without torch.nn.functional.scaled_dot_product_attention")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """PyTorch's scaled_dot_product_attention with enable_gqa instead of the learner's attention"""
    q, k, v = _qkv(x, weights, n_heads, n_kv_heads)
    pos = torch.arange(x.size(1))
    q, k = _apply_rope(q, pos, rope_base), _apply_rope(k, pos, rope_base)
    return _finish(x, weights, F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.repeat_kv")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's repeat_kv, imported inside the function"""
    from transformers.models.llama.modeling_llama import repeat_kv
    return mb(repeat=repeat_kv)(x, weights, n_heads, n_kv_heads, rope_base)


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.eager_attention_forward")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's eager_attention_forward (it repeats the kv heads itself) with an additive causal mask"""
    w, T = weights, x.size(1)
    q, k, v = _qkv(x, w, n_heads, n_kv_heads)
    q, k = _apply_rope(q, torch.arange(T), rope_base), _apply_rope(k, torch.arange(T), rope_base)
    stand_in = types.SimpleNamespace(num_key_value_groups=n_heads // n_kv_heads, training=False)
    bias = torch.zeros(T, T, dtype=x.dtype).masked_fill(~_causal(T), float("-inf"))
    y, _ = _hf.eager_attention_forward(stand_in, q, k, v, bias, scaling=q.size(-1) ** -0.5)
    return _finish(x, w, y.transpose(1, 2))


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.LlamaAttention")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's LlamaAttention with the weights copied in"""
    w, T = weights, x.size(1)
    attn = _hf.LlamaAttention(_hf_config(x, w, n_heads, n_kv_heads, rope_base), layer_idx=0).to(x.dtype)
    attn = _holding(attn, w, _HF_ATTENTION)
    cos, sin = _cos_sin(torch.arange(T), x.size(-1) // n_heads, rope_base, x.dtype)
    bias = torch.zeros(T, T, dtype=x.dtype).masked_fill(~_causal(T), float("-inf"))
    h = x + attn(_rms_norm(x, w["norm1"]), (cos[None], sin[None]), bias)[0]
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="without transformers.models.llama.modeling_llama.LlamaDecoderLayer")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """Hugging Face's whole LlamaDecoderLayer with the weights copied in"""
    w, T = weights, x.size(1)
    config = _hf_config(x, w, n_heads, n_kv_heads, rope_base)
    layer = _holding(_hf.LlamaDecoderLayer(config, 0).to(x.dtype), w, _HF_LAYER)
    cos, sin = _hf.LlamaRotaryEmbedding(config)(x, torch.arange(T)[None])
    bias = torch.zeros(T, T, dtype=x.dtype).masked_fill(~_causal(T), float("-inf"))
    return layer(x, attention_mask=bias, position_embeddings=(cos, sin))


@wrong("11.3", hint="without attnbook.models.llama.LlamaAttention")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's LlamaAttention with the weights copied in"""
    w = weights
    attn = _holding(_llama.LlamaAttention(x.shape[-1], n_heads, n_kv_heads, rope_base).to(x.dtype), w,
                    _OUR_ATTENTION)
    h = x + attn(_rms_norm(x, w["norm1"]))
    return h + _swiglu(_rms_norm(h, w["norm2"]), w["W_gate"], w["W_up"], w["W_down"])


@wrong("11.3", hint="package's own")
def modern_block(x, weights, n_heads, n_kv_heads, rope_base=10000.0):
    """the package's LlamaBlock with the weights copied in"""
    w = weights
    block = _llama.LlamaBlock(x.shape[-1], n_heads, n_kv_heads, w["W_gate"].shape[1], rope_base).to(x.dtype)
    return _holding(block, w, _OUR_BLOCK)(x)
