"""Checker for exercise 4.3, a pre-norm block from its sublayers."""
from __future__ import annotations

import re

import torch
from torch import Tensor, nn

from ...layers import EncoderBlock, LayerNorm
from ..compare import expect_input_dtype, generator
from ..guard import call
from ..inputs import builds
from ..registry import exercise
from ..runs import GRAD_TAIL, Run, collect, expect_gradients, expect_shape, verdict
from ._shared import randn64, tolerance
from ...i18n import N_, _


def _randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Random values for every parameter, new on every run (`generator` adds the run's seed offset; `builds`
    records it, so the grader's kernel makes the same ones): torch's ones and zeros would hide a forgotten gamma,
    beta or bias, and weights fixed across runs would let an answer remember them."""
    g = generator(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    return module


BLOCK_FORBIDDEN = [
    (name, N_("compose the four callables yourself, in the order of the pre-norm diagram"))
    for name in ("attnbook.layers.EncoderBlock", "torch.nn.TransformerEncoderLayer")
]


def _block_mistakes(x: Tensor, attn, ffn, norm1, norm2) -> dict[str, Tensor]:
    """What common mistakes return on this input; each hint names the mistake and the rule, not the answer."""
    y = norm1(x)
    a_y, a_x, a_n2 = attn(y), attn(x), attn(norm2(x))  # the attention outputs the mistakes share
    h, z, post_h, half = x + a_y, y + a_y, norm1(x + a_x), 0.5 * (x + a_y)
    out = h + ffn(norm2(h))
    post = (_("that is a post-norm block, which normalises after each residual addition; a pre-norm block normalises "
              "only the input of each sublayer and adds the sublayer's output to the un-normalised stream"))
    order = _("the sublayers come in the other order: attention first, then the feed-forward network, each with its "
              "norm")
    both = norm1(x + a_y)  # the stream normalised after the first residual too
    return {
        post: norm2(post_h + ffn(post_h)),
        _("you normalise after each residual addition too, as a post-norm block does, on top of normalising each "
          "sublayer's input: a pre-norm block leaves the stream itself un-normalised"): norm2(both + ffn(norm2(both))),
        post + _(" (your second sublayer also reads x instead of h, so the attention output is lost)"):
            norm2(x + ffn(x)),
        post + _(" (your second residual also starts from x instead of h)"): norm2(x + ffn(post_h)),
        _("the feed-forward sublayer reads the block's input x: it must read h, the output of the first sublayer "
          "block (attention with its residual), through its own norm"): h + ffn(norm2(x)),
        _("the second residual starts from x: it must start from h, the output of the first sublayer block; as "
          "written, the attention output never reaches the result"): x + ffn(norm2(h)),
        _("you forgot the first residual connection: the attention sublayer's output is added to the block's input x"):
            a_y + ffn(norm2(a_y)),
        _("you forgot the second residual connection: the feed-forward sublayer's output is added to its input "
          "stream h"): ffn(norm2(h)),
        _("you forgot both residual connections: each sublayer's output is added to the stream it read from"):
            ffn(norm2(a_y)),
        _("you applied the norms to the sublayer outputs; in a pre-norm block each norm normalises the input of its "
          "sublayer"): (x + norm1(a_x)) + norm2(ffn(x + norm1(a_x))),
        _("the residual must carry the un-normalised x: normalise only what goes into attn"): z + ffn(norm2(z)),
        _("the residuals must carry the un-normalised stream: normalise only what goes into each sublayer"):
            norm2(z) + ffn(norm2(z)),
        _("the second residual must carry the un-normalised h: normalise only what goes into ffn"):
            norm2(h) + ffn(norm2(h)),
        _("you used norm1 twice: the feed-forward sublayer has its own norm, norm2"): h + ffn(norm1(h)),
        _("norm1 and norm2 are swapped: norm1 belongs to the attention sublayer, norm2 to the feed-forward sublayer"):
            (x + a_n2) + ffn(norm1(x + a_n2)),
        order: (x + ffn(norm1(x))) + attn(norm2(x + ffn(norm1(x)))),
        order + _(" (yours have the right norms)"): (x + ffn(norm2(x))) + attn(norm1(x + ffn(norm2(x)))),
        _("you stopped after the attention sublayer: the block goes on with the feed-forward sublayer and its own "
          "residual connection"): h,
        _("attn returns one tensor, not an (output, weights) tuple: use its result as it is, without [0]"):
            (x + a_y[0]) + ffn(norm2(x + a_y[0])),
        _("you added the block's input x once more at the end: each residual connection adds a sublayer's output "
          "once, to the stream it read from"): out + x,
        _("a pre-norm block does not normalise its output: the norms only normalise what goes into the sublayers"):
            norm2(out),
        _("the residual connections add the sublayer's output to the stream as it is, unscaled (no averaging)"):
            0.5 * (half + ffn(norm2(half))),
    }


def _block_error_hint(message: str) -> str | None:
    # the stand-ins' own ValueError (below, in the language of the moment), or PyTorch's
    if _("attn takes one tensor of shape (batch, n, d)") in message or "must have shape (batch, seq" in message:
        return (_("keep x as it is, (batch, n, d): attention mixes the positions within each sequence, so do not "
                  "flatten or reshape x (to (batch * n, d)) before calling attn"))
    if "pre_norm_block()" in message and ("positional argument" in message or "keyword argument" in message):
        return (_("keep the signature pre_norm_block(x, attn, ffn, norm1, norm2): the check passes these five "
                  "arguments, a norm for each sublayer, and nothing else"))
    called = re.search(r"\b(attn|ffn|norm1|norm2)\(\) (takes \d+ positional|got an unexpected keyword)", message)
    if called:
        name = called.group(1)
        if name == "attn":
            return (_("attn takes one tensor of shape (batch, n, d) and returns one: call it as attn(t), with the "
                      "normalised tensor alone, not attn(q, k, v)"))
        return (_("{name} takes one tensor of shape (batch, n, d) and returns one: call it as {name}(t), with the "
                  "tensor alone (its settings, such as eps or the weights, are already inside it)", name=name))
    if "not subscriptable" in message or "tuple" in message:
        return (_("one of your values is a tuple where a tensor is needed: each sublayer returns one tensor (not an "
                  "(output, weights) tuple), and a trailing comma (h = ...,) makes a tuple"))
    return None


def _named(fn, name: str, three_d: bool = False):
    """`fn` as a plain function called `name` (what error messages and repr show), taking one tensor; with
    `three_d`, it refuses anything but a (batch, n, d) tensor, as attention does."""

    def sublayer(t):
        if three_d and isinstance(t, Tensor) and t.dim() != 3:
            raise ValueError(_("{name} takes one tensor of shape (batch, n, d), got shape {tuple_t_shape}",
                               name=name, tuple_t_shape=tuple(t.shape)))
        return fn(t)

    sublayer.__name__ = sublayer.__qualname__ = name
    return sublayer


@builds
def _encoder_block(d_model: int, n_heads: int, d_ff: int, seed: int, float64: bool = True) -> EncoderBlock:
    """A pre-norm EncoderBlock with random parameters, in eval mode (float64 or float32)."""
    block = EncoderBlock(d_model, n_heads, d_ff, norm_first=True)
    return _randomize_(block.double() if float64 else block, seed=seed).eval()


@builds
def _block_from(block: EncoderBlock) -> tuple:
    """(attn, ffn, norm1, norm2) of a pre-norm EncoderBlock, as one-tensor functions with readable names."""
    return (_named(lambda t: block.self_attn(t, t, t)[0], "attn", three_d=True), _named(block.ffn, "ffn"),
            _named(block.norm1, "norm1"), _named(block.norm2, "norm2"))


@builds
def _mixing_sublayers() -> tuple:
    """(attn, ffn, norm1, norm2) that are plain functions: attn(t) = softmax(t t^T) t A, ffn(t) = tanh(t B) C."""
    A, B, C = randn64(4, 4, seed=33), randn64(4, 6, seed=34), randn64(6, 4, seed=35)
    norm_a, norm_b = _randomize_(LayerNorm(4).double(), seed=36), _randomize_(LayerNorm(4).double(), seed=37)

    def mix(t):
        return torch.softmax(t @ t.transpose(-2, -1), dim=-1) @ t @ A  # (B, n, 4): every position sees the others

    def mlp(t):
        return torch.tanh(t @ B) @ C  # (B, n, 4)

    return (_named(mix, "attn", three_d=True), _named(mlp, "ffn"), _named(norm_a, "norm1"),
            _named(norm_b, "norm2"))


def _block_cases():
    """(description, x, attn, ffn, norm1, norm2, reference) for 4.3. The sublayers are made by factories, so
    that the grader's sandboxed kernel can make the same ones (inputs.builds)."""
    block, x = _encoder_block(8, 2, 16, 31), randn64(2, 5, 8, seed=32)
    with torch.no_grad():
        ref = block(x)  # the first case's reference: the package's own pre-norm EncoderBlock
    return [
        (_("x of shape (2, 5, 8) with attn = multi-head self-attention (2 heads), ffn = a ReLU feed-forward "
           "network 8 -> 16 -> 8, and two LayerNorms with different random gamma and beta"),
         x, *_block_from(block), ref),
        (_("x of shape (1, 3, 4) with attn(t) = softmax(t t^T) t A, ffn(t) = tanh(t B) C, and two LayerNorms"),
         randn64(1, 3, 4, seed=38), *_mixing_sublayers(), None),
        (_("x of shape (3, 1, 6), one token per sequence, with attention (3 heads), a feed-forward network "
           "6 -> 5 -> 6 and two LayerNorms"), randn64(3, 1, 6, seed=40), *_block_from(_encoder_block(6, 3, 5, 39)),
         None),
        (_("x of shape (2, 4, 6) in float32, with attention (2 heads), a feed-forward network 6 -> 12 -> 6 "
           "and two LayerNorms, all in float32"), randn64(2, 4, 6, seed=42, dtype=torch.float32),
         *_block_from(_encoder_block(6, 2, 12, 41, False)), None),
    ]


@exercise("4.3", "A pre-norm block from its sublayers", answer_name="pre_norm_block",
          section="Pre-norm: GPT-2 and most modern models",
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
        expect_input_dtype(got, x, what=_("your result"), on=desc, same_shape=True)
        got = expect_shape(got, ref, mistakes, runs, what=_("your result"), on=desc)
        return Run(desc, got, ref, mistakes, *tolerance(x))

    verdict(collect(cases, one), what=_("your result"),
            rule=_("the attention sublayer reads norm1 of the stream and adds its output to the stream; then the "
                   "feed-forward sublayer does the same with norm2"))
    desc, x, *sublayers, _unused = cases[0]
    expect_gradients(pre_norm_block, (x, *sublayers), {0: "x"}, _block_ref, what="pre_norm_block", on=desc,
                     forbid=BLOCK_FORBIDDEN, explain=_block_error_hint,
                     hint=_("the gradient must reach x through every path, the residual connections (the skip paths) "
                            "included: ") + _(GRAD_TAIL))
    return (_("the pre-norm block is right on {len_cases} inputs, including a batch of one, one token per "
              "sequence and float32", len_cases=len(cases)))


def _block_ref(x, attn, ffn, norm1, norm2):
    h = x + attn(norm1(x))  # (B, n, d)
    return h + ffn(norm2(h))
