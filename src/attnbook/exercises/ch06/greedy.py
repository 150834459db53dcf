"""Checker for exercise 6.3, greedy decoding."""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from .. import compare
from ..compare import case_seed
from ..guard import call
from ..inputs import builds
from ..limits import one_thread
from ..observe import Training
from ..hints import describe
from ..registry import exercise, Wrong
from ...i18n import N_, _


PAD, VOCAB = 0, 13  # the padding id and vocabulary size of the chapter's reversal task (its <bos> is 1, <eos> 2)
_SEED, _SCALE, _EOS_BIAS = 90, 0.3, 0.5  # chosen so that the cases below show every mistake (tests check it)


def _same(got, want: Tensor) -> bool:
    return (isinstance(got, Tensor) and tuple(got.shape) == tuple(want.shape)
            and torch.equal(got.detach().cpu().to(want.dtype), want))


def relabelling(bos: int, eos: int, seed: int) -> Tensor:
    """(VOCAB,) sigma: token t becomes sigma[t]. PAD, the chapter's ids 1 and 2 (which the fixed-id mistakes use)
    and the case's bos and eos stay; the other ids are shuffled by a generator seeded with `seed`."""
    free = [t for t in range(VOCAB) if t not in {PAD, 1, 2, bos, eos}]
    sigma = torch.arange(VOCAB)
    sigma[free] = torch.tensor(free)[torch.randperm(len(free), generator=torch.Generator().manual_seed(seed))]
    return sigma


@functools.lru_cache(maxsize=32)
def _model_state(bos: int, eos: int, seed: int | None = None):
    """The weights of the checker's model for these ids: a small random Transformer, in float64 so that no argmax
    is a near tie, with its token ids relabelled by `relabelling(bos, eos, seed)` (seed None: as made).

    The EOS logit gets a bias so that rows end at different steps (see the cases in `_decode_cases`), and the
    PAD and BOS logits a large negative one. Relabelling moves the rows of the two embeddings and of the output
    layer: the relabelled model on the relabelled source computes exactly what the model made computes on the
    source, with every token relabelled, so each case keeps what it was chosen for under every seed.
    """
    from ...models.transformer import Transformer, TransformerConfig

    config = TransformerConfig(VOCAB, VOCAB, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                               n_decoder_layers=1, max_len=16, dropout=0.3)
    g = torch.Generator().manual_seed(_SEED)
    model = Transformer(config).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * _SCALE)
        model.lm_head.bias[eos] += _EOS_BIAS
        model.lm_head.bias[[PAD, bos]] -= 10.0  # like a trained model, it never predicts PAD or BOS
    state = {k: v.clone() for k, v in model.state_dict().items()}
    if seed is not None:
        inverse = torch.argsort(relabelling(bos, eos, seed))  # row sigma[t] of the new model is row t of the old
        for name in ("encoder.embed.tok.weight", "decoder.embed.tok.weight", "lm_head.weight", "lm_head.bias"):
            state[name] = state[name][inverse].clone()
    return config, state


@builds
def _fresh_model(bos: int, eos: int, seed: int | None = None):
    """A new copy of the checker's model, in training mode (dropout on), as a learner might hand it over."""
    from ...models.transformer import Transformer

    config, state = _model_state(bos, eos, seed)
    model = Transformer(config).double()
    model.load_state_dict(state)
    return model.train()


def _src(rows: list[list[int]]) -> Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


# (source rows, max_len, bos_id, eos_id) of the four cases before relabelling. The ids vary, so that fixed ids
# fail (bos_id differs from eos_id in every case, as the task says); rows end at different steps, and the first
# row to end is not always the same one.
CASES = [
    ([[5, 12, 3, 6, 5, 2], [3, 11, 2], [9, 9, 5, 7, 2], [9, 2]], 12, 1, 2),
    ([[6, 2], [3, 3, 9, 2], [10, 4, 6, 8, 12, 5, 2]], 6, 3, 9),
    ([[8, 6, 11, 2]], 9, 6, 12),
    ([[9, 4, 2], [3, 5, 7, 4, 2]], 1, 5, 2),
]


def _decode_cases(relabel: bool = True) -> list[tuple[str, Tensor, int, int, int, int | None]]:
    """(description, src, max_len, bos_id, eos_id, model seed) of every case. Each case's model and source are
    relabelled (`relabelling`) with a seed from the run's seed (`case_seed`): new weights and new source tokens,
    the same shapes, ids and behaviour; relabel=False gives the cases as made, with seed None (the tests compare
    the two)."""
    out = []
    for index, (rows, max_len, bos, eos) in enumerate(CASES):
        src, seed = _src(rows), None
        if relabel:
            seed = case_seed(930 + index)
            src = relabelling(bos, eos, seed)[src]  # (B, S): every token relabelled, PAD stays 0
        out.append((_describe(index, src), src, max_len, bos, eos, seed))
    _desc, src, max_len, bos, eos, seed = out[SAME_SHAPE]
    order = _reordering(seed)
    out.append((_("the first batch again with its rows in the order {order}", order=order), src[order], max_len,
                bos, eos, seed))
    return out


REORDERED, SAME_SHAPE = 4, 0  # the last case is the first one's batch reordered: a memory kept by shape fails


@functools.lru_cache(maxsize=16)
def _reordering(seed: int | None) -> list[int]:
    """An order of the first case's rows (drawn from its seed) in which decoding with the memory of the rows in
    their first order (a memory kept from the first case, which has the same shape) gives other tokens than
    decoding right: every order but the identity does so far, and the tests check it over many seeds."""
    rows, max_len, bos, eos = CASES[SAME_SHAPE]
    src = _src(rows) if seed is None else relabelling(bos, eos, seed)[_src(rows)]
    g = torch.Generator().manual_seed(0 if seed is None else seed + 5)
    model = _model_for(bos, eos, seed)
    candidates = [torch.randperm(src.size(0), generator=g) for _unused in range(24)]
    for order in candidates:
        if torch.equal(order, torch.arange(src.size(0))):
            continue
        with one_thread():
            right = _greedy(model, src[order], max_len, bos, eos)
            stale = _greedy(model, src[order], max_len, bos, eos, memory_of=src)
        if not _same(right, stale):
            return order.tolist()
    return [1, 0, 3, 2]


def _describe(index: int, src: Tensor) -> str:
    return [_("a batch of 4 padded sources (lengths 6, 3, 5, 2) with max_len=12, bos_id=1, eos_id=2"),
            _("a batch of 3 sources (lengths 2, 4, 7) with max_len=6, bos_id=3, eos_id=9"),
            _("a batch of one: src {src} with max_len=9, bos_id=6, eos_id=12", src=src.tolist()),
            _("a batch of 2 sources (lengths 3, 5) with max_len=1 (room for BOS only), bos_id=5, eos_id=2")][index]


@torch.no_grad()
def _greedy(model, src: Tensor, max_len: int, bos: int, eos: int, *, feed: str = "prediction",
            position: str = "last", stop: str = "all", fill: str = "pad", memory_mask: bool = True,
            encoder_mask: bool = True, steps_delta: int = 0, with_bos: bool = True, bos_used: int | None = None,
            eos_used: int | None = None, memory_of: Tensor | None = None) -> Tensor:
    """The right greedy loop (defaults), or the same loop with one mistake; the model must be in eval mode.
    `bos_used`/`eos_used`: fixed ids used instead of the arguments; `memory_of`: the memory of these sources
    (another batch of the same shape) instead of src's."""
    bos = bos if bos_used is None else bos_used
    eos = eos if eos_used is None else eos_used
    B = src.size(0)
    encoded = src if memory_of is None else memory_of
    memory = model.encoder(encoded, model.make_src_mask(encoded) if encoder_mask else None)  # (B, S, d)
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


_FROM_BOS = (N_("every token was predicted from BOS alone: the decoder must read the whole prefix (BOS and every "
                "token appended so far), and the next token comes from the LAST position's logits; the first position "
                "sees only BOS, so reading it gives the same token at every step"))


def _decode_mistake_specs(bos: int, eos: int) -> dict[str, tuple[str, dict]]:
    """{mistake: (hint, the keyword arguments of `_greedy` that make that mistake)}, the hints worded for these
    ids; the outputs are computed only when needed (`_decode_hint`), as each greedy run costs a few ms."""
    g = dict
    return {
        _("no bos"): (_("each row must start with bos_id, followed by the generated tokens: keep the BOS column in the "
                        "result"), g(with_bos=False)),
        _("fixed bos"): (_("start each row with the bos_id argument (here {bos}): the ids vary from model to model, "
                           "so a fixed <bos> id such as the chapter's 1 is wrong here", bos=bos), g(bos_used=1)),
        _("fixed eos"): (_("a row ends when it produces the eos_id argument (here {eos}): the ids vary from model "
                           "to model, so a fixed <eos> id such as the chapter's 2 is wrong here", eos=eos), g(eos_used=2)),
        _("from bos"): (_FROM_BOS, g(feed="bos")),
        _("last token"): (_("the decoder must read the whole prefix generated so far (BOS and every token since), not "
                            "only the latest token"), g(feed="last")),
        "overwrite": (_("keep the EOS token itself: only the positions AFTER a row's EOS become PAD"),
                      g(fill="overwrite")),
        "source": (_("the decoder must read its own predictions (BOS and the tokens generated so far), not the "
                     "source tokens: at generation time there is no target to teacher-force with"), g(feed="source")),
        "positions": (_("the argmax must run over the vocabulary (the last axis) of the last position's logits; you "
                        "took it over the positions"), g(position="positions")),
        _("no fill"): (_("after a row has produced EOS, fill its remaining positions with PAD (model.config.pad_id), "
                         "not with further predictions"), g(fill="none")),
        _("eos fill"): (_("after a row has produced EOS, fill its remaining positions with PAD (model.config.pad_id = 0), "
                          "not EOS"), g(fill="eos")),
        _("stop any"): (_("stop once EVERY row has produced EOS, not as soon as one row has; the other rows still need "
                          "their tokens"), g(stop="any")),
        _("stop first"): (_("stop once EVERY row has produced EOS, not when the first row has: the rows end at "
                            "different steps"), g(stop="first")),
        _("never stop"): (_("stop as soon as every row has produced EOS: after that step nothing but padding would "
                            "follow"), g(stop="never")),
        _("never stop, no fill"): (_("stop as soon as every row has produced EOS, and fill the finished rows with PAD "
                                     "(model.config.pad_id)"), g(stop="never", fill="none")),
        _("extra step"): (_("max_len counts every position of the result, BOS included: generate at most max_len - 1 "
                            "tokens"), g(steps_delta=1)),
        "short": (_("one step short: max_len counts every position of the result, BOS included, so up to max_len - 1 "
                    "tokens are generated after it (not max_len - 2)"), g(steps_delta=-1)),
        _("memory mask"): (_("the cross-attention must not read the source padding: pass the source mask "
                             "(model.make_src_mask(src)) to decode, or call model(src, ys), which builds it"),
                        g(memory_mask=False)),
        _("no masks"): (_("the source padding must be masked in the encoder and in the cross-attention: pass the source "
                          "mask (model.make_src_mask(src)) to encode and to decode, or call model(src, ys), which builds "
                          "it"), g(memory_mask=False, encoder_mask=False)),
    }


@functools.lru_cache(maxsize=32)
def _model_for(bos: int, eos: int, seed: int):
    """The checker's own copy of a case's model, in eval mode (the learner's copy may have been changed)."""
    return _fresh_model(bos, eos, seed).eval()


@functools.lru_cache(maxsize=512)
def _case_output(offset: int, case: int, mistake: str | None) -> Tensor:
    """The right output (mistake None) or a known mistake's on case number `case` under this seed offset: they
    never change, so each is computed once per session."""
    cases = _decode_cases()
    _, src, max_len, bos, eos, seed = cases[case]
    if mistake == STALE:
        kwargs = {"memory_of": cases[SAME_SHAPE][1]} if case == REORDERED else {}
    else:
        kwargs = {} if mistake is None else _decode_mistake_specs(bos, eos)[mistake][1]
    with one_thread():
        return _greedy(_model_for(bos, eos, seed), src, max_len, bos, eos, **kwargs)


def _decode_hint(results: list[tuple[int, Tensor]], first: int, offset: int) -> str | None:
    """The hint of the first known mistake that gives the learner's tokens on every case run, or None. The
    first wrong case is tried first, so that most mistakes are ruled out after one greedy run."""
    got = dict(results)
    order = [first] + [i for i in got if i != first]
    _, _, _, bos, eos, _ = _decode_cases()[first]
    specs = list(_decode_mistake_specs(bos, eos).items()) + [(STALE, (_STALE_HINT, {}))]
    for key, (hint, _) in specs:
        if all(_same(got[i], _case_output(offset, i, key)) for i in order):
            return hint
    return None


STALE = "stale memory"  # the mistake of decoding with a memory kept from another batch of the same shape
_STALE_HINT = (N_("you decoded this batch with the encoder's output (memory) of another batch of the same shape: "
                  "encode src on every call; a memory kept from an earlier call belongs to other sources"))


def _decode_error_hint(message: str) -> str | None:
    if "only one element tensors" in message or "a Tensor with" in message and "cannot be converted" in message:
        return (_("with a batch, the argmax gives one id per row: compare whole tensors (one boolean per row) and "
                  "stop when every row has produced EOS"))
    if "Boolean value of Tensor with more than one" in message:
        return (_("an `if` on a comparison with the new ids asks about a whole batch at once: keep one boolean per "
                  "row that says whether the row has ended, and stop when all of them are True"))
    if "must be an integer tensor of token ids" in message:
        return _("token ids are integers (torch.long): the BOS column and the argmax results must stay integer")
    if "Tensors must have same number of dimensions" in message or "Sizes of tensors must match" in message:
        return (_("the new ids must have shape (batch, 1) to be appended to ys (batch, t): one id per row, from the "
                  "last position's logits, with an axis added"))
    return None


GREEDY_FORBIDDEN = [
    (name, N_("write the loop yourself: encode once, then decode, take the argmax of the last position, append"))
    for name in ("attnbook.models.transformer.greedy_decode",)
]


def _decode_type(got, on: str, B: int) -> None:
    """Wrong unless `got` is a 2-D torch.long tensor with one row per source sequence."""
    if got is None:
        raise Wrong(_("greedy_decode returned None on {on}", on=on), _("did you forget a `return` statement?"))
    if not isinstance(got, Tensor):
        raise Wrong(_("greedy_decode returned {describe_got} on {on}, expected a (batch, length) tensor of token "
                      "ids", describe_got=describe(got), on=on), _("return ys, the tensor you appended the tokens to"))
    if got.dtype != torch.long:
        raise Wrong(_("greedy_decode returned a tensor of dtype {dtype} on {on}, expected torch.long (int64) "
                      "token ids",
                      dtype=got.dtype,
                      on=on), _("keep the ids as torch.long, as the task asks: argmax already returns int64, so "
                                 "no conversion (.int(), .float()) is needed"))
    if got.dim() != 2:
        raise Wrong(_("greedy_decode returned shape {tuple_got_shape} on {on}, expected (batch, length)",
                      tuple_got_shape=tuple(got.shape), on=on),
                    _("return a 2-D (batch, length) tensor: BOS, then one column per generated token"))
    if got.size(0) != B:
        raise Wrong(_("greedy_decode returned shape {tuple_got_shape} on {on}, expected {B} rows",
                      tuple_got_shape=tuple(got.shape), on=on, B=B),
                    _("the result has one row per source sequence: (batch, length)")
                    if got.size(1) == B else None)


@torch.no_grad()
def _decode_detail(model, src: Tensor, max_len: int, bos: int, eos: int, got: Tensor) -> str:
    """The first rule the learner's tokens break, read in order (length, BOS, then column by column), with the
    model's argmax recomputed on the learner's own prefix; never the expected row."""
    got = got.cpu()
    B, L = got.shape
    if L > max_len:
        return (_("the result has {L} positions, more than max_len={max_len} (BOS counts): stop at max_len tokens",
                  L=L, max_len=max_len))
    if L == 0:
        return _("the result has no positions: every row starts with bos_id")
    for b in range(B):
        if int(got[b, 0]) != bos:
            return _("row {b} starts with {int_got_b_0}: every row starts with bos_id={bos}",
                     b=b, int_got_b_0=int(got[b, 0]), bos=bos)
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
                    return (_("row {b} produced eos_id={eos} at position {ended_b}, so its position {t} must "
                              "hold pad_id={PAD}, got {token}",
                              b=b, eos=eos, ended_b=ended[b], t=t, PAD=PAD, token=token))
                continue
            best = int(logits[b, t - 1].argmax())
            if token != best:
                return (_("row {b}, position {t} holds {token}, but the argmax over the vocabulary of the "
                          "model's last-position logits after that row's positions 0..{t_1} is {best}: each step "
                          "appends that argmax, for every row that has not ended",
                          b=b, t=t, token=token, t_1=t - 1, best=best))
            if token == eos:
                ended[b] = t
    if all(e is not None for e in ended):
        last = max(ended)
        if L > last + 1:
            return (_("every row had produced eos_id={eos} by position {last}, so decoding stops there, but the "
                      "result has {L} positions", eos=eos, last=last, L=L))
    elif L < max_len:
        b = ended.index(None)
        return (_("row {b} has not produced eos_id={eos} yet, so decoding goes on until the result has "
                  "max_len={max_len} positions, but it stops at {L}", b=b, eos=eos, max_len=max_len, L=L))
    ref = _greedy(model, src, max_len, bos, eos)  # rarely needed: every rule above held
    if tuple(ref.shape) != tuple(got.shape):
        return _("the result has shape {tuple_got_shape}, expected {tuple_ref_shape}",
                 tuple_got_shape=tuple(got.shape), tuple_ref_shape=tuple(ref.shape))
    b, t = (int(i) for i in (got != ref).nonzero()[0])
    return _("row {b} differs from the argmax loop at position {t}", b=b, t=t)


@exercise("6.3", "Greedy decoding", answer_name="greedy_decode", section="Greedy decoding",
          references=("attnbook.models.transformer.greedy_decode",))
def check_greedy_decode(greedy_decode) -> str:
    """greedy_decode(model, src, max_len, bos_id, eos_id) -> (B, <= max_len) LongTensor, as the reference loop."""
    offset = compare.SEED_OFFSET  # the outputs of the right loop and of each mistake are kept per offset
    cases = _decode_cases()
    results: list[tuple[int, Tensor]] = []  # (case number, learner's result) of every case run
    wrong: list[int] = []
    for index, (desc, src, max_len, bos, eos, seed) in enumerate(cases):
        model = _fresh_model(bos, eos, seed)
        try:
            got, left_training = call(greedy_decode, model, src, max_len, bos, eos, what="greedy_decode", on=desc,
                                      forbid=GREEDY_FORBIDDEN, explain=_decode_error_hint,
                                      observe=Training(0))
            _decode_type(got, desc, src.size(0))
        except Wrong:
            if wrong:
                break  # a wrong result came first: report it, with the evidence of the cases before
            raise
        got = got.detach().cpu()
        if not _same(got, _case_output(offset, index, None)):
            if not wrong:
                _explain_randomness(greedy_decode, src, max_len, bos, eos, seed, desc, got, left_training)
            wrong.append(index)
        results.append((index, got))
    if not wrong:
        return (_("right on {len_cases} batches: BOS first, argmax fed back, PAD after EOS, stops when every row "
                  "has ended or at max_len", len_cases=len(cases)))
    first = wrong[0]
    desc, src, max_len, bos, eos, seed = cases[first]
    hint = _decode_hint(results, first, offset)
    if hint is not None:
        raise Wrong(_("greedy_decode gave the wrong tokens on {desc}", desc=desc), hint)
    with one_thread():
        detail = _decode_detail(_model_for(bos, eos, seed), src, max_len, bos, eos, dict(results)[first])
    raise Wrong(_("greedy_decode gave the wrong tokens on {desc}: {detail}", desc=desc, detail=detail))


def _explain_randomness(greedy_decode, src, max_len, bos, eos, seed, on, got, left_training) -> None:
    """Wrong with the right hint when the answer gives different tokens under another seed (dropout or sampling)."""
    model = _fresh_model(bos, eos, seed)
    again = call(greedy_decode, model, src, max_len, bos, eos, what="greedy_decode", on=on,
                 forbid=GREEDY_FORBIDDEN, explain=_decode_error_hint, seed=1)
    if isinstance(again, Tensor) and tuple(again.shape) == tuple(got.shape) and torch.equal(again, got):
        return
    if left_training:
        raise Wrong(_("greedy_decode gives different tokens from run to run on {on}", on=on),
                    _("the model comes in training mode, so dropout is on: switch it to evaluation mode before "
                      "decoding (model.eval())"))
    raise Wrong(_("greedy_decode gives different tokens from run to run on {on}", on=on),
                _("greedy decoding has no randomness: take the argmax of the logits, do not sample from the softmax"))
