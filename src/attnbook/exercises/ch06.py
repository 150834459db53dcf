"""Checkers for chapter 6, decoder masking, cross-attention and a complete Transformer.

The references are written out here from the definitions (query i may attend to key j when j <= i and key j is
a real token), independently of `attnbook.masks`; 6.3's reference is a plain argmax loop over the package's
model, and each known mistake is the same loop with that one mistake.
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from .guard import call
from .hints import describe
from .registry import exercise, Wrong

# ---------------------------------------------------------------------------------------------------------
# Shared: boolean masks
# ---------------------------------------------------------------------------------------------------------

ADDITIVE_HINT = (
    "that is the additive form (0 where allowed, -inf where blocked) that nn.Transformer's "
    "generate_square_subsequent_mask returns; this book's masks are boolean with True = may attend"
)


def _show(m: Tensor) -> str:
    """A small boolean matrix as rows of 1s and 0s: '[1 0 0] [1 1 0] [1 1 1]'."""
    return " ".join("[" + " ".join("1" if v else "0" for v in row) + "]" for row in m.tolist())


def _expect_bool_mask(got, expected: Tensor, *, what: str, on: str, mistakes: dict[str, Tensor],
                      shape_hints: dict[tuple, str] | None = None, show_row=None) -> None:
    """Wrong unless `got` is a boolean tensor equal to `expected`; known mistakes get their hint."""
    if got is None:
        raise Wrong(f"{what} is None on {on}", "did you forget a `return` statement?")
    if not isinstance(got, Tensor):
        raise Wrong(f"{what} is {describe(got)} on {on}, expected a boolean torch.Tensor")
    shape, want = tuple(got.shape), tuple(expected.shape)
    if shape != want:
        hint = (shape_hints or {}).get(shape)
        if hint is None:
            for mistake_hint, wrong in mistakes.items():
                if tuple(wrong.shape) == shape:
                    hint = mistake_hint
                    break
        raise Wrong(f"{what} has shape {shape} on {on}, expected {want}", hint)
    if got.dtype != torch.bool:
        if got.is_floating_point() and bool(torch.isinf(got).any()) and bool((got[~torch.isinf(got)] == 0).all()):
            raise Wrong(f"{what} has dtype {got.dtype} on {on}, expected torch.bool", ADDITIVE_HINT)
        zero_one = not got.is_complex() and bool(((got == 0) | (got == 1)).all())
        hint = ("a mask holds True/False, not numbers: build it with a comparison, or call .bool() on a 0/1 tensor "
                "(torch.ones(n, n, dtype=torch.bool) starts you off boolean)" if zero_one else
                "a mask holds True/False: build it with comparisons and &, |, ~")
        raise Wrong(f"{what} has dtype {got.dtype} on {on}, expected torch.bool (True = may attend)", hint)
    got = got.cpu()
    if torch.equal(got, expected):
        return
    for hint, wrong in mistakes.items():
        if tuple(wrong.shape) == shape and torch.equal(got, wrong):
            raise Wrong(f"{what} has the wrong values on {on}", hint)
    detail = show_row(got) if show_row else ""
    raise Wrong(f"{what} has the wrong values on {on}{detail}")


def _matrix_detail(expected: Tensor):
    def show(got: Tensor) -> str:
        if got.dim() == 2 and got.size(0) <= 6:
            return f": expected (rows = queries, 1 = may attend) {_show(expected)}, got {_show(got)}"
        return ""
    return show


# ---------------------------------------------------------------------------------------------------------
# 6.1 causal mask
# ---------------------------------------------------------------------------------------------------------

CAUSAL_FORBIDDEN = [
    (name, "build it from torch.ones(n, n, dtype=torch.bool) and torch.tril, or by comparing two aranges")
    for name in ("attnbook.masks.causal_mask", "torch.nn.Transformer.generate_square_subsequent_mask",
                 "torch.nn.modules.transformer._generate_square_subsequent_mask",
                 "attnbook.models.transformer.Transformer.make_tgt_mask")
]


@exercise("6.1", "A causal mask", section="The causal mask",
          references=("attnbook.masks.causal_mask",))
def check_causal_mask(causal_mask) -> str:
    """causal_mask(n) -> bool (n, n), True on and below the diagonal."""
    sizes = [4, 5, 2, 7, 1]
    for n in sizes:
        on = f"n={n}" + (" (a single position)" if n == 1 else "")
        got = call(causal_mask, n, what="causal_mask", on=on, forbid=CAUSAL_FORBIDDEN)
        i = torch.arange(n)[:, None]  # (n, 1): query positions (rows)
        j = torch.arange(n)[None, :]  # (1, n): key positions (columns)
        ref = j <= i  # (n, n)
        mistakes = {
            "your mask is inverted: True must mean 'may attend', so the diagonal and everything below it are "
            "True, and the future (above the diagonal) is False": ~ref,
            "a position may attend to itself: keep the diagonal (torch.tril with the default diagonal=0, not "
            "diagonal=-1)": j < i,
            "you kept the upper triangle: row i is query i, and it may attend to the keys j <= i, which lie on and "
            "below the diagonal; use tril, not triu": j >= i,
            "every entry is True, so nothing is masked: query i must not see the keys j > i":
                torch.ones(n, n, dtype=torch.bool),
        }
        _expect_bool_mask(got, ref, what="your mask", on=on, mistakes=mistakes,
                          shape_hints={(1, 1, n, n): "return a plain 2-D (n, n) mask; broadcasting adds the batch "
                                                     "and head axes later"},
                          show_row=_matrix_detail(ref))
    return f"right for n = {', '.join(map(str, sizes))}"


# ---------------------------------------------------------------------------------------------------------
# 6.2 padding and causal combined
# ---------------------------------------------------------------------------------------------------------

MASK_FORBIDDEN = [
    (name, "write it with torch.arange comparisons (or torch.tril) and &")
    for name in ("attnbook.masks.causal_mask", "attnbook.masks.padding_mask", "attnbook.masks.combine_masks",
                 "attnbook.masks.convert_mask", "torch.nn.Transformer.generate_square_subsequent_mask",
                 "torch.nn.modules.transformer._generate_square_subsequent_mask",
                 "attnbook.models.transformer.Transformer.make_tgt_mask")
]


@exercise("6.2", "Padding and causal masks combined", section="Padding and causal together",
          references=("attnbook.models.transformer.Transformer.make_tgt_mask",))
def check_decoder_self_mask(decoder_self_mask) -> str:
    """decoder_self_mask(lengths, n) -> bool (batch, 1, n, n): query i may attend to key j when j <= i and
    j < lengths[b]."""
    cases = [
        ([3, 5, 1], 5, torch.int64, "lengths [3, 5, 1] and n=5"),
        ([2], 4, torch.int64, "a batch of one: lengths [2] and n=4"),
        ([4, 0, 2], 4, torch.int64, "lengths [4, 0, 2] and n=4 (an empty sequence)"),
        ([3, 3], 3, torch.int64, "lengths [3, 3] and n=3 (no padding)"),
        ([1], 1, torch.int64, "lengths [1] and n=1"),
        ([2, 6, 4], 6, torch.int32, "int32 lengths [2, 6, 4] and n=6"),
    ]
    for values, n, dtype, on in cases:
        lengths = torch.tensor(values, dtype=dtype)
        got = call(decoder_self_mask, lengths, n, what="decoder_self_mask", on=on, forbid=MASK_FORBIDDEN)
        B = len(values)
        i = torch.arange(n)[:, None]  # (n, 1) queries
        j = torch.arange(n)[None, :]  # (1, n) keys
        length = lengths.long()[:, None, None, None]  # (B, 1, 1, 1)
        causal = (j <= i).expand(B, 1, n, n)  # (B, 1, n, n)
        key_ok = (j < length).expand(B, 1, n, n)  # keys beyond the length are padding
        ref = causal & key_ok
        mistakes = {
            "your mask is inverted: True must mean 'may attend'": ~ref,
            "the padding is on the wrong axis: block padding KEYS (the last axis, the columns j >= length), "
            "not padding queries (rows); a padding query may still attend to the real tokens before it, and the "
            "loss ignores its output": causal & (i < length),
            "combine the two masks with AND (&): a key must be allowed by both, not by either (|)": causal | key_ok,
            "the causal part is missing: query i must not see the keys j > i": key_ok,
            "the padding part is missing: keys at positions >= lengths[b] are padding and must be blocked":
                causal.clone(),
            "off by one: key j is a real token when j < length (positions count from 0), not j <= length":
                causal & (j <= length),
            "queries are the rows (axis -2) and keys the columns (axis -1): your mask is transposed":
                ref.transpose(-2, -1),
        }
        shape_hints = {
            (B, n, n): "add the head axis: the result must be (batch, 1, n, n), so that it broadcasts over the "
                       "heads of (batch, heads, n, n) scores (mask[:, None])",
            (B, 1, 1, n): "that is only the padding part, (batch, 1, 1, n); AND it with the (n, n) causal mask, "
                          "which broadcasts it to (batch, 1, n, n)",
            (n, n): "that is only the causal part, (n, n); AND it with the padding mask of shape (batch, 1, 1, n)",
            (B, 1, n): "the padding mask needs two size-1 axes, for heads and queries: (batch, 1, 1, n)",
        }
        shape_hints.setdefault((1, B, n, n), "the batch axis comes first: (batch, 1, n, n)")
        _expect_bool_mask(got, ref, what="your mask", on=on, mistakes=mistakes, shape_hints=shape_hints,
                          show_row=_batch_detail(ref, values))
    return f"right on {len(cases)} batches, including an empty sequence, no padding and a batch of one"


def _batch_detail(expected: Tensor, lengths: list[int]):
    def show(got: Tensor) -> str:
        bad = (got != expected).flatten(1).any(dim=1).nonzero()
        if not len(bad):
            return ""
        b = int(bad[0])
        return (f": for sequence {b} (length {lengths[b]}) expected (rows = queries, 1 = may attend) "
                f"{_show(expected[b, 0])}, got {_show(got[b, 0])}")
    return show


# ---------------------------------------------------------------------------------------------------------
# 6.3 greedy decoding
# ---------------------------------------------------------------------------------------------------------

PAD, BOS, EOS, VOCAB = 0, 1, 2, 13  # the ids and vocabulary size of the chapter's reversal task
_SEED, _SCALE, _EOS_BIAS = 45, 0.3, 0.5  # chosen so that the cases below show every mistake (tests check it)


@functools.lru_cache(maxsize=1)
def _model_state():
    """The weights of the checker's model: a small random Transformer, in float64 so that no argmax is a near tie.

    The EOS logit gets a bias so that rows end at different steps (see the cases in `_decode_cases`), and the
    PAD and BOS logits a large negative one.
    """
    from ..models.transformer import Transformer, TransformerConfig

    config = TransformerConfig(VOCAB, VOCAB, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                               n_decoder_layers=1, max_len=16, dropout=0.3)
    g = torch.Generator().manual_seed(_SEED)
    model = Transformer(config).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * _SCALE)
        model.lm_head.bias[EOS] += _EOS_BIAS
        model.lm_head.bias[[PAD, BOS]] -= 10.0  # like a trained model, it never predicts PAD or BOS
    return config, {k: v.clone() for k, v in model.state_dict().items()}


def _fresh_model():
    """A new copy of the checker's model, in training mode (dropout on), as a learner might hand it over."""
    from ..models.transformer import Transformer

    config, state = _model_state()
    model = Transformer(config).double()
    model.load_state_dict(state)
    return model.train()


def _src(rows: list[list[int]]) -> Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


def _decode_cases() -> list[tuple[str, Tensor, int]]:
    """(description, src, max_len), ordered so that each mistake shows first where it is unambiguous."""
    return [
        ("a batch of 4 padded sources (lengths 6, 3, 5, 2) with max_len=12",
         _src([[5, 9, 3, 12, 4, 2], [7, 8, 2], [11, 3, 6, 10, 2], [4, 2]]), 12),
        ("a batch of 3 sources (lengths 4, 7, 2) with max_len=6",
         _src([[3, 3, 9, 2], [10, 4, 6, 8, 12, 5, 2], [6, 2]]), 6),
        ("a batch of one: src [[8, 6, 11, 2]] with max_len=9", _src([[8, 6, 11, 2]]), 9),
        ("a batch of 2 sources (lengths 3, 5) with max_len=1 (room for BOS only)",
         _src([[9, 4, 2], [3, 5, 7, 4, 2]]), 1),
    ]


@torch.no_grad()
def _greedy(model, src: Tensor, max_len: int, *, feed: str = "prediction", position: str = "last",
            stop: str = "all", fill: str = "pad", memory_mask: bool = True, extra_step: bool = False,
            with_bos: bool = True) -> Tensor:
    """The right greedy loop (defaults), or the same loop with one mistake; the model must be in eval mode."""
    B = src.size(0)
    memory = model.encode(src, model.make_src_mask(src))  # (B, S, d)
    src_mask = model.make_src_mask(src) if memory_mask else None  # False: the cross-attention sees the padding
    ys = torch.full((B, 1), BOS, dtype=torch.long)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool)
    steps = max_len if extra_step else max_len - 1
    for t in range(steps):
        if feed == "prediction":
            tgt_in = ys
        elif feed == "bos":  # the prediction is never fed back: every step sees BOS alone
            tgt_in = ys[:, :1]
        elif feed == "last":  # only the latest token, not the whole prefix
            tgt_in = ys[:, -1:]
        else:  # "source": the source tokens fed as the decoder input (teacher forcing with src)
            tgt_in = torch.cat([ys[:, :1], src[:, :t]], dim=1)[:, : t + 1]
        logits = model.decode(tgt_in, memory, src_mask)  # (B, T, V)
        if position == "last":
            nxt = logits[:, -1].argmax(dim=-1)  # (B,)
        elif position == "first":  # the first position's logits instead of the last one's
            nxt = logits[:, 0].argmax(dim=-1)
        else:  # "positions": argmax over the positions instead of the vocabulary
            nxt = logits.argmax(dim=1)[:, -1]
        if fill == "pad":
            nxt = nxt.masked_fill(done, PAD)
        elif fill == "eos":
            nxt = nxt.masked_fill(done, EOS)
        if fill == "overwrite":  # marks the row done first, so its EOS itself becomes PAD
            done = done | (nxt == EOS)
            nxt = nxt.masked_fill(done, PAD)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done = done | (nxt == EOS)
        if (stop == "all" and done.all()) or (stop == "any" and done.any()):
            break
    return ys if with_bos else ys[:, 1:]


def _decode_mistakes(model, src: Tensor, max_len: int) -> dict[str, Tensor]:
    g = functools.partial(_greedy, model, src, max_len)
    return {
        "each row must start with bos_id: the decoder's first input is BOS, and the result keeps it "
        "(then the generated tokens)": g(with_bos=False),
        "every step predicted from BOS alone: append each new token to the decoder input "
        "(ys = torch.cat([ys, next_id[:, None]], dim=1)), run the decoder on all of ys, and read the LAST "
        "position's logits, logits[:, -1]": g(feed="bos"),
        "the decoder must read the whole prefix generated so far (BOS and every token since), not only the "
        "latest token: pass all of ys to decode": g(feed="last"),
        "read the LAST position's logits, logits[:, -1]: the first position only ever predicts the token after "
        "BOS": g(position="first"),
        "keep the EOS token itself: only the positions AFTER a row's EOS become PAD": g(fill="overwrite"),
        "the decoder must read its own predictions (BOS and the tokens generated so far), not the source "
        "tokens: at generation time there is no target to teacher-force with": g(feed="source"),
        "the argmax must run over the vocabulary (dim=-1) of the last position's logits (batch, vocab); you "
        "took it over the positions": g(position="positions"),
        "after a row has produced EOS, fill its remaining positions with PAD (model.config.pad_id), not with "
        "further predictions": g(fill="none"),
        "after a row has produced EOS, fill its remaining positions with PAD (model.config.pad_id = 0), not EOS":
            g(fill="eos"),
        "stop once EVERY row has produced EOS ((ys == eos_id).any(dim=1).all()), not as soon as one row has; "
        "the other rows still need their tokens": g(stop="any"),
        "stop as soon as every row has produced EOS: after that step nothing but padding would follow":
            g(stop="never"),
        "stop as soon as every row has produced EOS, and fill the finished rows with PAD (model.config.pad_id)":
            g(stop="never", fill="none"),
        "max_len counts every position of the result, BOS included: generate at most max_len - 1 tokens":
            g(extra_step=True),
        "the cross-attention must not read the source padding: pass the source mask (model.make_src_mask(src)) "
        "to decode, or call model(src, ys), which builds it": g(memory_mask=False),
    }


def _decode_error_hint(message: str) -> str | None:
    if "only one element tensors" in message or "a Tensor with" in message and "cannot be converted" in message:
        return ("with a batch, the argmax gives one id per row: compare whole tensors (next_id == eos_id gives a "
                "boolean per row) and stop when every row has produced EOS, e.g. done.all()")
    if "Boolean value of Tensor with more than one" in message:
        return ("`if next_id == eos_id:` asks about a whole batch at once: keep a boolean `done` per row and stop "
                "with `if done.all(): break`")
    if "must be an integer tensor of token ids" in message:
        return ("token ids are integers: build the BOS column with torch.full((B, 1), bos_id, dtype=torch.long) "
                "and keep the argmax results (already int64) as they are")
    if "Tensors must have same number of dimensions" in message or "Sizes of tensors must match" in message:
        return ("the new ids must have shape (batch, 1) to be appended to ys (batch, t): take the argmax of the "
                "last position's logits over the vocabulary, logits[:, -1].argmax(dim=-1), then add an axis "
                "with [:, None]")
    return None


GREEDY_FORBIDDEN = [
    (name, "write the loop yourself: encode once, then decode, take the argmax of the last position, append")
    for name in ("attnbook.models.transformer.greedy_decode",)
]


@exercise("6.3", "Greedy decoding", section="Greedy decoding",
          references=("attnbook.models.transformer.greedy_decode",))
def check_greedy_decode(greedy_decode) -> str:
    """greedy_decode(model, src, max_len, bos_id, eos_id) -> (B, <= max_len) LongTensor, as the reference loop."""
    cases = _decode_cases()
    for desc, src, max_len in cases:
        model = _fresh_model()
        on = desc
        got = call(greedy_decode, model, src, max_len, BOS, EOS, what="greedy_decode", on=on,
                   forbid=GREEDY_FORBIDDEN, explain=_decode_error_hint)
        left_training = model.training
        model.eval()
        ref = _greedy(model, src, max_len)
        if got is None:
            raise Wrong(f"greedy_decode returned None on {on}", "did you forget a `return` statement?")
        if not isinstance(got, Tensor):
            raise Wrong(f"greedy_decode returned {describe(got)} on {on}, expected a (batch, length) tensor of "
                        "token ids", "return ys, the tensor you appended the tokens to")
        if got.is_floating_point() or got.dtype == torch.bool or got.is_complex():
            raise Wrong(f"greedy_decode returned a tensor of dtype {got.dtype} on {on}, expected integer token "
                        "ids (torch.long)", "keep the ids as integers: argmax already returns int64")
        if tuple(got.shape) == tuple(ref.shape) and torch.equal(got.cpu().long(), ref):
            continue
        _explain_randomness(greedy_decode, src, max_len, on, got, left_training)
        mistakes = _decode_mistakes(model, src, max_len)
        for hint, wrong in mistakes.items():
            if tuple(wrong.shape) == tuple(got.shape) and torch.equal(got.cpu().long(), wrong):
                raise Wrong(f"greedy_decode gave the wrong tokens on {on}", hint)
        if tuple(got.shape) != tuple(ref.shape):
            hint = None
            if got.dim() == 2 and got.size(0) == ref.size(0) and got.size(1) > max_len:
                hint = "max_len counts every position of the result, BOS included: generate at most max_len - 1 tokens"
            elif got.dim() == 2 and got.size(0) == ref.size(0) and got.size(1) == max_len > ref.size(1):
                hint = "stop as soon as every row has produced EOS"
            elif got.dim() == 2 and got.size(0) != ref.size(0) and got.size(1) == ref.size(0):
                hint = "the result has one row per source sequence: (batch, length)"
            elif got.dim() != 2:
                hint = "return a 2-D (batch, length) tensor: BOS, then one column per generated token"
            raise Wrong(f"greedy_decode returned shape {tuple(got.shape)} on {on}, expected {tuple(ref.shape)}", hint)
        diff = (got.cpu().long() != ref).nonzero()[0]
        b, t = int(diff[0]), int(diff[1])
        raise Wrong(f"greedy_decode gave the wrong tokens on {on}: row {b} is {got[b].tolist()}, expected "
                    f"{ref[b].tolist()} (first difference at position {t})",
                    "at each step: logits = model.decode(ys, memory, src_mask) (or model(src, ys)); next_id = the "
                    "argmax of logits[:, -1] over the vocabulary; append it; PAD after a row's EOS")
    return (f"right on {len(cases)} batches: BOS first, argmax fed back, PAD after EOS, stops when every row has "
            "ended or at max_len")


def _explain_randomness(greedy_decode, src, max_len, on, got, left_training) -> None:
    """Wrong with the right hint when the answer gives different tokens under another seed (dropout or sampling)."""
    model = _fresh_model()
    again = call(greedy_decode, model, src, max_len, BOS, EOS, what="greedy_decode", on=on,
                 forbid=GREEDY_FORBIDDEN, explain=_decode_error_hint, seed=1)
    if isinstance(again, Tensor) and tuple(again.shape) == tuple(got.shape) and torch.equal(again, got):
        return
    if left_training:
        raise Wrong(f"greedy_decode gives different tokens from run to run on {on}",
                    "the model comes in training mode, so dropout is on: call model.eval() before decoding")
    raise Wrong(f"greedy_decode gives different tokens from run to run on {on}",
                "greedy decoding has no randomness: take the argmax of the logits, do not sample from the softmax")


# ---------------------------------------------------------------------------------------------------------
# 6.4 from nn.MultiheadAttention's or an additive mask to ours
# ---------------------------------------------------------------------------------------------------------


def _convert_cases() -> list[tuple[str, Tensor, Tensor]]:
    """(description, mask, expected allow-mask), ordered so that each mistake first shows where it is unambiguous."""
    causal = torch.ones(4, 4, dtype=torch.bool).tril()  # (4, 4) allow
    g = torch.Generator().manual_seed(64)
    rand = torch.rand(6, 3, 5, generator=g) < 0.6  # (B*h, L, S) allow
    rand[..., 0] = True
    key_pad = torch.tensor([[True, True, True, False, False], [True, True, True, True, True],
                            [True, False, False, False, False]])  # (3, 5) allow
    bert = torch.tensor([[True, True, False], [True, True, True]])  # (2, 3) allow
    blocked_inf = torch.zeros(4, 4).masked_fill(~causal, float("-inf"))
    return [
        ("a boolean attn_mask of shape (4, 4) in nn.MultiheadAttention's convention (the causal mask: True above "
         "the diagonal)", ~causal, causal),
        ("an additive float mask of shape (4, 4) with 0 and -inf (what nn.Transformer.generate_square_subsequent_mask "
         "returns)", blocked_inf, causal),
        ("a boolean key_padding_mask of shape (3, 5), True at the padding", ~key_pad, key_pad),
        ("an additive float mask of shape (6, 3, 5) with 0 and -1e9",
         torch.zeros(6, 3, 5).masked_fill(~rand, -1e9), rand),
        ("an additive float64 mask of shape (2, 1, 1, 3) with 0 and -10000 (BERT's extended attention mask)",
         torch.zeros(2, 1, 1, 3, dtype=torch.float64).masked_fill(~bert[:, None, None, :], -10000.0),
         bert[:, None, None, :]),
        ("a boolean attn_mask of shape (6, 3, 5) in nn.MultiheadAttention's convention", ~rand, rand),
        ("an additive float mask of shape (3, 5) with 0 and -inf",
         torch.zeros(3, 5).masked_fill(~key_pad, float("-inf")), key_pad),
    ]


def _convert_error_hint(message: str) -> str | None:
    if "bitwise_not" in message or "only implemented on integer and Boolean" in message:
        return ("~ works on boolean tensors only; an additive mask is floating point: compare it instead "
                "(mask == 0 is True where attention is allowed). Tell the two kinds apart with "
                "mask.dtype == torch.bool")
    if "Boolean value of Tensor with more than one" in message:
        return ("`if mask:` asks about the whole tensor; to tell the two kinds of mask apart test its dtype: "
                "`if mask.dtype == torch.bool:`")
    return None


CONVERT_FORBIDDEN = [
    ("attnbook.masks.convert_mask", "a boolean mask needs ~; an additive one a comparison")
]


@exercise("6.4", "nn.MultiheadAttention's masks in our convention", section="Three mask conventions",
          references=("attnbook.masks.convert_mask",))
def check_to_allow_mask(to_allow_mask) -> str:
    """to_allow_mask(mask) -> bool mask of the same shape, True = may attend."""
    cases = _convert_cases()
    for desc, mask, ref in cases:
        got = call(to_allow_mask, mask, what="to_allow_mask", on=desc, forbid=CONVERT_FORBIDDEN,
                   explain=_convert_error_hint)
        if mask.dtype == torch.bool:
            mistakes = {
                "nn.MultiheadAttention's True means 'blocked', ours means 'may attend': invert a boolean mask "
                "with ~mask": mask,
                "this boolean mask came out all True: you treated it like an additive mask; a boolean mask is "
                "converted by inverting it (~mask)": torch.ones_like(mask),
            }
        else:
            mistakes = {
                "in an additive mask 0 means 'allowed' (adding 0 leaves the score unchanged) and a large negative "
                "number means 'blocked': True where mask == 0": mask != 0,
                "a large negative number such as -1e9 or -10000 blocks attention just like -inf (after the "
                "softmax its weight is 0): treat every large negative entry as blocked, e.g. mask > -1e4 or "
                "mask == 0": torch.ones(mask.shape, dtype=torch.bool),
            }
        same_shape = isinstance(got, Tensor) and tuple(got.shape) == tuple(ref.shape)
        if same_shape and got.dtype != torch.bool and not got.is_complex():
            if got.is_floating_point() and torch.equal(got.to(mask.dtype), mask) and mask.is_floating_point():
                raise Wrong(f"to_allow_mask returned the additive mask unchanged on {desc}",
                            "turn it into booleans: True where the entry is 0 (allowed), False where it is a large "
                            "negative number")
            if bool(((got == 0) | (got == 1)).all()) and torch.equal(got.bool(), ref):
                raise Wrong(f"to_allow_mask returned dtype {got.dtype} on {desc}, expected torch.bool",
                            "return booleans: a comparison such as mask == 0 already gives a bool tensor (no "
                            ".float() or .int() after it)")
        _expect_bool_mask(got, ref, what="your mask", on=desc, mistakes=mistakes,
                          shape_hints={tuple(ref.shape[:1]) + (1, 1) + tuple(ref.shape[1:]):
                                       "keep the shape of the input: only the meaning of the entries changes"}
                          if ref.dim() == 2 else None)
    return (f"right on {len(cases)} masks: boolean attn_mask and key_padding_mask, additive with -inf, -1e9 "
            "and -10000")

