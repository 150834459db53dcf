"""Checker for exercise 8.3, temperature and top-k sampling."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import case_seed, expect_tensor, generator
from ..guard import call
from ..registry import exercise, Wrong
from ._shared import drawn_from, is_integer_tensor, library_paths, within_window
from ...i18n import N_, _

_SAMPLE_INSTEAD = N_("write the sampling yourself, step by step as the task describes it")
SAMPLE_FORBIDDEN = [(name, _SAMPLE_INSTEAD)
                    for name in ("attnbook.models.gpt.sample_next", "attnbook.models.gpt.GPT.generate")]
# transformers' temperature and top-k steps (its logits warpers), by their public names, where the answer can reach
# them: their module is loaded, or the answer's code names them (see library_paths).
_WARPERS = [(f"{where}.{name}", "transformers.generation.logits_process", name)
            for name in ("TopKLogitsWarper", "TemperatureLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper")
            for where in ("transformers", "transformers.generation.logits_process")]


def sample_forbidden(fn) -> list[tuple[str, str]]:
    """What 8.3 forbids, for the learner's function `fn`: the package's sampler and transformers' warpers."""
    return SAMPLE_FORBIDDEN + [(path, _SAMPLE_INSTEAD) for path in library_paths(fn, _WARPERS)]


_ROWS = torch.tensor([[1.0, -1.5, 2.2, 0.3, -0.4, 1.6],  # two different rows, the largest logits not first
                      [-0.5, 0.8, -2.0, 1.9, 0.1, 1.2]], dtype=torch.float64)
# The rows of each setting: the chapter-sized ones; the same about 10 lower, where a fill of -10 for the logits
# outside the top k is as large as the kept ones (the tokens it should remove keep about 15% of the probability,
# and a fill of 0 nearly all of it); about 30 lower, where any fill above about -40 keeps them; and rows about 30
# higher with 25 times smaller differences, sampled at temperature 0.04: logits / temperature is about 750 there,
# beyond the range of exp in float32 (88.7) and float64 (709.8), so exp without subtracting the maximum overflows,
# while the distribution is again softmax(_ROWS). A softmax does not change when a row moves by a constant: the
# right distributions are those of _ROWS.
ROWS = {"base": _ROWS, "low": _ROWS - 10.0, "lower": _ROWS - 30.0, "high": 30.0 + 0.04 * _ROWS}
# (rows, temperature, top_k) of the sampled settings, in the order they are checked
CONFIGS = [("base", 1.0, None), ("base", 0.5, None), ("base", 1.0, 3), ("base", 2.0, 4), ("base", 0.7, 2),
           ("low", 1.0, 3), ("lower", 2.0, 2), ("high", 0.04, None), ("high", 0.04, 4)]
_N = 20_000  # samples per row


def _sample_error_hint(message: str, top_k, overflow: bool = False) -> str | None:
    """`overflow`: logits / temperature of this input lie beyond exp's range."""
    if top_k is None and "NoneType" in message:
        return _("top_k=None means no cut: keep every logit, and skip the top-k step when top_k is None")
    invalid = "probability tensor contains either `inf`, `nan` or element < 0" in message or \
        "invalid multinomial" in message
    if invalid and overflow:
        return _(OVERFLOW_HINT)
    if invalid:
        return (_("torch.multinomial takes probabilities (non-negative, finite): apply the softmax over the vocabulary "
                  "(dim=-1) to the (scaled) logits first (over another dimension a column of -inf gives NaN); and with "
                  "temperature 0 return the argmax without dividing by it"))
    return None


FINITE_FILL_HINT = (N_("the tokens outside the top k keep some probability in your samples: a finite fill (0, -10, "
                       "...) is not small next to logits that are smaller still; set the logits outside the top k to "
                       "-inf, whose exp is 0"))
OVERFLOW_HINT = (N_("exp of logits / temperature overflows here (about 750; exp overflows above 88.7 in float32 and "
                    "709.8 in float64), and inf / inf is NaN: subtract each row's maximum before exp, or use "
                    "torch.softmax, which does"))


def _probs(logits: Tensor, temperature: float, top_k: int | None, *, smallest: bool = False, fill=None,
           fill_before: bool = False) -> Tensor:
    """softmax(logits / temperature) over the top_k largest (or smallest) logits of each row, in float64; the
    others set to -inf, or to `fill` ("min": the row's minimum), after dividing by the temperature or, with
    `fill_before`, before."""
    scaled = logits.double() / temperature
    if top_k is not None:
        kept = torch.topk(scaled, top_k, dim=-1, largest=not smallest).indices  # (R, k)
        keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, kept, True)
        if fill == "min":
            low = scaled.amin(dim=-1, keepdim=True)
        else:
            value = float("-inf") if fill is None else fill / temperature if fill_before else fill
            low = torch.full_like(scaled, value)
        scaled = torch.where(keep, scaled, low)
    return torch.softmax(scaled, dim=-1)


def _sample_mistakes(rows: Tensor, temperature: float, top_k: int | None) -> list[tuple[str, Tensor]]:
    """The distributions that plausible mistakes sample from, per row of `rows`, with the hint for each."""
    out = [
        (_("you multiplied the logits by the temperature; divide them: softmax(logits / temperature)"),
         _probs(rows, 1 / temperature, top_k)),
        (_("the temperature changes nothing in your samples: divide the logits by it before the softmax"),
         _probs(rows, 1.0, top_k)),
    ]
    if top_k is None:  # softmax over the batch (dim=0) of _N copies of each row; multinomial renormalises each row
        over_batch = torch.softmax(rows / temperature, dim=0)  # (R, V): the _N factor cancels
        out.append((_("you applied the softmax over the batch (dim=0): take it over the vocabulary, dim=-1"),
                    over_batch / over_batch.sum(dim=-1, keepdim=True)))
    if top_k is not None:
        unmapped = torch.zeros_like(rows)  # sampled a position among the top k and returned it as the id
        unmapped[:, :top_k] = torch.softmax(torch.topk(rows / temperature, top_k, dim=-1).values, dim=-1)
        out += [
            (_("your samples include tokens outside the top_k: set every logit below the k-th largest to -inf before "
               "the softmax"), _probs(rows, temperature, None)),
            (_("you kept the top_k SMALLEST logits: keep the largest (torch.topk returns the largest by default)"),
             _probs(rows, temperature, top_k, smallest=True)),
            (_("you returned the position within the top k (0 .. top_k - 1) instead of the token id: map it back "
               "through the indices that torch.topk returns (topk.indices.gather(-1, choice))"), unmapped),
        ]
        V = rows.size(-1)
        if top_k < V:
            out.append((_("keep exactly top_k logits: you kept top_k + 1"), _probs(rows, temperature, top_k + 1)))
        if top_k > 1:
            out.append((_("keep exactly top_k logits: you kept top_k - 1"), _probs(rows, temperature, top_k - 1)))
        fills = [(0.0, False, _("to 0")), ("min", False, _("to the row's smallest logit")),
                 (-10.0, False, _("to -10")), (-10.0, True, _("to -10 (before dividing by the temperature)"))]
        for fill, before, what in fills:
            out.append((_("you set the logits outside the top k {what}, so they keep some probability: set them to "
                          "-inf, whose exp is 0", what=what), _probs(rows, temperature, top_k, fill=fill,
                                                                       fill_before=before)))
        keep = (_probs(rows, temperature, top_k) > 0).double()  # (R, V): the top k of each row
        out.append((_("you sampled the top_k tokens uniformly: weight them by softmax(logits / temperature)"),
                    keep / keep.sum(dim=-1, keepdim=True)))
    return out


def _counts(ids: Tensor, rows: int, vocab: int) -> Tensor:
    """(rows, vocab) counts of each id among the samples of each row (the samples come in blocks of _N per row)."""
    return torch.stack([torch.bincount(ids[r * _N:(r + 1) * _N].long(), minlength=vocab)[:vocab]
                        for r in range(rows)]).double()


def _fits(counts: Tensor, probs: Tensor) -> bool:
    """Whether every count fits its binomial(_N, p) window (and ids with probability 0 never occur)."""
    return all(within_window(float(c), _N, float(p)) for c, p in zip(counts.flatten(), probs.flatten()))


def _finite_fill(counts: Tensor, expected: Tensor) -> bool:
    """Whether the counts fit a finite fill of the logits outside the top k: in each row the tokens outside come
    equally often (one common fill), and the kept ones keep their relative frequencies."""
    cut = expected == 0  # (R, V)
    if not bool((counts[cut] > 0).any()):
        return False
    model = expected.clone()
    for r in range(expected.size(0)):
        k = int(cut[r].sum())
        if k:
            q = float(counts[r][cut[r]].sum()) / (_N * k)  # each token outside the top k, its rate
            model[r][cut[r]] = q
            model[r][~cut[r]] = expected[r][~cut[r]] * (1 - k * q)
    return _fits(counts, model)


def _sample_call(sample_next, logits: Tensor, temperature, top_k, gen_seed: int, on: str, seed: int = 0,
                 overflow: bool = False):
    """The learner's ids (checked for type, shape, range) and whether the generator was drawn from. `gen_seed` is
    moved by the run's offset (new draws on the check's second pass)."""
    gen_seed = case_seed(gen_seed)
    generator = torch.Generator().manual_seed(gen_seed)
    got, used = call(sample_next, logits, temperature, top_k, generator, what="sample_next", on=on,
                     forbid=sample_forbidden, seed=seed,
                     explain=lambda message: _sample_error_hint(message, top_k, overflow),
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
    g = generator(830)  # new logits on every pass of the check
    greedy = [  # temperature 0 first, top_k=1 (sampled from one logit) after the frequencies
        (_("logits of shape (3, 10), temperature=0, top_k=None"), torch.randn(3, 10, generator=g), 0.0, None),
        (_("a batch of 1: logits (1, 7), temperature=0, top_k=3"), torch.randn(1, 7, generator=g), 0.0, 3),
        (_("logits (5, 12), temperature=1.0, top_k=1 (only the largest logit is left)"),
         torch.randn(5, 12, generator=g), 1.0, 1),
    ]
    for on, logits, temperature, top_k in greedy[:2]:
        _expect_argmax(*_sample_call(sample_next, logits, temperature, top_k, 5, on), logits, temperature, top_k, on)
    for index, (which, temperature, top_k) in enumerate(CONFIGS):
        rows = ROWS[which].float()  # (R, V), as the learner gets them
        R, V = rows.shape
        on = _describe_config(which, R, V, temperature, top_k)
        logits = rows.repeat_interleave(_N, dim=0)  # (R * _N, V): row r fills block r
        overflow = bool((rows.double() / temperature).abs().max() > 88.7)
        got, used = _sample_call(sample_next, logits, temperature, top_k, 7, on, overflow=overflow)
        if torch.equal(got, logits.argmax(dim=-1)):
            raise Wrong(_("your result is the argmax of every row on {on}", on=on),
                        _("the argmax of every row is for temperature 0 only: at temperature > 0, draw a random id "
                          "from softmax(logits / temperature) over the top_k largest logits"))
        if not used:
            raise Wrong(_("sample_next drew no random number from `generator` on {on} (its state is unchanged "
                          "after the call)", on=on), SAMPLE_GENERATOR_HINT)
        counts = _counts(got, R, V)
        expected = _probs(rows, temperature, top_k)
        if _fits(counts, expected):
            if index == 0:
                _check_generator(sample_next, logits, got, on)
            continue
        seen, hints = [expected], []  # a mistake that samples as one seen before (here) adds nothing
        for hint, probs in _sample_mistakes(rows.double(), temperature, top_k):
            if not any(torch.allclose(probs, other) for other in seen):
                seen.append(probs)
                if _fits(counts, probs):
                    hints.append(hint)
        if len(hints) != 1 and _finite_fill(counts, expected):  # a fill of its own, or several fills explain it
            hints = [_(FINITE_FILL_HINT)]
        if len(hints) == 1:
            raise Wrong(_("the frequencies of your samples do not match softmax(logits / temperature) over "
                          "the top_k largest logits on {on}", on=on), hints[0])
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
              "{len_configs} settings of temperature and top_k", len_configs=len(CONFIGS)))


def _describe_config(which: str, R: int, V: int, temperature: float, top_k) -> str:
    if which in ("low", "lower"):
        return _("logits of shape ({r__n}, {V}) of about {level} ({_N:,} copies of each of two rows), temperature="
                 "{temperature}, top_k={top_k}", r__n=R * _N, V=V, level=-10 if which == "low" else -30, _N=_N,
                 temperature=temperature, top_k=top_k)
    if which == "high":
        return _("logits of shape ({r__n}, {V}) of about +30 ({_N:,} copies of each of two rows), temperature="
                 "{temperature}, top_k={top_k}, so that logits / temperature is about 750",
                 r__n=R * _N, V=V, _N=_N, temperature=temperature, top_k=top_k)
    return _("logits of shape ({r__n}, {V}) ({_N:,} copies of each of two rows), temperature={temperature}, "
             "top_k={top_k}", r__n=R * _N, V=V, _N=_N, temperature=temperature, top_k=top_k)


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
        raise Wrong(_("two calls with generators seeded alike (torch.Generator().manual_seed({seed})) gave different "
                      "samples when the global random generator was in another state", seed=case_seed(7)),
                    SAMPLE_GENERATOR_HINT)
    other, _unused = _sample_call(sample_next, logits, 1.0, None, 8, on)
    if torch.equal(other, first):
        raise Wrong(_("generators seeded with {seed} and with {other} gave exactly the same samples",
                      seed=case_seed(7), other=case_seed(8)),
                    _("use the generator argument in torch.multinomial, not a generator you create and seed yourself"))
