"""Checker for exercise 8.3, temperature and top-k sampling."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import expect_tensor
from ..guard import call
from ..registry import exercise, Wrong
from ._shared import is_integer_tensor, within_window, drawn_from
from ...i18n import N_, _

SAMPLE_FORBIDDEN = [(name, N_("write the sampling yourself, step by step as the task describes it"))
                    for name in ("attnbook.models.gpt.sample_next", "attnbook.models.gpt.GPT.generate")]
_ROWS = torch.tensor([[1.0, -1.5, 2.2, 0.3, -0.4, 1.6],  # two different rows, the largest logits not first
                      [-0.5, 0.8, -2.0, 1.9, 0.1, 1.2]], dtype=torch.float64)
_N = 20_000  # samples per row


def _sample_error_hint(message: str, top_k) -> str | None:
    if top_k is None and "NoneType" in message:
        return _("top_k=None means no cut: keep every logit, and skip the top-k step when top_k is None")
    if "probability tensor contains either `inf`, `nan` or element < 0" in message or "invalid multinomial" in message:
        return (_("torch.multinomial takes probabilities (non-negative, finite): apply the softmax over the vocabulary "
                  "(dim=-1) to the (scaled) logits first (over another dimension a column of -inf gives NaN); and with "
                  "temperature 0 return the argmax without dividing by it"))
    return None


def _probs(logits: Tensor, temperature: float, top_k: int | None, *, smallest: bool = False, fill=None) -> Tensor:
    """softmax(logits / temperature) over the top_k largest (or smallest) logits of each row, in float64; the
    others set to -inf, or to `fill` ("min": the row's minimum)."""
    scaled = logits.double() / temperature
    if top_k is not None:
        kept = torch.topk(scaled, top_k, dim=-1, largest=not smallest).indices  # (R, k)
        keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, kept, True)
        low = scaled.amin(dim=-1, keepdim=True) if fill == "min" else torch.full_like(scaled, float("-inf") if fill is None else fill)
        scaled = torch.where(keep, scaled, low)
    return torch.softmax(scaled, dim=-1)


def _sample_mistakes(temperature: float, top_k: int | None) -> dict[str, Tensor]:
    """The distributions that plausible mistakes sample from, per row of _ROWS, keyed by the hint for each."""
    out = {
        _("you multiplied the logits by the temperature; divide them: softmax(logits / temperature)"):
            _probs(_ROWS, 1 / temperature, top_k),
        _("the temperature changes nothing in your samples: divide the logits by it before the softmax"):
            _probs(_ROWS, 1.0, top_k),
    }
    if top_k is None:  # softmax over the batch (dim=0) of _N copies of each row; multinomial renormalises each row
        over_batch = torch.softmax(_ROWS / temperature, dim=0)  # (R, V): the _N factor cancels
        out[_("you applied the softmax over the batch (dim=0): take it over the vocabulary, dim=-1")] = (
            over_batch / over_batch.sum(dim=-1, keepdim=True))
    if top_k is not None:
        unmapped = torch.zeros_like(_ROWS)  # sampled a position among the top k and returned it as the id
        unmapped[:, :top_k] = torch.softmax(torch.topk(_ROWS / temperature, top_k, dim=-1).values, dim=-1)
        out.update({
            _("your samples include tokens outside the top_k: set every logit below the k-th largest to -inf before "
              "the softmax"): _probs(_ROWS, temperature, None),
            _("you kept the top_k SMALLEST logits: keep the largest (torch.topk returns the largest by default)"):
                _probs(_ROWS, temperature, top_k, smallest=True),
            _("you returned the position within the top k (0 .. top_k - 1) instead of the token id: map it back "
              "through the indices that torch.topk returns (topk.indices.gather(-1, choice))"): unmapped,
        })
        V = _ROWS.size(-1)
        if top_k < V:
            out[_("keep exactly top_k logits: you kept top_k + 1")] = _probs(_ROWS, temperature, top_k + 1)
        if top_k > 1:
            out[_("keep exactly top_k logits: you kept top_k - 1")] = _probs(_ROWS, temperature, top_k - 1)
        for fill, what in ((0.0, _("to 0")), ("min", _("to the row's smallest logit"))):
            out[_("you set the logits outside the top k {what}, so they keep some probability: set them to -inf, "
                  "whose exp is 0", what=what)] = _probs(_ROWS, temperature, top_k, fill=fill)
        keep = (_probs(_ROWS, temperature, top_k) > 0).double()  # (R, V): the top k of each row
        out[_("you sampled the top_k tokens uniformly: weight them by softmax(logits / temperature)")] = (
            keep / keep.sum(dim=-1, keepdim=True))
    return out


def _counts(ids: Tensor, rows: int, vocab: int) -> Tensor:
    """(rows, vocab) counts of each id among the samples of each row (the samples come in blocks of _N per row)."""
    return torch.stack([torch.bincount(ids[r * _N:(r + 1) * _N].long(), minlength=vocab)[:vocab]
                        for r in range(rows)]).double()


def _fits(counts: Tensor, probs: Tensor) -> bool:
    """Whether every count fits its binomial(_N, p) window (and ids with probability 0 never occur)."""
    return all(within_window(float(c), _N, float(p)) for c, p in zip(counts.flatten(), probs.flatten()))


def _sample_call(sample_next, logits: Tensor, temperature, top_k, gen_seed: int, on: str, seed: int = 0):
    """The learner's ids (checked for type, shape, range) and whether the generator was drawn from."""
    generator = torch.Generator().manual_seed(gen_seed)
    got, used = call(sample_next, logits, temperature, top_k, generator, what="sample_next", on=on,
                     forbid=SAMPLE_FORBIDDEN, seed=seed, explain=lambda message: _sample_error_hint(message, top_k),
                     observe=drawn_from(3, gen_seed))
    got = expect_tensor(got, what=_("your result"), on=on, finite=False)
    B = logits.size(0)
    if tuple(got.shape) != (B,):
        hint = (_("return one id per row, shape (batch,): torch.multinomial(probs, 1) gives (batch, 1), so "
                  "squeeze the last dimension (.squeeze(-1))") if tuple(got.shape) == (B, 1) else
                _("return one token id per row of logits, a tensor of shape (batch,)"))
        raise Wrong(_("your result has shape {tuple_got_shape} on {on}, expected ({B},)",
                      tuple_got_shape=tuple(got.shape), on=on, B=B), hint)
    if not is_integer_tensor(got):
        raise Wrong(_("your result has dtype {dtype} on {on}, expected integer token ids (torch.long)",
                      dtype=got.dtype, on=on),
                    _("return the indices (argmax, torch.multinomial, topk indices), not probabilities or logits"))
    V = logits.size(-1)
    if int(got.min()) < 0 or int(got.max()) >= V:
        raise Wrong(_("your result holds ids in [{int_got_min}, {int_got_max}] on {on}, outside [0, {V})",
                      int_got_min=int(got.min()), int_got_max=int(got.max()), on=on, V=V))
    return got, used


SAMPLE_GENERATOR_HINT = (N_("draw with generator=generator (torch.multinomial(..., generator=generator)); reseeding the "
                            "global generator or making a generator of your own does not count"))


@exercise("8.3", "Temperature and top-k sampling", section="Temperature and top-k",
          references=("attnbook.models.gpt.sample_next",))
def check_sample_next(sample_next) -> str:
    """sample_next(logits, temperature, top_k, generator) -> (B,) ids: greedy at 0, else softmax(l/T) on the top k."""
    g = torch.Generator().manual_seed(830)
    greedy = [  # temperature 0 first, top_k=1 (sampled from one logit) after the frequencies
        (_("logits of shape (3, 10), temperature=0, top_k=None"), torch.randn(3, 10, generator=g), 0.0, None),
        (_("a batch of 1: logits (1, 7), temperature=0, top_k=3"), torch.randn(1, 7, generator=g), 0.0, 3),
        (_("logits (5, 12), temperature=1.0, top_k=1 (only the largest logit is left)"),
         torch.randn(5, 12, generator=g), 1.0, 1),
    ]
    for on, logits, temperature, top_k in greedy[:2]:
        _expect_argmax(*_sample_call(sample_next, logits, temperature, top_k, 5, on), logits, temperature, top_k, on)
    configs = [(1.0, None), (0.5, None), (1.0, 3), (2.0, 4), (0.7, 2)]
    R, V = _ROWS.shape
    for temperature, top_k in configs:
        on = (_("logits of shape ({r__n}, {V}) ({_N:,} copies of each of two rows), temperature={temperature}, "
                "top_k={top_k}", r__n=R * _N, V=V, _N=_N, temperature=temperature, top_k=top_k))
        logits = _ROWS.float().repeat_interleave(_N, dim=0)  # (R * _N, V): row r fills block r
        got, used = _sample_call(sample_next, logits, temperature, top_k, 7, on)
        if torch.equal(got, logits.argmax(dim=-1)):
            raise Wrong(_("your result is the argmax of every row on {on}", on=on),
                        _("the argmax of every row is for temperature 0 only: at temperature > 0, draw a random id "
                          "from softmax(logits / temperature) over the top_k largest logits"))
        if not used:
            raise Wrong(_("sample_next drew no random number from `generator` on {on} (its state is unchanged "
                          "after the call)", on=on), SAMPLE_GENERATOR_HINT)
        counts = _counts(got, R, V)
        expected = _probs(_ROWS, temperature, top_k)
        if _fits(counts, expected):
            if (temperature, top_k) == configs[0]:
                _check_generator(sample_next, logits, got, on)
            continue
        for hint, probs in _sample_mistakes(temperature, top_k).items():
            if not torch.allclose(probs, expected) and _fits(counts, probs):
                raise Wrong(_("the frequencies of your samples do not match softmax(logits / temperature) over "
                              "the top_k largest logits on {on}", on=on), hint)
        r, j = divmod(int(((counts - _N * expected).abs() / (_N * expected * (1 - expected)).clamp_min(1e-12).sqrt()
                           ).flatten().argmax()), V)
        raise Wrong(_("the frequencies of your samples do not match softmax(logits / temperature) over the top_k "
                      "largest logits on {on}: in row {r}, token {j} came {int_counts_r_j:,} times in {_N:,} "
                      "draws, expected about {n_float_expected_r_j:,.0f}",
                      on=on, r=r, j=j, int_counts_r_j=int(counts[r, j]), _N=_N, n_float_expected_r_j=_N * float(expected[r, j])),
                    _("each row must be sampled from softmax(logits / temperature) over its own top_k largest logits"))
    on, logits, temperature, top_k = greedy[2]
    _expect_argmax(*_sample_call(sample_next, logits, temperature, top_k, 5, on), logits, temperature, top_k, on)
    return (_("greedy at temperature 0, the argmax at top_k=1, and frequencies within statistical bounds for "
              "{len_configs} settings of temperature and top_k", len_configs=len(configs)))


def _expect_argmax(got: Tensor, used: bool, logits: Tensor, temperature: float, top_k, on: str) -> None:
    """Wrong unless `got` is the argmax of each row (and, at temperature 0, drawn without the generator)."""
    if torch.equal(got, logits.argmax(dim=-1)):
        if temperature == 0 and used:
            raise Wrong(_("sample_next drew random numbers from `generator` at temperature 0 on {on}", on=on),
                        _("temperature 0 means greedy: the argmax of each row, with no randomness (no sampling, not "
                          "even at a tiny temperature)"))
        return
    if top_k == 1 and not got.any() and logits.argmax(dim=-1).any():
        raise Wrong(_("your result is 0 in every row on {on}, expected the argmax of each row", on=on),
                    _("you returned the position within the top k (always 0 when top_k=1) instead of the token "
                      "id: map it back through the indices that torch.topk returns"))
    if torch.equal(got, logits.argmin(dim=-1)):
        raise Wrong(_("your result is the argmin of each row on {on}, expected the argmax", on=on),
                    _("the most likely token has the LARGEST logit") + (_("; torch.topk returns the largest by default")
                                                                     if top_k else ""))
    raise Wrong(_("your result is not the argmax of each row on {on}", on=on),
                _("temperature 0 means greedy: the argmax of each row, with no randomness") if temperature == 0 else
                _("with top_k=1 only the largest logit survives, so the sample must be the argmax of each row"))


def _check_generator(sample_next, logits: Tensor, first: Tensor, on: str) -> None:
    """The same generator seed gives the same samples whatever the global generators; another seed others."""
    again, _unused = _sample_call(sample_next, logits, 1.0, None, 7, on, seed=1)
    if not torch.equal(again, first):
        raise Wrong(_("two calls with generators seeded alike (torch.Generator().manual_seed(7)) gave different "
                      "samples when the global random generator was in another state"), SAMPLE_GENERATOR_HINT)
    other, _unused = _sample_call(sample_next, logits, 1.0, None, 8, on)
    if torch.equal(other, first):
        raise Wrong(_("generators seeded with 7 and with 8 gave exactly the same samples"),
                    _("use the generator argument in torch.multinomial, not a generator you create and seed yourself"))
