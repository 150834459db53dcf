"""Checker for exercise 8.3, temperature and top-k sampling."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import case_seed, expect_tensor, generator
from ..guard import call
from ..registry import exercise, Wrong
from ..observe import Drawn
from ._shared import expect_same_draws, is_integer_tensor, library_paths, within_window
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

# Two cases after the frequencies, each of one call on small logits drawn from the run (new ones on every pass):
# - TIE: in every row the two largest logits are equal, and every other one lies at least TIE_MARGIN below them; at
#   TIE_TEMPERATURE that is at least 1,000 in logits / temperature, so the other tokens have probability exp(-1000),
#   0 in float32 and float64 alike, and each of the two is drawn with probability 1/2 exactly. The share of the
#   second of the pair is tested with the window of _shared (one binomial(TIE_SHAPE[0], 1/2) count, accepted in
#   [48, 152]), so a right answer fails it with probability below 2e-9 per pass by the bound, 2.7e-14 exactly
#   (computed, with the frequencies', in tests/test_exercises_ch08.py); an
#   answer that is greedy at a tiny temperature > 0 draws the first of each pair (torch.argmax) every time, a count
#   of 0, outside the window: it fails with certainty.
# - DEEP: logits of about -25 to -45 at DEEP_TEMPERATURE, so that logits / temperature lies below -20,000: a finite
#   fill of the logits outside the top k above that (-100, -1e4) takes all the probability (the kept tokens get
#   exp(-10,000) or less, 0 in any float dtype), so every sample lies outside the top k; a right answer, whose
#   fill is -inf (exp 0 exactly), never draws one there. The logits of a row differ by at least DEEP_GAP (no ties),
#   so the top k is the same whatever the method. Both cases fail or pass with certainty but for the tie window.
TIE_SHAPE, TIE_TEMPERATURE, TIE_MARGIN = (200, 8), 1e-4, 0.1
DEEP_SHAPE, DEEP_TEMPERATURE, DEEP_TOP_K, DEEP_GAP = (64, 8), 1e-3, 2, 5e-4


def tie_case() -> tuple[Tensor, Tensor]:
    """(logits (TIE_SHAPE), pairs (rows, 2)): in each row two positions (`pairs`, in increasing order) hold the
    largest logit, equal, and every other logit lies at least TIE_MARGIN below it."""
    g = generator(831)
    B, V = TIE_SHAPE
    logits = torch.randn(B, V, generator=g)
    pairs = torch.rand(B, V, generator=g).argsort(dim=-1)[:, :2].sort(dim=-1).values  # two distinct positions
    top = logits.amax(dim=-1, keepdim=True) + TIE_MARGIN + torch.rand(B, 1, generator=g)
    return logits.scatter(-1, pairs, top.expand(B, 2)), pairs


def deep_case() -> Tensor:
    """logits (DEEP_SHAPE): each row about -25 to -45 (its own level), its logits DEEP_GAP or more apart."""
    g = generator(832)
    B, V = DEEP_SHAPE
    level = -25.0 - 20.0 * torch.rand(B, 1, generator=g)
    ranks = torch.rand(B, V, generator=g).argsort(dim=-1).float()  # a permutation of 0 .. V-1 in each row
    steps = ranks + 0.5 * torch.rand(B, V, generator=g)  # distinct, at least 0.5 apart
    return level + 1e-3 * steps


def _sample_error_hint(message: str, top_k, overflow: bool = False, batch_cut_empties=None) -> str | None:
    """`overflow`: logits / temperature of this input lie beyond exp's range. `batch_cut_empties()`: whether a top-k
    threshold taken over the whole batch (the k-th largest of all the logits) leaves some row of this input with no
    logit, all -inf, which the softmax makes NaN (it is asked only for a setting of temperature > 0 and a top_k, which
    the check reaches after settings with top_k=None that the softmax over dim=-1 has passed)."""
    if top_k is None and "NoneType" in message:
        return _("top_k=None means no cut: keep every logit, and skip the top-k step when top_k is None")
    invalid = "probability tensor contains either `inf`, `nan` or element < 0" in message or \
        "invalid multinomial" in message
    if invalid and overflow:
        return _(OVERFLOW_HINT)
    if invalid and top_k is not None and batch_cut_empties is not None and batch_cut_empties():
        return _(PER_ROW_HINT)
    if invalid:
        return (_("torch.multinomial takes probabilities (non-negative, finite): apply the softmax over the vocabulary "
                  "(dim=-1) to the (scaled) logits first (over another dimension a column of -inf gives NaN); and with "
                  "temperature 0 return the argmax without dividing by it"))
    return None


FINITE_FILL_HINT = (N_("the tokens outside the top k keep some probability in your samples: a finite fill (0, -10, "
                       "...) is not small next to logits that are smaller still; set the logits outside the top k to "
                       "-inf, whose exp is 0"))
PER_ROW_HINT = (N_("some row was left with no logit (all -inf, and a softmax of nothing but -inf is NaN), as when the "
                   "k-th largest logit is taken over the whole batch: each row keeps its own top_k largest logits, "
                   "so find the k-th largest of every row separately, along the vocabulary"))
DEEP_FILL_HINT = (N_("a finite fill like -1e4 is not small next to logits / temperature far below 0 (about -30,000 here): "
                     "the tokens you meant to remove get all the probability; set the logits outside the top k to "
                     "float('-inf'), whose exp is 0 at any scale"))
TINY_TEMPERATURE_HINT = (N_("greedy is for temperature 0 only: even at a tiny temperature (0.0001 here) the two equal "
                            "largest logits of a row are drawn about equally often, half the time each; sample at every "
                            "temperature above 0"))
TIE_SAMPLE_HINT = (N_("sample from softmax(logits / temperature) at every temperature above 0: at this one only the two "
                      "equal largest logits of a row have any probability, half each"))
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
    for dtype, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):  # precision lost on the way
        out += [(_(ROUNDED_LOGITS_HINT, dtype=name), _probs(rows.to(dtype).double(), temperature, top_k)),
                (_(ROUNDED_SCALED_HINT, dtype=name), _probs((rows / temperature).to(dtype).double(), 1.0, top_k))]
    return out


ROUNDED_LOGITS_HINT = (N_("your samples fit the logits rounded to {dtype} before sampling: a rounding error in a logit "
                          "is multiplied by 1 / temperature, so at a low temperature it changes the distribution; keep "
                          "the logits in the dtype they come in (float32)"))
ROUNDED_SCALED_HINT = (N_("your samples fit logits / temperature rounded to {dtype}: at a low temperature these values "
                          "are large, and {dtype} cannot tell close large values apart; keep them in the dtype the "
                          "logits come in (float32)"))


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
                 overflow: bool = False, batch_cut_empties=None):
    """The learner's ids (checked for type, shape, range) and whether the generator was drawn from. `gen_seed` is
    moved by the run's offset (new draws on the check's second pass)."""
    gen_seed = case_seed(gen_seed)
    generator = torch.Generator().manual_seed(gen_seed)
    got, used = call(sample_next, logits, temperature, top_k, generator, what="sample_next", on=on,
                     forbid=sample_forbidden, seed=seed,
                     explain=lambda message: _sample_error_hint(message, top_k, overflow, batch_cut_empties),
                     observe=Drawn(3, gen_seed))
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


@exercise("8.3", "Temperature and top-k sampling", answer_name="sample_next", section="Temperature and top-k",
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
        got, used = _sample_call(sample_next, logits, temperature, top_k, 7, on, overflow=overflow,
                                 batch_cut_empties=lambda: _batch_cut_empties(logits, top_k))
        if torch.equal(got, logits.argmax(dim=-1)):
            raise Wrong(_("your result is the argmax of every row on {on}", on=on),
                        _("the argmax of every row is for temperature 0 only: at temperature > 0, draw a random id "
                          "from softmax(logits / temperature) over the top_k largest logits"))
        _expect_generator_used(used, on)
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
                if _fits(counts, probs) and hint not in hints:
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
                      on=on, r=r, j=j, int_counts_r_j=int(counts[r, j]), _N=_N,
                      n_float_expected_r_j=_N * float(expected[r, j])),
                    _("each row must be sampled from softmax(logits / temperature) over its own top_k largest logits"))
    _check_tie(sample_next)
    _check_deep(sample_next)
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


def _batch_cut_empties(logits: Tensor, top_k: int) -> bool:
    """Whether the k-th largest of ALL the logits, as a threshold for every row, leaves some row with none."""
    kth = torch.topk(logits.flatten(), top_k).values[-1]
    return bool((logits < kth).all(dim=-1).any())


def _expect_generator_used(used: bool, on: str) -> None:
    if not used:
        raise Wrong(_("sample_next drew no random number from `generator` on {on} (its state is unchanged "
                      "after the call)", on=on), SAMPLE_GENERATOR_HINT)


def _check_tie(sample_next) -> None:
    """Two equal largest logits at a tiny temperature: each drawn about half the time (see TIE_SHAPE)."""
    logits, pairs = tie_case()
    B, V = logits.shape
    on = _("logits of shape ({B}, {V}) whose two largest logits are equal in every row, the others at least {margin} "
           "below them, temperature={temperature}, top_k=None",
           B=B, V=V, margin=TIE_MARGIN, temperature=TIE_TEMPERATURE)
    got, used = _sample_call(sample_next, logits, TIE_TEMPERATURE, None, 9, on, overflow=True)
    first, second = got == pairs[:, 0], got == pairs[:, 1]
    outside = ~(first | second)
    if bool(outside.any()):
        r = int(outside.nonzero()[0, 0])
        raise Wrong(_("in row {r} on {on} your sample is id {j}, whose logit lies at least {margin} below the two "
                      "largest: at this temperature its probability is below exp(-1000)",
                      r=r, on=on, j=int(got[r]), margin=TIE_MARGIN),
                    _(TIE_SAMPLE_HINT))
    count = int(second.sum())
    if not within_window(count, B, 0.5):
        if torch.equal(got, logits.argmax(dim=-1)):
            raise Wrong(_("your result is the argmax of every row on {on}: always the first of the two equal largest "
                          "logits", on=on), TINY_TEMPERATURE_HINT)
        raise Wrong(_("of the two equal largest logits of each row on {on}, your samples took the first {a} times "
                      "and the second {b} times in {B} rows; equal logits are drawn equally often",
                      on=on, a=B - count, b=count, B=B),
                    _(TIE_SAMPLE_HINT))
    _expect_generator_used(used, on)


def _check_deep(sample_next) -> None:
    """Logits far below 0 at a low temperature, top_k=DEEP_TOP_K: no sample outside the top k (see DEEP_SHAPE)."""
    logits = deep_case()
    B, V = logits.shape
    on = _("logits of shape ({B}, {V}) of about -25 to -45, temperature={temperature}, top_k={top_k}, so that "
           "logits / temperature is about -30,000", B=B, V=V, temperature=DEEP_TEMPERATURE, top_k=DEEP_TOP_K)
    got, used = _sample_call(sample_next, logits, DEEP_TEMPERATURE, DEEP_TOP_K, 10, on)
    kept = torch.topk(logits, DEEP_TOP_K, dim=-1).indices  # (B, k)
    outside = ~(got[:, None] == kept).any(dim=-1)  # (B,)
    count = int(outside.sum())
    if count:
        raise Wrong(_("{count} of your {B} samples on {on} are ids outside the top_k largest logits of their row",
                      count=count, B=B, on=on),
                    _(DEEP_FILL_HINT) if count == B else
                    _("a token outside the top_k largest logits of its row can never be drawn: set every other logit "
                      "to -inf (a finite fill is not small next to logits / temperature that are smaller still)"))
    _expect_generator_used(used, on)


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
    expect_same_draws(
        lambda seed: _sample_call(sample_next, logits, 1.0, None, 7, on, seed=seed)[0],
        lambda again: torch.equal(again, first), case_seed(7),
        (N_("two calls with generators seeded alike (torch.Generator().manual_seed({seed})) gave different samples "
            "when the global random generator was in another state, and the same samples when it was in the same "
            "state"), SAMPLE_GENERATOR_HINT),
        (N_("three calls with the same logits and generators seeded alike (torch.Generator().manual_seed({seed})) "
            "gave different samples, even the first and the third, made with the global random generators in the "
            "same state too"),
         N_("the same arguments and the same generator state must give the same samples: draw anew from "
            "`generator` on each call, and keep nothing from one call to the next (no cache of draws or results, no "
            "counter)")))
    other, _unused = _sample_call(sample_next, logits, 1.0, None, 8, on)
    if torch.equal(other, first):
        raise Wrong(_("generators seeded with {seed} and with {other} gave exactly the same samples",
                      seed=case_seed(7), other=case_seed(8)),
                    _("another seed must give other samples: draw from the generator argument as it comes (without "
                      "reseeding it or making a generator of your own), and keep no draws or results from one call "
                      "to the next"))
