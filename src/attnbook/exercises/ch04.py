"""Checkers for chapter 4, residual connections, LayerNorm and the Transformer block."""
from __future__ import annotations

import numbers

import torch
from torch import Tensor, nn

from ..layers import EncoderBlock, LayerNorm
from ._core import Wrong, call, describe, exercise, expect_close

_ATOL64, _RTOL64 = 1e-8, 1e-7  # float64 inputs: tight enough to tell eps inside the sqrt from eps outside it


def _randn(*shape: int, seed: int, dtype=torch.float64) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Random values for every parameter: torch's ones and zeros would hide a forgotten gamma, beta or bias."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    return module


def _tolerance(x: Tensor) -> dict:
    return dict(atol=_ATOL64, rtol=_RTOL64) if x.dtype == torch.float64 else dict(atol=1e-5, rtol=1e-4)


def _expect_dtype(got, x: Tensor, what: str, on: str) -> None:
    """Wrong if `got` is a floating-point tensor of the right shape but another dtype than the input `x`."""
    if (isinstance(got, Tensor) and got.is_floating_point() and tuple(got.shape) == tuple(x.shape)
            and got.dtype != x.dtype):
        raise Wrong(f"{what} has dtype {got.dtype} on {on}, expected {x.dtype} like the input",
                    "build the result from the inputs (no float32 constants or .float()): it keeps their dtype")


# ---------------------------------------------------------------------------------------------------------
# 4.1  LayerNorm from scratch
# ---------------------------------------------------------------------------------------------------------

LAYER_NORM_FORBIDDEN = [
    (name, "compute the mean and the biased variance over the last dimension yourself, then "
           "(x - mean) / sqrt(var + eps) * gamma + beta")
    for name in ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm", "torch.nn.LayerNorm",
                 "attnbook.layers.LayerNorm", "torch.nn.functional.group_norm", "torch.nn.functional.instance_norm",
                 "torch.nn.functional.batch_norm")
]


def _norm_stats(x: Tensor, dims, correction: int = 0) -> tuple[Tensor, Tensor]:
    return x.mean(dim=dims, keepdim=True), x.var(dim=dims, keepdim=True, correction=correction)


def _layer_norm_mistakes(x: Tensor, gamma: Tensor, beta: Tensor, eps: float) -> dict[str, Tensor]:
    """What common mistakes return on this input, keyed by the hint for each (first match wins)."""
    mean, var = _norm_stats(x, -1)
    centred = x - mean
    x_hat = centred / torch.sqrt(var + eps)
    out = {}
    if x.size(-1) > 1:
        out["you used the unbiased variance, which divides by d - 1 (the default of torch.var and torch.std); "
            "LayerNorm divides by d: x.var(dim=-1, keepdim=True, unbiased=False), or ((x - mean) ** 2).mean(-1, "
            "keepdim=True)"] = centred / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) * gamma + beta
        out["you divided by the unbiased standard deviation plus eps (x.std() + eps): LayerNorm divides by "
            "sqrt(var + eps), with the biased variance (divide by d) and eps inside the square root"] = (
            centred / (x.std(dim=-1, keepdim=True) + eps) * gamma + beta)
    for dims, name in (((0,), "the wrong dimension (dim=0 here)"),
                       ((-2,), f"the wrong dimension (dim={x.dim() - 2} here, the positions)"),
                       (tuple(range(x.dim())), "all dimensions at once")):
        if x.dim() > 1 and not (dims == (-2,) and x.dim() == 2):
            m, v = _norm_stats(x, dims)
            out[f"you normalised over {name}; LayerNorm normalises each token over its own features, the last "
                "dimension: mean(dim=-1, keepdim=True)"] = (x - m) / torch.sqrt(v + eps) * gamma + beta
    out.update({
        "eps goes inside the square root: (x - mean) / sqrt(var + eps), not / (sqrt(var) + eps)":
            centred / (torch.sqrt(var) + eps) * gamma + beta,
        "you left out eps: divide by sqrt(var + eps), which also keeps a token whose features are all equal "
        "from dividing 0 by 0": centred / torch.sqrt(var) * gamma + beta,
        "use the eps argument of your function, not a fixed 1e-5": centred / torch.sqrt(var + 1e-5) * gamma + beta,
        "you forgot gamma and beta: after normalising, scale by gamma and shift by beta": x_hat,
        "you forgot to multiply by gamma: x_hat * gamma + beta": x_hat + beta,
        "you forgot to add beta: x_hat * gamma + beta": x_hat * gamma,
        "gamma and beta are swapped: gamma scales (multiply), beta shifts (add)": x_hat * beta + gamma,
        "subtract the mean before dividing: (x - mean) / sqrt(var + eps)": x / torch.sqrt(var + eps) * gamma + beta,
        "divide by the standard deviation sqrt(var + eps), not by the variance": centred / (var + eps) * gamma + beta,
    })
    return out


def _layer_norm_error_hint(message: str) -> str | None:
    if "must match the size" in message or "size of tensor" in message:
        return ("keep the reduced dimension so that the mean and variance broadcast against x: "
                "x.mean(dim=-1, keepdim=True)")
    return None


@exercise("4.1", "LayerNorm from scratch", section="Normalise each token over its features")
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
        ("x of shape (2, 3, 6) in float32", _randn(2, 3, 6, seed=48, dtype=torch.float32) * 2, None),
    ]
    for i, (desc, x, eps) in enumerate(cases):
        d = x.size(-1)
        gamma, beta = _randn(d, seed=100 + i, dtype=x.dtype) + 1, _randn(d, seed=200 + i, dtype=x.dtype)
        args = (x, gamma, beta) if eps is None else (x, gamma, beta, eps)
        on = desc + (" (and random gamma, beta of shape " + f"({d},))")
        got = call(layer_norm, *args, what="layer_norm", on=on, forbid=LAYER_NORM_FORBIDDEN,
                   explain=_layer_norm_error_hint)
        eps_ = 1e-5 if eps is None else eps
        ref = nn.functional.layer_norm(x, (d,), gamma, beta, eps_)  # PyTorch's own, outside the learner's call
        _expect_dtype(got, x, "your result", on)
        expect_close(got, ref, what="your result", on=on, mistakes=_layer_norm_mistakes(x, gamma, beta, eps_),
                     nan_hint="a token whose features are all equal has variance 0: add eps inside the square "
                              "root, sqrt(var + eps), so that you never divide by 0",
                     **_tolerance(x))
    return f"matches nn.LayerNorm on {len(cases)} inputs, including a single token, a zero-variance token and float32"


# ---------------------------------------------------------------------------------------------------------
# 4.2  The position-wise feed-forward network
# ---------------------------------------------------------------------------------------------------------

FFN_FORBIDDEN = [
    (name, "write it with @: torch.relu(x @ W1 + b1) @ W2 + b2")
    for name in ("attnbook.layers.FeedForward", "torch.nn.functional.linear", "torch.nn.Linear",
                 "torch.nn.functional.bilinear")
]


def _ffn_mistakes(x: Tensor, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor) -> dict[str, Tensor]:
    relu, gelu = torch.relu, torch.nn.functional.gelu
    out = {
        "that is GELU; this exercise uses ReLU, the original paper's activation: torch.relu":
            gelu(x @ W1 + b1) @ W2 + b2,
        "that is the tanh approximation of GELU; this exercise uses ReLU: torch.relu":
            gelu(x @ W1 + b1, approximate="tanh") @ W2 + b2,
        "the ReLU comes only between the two layers: the output is h @ W2 + b2, with no activation after it":
            relu(relu(x @ W1 + b1) @ W2 + b2),
        "you left out the activation: without a ReLU between them, the two layers collapse into one linear map":
            (x @ W1 + b1) @ W2 + b2,
        "you forgot the first bias b1: relu(x @ W1 + b1)": relu(x @ W1) @ W2 + b2,
        "you forgot the second bias b2: ... @ W2 + b2": relu(x @ W1 + b1) @ W2,
        "you forgot both biases: relu(x @ W1 + b1) @ W2 + b2": relu(x @ W1) @ W2,
        "add b1 before the ReLU, not after it: relu(x @ W1 + b1)": (relu(x @ W1) + b1) @ W2 + b2,
        "the ReLU acts on the hidden layer, not on the input: relu(x @ W1 + b1) @ W2 + b2":
            (relu(x) @ W1 + b1) @ W2 + b2,
    }
    if W1.size(0) == W1.size(1):  # square matrices: a transpose runs and gives a wrong answer
        transposed = ("W1 and W2 are given as (in, out), so x @ W1 needs no transpose (nn.Linear stores (out, in) "
                      "and computes x @ W.T; these are already the other way round)")
        out[transposed] = relu(x @ W1.T + b1) @ W2.T + b2
        out[transposed + " (you transposed W1)"] = relu(x @ W1.T + b1) @ W2 + b2
        out[transposed + " (you transposed W2)"] = relu(x @ W1 + b1) @ W2.T + b2
    return out


def _ffn_error_hint(message: str) -> str | None:
    if any(s in message for s in ("cannot be multiplied", "size mismatch", "must match the size", "size of tensor")):
        return ("follow the shapes: x (..., d) @ W1 (d, d_ff) + b1 (d_ff,), ReLU, then @ W2 (d_ff, d) + b2 (d,). "
                "The matrices are given as (in, out), so no transpose is needed")
    return None


@exercise("4.2", "The position-wise feed-forward network", section="The position-wise feed-forward network")
def check_feed_forward(feed_forward) -> str:
    """feed_forward(x, W1, b1, W2, b2) must equal relu(x @ W1 + b1) @ W2 + b2 on several shapes."""
    cases = [
        ("x of shape (5, 4) with d=4, d_ff=8", (5, 4), 8),
        ("x of shape (2, 3, 6), a batch of sequences, with d=6, d_ff=10", (2, 3, 6), 10),
        ("x of shape (3, 5) with square weights, d = d_ff = 5", (3, 5), 5),
        ("x of shape (7,), a single token, with d=7, d_ff=3 (d_ff smaller than d)", (7,), 3),
        ("x of shape (1, 1, 4), a batch of one token, with d=4, d_ff=16", (1, 1, 4), 16),
        ("x of shape (2, 3, 4) in float32 with d=4, d_ff=8", (2, 3, 4), 8),
    ]
    for i, (desc, shape, d_ff) in enumerate(cases):
        dtype = torch.float32 if "float32" in desc else torch.float64
        d = shape[-1]
        x = _randn(*shape, seed=50 + i, dtype=dtype)
        W1 = _randn(d, d_ff, seed=60 + i, dtype=dtype) / d ** 0.5
        b1 = _randn(d_ff, seed=70 + i, dtype=dtype) * 0.5
        W2 = _randn(d_ff, d, seed=80 + i, dtype=dtype) / d_ff ** 0.5
        b2 = _randn(d, seed=90 + i, dtype=dtype) * 0.5
        on = f"{desc} (W1 {tuple(W1.shape)}, b1 ({d_ff},), W2 {tuple(W2.shape)}, b2 ({d},))"
        got = call(feed_forward, x, W1, b1, W2, b2, what="feed_forward", on=on, forbid=FFN_FORBIDDEN,
                   explain=_ffn_error_hint)
        hidden = (x.double() @ W1.double() + b1.double()).clamp(min=0)  # (..., d_ff)
        ref = hidden @ W2.double() + b2.double()  # (..., d)
        _expect_dtype(got, x, "your result", on)
        expect_close(got, ref, what="your result", on=on, mistakes=_ffn_mistakes(x, W1, b1, W2, b2), **_tolerance(x))
    return f"matches relu(x @ W1 + b1) @ W2 + b2 on {len(cases)} inputs, including a single token and d_ff < d"


# ---------------------------------------------------------------------------------------------------------
# 4.3  A pre-norm block from its sublayers
# ---------------------------------------------------------------------------------------------------------

BLOCK_FORBIDDEN = [
    (name, "compose the four callables yourself: h = x + attn(norm1(x)), then h + ffn(norm2(h))")
    for name in ("attnbook.layers.EncoderBlock", "torch.nn.TransformerEncoderLayer")
]


def _block_mistakes(x: Tensor, attn, ffn, norm1, norm2) -> dict[str, Tensor]:
    """What common mistakes return on this input; each hint names the mistake."""
    h = x + attn(norm1(x))
    y = norm1(x)
    z = y + attn(y)
    return {
        "that is a post-norm block, norm(x + sublayer(x)); pre-norm normalises the input of each sublayer and "
        "leaves the residual path alone: x + attn(norm1(x))": norm2(norm1(x + attn(x)) + ffn(norm1(x + attn(x)))),
        "the second sublayer reads the block's input x instead of h = x + attn(norm1(x)): compute h first, then "
        "h + ffn(norm2(h)) (the Add & Norm result must be the one you pass on)": h + ffn(norm2(x)),
        "the second residual starts from x instead of h: return h + ffn(norm2(h)), where h = x + attn(norm1(x))":
            x + ffn(norm2(h)),
        "you forgot the first residual connection: h = x + attn(norm1(x)), not attn(norm1(x))":
            attn(norm1(x)) + ffn(norm2(attn(norm1(x)))),
        "you forgot the second residual connection: return h + ffn(norm2(h)), not ffn(norm2(h))": ffn(norm2(h)),
        "you forgot both residual connections: add each sublayer's output to its input":
            ffn(norm2(attn(norm1(x)))),
        "you applied the norms to the sublayer outputs; in a pre-norm block they normalise the sublayer inputs: "
        "x + attn(norm1(x))": (x + norm1(attn(x))) + norm2(ffn(x + norm1(attn(x)))),
        "the residual must carry the un-normalised x: x + attn(norm1(x)), not norm1(x) + attn(norm1(x))":
            z + ffn(norm2(z)),
        "the residual must carry the un-normalised x and h: x + attn(norm1(x)), then h + ffn(norm2(h)); normalise "
        "only what goes into each sublayer": norm2(z) + ffn(norm2(z)),
        "the residual must carry the un-normalised h: h + ffn(norm2(h)), not norm2(h) + ffn(norm2(h))":
            norm2(h) + ffn(norm2(h)),
        "you used norm1 twice: the second sublayer has its own norm, h + ffn(norm2(h))": h + ffn(norm1(h)),
        "norm1 and norm2 are swapped: norm1 goes with attn, norm2 with ffn": (x + attn(norm2(x))) + ffn(
            norm1(x + attn(norm2(x)))),
        "the sublayers come in the other order: attention first, then the feed-forward network":
            (x + ffn(norm1(x))) + attn(norm2(x + ffn(norm1(x)))),
        "you stopped after the attention sublayer: add the feed-forward sublayer, h + ffn(norm2(h))": h,
        "attn returns one tensor, not an (output, weights) tuple: use attn(norm1(x)) as it is, without [0]":
            (x + attn(norm1(x))[0]) + ffn(norm2(x + attn(norm1(x))[0])),
    }


def _block_error_hint(message: str) -> str | None:
    if "TypeError" in message and ("positional argument" in message or "takes" in message):
        return ("each of attn, ffn, norm1 and norm2 takes one tensor and returns one tensor: call attn(norm1(x)), "
                "not attn(q, k, v)")
    if "not subscriptable" in message or "tuple" in message:
        return "attn returns one tensor (not an (output, weights) tuple): use its result directly"
    return None


def _block_cases():
    """(description, x, attn, ffn, norm1, norm2, reference) for 4.3, in float64."""
    cases = []
    # 1. the package's own pieces: reference = the package's pre-norm EncoderBlock
    block = _randomize_(EncoderBlock(8, 2, 16, norm_first=True).double(), seed=31).eval()
    x = _randn(2, 5, 8, seed=32)

    def attn(t):
        return block.self_attn(t, t, t)[0]  # one tensor in, one tensor out

    with torch.no_grad():
        ref = block(x)
    cases.append(("x of shape (2, 5, 8) with attn = multi-head self-attention (2 heads), ffn = a ReLU feed-forward "
                  "network 8 -> 16 -> 8, and two LayerNorms with different random gamma and beta",
                  x, attn, block.ffn, block.norm1, block.norm2, ref))
    # 2. plain functions that mix positions, batch of one
    A, B, C = _randn(4, 4, seed=33), _randn(4, 6, seed=34), _randn(6, 4, seed=35)
    norm_a, norm_b = _randomize_(LayerNorm(4).double(), seed=36), _randomize_(LayerNorm(4).double(), seed=37)
    x = _randn(1, 3, 4, seed=38)

    def mix(t):
        return torch.softmax(t @ t.transpose(-2, -1), dim=-1) @ t @ A  # (B, n, 4): every position sees the others

    def mlp(t):
        return torch.tanh(t @ B) @ C  # (B, n, 4)

    cases.append(("x of shape (1, 3, 4) with attn(t) = softmax(t t^T) t A, ffn(t) = tanh(t B) C, and two "
                  "LayerNorms", x, mix, mlp, norm_a, norm_b, None))
    # 3. one token per sequence, odd width
    block3 = _randomize_(EncoderBlock(6, 3, 5, norm_first=True).double(), seed=39).eval()
    x = _randn(3, 1, 6, seed=40)

    def attn3(t):
        return block3.self_attn(t, t, t)[0]

    cases.append(("x of shape (3, 1, 6), one token per sequence, with attention (3 heads), a feed-forward network "
                  "6 -> 5 -> 6 and two LayerNorms", x, attn3, block3.ffn, block3.norm1, block3.norm2, None))
    return cases


@exercise("4.3", "A pre-norm block from its sublayers", section="Pre-norm: GPT-2 and most modern models")
def check_pre_norm_block(pre_norm_block) -> str:
    """pre_norm_block(x, attn, ffn, norm1, norm2) must return h + ffn(norm2(h)) with h = x + attn(norm1(x))."""
    cases = _block_cases()
    for desc, x, attn, ffn, norm1, norm2, ref in cases:
        with torch.no_grad():
            if ref is None:
                h = x + attn(norm1(x))
                ref = h + ffn(norm2(h))
            mistakes = _block_mistakes(x, attn, ffn, norm1, norm2)
            got = call(pre_norm_block, x, attn, ffn, norm1, norm2, what="pre_norm_block", on=desc,
                       forbid=BLOCK_FORBIDDEN, explain=_block_error_hint)
        expect_close(got, ref, what="your result", on=desc, mistakes=mistakes, atol=1e-8, rtol=1e-7)
    return f"the pre-norm block is right on {len(cases)} inputs, including a batch of one and one token per sequence"


# ---------------------------------------------------------------------------------------------------------
# 4.4  The encoder's parameter count
# ---------------------------------------------------------------------------------------------------------

COUNT_FORBIDDEN = [
    (name, "count with a formula: embedding vocab_size * d_model, and per block the attention, feed-forward and "
           "LayerNorm weights and biases")
    for name in ("attnbook.models.params.encoder_param_count", "attnbook.models.params.count_parameters",
                 "attnbook.models.params.encoder_block_param_count", "torch.nn.Module.parameters",
                 "torch.nn.Module.named_parameters")
]


def _reference_count(vocab_size: int, d_model: int, n_heads: int, d_ff: int, n_layers: int) -> int:
    """Count a real stack: nn.Embedding and n_layers nn.TransformerEncoderLayer (on the meta device: no memory)."""
    with torch.device("meta"):
        embedding = nn.Embedding(vocab_size, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, batch_first=True)
    return embedding.weight.numel() + n_layers * sum(p.numel() for p in layer.parameters())


def _count_mistakes(V: int, d: int, h: int, f: int, L: int) -> dict[str, int]:
    """What common counting mistakes give, keyed by the hint for each."""
    emb, attn, ffn, norms = V * d, 4 * d * d + 4 * d, 2 * d * f + f + d, 4 * d
    right = emb + L * (attn + ffn + norms)
    return {
        "you left out the biases: every Linear layer from a to b features has a*b weights and b biases":
            emb + L * (4 * d * d + 2 * d * f + norms),
        "you counted only the weight matrices: add the biases (every Linear layer has one per output feature) and "
        "the two LayerNorms of each block (d_model scales gamma and d_model shifts beta each)":
            emb + L * (4 * d * d + 2 * d * f),
        "your count is 4 * d_model short in every block: either the attention biases are missing (W_q, W_k, W_v "
        "and W_o each have d_model biases) or the LayerNorms are (two per block, each with d_model scales gamma and "
        "d_model shifts beta)": emb + L * (4 * d * d + ffn + norms),
        "you left out the feed-forward biases: d_ff for the first layer and d_model for the second":
            emb + L * (attn + 2 * d * f + norms),
        "each block has two LayerNorms, each with 2 * d_model parameters (gamma and beta): 4 * d_model per block":
            emb + L * (attn + ffn + 2 * d),
        "attention has four matrices, W_q, W_k, W_v and the output projection W_o, each d_model x d_model with "
        "d_model biases": emb + L * (3 * d * d + 3 * d + ffn + norms),
        "the number of heads does not multiply the count: the heads are slices of the same d_model x d_model "
        "projections": emb + L * (h * attn + ffn + norms),
        "the number of heads does not multiply the count: the heads are slices of the same d_model x d_model "
        "projections (W_q, W_k, W_v and W_o together hold 4 d_model^2 weights whatever n_heads is)":
            emb + L * (h * (3 * d * d + 3 * d) + d * d + d + ffn + norms),
        "this encoder uses sinusoidal positions, which have no parameters: leave out the 512 * d_model learned "
        "positions": right + 512 * d,
        "that is close to BERT's count: this encoder has no learned positions, token types, embedding LayerNorm "
        "or pooler": right + 512 * d + 2 * d + 2 * d + d * d + d,
        "the encoder has no output layer: count the token embedding once, and no vocab_size x d_model head":
            right + V * d,
        "the encoder has no output layer: count the token embedding once, and no vocab_size x d_model head "
        "(nor its vocab_size biases)": right + V * d + V,
        "use the d_ff argument for the feed-forward width, not 4 * d_model":
            emb + L * (attn + 2 * d * 4 * d + 4 * d + d + norms),
        "you left out the token embedding: vocab_size * d_model": right - emb,
        "count the token embedding once, not once per layer": L * (emb + attn + ffn + norms),
        "the feed-forward network has two layers, d_model -> d_ff and d_ff -> d_model": emb + L * (
            attn + d * f + f + norms),
        "multiply the per-block count by n_layers: every block has its own weights": emb + attn + ffn + norms,
    }


def _as_count(got, on: str) -> int:
    """An int from the learner's answer, or Wrong with a hint about the type."""
    if got is None:
        raise Wrong(f"encoder_param_count returned None for {on}, expected an int",
                    "did you forget the `return` statement?")
    if isinstance(got, bool):
        raise Wrong(f"encoder_param_count returned a bool for {on}, expected an int")
    if isinstance(got, numbers.Integral):
        return int(got)
    if isinstance(got, Tensor):
        raise Wrong(f"encoder_param_count returned a tensor for {on}, expected a Python int",
                    "count with plain integers (d_model * d_ff, ...), or return int(count)")
    if isinstance(got, numbers.Real):
        raise Wrong(f"encoder_param_count returned the float {got!r} for {on}, expected an int",
                    "a count is a whole number: use integer arithmetic (// instead of /, no ** 0.5, no 1e6)")
    raise Wrong(f"encoder_param_count returned {describe(got)} for {on}, expected an int",
                "return the number of parameters as an int")


@exercise("4.4", "The encoder's parameter count", section="The whole encoder")
def check_encoder_param_count(encoder_param_count) -> str:
    """encoder_param_count(vocab_size, d_model, n_heads, d_ff, n_layers) must equal a real stack's count."""
    configs = [  # the first one tells every known mistake apart (each gives a different count)
        (100, 8, 2, 20, 3),
        (50, 6, 3, 10, 3),
        (1000, 16, 4, 40, 1),
        (37, 12, 1, 20, 2),
        (500, 12, 12, 7, 4),
        (30000, 768, 12, 3072, 12),
    ]
    for V, d, h, f, L in configs:
        on = f"vocab_size={V}, d_model={d}, n_heads={h}, d_ff={f}, n_layers={L}"
        got = _as_count(call(encoder_param_count, V, d, h, f, L, what="encoder_param_count", on=on,
                             forbid=COUNT_FORBIDDEN), on)
        expected = _reference_count(V, d, h, f, L)
        if got == expected:
            continue
        if got in (110_100_000, 110_000_000):
            hint = ("110.1M is the popular tutorial's number for the big model, not a count of this model's "
                    "parameters: add up the pieces")
        else:
            hint = next((hint for hint, wrong in _count_mistakes(V, d, h, f, L).items() if wrong == got), None)
        raise Wrong(f"encoder_param_count({V}, {d}, {h}, {f}, {L}) returned {got:,}, expected {expected:,} "
                    f"(yours is off by {got - expected:+,})", hint)
    return (f"right on {len(configs)} configurations, including the chapter's encoder "
            f"({_reference_count(*configs[-1]):,} parameters)")
