"""Checkers for chapter 6, decoder masking, cross-attention and a complete Transformer.

The references are written out here from the definitions (query i may attend to key j when j <= i and key j is
a real token), independently of `attnbook.masks`; 6.3's reference is a plain argmax loop over the package's
model, and each known mistake is the same loop with that one mistake.

Every checker runs all its cases before it judges: a known mistake is named only when it gives the learner's
result on every case of its kind; otherwise the message shows the first wrong entry and the rule it breaks
(never a whole expected mask or row).
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
INVERTED = "your mask is inverted: True must mean 'may attend'"
STRICT = ("a position may attend to itself: keep the diagonal (query i may see key j = i; tril's default "
          "diagonal=0, not diagonal=-1)")
UPPER = ("you kept the upper triangle: row i is query i, and it may attend to the keys j <= i, which lie on and "
         "below the diagonal; use tril, not triu")
NO_CAUSAL = "the causal part is missing: query i must not see the keys j > i"


class _Case:
    """One case a checker ran: its description, the learner's result, the right one, and {key: (hint, wrong
    result)} for the known mistakes; `kind` groups the cases a mistake is about (6.4: boolean or additive)."""

    def __init__(self, on: str, got, ref: Tensor, mistakes: dict[str, tuple[str, Tensor]], kind: str = ""):
        self.on, self.got, self.ref, self.mistakes, self.kind = on, got, ref, mistakes, kind

    def right(self) -> bool:
        return _same(self.got, self.ref)


def _same(got, want: Tensor) -> bool:
    return (isinstance(got, Tensor) and tuple(got.shape) == tuple(want.shape)
            and torch.equal(got.detach().cpu().to(want.dtype), want))


def _explained(cases: list[_Case], first: _Case) -> str | None:
    """The hint of the first known mistake (in `first`'s order) that gives the learner's result on EVERY case of
    `first`'s kind, or None: a mistake that explains only some of them is not named."""
    for key, (hint, _) in first.mistakes.items():
        if all(key in c.mistakes and _same(c.got, c.mistakes[key][1]) for c in cases if c.kind == first.kind):
            return hint
    return None


def _mask_type(got, expected: Tensor, *, what: str, on: str, shape_hints: dict[tuple, str] | None = None,
               shape_mistakes: dict[str, tuple[str, Tensor]] | None = None) -> None:
    """Wrong unless `got` is a boolean tensor of expected's shape (a shape that only a known mistake gives gets
    its hint)."""
    if got is None:
        raise Wrong(f"{what} is None on {on}", "did you forget a `return` statement?")
    if not isinstance(got, Tensor):
        raise Wrong(f"{what} is {describe(got)} on {on}, expected a boolean torch.Tensor")
    shape, want = tuple(got.shape), tuple(expected.shape)
    if shape != want:
        hint = (shape_hints or {}).get(shape)
        if hint is None:
            for mistake_hint, wrong in (shape_mistakes or {}).values():
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


def _judge(cases: list[_Case], *, what: str, detail) -> None:
    """Wrong for the first case whose result is not right: a known mistake's hint when that mistake explains
    every case of its kind, else the first wrong entry and the rule it breaks (`detail(case, index)`)."""
    for case in cases:
        if case.right():
            continue
        hint = _explained(cases, case)
        if hint is not None:
            raise Wrong(f"{what} has the wrong values on {case.on}", hint)
        got = case.got.detach().cpu()
        index = tuple(int(i) for i in (got != case.ref).nonzero()[0])
        raise Wrong(f"{what} has the wrong values on {case.on}: {detail(case, index)}")


def _run_masks(inputs, run, *, what: str, detail) -> None:
    """Run `run(input) -> _Case` for every input; a result of the wrong type or shape is reported at once,
    unless an earlier case already had wrong values (then that one is reported, with what the cases so far
    show). Then `_judge` the values."""
    cases: list[_Case] = []
    for item in inputs:
        try:
            case = run(item)
        except Wrong:
            if any(not c.right() for c in cases):
                break
            raise
        cases.append(case)
    _judge(cases, what=what, detail=detail)


def _tf(v: bool) -> str:
    return "True" if v else "False"


# ---------------------------------------------------------------------------------------------------------
# 6.1 causal mask
# ---------------------------------------------------------------------------------------------------------

CAUSAL_FORBIDDEN = [
    (name, "build it from torch.ones(n, n, dtype=torch.bool) and torch.tril, or by comparing two aranges")
    for name in ("attnbook.masks.causal_mask", "torch.nn.Transformer.generate_square_subsequent_mask",
                 "torch.nn.modules.transformer._generate_square_subsequent_mask",
                 "attnbook.models.transformer.Transformer.make_tgt_mask")
]


def _causal_detail(case: _Case, index: tuple[int, ...]) -> str:
    i, j = index
    want = bool(case.ref[i, j])
    rule = (f"key j={j} is not after query i={i} (j <= i), so query i may attend to it" if want else
            f"key j={j} comes after query i={i} (j > i), and a query may attend only to the keys j <= i")
    return (f"entry [{i}, {j}] (row = query {i}, column = key {j}) is {_tf(not want)}, expected {_tf(want)}: "
            f"{rule}")


@exercise("6.1", "A causal mask", section="The causal mask",
          references=("attnbook.masks.causal_mask",))
def check_causal_mask(causal_mask) -> str:
    """causal_mask(n) -> bool (n, n), True on and below the diagonal."""
    sizes = [4, 5, 2, 7, 1]

    def run(n: int) -> _Case:
        on = f"n={n}" + (" (a single position)" if n == 1 else "")
        got = call(causal_mask, n, what="causal_mask", on=on, forbid=CAUSAL_FORBIDDEN)
        i = torch.arange(n)[:, None]  # (n, 1): query positions (rows)
        j = torch.arange(n)[None, :]  # (1, n): key positions (columns)
        ref = j <= i  # (n, n)
        mistakes = {
            "inverted": ("your mask is inverted: True must mean 'may attend', so the diagonal and everything below "
                         "it are True, and the future (above the diagonal) is False", ~ref),
            "strict": (STRICT, j < i),
            "upper": (UPPER, j >= i),
            "all": ("every entry is True, so nothing is masked: query i must not see the keys j > i",
                    torch.ones(n, n, dtype=torch.bool)),
            "one ahead": ("off by one: query i may see the keys j <= i, not also key i + 1 (tril's diagonal is 0, "
                          "not 1)", j <= i + 1),
        }
        _mask_type(got, ref, what="your mask", on=on,
                   shape_hints={(1, 1, n, n): "return a plain 2-D (n, n) mask; broadcasting adds the batch "
                                              "and head axes later"})
        return _Case(on, got, ref, mistakes)

    _run_masks(sizes, run, what="your mask", detail=_causal_detail)
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


def _self_mask_detail(case: _Case, index: tuple[int, ...]) -> str:
    b, _, i, j = index
    length = case.lengths[b]
    want = bool(case.ref[index])
    if want:
        rule = (f"key j={j} is a real token (j < lengths[b] = {length}) and not after query i={i} (j <= i), so "
                "query i may attend to it" + (" (padding queries are not blocked)" if i >= length else ""))
    elif j > i:
        rule = f"key j={j} comes after query i={i} (j > i), so the causal part blocks it"
    else:
        rule = f"key j={j} is padding (j >= lengths[b] = {length}), so it is blocked"
    return (f"for sequence {b} (length {length}), entry [{b}, 0, {i}, {j}] (query {i}, key {j}) is "
            f"{_tf(not want)}, expected {_tf(want)}: {rule}")


@exercise("6.2", "Padding and causal masks combined", section="Padding and causal together",
          references=("attnbook.models.transformer.Transformer.make_tgt_mask",))
def check_decoder_self_mask(decoder_self_mask) -> str:
    """decoder_self_mask(lengths, n) -> bool (batch, 1, n, n): query i may attend to key j when j <= i and
    j < lengths[b]."""
    inputs = [
        ([3, 5, 1], 5, torch.int64, "lengths [3, 5, 1] and n=5"),
        ([2], 4, torch.int64, "a batch of one: lengths [2] and n=4"),
        ([4, 0, 2], 4, torch.int64, "lengths [4, 0, 2] and n=4 (an empty sequence)"),
        ([3, 3], 3, torch.int64, "lengths [3, 3] and n=3 (no padding)"),
        ([1], 1, torch.int64, "lengths [1] and n=1"),
        ([2, 6, 4], 6, torch.int32, "int32 lengths [2, 6, 4] and n=6"),
    ]

    def run(item) -> _Case:
        values, n, dtype, on = item
        lengths = torch.tensor(values, dtype=dtype)
        got = call(decoder_self_mask, lengths, n, what="decoder_self_mask", on=on, forbid=MASK_FORBIDDEN)
        B = len(values)
        i = torch.arange(n)[:, None]  # (n, 1) queries
        j = torch.arange(n)[None, :]  # (1, n) keys
        length = lengths.long()[:, None, None, None]  # (B, 1, 1, 1)
        causal = (j <= i).expand(B, 1, n, n)  # (B, 1, n, n)
        key_ok = (j < length).expand(B, 1, n, n)  # keys beyond the length are padding
        query_ok = (i < length).expand(B, 1, n, n)  # the real queries
        ref = causal & key_ok
        mistakes = {
            "inverted": (INVERTED, ~ref),
            "queries": ("padding queries are not blocked: your mask blocks every key for the padding queries (the "
                        "rows i >= lengths[b]), as if the padding were on the query axis or on both axes. Block only "
                        "the padding KEYS (the columns j >= lengths[b]): a padding query still attends to the real "
                        "tokens before it, and the loss ignores its output", causal & query_ok),
            "or": ("combine the two masks with AND (&): a key must be allowed by both, not by either (|)",
                   causal | key_ok),
            "no causal": (NO_CAUSAL, key_ok),
            "no padding": ("the padding part is missing: keys at positions >= lengths[b] are padding and must be "
                           "blocked", causal.clone()),
            "off by one": ("off by one: key j is a real token when j < length (positions count from 0), not "
                           "j <= length", causal & (j <= length)),
            "transposed": ("queries are the rows (axis -2) and keys the columns (axis -1): your mask is transposed",
                           ref.transpose(-2, -1)),
            "strict": (STRICT, (j < i) & key_ok),
            "upper": (UPPER, (j >= i) & key_ok),
        }
        shape_hints = {
            (B, n, n): "add the head axis: the result must be (batch, 1, n, n), so that it broadcasts over the "
                       "heads of (batch, heads, n, n) scores",
            (B, 1, 1, n): "that is only the padding part, (batch, 1, 1, n); AND it with the (n, n) causal mask, "
                          "which broadcasts it to (batch, 1, n, n)",
            (n, n): "that is only the causal part, (n, n); AND it with the padding mask of shape (batch, 1, 1, n)",
            (B, 1, n): "the padding mask needs two size-1 axes, for heads and queries: (batch, 1, 1, n)",
        }
        shape_hints.setdefault((1, B, n, n), "the batch axis comes first: (batch, 1, n, n)")
        _mask_type(got, ref, what="your mask", on=on, shape_hints=shape_hints)
        case = _Case(on, got, ref, mistakes)
        case.lengths = values
        return case

    _run_masks(inputs, run, what="your mask", detail=_self_mask_detail)
    return f"right on {len(inputs)} batches, including an empty sequence, no padding and a batch of one"


# ---------------------------------------------------------------------------------------------------------
# 6.3 greedy decoding
# ---------------------------------------------------------------------------------------------------------

PAD, VOCAB = 0, 13  # the padding id and vocabulary size of the chapter's reversal task (its <bos> is 1, <eos> 2)
_SEED, _SCALE, _EOS_BIAS = 90, 0.3, 0.5  # chosen so that the cases below show every mistake (tests check it)


@functools.lru_cache(maxsize=8)
def _model_state(bos: int, eos: int):
    """The weights of the checker's model for these ids: a small random Transformer, in float64 so that no argmax
    is a near tie.

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
        model.lm_head.bias[eos] += _EOS_BIAS
        model.lm_head.bias[[PAD, bos]] -= 10.0  # like a trained model, it never predicts PAD or BOS
    return config, {k: v.clone() for k, v in model.state_dict().items()}


def _fresh_model(bos: int, eos: int):
    """A new copy of the checker's model, in training mode (dropout on), as a learner might hand it over."""
    from ..models.transformer import Transformer

    config, state = _model_state(bos, eos)
    model = Transformer(config).double()
    model.load_state_dict(state)
    return model.train()


def _src(rows: list[list[int]]) -> Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


def _decode_cases() -> list[tuple[str, Tensor, int, int, int]]:
    """(description, src, max_len, bos_id, eos_id). The ids vary, so that fixed ids fail; rows end at different
    steps, and the first row to end is not always the same one."""
    return [
        ("a batch of 4 padded sources (lengths 6, 3, 5, 2) with max_len=12, bos_id=1, eos_id=2",
         _src([[5, 12, 3, 6, 5, 2], [3, 11, 2], [9, 9, 5, 7, 2], [9, 2]]), 12, 1, 2),
        ("a batch of 3 sources (lengths 2, 4, 7) with max_len=6, bos_id=3, eos_id=9",
         _src([[6, 2], [3, 3, 9, 2], [10, 4, 6, 8, 12, 5, 2]]), 6, 3, 9),
        ("a batch of one: src [[8, 6, 11, 2]] with max_len=9, bos_id=6, eos_id=12", _src([[8, 6, 11, 2]]), 9, 6, 12),
        ("a batch of 2 sources (lengths 3, 5) with max_len=1 (room for BOS only), bos_id=5, eos_id=2",
         _src([[9, 4, 2], [3, 5, 7, 4, 2]]), 1, 5, 2),
    ]


@torch.no_grad()
def _greedy(model, src: Tensor, max_len: int, bos: int, eos: int, *, feed: str = "prediction",
            position: str = "last", stop: str = "all", fill: str = "pad", memory_mask: bool = True,
            encoder_mask: bool = True, steps_delta: int = 0, with_bos: bool = True, bos_used: int | None = None,
            eos_used: int | None = None) -> Tensor:
    """The right greedy loop (defaults), or the same loop with one mistake; the model must be in eval mode.
    `bos_used`/`eos_used`: fixed ids used instead of the arguments."""
    bos = bos if bos_used is None else bos_used
    eos = eos if eos_used is None else eos_used
    B = src.size(0)
    memory = model.encoder(src, model.make_src_mask(src) if encoder_mask else None)  # (B, S, d)
    src_mask = model.make_src_mask(src) if memory_mask else None  # False: the cross-attention sees the padding
    ys = torch.full((B, 1), bos, dtype=torch.long)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool)
    for t in range(max(0, max_len - 1 + steps_delta)):
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
        else:  # "positions": argmax over the positions instead of the vocabulary
            nxt = logits.argmax(dim=1)[:, -1]
        if fill == "pad":
            nxt = nxt.masked_fill(done, PAD)
        elif fill == "eos":
            nxt = nxt.masked_fill(done, eos)
        if fill == "overwrite":  # marks the row done first, so its EOS itself becomes PAD
            done = done | (nxt == eos)
            nxt = nxt.masked_fill(done, PAD)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done = done | (nxt == eos)
        if (stop == "all" and done.all()) or (stop == "any" and done.any()) or (stop == "first" and done[0]):
            break
    return ys if with_bos else ys[:, 1:]


_FROM_BOS = ("every token was predicted from BOS alone: the decoder must read the whole prefix (BOS and every "
             "token appended so far), and the next token comes from the LAST position's logits; the first position "
             "sees only BOS, so reading it gives the same token at every step")


def _decode_mistake_specs(bos: int, eos: int) -> dict[str, tuple[str, dict]]:
    """{mistake: (hint, the keyword arguments of `_greedy` that make that mistake)}, the hints worded for these
    ids; the outputs are computed only when needed (`_decode_hint`), as each greedy run costs a few ms."""
    g = dict
    return {
        "no bos": ("each row must start with bos_id, followed by the generated tokens: keep the BOS column in the "
                   "result", g(with_bos=False)),
        "fixed bos": (f"start each row with the bos_id argument (here {bos}): the ids vary from model to model, so "
                      "a fixed <bos> id such as the chapter's 1 is wrong here", g(bos_used=1)),
        "fixed eos": (f"a row ends when it produces the eos_id argument (here {eos}): the ids vary from model to "
                      "model, so a fixed <eos> id such as the chapter's 2 is wrong here", g(eos_used=2)),
        "from bos": (_FROM_BOS, g(feed="bos")),
        "last token": ("the decoder must read the whole prefix generated so far (BOS and every token since), not "
                       "only the latest token", g(feed="last")),
        "overwrite": ("keep the EOS token itself: only the positions AFTER a row's EOS become PAD",
                      g(fill="overwrite")),
        "source": ("the decoder must read its own predictions (BOS and the tokens generated so far), not the "
                   "source tokens: at generation time there is no target to teacher-force with", g(feed="source")),
        "positions": ("the argmax must run over the vocabulary (the last axis) of the last position's logits; you "
                      "took it over the positions", g(position="positions")),
        "no fill": ("after a row has produced EOS, fill its remaining positions with PAD (model.config.pad_id), "
                    "not with further predictions", g(fill="none")),
        "eos fill": ("after a row has produced EOS, fill its remaining positions with PAD (model.config.pad_id = 0), "
                     "not EOS", g(fill="eos")),
        "stop any": ("stop once EVERY row has produced EOS, not as soon as one row has; the other rows still need "
                     "their tokens", g(stop="any")),
        "stop first": ("stop once EVERY row has produced EOS, not when the first row has: the rows end at "
                       "different steps", g(stop="first")),
        "never stop": ("stop as soon as every row has produced EOS: after that step nothing but padding would "
                       "follow", g(stop="never")),
        "never stop, no fill": ("stop as soon as every row has produced EOS, and fill the finished rows with PAD "
                                "(model.config.pad_id)", g(stop="never", fill="none")),
        "extra step": ("max_len counts every position of the result, BOS included: generate at most max_len - 1 "
                       "tokens", g(steps_delta=1)),
        "short": ("one step short: max_len counts every position of the result, BOS included, so up to max_len - 1 "
                  "tokens are generated after it (not max_len - 2)", g(steps_delta=-1)),
        "memory mask": ("the cross-attention must not read the source padding: pass the source mask "
                        "(model.make_src_mask(src)) to decode, or call model(src, ys), which builds it",
                        g(memory_mask=False)),
        "no masks": ("the source padding must be masked in the encoder and in the cross-attention: pass the source "
                     "mask (model.make_src_mask(src)) to encode and to decode, or call model(src, ys), which builds "
                     "it", g(memory_mask=False, encoder_mask=False)),
    }


def _decode_mistakes(model, src: Tensor, max_len: int, bos: int, eos: int) -> dict[str, tuple[str, Tensor]]:
    """{mistake: (hint, its output)} on one case (for the tests)."""
    return {key: (hint, _greedy(model, src, max_len, bos, eos, **kwargs))
            for key, (hint, kwargs) in _decode_mistake_specs(bos, eos).items()}


class _OneThread:
    """Runs the checker's own greedy loops on one CPU thread (restored after): the model is tiny, and threads
    only add overhead, which matters when the machine is busy."""

    def __enter__(self):
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.threads)


@functools.lru_cache(maxsize=8)
def _eval_model(case: int):
    """The checker's own copy of case `case`'s model, in eval mode (the learner's copy may have been changed)."""
    _, _, _, bos, eos = _decode_cases()[case]
    return _fresh_model(bos, eos).eval()


@functools.lru_cache(maxsize=None)
def _case_output(case: int, mistake: str | None) -> Tensor:
    """The right output (mistake None) or a known mistake's on case number `case`: they never change, so each is
    computed once per session."""
    _, src, max_len, bos, eos = _decode_cases()[case]
    kwargs = {} if mistake is None else _decode_mistake_specs(bos, eos)[mistake][1]
    with _OneThread():
        return _greedy(_eval_model(case), src, max_len, bos, eos, **kwargs)


def _decode_hint(results: list[tuple[int, Tensor]], first: int) -> str | None:
    """The hint of the first known mistake that gives the learner's tokens on every case run, or None. The
    first wrong case is tried first, so that most mistakes are ruled out after one greedy run."""
    got = dict(results)
    order = [first] + [i for i in got if i != first]
    _, _, _, bos, eos = _decode_cases()[first]
    for key, (hint, _) in _decode_mistake_specs(bos, eos).items():
        if all(_same(got[i], _case_output(i, key)) for i in order):
            return hint
    return None


def _decode_error_hint(message: str) -> str | None:
    if "only one element tensors" in message or "a Tensor with" in message and "cannot be converted" in message:
        return ("with a batch, the argmax gives one id per row: compare whole tensors (one boolean per row) and "
                "stop when every row has produced EOS")
    if "Boolean value of Tensor with more than one" in message:
        return ("an `if` on a comparison with the new ids asks about a whole batch at once: keep one boolean per "
                "row that says whether the row has ended, and stop when all of them are True")
    if "must be an integer tensor of token ids" in message:
        return "token ids are integers (torch.long): the BOS column and the argmax results must stay integer"
    if "Tensors must have same number of dimensions" in message or "Sizes of tensors must match" in message:
        return ("the new ids must have shape (batch, 1) to be appended to ys (batch, t): one id per row, from the "
                "last position's logits, with an axis added")
    return None


GREEDY_FORBIDDEN = [
    (name, "write the loop yourself: encode once, then decode, take the argmax of the last position, append")
    for name in ("attnbook.models.transformer.greedy_decode",)
]


def _decode_type(got, on: str, B: int) -> None:
    """Wrong unless `got` is a 2-D torch.long tensor with one row per source sequence."""
    if got is None:
        raise Wrong(f"greedy_decode returned None on {on}", "did you forget a `return` statement?")
    if not isinstance(got, Tensor):
        raise Wrong(f"greedy_decode returned {describe(got)} on {on}, expected a (batch, length) tensor of "
                    "token ids", "return ys, the tensor you appended the tokens to")
    if got.dtype != torch.long:
        raise Wrong(f"greedy_decode returned a tensor of dtype {got.dtype} on {on}, expected torch.long (int64) "
                    "token ids", "keep the ids as torch.long, as the task asks: argmax already returns int64, so "
                                 "no conversion (.int(), .float()) is needed")
    if got.dim() != 2:
        raise Wrong(f"greedy_decode returned shape {tuple(got.shape)} on {on}, expected (batch, length)",
                    "return a 2-D (batch, length) tensor: BOS, then one column per generated token")
    if got.size(0) != B:
        raise Wrong(f"greedy_decode returned shape {tuple(got.shape)} on {on}, expected {B} rows",
                    "the result has one row per source sequence: (batch, length)"
                    if got.size(1) == B else None)


@torch.no_grad()
def _decode_detail(model, src: Tensor, max_len: int, bos: int, eos: int, got: Tensor) -> str:
    """The first rule the learner's tokens break, read in order (length, BOS, then column by column), with the
    model's argmax recomputed on the learner's own prefix; never the expected row."""
    got = got.cpu()
    B, L = got.shape
    if L > max_len:
        return (f"the result has {L} positions, more than max_len={max_len} (BOS counts): stop at max_len "
                "tokens")
    if L == 0:
        return "the result has no positions: every row starts with bos_id"
    for b in range(B):
        if int(got[b, 0]) != bos:
            return f"row {b} starts with {int(got[b, 0])}: every row starts with bos_id={bos}"
    src_mask = model.make_src_mask(src)
    memory = model.encode(src, src_mask)
    ids = got.clamp(0, VOCAB - 1)
    logits = model.decode(ids, memory, src_mask) if L > 1 else None  # (B, L, V): position t sees ids[:, :t+1]
    ended = [None] * B  # the position of each row's EOS
    for t in range(1, L):
        for b in range(B):
            token = int(got[b, t])
            if ended[b] is not None:
                if token != PAD:
                    return (f"row {b} produced eos_id={eos} at position {ended[b]}, so its position {t} must hold "
                            f"pad_id={PAD}, got {token}")
                continue
            best = int(logits[b, t - 1].argmax())
            if token != best:
                return (f"row {b}, position {t} holds {token}, but the argmax over the vocabulary of the model's "
                        f"last-position logits after that row's positions 0..{t - 1} is {best}: each step appends "
                        "that argmax, for every row that has not ended")
            if token == eos:
                ended[b] = t
    if all(e is not None for e in ended):
        last = max(ended)
        if L > last + 1:
            return (f"every row had produced eos_id={eos} by position {last}, so decoding stops there, but the "
                    f"result has {L} positions")
    elif L < max_len:
        b = ended.index(None)
        return (f"row {b} has not produced eos_id={eos} yet, so decoding goes on until the result has "
                f"max_len={max_len} positions, but it stops at {L}")
    ref = _greedy(model, src, max_len, bos, eos)  # rarely needed: every rule above held
    if tuple(ref.shape) != tuple(got.shape):
        return f"the result has shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    b, t = (int(i) for i in (got != ref).nonzero()[0])
    return f"row {b} differs from the argmax loop at position {t}"


@exercise("6.3", "Greedy decoding", section="Greedy decoding",
          references=("attnbook.models.transformer.greedy_decode",))
def check_greedy_decode(greedy_decode) -> str:
    """greedy_decode(model, src, max_len, bos_id, eos_id) -> (B, <= max_len) LongTensor, as the reference loop."""
    cases = _decode_cases()
    results: list[tuple[int, Tensor]] = []  # (case number, learner's result) of every case run
    wrong: list[int] = []
    for index, (desc, src, max_len, bos, eos) in enumerate(cases):
        model = _fresh_model(bos, eos)
        try:
            got = call(greedy_decode, model, src, max_len, bos, eos, what="greedy_decode", on=desc,
                       forbid=GREEDY_FORBIDDEN, explain=_decode_error_hint)
            _decode_type(got, desc, src.size(0))
        except Wrong:
            if wrong:
                break  # a wrong result came first: report it, with the evidence of the cases before
            raise
        got = got.detach().cpu()
        if not _same(got, _case_output(index, None)):
            if not wrong:
                _explain_randomness(greedy_decode, src, max_len, bos, eos, desc, got, model.training)
            wrong.append(index)
        results.append((index, got))
    if not wrong:
        return (f"right on {len(cases)} batches: BOS first, argmax fed back, PAD after EOS, stops when every row "
                "has ended or at max_len")
    first = wrong[0]
    desc, src, max_len, bos, eos = cases[first]
    hint = _decode_hint(results, first)
    if hint is not None:
        raise Wrong(f"greedy_decode gave the wrong tokens on {desc}", hint)
    with _OneThread():
        detail = _decode_detail(_eval_model(first), src, max_len, bos, eos, dict(results)[first])
    raise Wrong(f"greedy_decode gave the wrong tokens on {desc}: {detail}")


def _explain_randomness(greedy_decode, src, max_len, bos, eos, on, got, left_training) -> None:
    """Wrong with the right hint when the answer gives different tokens under another seed (dropout or sampling)."""
    model = _fresh_model(bos, eos)
    again = call(greedy_decode, model, src, max_len, bos, eos, what="greedy_decode", on=on,
                 forbid=GREEDY_FORBIDDEN, explain=_decode_error_hint, seed=1)
    if isinstance(again, Tensor) and tuple(again.shape) == tuple(got.shape) and torch.equal(again, got):
        return
    if left_training:
        raise Wrong(f"greedy_decode gives different tokens from run to run on {on}",
                    "the model comes in training mode, so dropout is on: switch it to evaluation mode before "
                    "decoding (model.eval())")
    raise Wrong(f"greedy_decode gives different tokens from run to run on {on}",
                "greedy decoding has no randomness: take the argmax of the logits, do not sample from the softmax")


# ---------------------------------------------------------------------------------------------------------
# 6.4 from nn.MultiheadAttention's or an additive mask to ours
# ---------------------------------------------------------------------------------------------------------


def _convert_cases() -> list[tuple[str, Tensor, Tensor]]:
    """(description, mask, expected allow-mask)."""
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
        ("an additive float16 mask of shape (3, 5) that blocks nothing (every entry 0)",
         torch.zeros(3, 5, dtype=torch.float16), torch.ones(3, 5, dtype=torch.bool)),
    ]


def _convert_error_hint(message: str) -> str | None:
    if "bitwise_not" in message or "only implemented on integer and Boolean" in message:
        return ("~ works on boolean tensors only; an additive mask is floating point, so compare its entries "
                "with a number instead. Tell the two kinds of mask apart by their dtype")
    if "Boolean value of Tensor with more than one" in message:
        return ("`if mask:` asks about the whole tensor; to tell the two kinds of mask apart, test its dtype")
    return None


CONVERT_FORBIDDEN = [
    ("attnbook.masks.convert_mask", "a boolean mask needs ~; an additive one a comparison")
]


def _convert_mistakes(mask: Tensor, ref: Tensor) -> dict[str, tuple[str, Tensor]]:
    if mask.dtype == torch.bool:
        return {
            "not inverted": ("nn.MultiheadAttention's True means 'blocked', ours means 'may attend': invert a "
                             "boolean mask", mask.clone()),
            "all true": ("this boolean mask came out all True: you treated it like an additive mask; a boolean "
                         "mask is converted by inverting it", torch.ones_like(mask)),
        }
    m = mask.double()
    return {
        "inverted": ("your mask is inverted: in an additive mask 0 means 'allowed' (adding 0 leaves the score "
                     "unchanged) and a large negative number means 'blocked'", ~ref),
        "only -inf": ("a large negative number such as -1e9 or -10000 blocks attention just like -inf (after the "
                      "softmax its weight is 0): every large negative entry is blocked, not only -inf",
                      m != float("-inf")),
        "not -10000": ("BERT's -10000 blocks attention too (after the softmax its weight is about e^-10000 = 0): "
                       "every large negative entry is blocked, -10000 included", m >= -10000.0),
        "all true": ("every entry came out True: in an additive mask the large negative entries (-inf, -1e9, "
                     "-10000) are the blocked ones", torch.ones(mask.shape, dtype=torch.bool)),
        "none allowed": ("every entry came out False: in an additive mask the entries equal to 0 are allowed",
                         torch.zeros(mask.shape, dtype=torch.bool)),
    }


def _convert_detail(mask: Tensor):
    def detail(case: _Case, index: tuple[int, ...]) -> str:
        want = bool(case.ref[index])
        entry = mask[index].item()
        if mask.dtype == torch.bool:
            meaning = f"the input there is {entry}, which in nn.MultiheadAttention's convention means " + \
                      ("'blocked'" if entry else "'allowed'")
        else:
            meaning = f"the input there is {entry:g}, which in an additive mask means " + \
                      ("'allowed'" if entry == 0 else "'blocked'")
        return f"entry {list(index)} is {_tf(not want)}, expected {_tf(want)}: {meaning}"
    return detail


@exercise("6.4", "nn.MultiheadAttention's masks in our convention", section="Three mask conventions",
          references=("attnbook.masks.convert_mask",))
def check_to_allow_mask(to_allow_mask) -> str:
    """to_allow_mask(mask) -> bool mask of the same shape, True = may attend."""
    inputs = _convert_cases()
    details = {}

    def run(item) -> _Case:
        desc, mask, ref = item
        got = call(to_allow_mask, mask, what="to_allow_mask", on=desc, forbid=CONVERT_FORBIDDEN,
                   explain=_convert_error_hint)
        same_shape = isinstance(got, Tensor) and tuple(got.shape) == tuple(ref.shape)
        if same_shape and got.dtype != torch.bool and not got.is_complex():
            if got.is_floating_point() and mask.is_floating_point() and torch.equal(got.to(mask.dtype), mask):
                raise Wrong(f"to_allow_mask returned the additive mask unchanged on {desc}",
                            "turn it into booleans: True where the entry is 0 (allowed), False where it is a large "
                            "negative number")
            if bool(((got == 0) | (got == 1)).all()) and torch.equal(got.bool(), ref):
                raise Wrong(f"to_allow_mask returned dtype {got.dtype} on {desc}, expected torch.bool",
                            "return booleans: a comparison already gives a bool tensor (no .float() or .int() "
                            "after it)")
        _mask_type(got, ref, what="your mask", on=desc,
                   shape_hints={tuple(ref.shape[:1]) + (1, 1) + tuple(ref.shape[1:]):
                                "keep the shape of the input: only the meaning of the entries changes"}
                   if ref.dim() == 2 else None)
        details[desc] = _convert_detail(mask)
        return _Case(desc, got, ref, _convert_mistakes(mask, ref),
                     kind="boolean" if mask.dtype == torch.bool else "additive")

    _run_masks(inputs, run, what="your mask", detail=lambda case, index: details[case.on](case, index))
    return (f"right on {len(inputs)} masks: boolean attn_mask and key_padding_mask, additive with -inf, -1e9 "
            "and -10000")
