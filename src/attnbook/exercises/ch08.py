"""Checkers for chapter 8, BERT vs GPT.

8.1 (BERT's masking) and 8.3 (sampling) are random. A learner may draw the random numbers in any order, so the
checks cannot compare draws with a reference. They test the structure exactly (what may change, what the labels
hold, the shape and dtype), the proportions statistically over many draws, and the use of the generator:
the same generator seed must give the same result whatever the state of the global generators, and another
seed another result. The references are written out here from the definitions; 8.2's is F.cross_entropy on the
shifted logits and ids.

Statistical bounds. A count of successes in n independent trials of probability p is accepted when it lies within
t = L/3 + sqrt(L^2/9 + 2 L n p (1 - p)) of n p, with L = ln(2 / 2e-9). By Bernstein's inequality a right answer
falls outside one window with probability below 2e-9, also for small p where the normal approximation fails
(for large n p the window is about 6.4 standard deviations wide). A check tests at most 60 windows, so a right
answer, drawing its random numbers in any order, fails with probability below 1.2e-7. A mistake is recognised
when its own expected proportions fit the same windows and the right ones do not.
"""
from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import Tensor

from .compare import expect_close, expect_tensor, expect_tuple
from .guard import call
from .registry import exercise, Wrong

FALSE_FAILURE = 2e-9  # the probability that a right count falls outside its window (see the module docstring)
_L = math.log(2 / FALSE_FAILURE)


def _within(count: float, n: int, p: float) -> bool:
    """Whether `count` successes in `n` trials fit a binomial(n, p), by Bernstein's inequality."""
    if p <= 0 or p >= 1:  # an impossible (or certain) outcome: exactly
        return count == (n if p >= 1 else 0)
    variance = n * p * (1 - p)
    return abs(count - n * p) <= _L / 3 + math.sqrt(_L * _L / 9 + 2 * _L * variance) + 1e-9


def _is_integer_tensor(t: Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


# ---------------------------------------------------------------------------------------------------------
# 8.1 BERT's masking
# ---------------------------------------------------------------------------------------------------------

_V, _MASK = 1000, 3  # a large vocabulary, so that a random id rarely equals the original or [MASK]
_P_CHOOSE, _P_MASK, _P_RANDOM = 0.15, 0.8, 0.1
RANDOM_IDS = "draw the random ids uniformly from all of [0, vocab_size) (torch.randint), with generator=generator"
GENERATOR_HINT = ("draw every random number from the generator you are given: pass generator=generator to "
                  "torch.rand, torch.randint, torch.bernoulli, torch.multinomial or torch.randperm")
OVERLAP_HINT = ("your cases overlap: a position picked for [MASK] can also be picked for a random id (two independent "
                "draws, one overriding the other); split the chosen positions into three disjoint groups of 80%, 10% "
                "and 10%")
_MLM_INSTEAD = "write the masking yourself, from random numbers drawn with generator=generator"
# The package's masker, and transformers' collators (DataCollatorForLanguageModeling.torch_mask_tokens and the
# rest of that module), matched by a pattern wherever they are imported from.
MLM_FORBIDDEN = [("attnbook.data.mlm_mask", _MLM_INSTEAD),
                 ("transformers.data.data_collator.*mask_tokens*", _MLM_INSTEAD),
                 ("transformers.data.data_collator.*", _MLM_INSTEAD)]
INDEPENDENT_HINT = ("choose each position independently with probability 0.15, with a random number of its own (not "
                    "one per row or per column, and not a fixed number of positions): the number chosen then varies "
                    "from row to row and from call to call like a binomial count")


def _expect_used(generator: torch.Generator, gen_seed: int, what: str, on: str, hint: str) -> None:
    """Wrong if `generator` (seeded with `gen_seed`) has not been drawn from: the answer used other randomness."""
    if torch.equal(generator.get_state(), torch.Generator().manual_seed(gen_seed).get_state()):
        raise Wrong(f"{what} drew no random number from `generator` on {on} (its state is unchanged after the call)",
                    hint)


def _ids(shape: tuple[int, int], low: int, high: int, seed: int) -> Tensor:
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed))


def _mlm_call(mlm_mask, ids: Tensor, mask_id: int, vocab_size: int, gen_seed: int, on: str, seed: int = 0):
    """Call the learner's mlm_mask and return (masked_ids, labels) after checking their types and shapes."""
    generator = torch.Generator().manual_seed(gen_seed)
    got = call(mlm_mask, ids, mask_id, vocab_size, generator, what="mlm_mask", on=on, forbid=MLM_FORBIDDEN, seed=seed,
               explain=_mlm_error_hint)
    _expect_used(generator, gen_seed, "mlm_mask", on, GENERATOR_HINT)
    if isinstance(got, (tuple, list)) and len(got) == 3:
        raise Wrong(f"mlm_mask returned 3 values on {on}, expected 2: (masked_ids, labels)",
                    "return only masked_ids and labels (the package's mlm_mask also returns the chosen positions; "
                    "this exercise does not)")
    masked, labels = expect_tuple(got, ("masked_ids", "labels"), "mlm_mask", on)
    if (isinstance(masked, Tensor) and isinstance(labels, Tensor) and bool((masked == -100).any())
            and not bool((labels == -100).any())):
        raise Wrong(f"the first tensor you return holds -100s on {on} and the second none: they look swapped",
                    "return (masked_ids, labels) in this order: the masked ids first, the labels (-100 where not "
                    "chosen) second")
    for name, t in (("masked_ids", masked), ("labels", labels)):
        t = expect_tensor(t, what=f"{name} (the {'first' if name == 'masked_ids' else 'second'} item you return)",
                          on=on, finite=False)
        if tuple(t.shape) != tuple(ids.shape):
            raise Wrong(f"{name} has shape {tuple(t.shape)} on {on}, expected the shape of ids {tuple(ids.shape)}",
                        "keep one entry per position of ids: build the result with torch.where or masked_fill "
                        "rather than by indexing, which flattens")
        if t.dtype != ids.dtype:
            raise Wrong(f"{name} has dtype {t.dtype} on {on}, expected {ids.dtype}, the dtype of ids",
                        "token ids are integers, and F.cross_entropy takes int64 (torch.long) targets: build the "
                        "result from ids (torch.where, masked_fill) and keep the random ids of torch.randint, int64"
                        if _is_integer_tensor(t) else "token ids are integers: build the result from ids (torch.where, "
                        "masked_fill) and keep the random ids of torch.randint")
    return masked, labels


def _check_structure(ids: Tensor, masked: Tensor, labels: Tensor, mask_id: int, vocab_size: int, on: str) -> Tensor:
    """The exact rules (who may change, what the labels hold); returns the chosen positions."""
    n = ids.numel()
    chosen = labels != -100
    # Every position chosen has probability 0.15^n (below 1e-8 from n = 10 on); none chosen 0.85^n (below 1e-7
    # from n = 100 on): only then are they mistakes rather than bad luck.
    if (n >= 10 and bool(chosen.all())) or (n >= 100 and not chosen.any()):
        zeros = int((labels == 0).sum())
        if zeros > 0.5 * n:
            raise Wrong(f"labels has no -100 on {on}; {zeros / n:.0%} of its entries are 0",
                        "positions that are not chosen must be labelled -100, the ignore_index of F.cross_entropy "
                        "(0 is the id of a real token, [PAD] in the chapter, and would be trained on)")
        if torch.equal(labels, ids):
            raise Wrong(f"labels equals ids at every position on {on}",
                        "label only the chosen positions: the original id where chosen, -100 everywhere else, so "
                        "that the loss is computed at the chosen 15% only")
        if not chosen.any():
            raise Wrong(f"every label is -100 on {on}: no position was chosen",
                        "choose each position with probability 0.15 and label it with its original id")
        raise Wrong(f"labels has no -100 on {on}: every position is labelled",
                    "label only the chosen positions: the original id where chosen, -100 everywhere else")
    if not torch.equal(labels[chosen], ids[chosen]):
        if torch.equal(labels[chosen], masked[chosen]):
            raise Wrong(f"labels holds the masked ids at the chosen positions on {on}",
                        "the label of a chosen position is its ORIGINAL id (what the model must recover), not "
                        "[MASK] or the random id that replaced it")
        raise Wrong(f"labels holds ids other than the original ones at chosen positions on {on}",
                    "at a chosen position the label is ids at that position; elsewhere it is -100")
    changed = masked != ids
    if changed.any() and not (changed & chosen).any():
        raise Wrong(f"every position that you changed is labelled -100 on {on}, and every other one holds its id",
                    "your labels are inverted: a chosen position (one that may change) holds its original id, and "
                    "-100 marks the positions that were NOT chosen")
    if (changed & ~chosen).any():
        share = float((changed & ~chosen).sum()) / max(1, int((~chosen).sum()))
        hint = ("label every chosen position, also those that got a random id or kept their own: a position that "
                "changed must have a label" if share < 0.1 else
                "only chosen positions may change: apply the 80/10/10 split to the chosen positions only")
        raise Wrong(f"masked_ids differs from ids at {share:.1%} of the positions labelled -100 on {on}", hint)
    if int(masked.min()) < 0 or int(masked.max()) >= vocab_size:
        raise Wrong(f"masked_ids holds values in [{int(masked.min())}, {int(masked.max())}] on {on}, outside "
                    f"[0, vocab_size={vocab_size})",
                    RANDOM_IDS)
    k, to_mask = int(chosen.sum()), int((masked[chosen] == mask_id).sum())
    if k >= 200 and to_mask < k / 2:  # a right answer: probability below 1e-19
        replaced = masked[chosen & changed & (masked != mask_id)]
        mode = int(replaced.mode().values) if replaced.numel() else -1
        share = int((replaced == mode).sum()) / k
        if share > 0.5:
            raise Wrong(f"{to_mask / k:.1%} of the {k:,} chosen positions hold mask_id={mask_id} on {on}, and "
                        f"{share:.1%} hold {mode}", "your [MASK] ignores the mask_id argument: use mask_id itself, "
                        "whatever its value (it is not the same in every call)")
    return chosen


def _check_proportions(ids: Tensor, masked: Tensor, chosen: Tensor, on: str) -> None:
    """15% chosen; of those 80% [MASK], 10% another id, 10% unchanged (random ids that hit the original count as
    unchanged); the random ids spread over the whole vocabulary."""
    n, k = ids.numel(), int(chosen.sum())
    share = k / n
    # Independent choices make every row (and column) differ: equal rows or all-or-nothing rows have probability
    # below 1e-30 here.
    per_row = chosen.sum(dim=1)  # (rows,): equal counts in all 200 rows have probability below 0.06^199
    for what, bad in (("the same positions are chosen in every row", (chosen == chosen[:1]).all()),
                      ("each row is chosen entirely or not at all", (chosen.all(dim=1) | ~chosen.any(dim=1)).all()),
                      (f"every row has exactly {int(per_row[0])} chosen positions", (per_row == per_row[0]).all())):
        if bool(bad):
            raise Wrong(f"{what} on {on}", INDEPENDENT_HINT)
    if not _within(k, n, _P_CHOOSE):
        all_masked = bool((masked[chosen] == _MASK).all())
        all_changed = bool((masked[chosen] != ids[chosen]).all())
        known = [(_P_CHOOSE * _P_MASK, all_masked, "you labelled only the positions that became [MASK]: label every "
                  "chosen position, also those that got a random id or kept their own"),
                 (_P_CHOOSE * (_P_MASK + _P_RANDOM), all_changed, "you labelled only the positions that changed: "
                  "label every chosen position, also the 10% that keep their id"),
                 (1 - _P_CHOOSE, True, "your choice is inverted: 15% of the positions are chosen (labelled), 85% are "
                  "labelled -100")]
        for p, confirmed, hint in known:
            if confirmed and _within(k, n, p):
                raise Wrong(f"{share:.1%} of the positions are chosen (labelled) on {on}, expected about 15%", hint)
        raise Wrong(f"{share:.1%} of the positions are chosen (labelled) on {on}, expected about 15%",
                    "choose each position independently with probability 0.15")
    to_mask = int((masked[chosen] == _MASK).sum())
    same = int((masked[chosen] == ids[chosen]).sum())
    got = (to_mask, same, k - to_mask - same)  # [MASK], unchanged, another id

    def observed(p_mask: float, p_random: float, p_keep: float) -> tuple[float, float, float]:
        """Expected shares of [MASK], unchanged, another id: a random id is [MASK] or the original w.p. 1/V each."""
        return p_mask + p_random / _V, p_keep + p_random / _V, p_random * (_V - 2) / _V

    if not all(_within(c, k, p) for c, p in zip(got, observed(_P_MASK, _P_RANDOM, 1 - _P_MASK - _P_RANDOM))):
        shares = f"{got[0] / k:.1%} [MASK], {got[2] / k:.1%} another id, {got[1] / k:.1%} unchanged"
        known = [((1.0, 0.0, 0.0), "every chosen position became [MASK]: replace 80% of them by [MASK], 10% by a "
                  "random id, and leave 10% unchanged"),
                 ((0.8, 0.0, 0.2), "no chosen position got a random id: 10% of them must get a random id"),
                 ((0.8, 0.2, 0.0), "no chosen position kept its id: 10% of them must stay unchanged (they are "
                  "still labelled, so the model learns that any token may be wrong)"),
                 ((0.1, 0.8, 0.1), "the split is the wrong way round: 80% of the chosen positions become [MASK], "
                  "10% a random id"),
                 ((0.1, 0.1, 0.8), "the split is the wrong way round: 80% of the chosen positions become [MASK], "
                  "10% stay unchanged"),
                 ((0.72, 0.1, 0.18), OVERLAP_HINT), ((0.8, 0.02, 0.18), OVERLAP_HINT)]
        for actions, hint in known:
            if all(_within(c, k, p) for c, p in zip(got, observed(*actions))):
                raise Wrong(f"of the chosen positions on {on}: {shares}; expected 80%, 10%, 10%", hint)
        raise Wrong(f"of the chosen positions on {on}: {shares}; expected 80%, 10%, 10%",
                    "split the chosen positions into three disjoint groups with probabilities 0.8 ([MASK]), 0.1 "
                    "(a random id) and 0.1 (unchanged)")
    replaced = masked[chosen & (masked != ids) & (masked != _MASK)].double()  # (other,) the random ids
    m = replaced.numel()
    low, high = int((replaced < _V / 2).sum()), int((replaced >= 0.9 * _V).sum())  # uniform: half, a tenth
    if m and not (_within(low, m, 0.5) and _within(high, m, 0.1)):
        raise Wrong(f"the random ids on {on} lie in [{int(replaced.min())}, {int(replaced.max())}], {low / m:.0%} of "
                    f"them below {_V // 2}; ids drawn uniformly from [0, vocab_size={_V}) spread over the whole "
                    "range, half of them below the middle", RANDOM_IDS)


def _check_random_ids(ids: Tensor, masked: Tensor, chosen: Tensor, mask_id: int, vocab_size: int, on: str) -> None:
    """With a small vocabulary, every id in [0, vocab_size) is drawn as a random id with probability 1/vocab_size:
    also 0, vocab_size - 1, ids absent from the batch, mask_id and the original id (vocab_size + 1 windows)."""
    k = int(chosen.sum())
    p_each = _P_RANDOM / vocab_size
    where = (f"among the {k:,} chosen positions on {on}, where each id in [0, {vocab_size}) should come as the "
             f"random id 10% x 1/{vocab_size} = {p_each:.1%} of the time")
    present = set(ids.unique().tolist())
    shares, failed = {}, []  # id -> share among the chosen positions not holding it; the ids outside their window
    for j in range(vocab_size):
        if j == mask_id:
            continue
        others = chosen & (ids != j)  # a chosen position not holding j shows j only through a random id
        n, count = int(others.sum()), int((masked[others] == j).sum())
        shares[j] = count / max(n, 1)
        if not _within(count, n, p_each):
            failed.append(j)
    same = int((masked[chosen] == ids[chosen]).sum())
    to_mask = int((masked[chosen] == mask_id).sum())
    same_ok = _within(same, k, 1 - _P_MASK - _P_RANDOM + p_each)
    mask_ok = _within(to_mask, k, _P_MASK + p_each)
    rare = [j for j in failed if shares[j] < p_each]
    if rare in ([0], [vocab_size - 1]):
        j = rare[0]
        raise Wrong(f"id {j} replaced a chosen position other than its own {shares[j]:.2%} of the time {where}",
                    "every id from 0 to vocab_size - 1 can be drawn: the lower bound is 0 (also the special ids), "
                    "and torch.randint's upper bound, vocab_size, is exclusive")
    for j in rare:  # an id never (or too rarely) drawn names the mistake best
        if j not in present:
            raise Wrong(f"id {j}, which is not in the batch, replaced a chosen position {shares[j]:.2%} of the time "
                        f"{where}", "draw random ids from the whole vocabulary, not from the tokens in the batch")
    if not same_ok and same < k * (1 - _P_MASK - _P_RANDOM + p_each):
        raise Wrong(f"{same / k:.1%} of the chosen positions kept their id {where}; expected 10% unchanged + "
                    f"{p_each:.1%} that drew their own id",
                    "a random id may equal the original one (probability 1/vocab_size): keep it, without shifting "
                    "or redrawing it")
    if not mask_ok and to_mask < k * (_P_MASK + p_each):
        raise Wrong(f"{to_mask / k:.1%} of the chosen positions hold mask_id {where}; expected 80% [MASK] + "
                    f"{p_each:.1%} that drew mask_id as their random id",
                    "a random id may be mask_id too: draw it from all of [0, vocab_size), without shifting or "
                    "redrawing it")
    if failed or not (same_ok and mask_ok):
        detail = (f"id {failed[0]} replaced a chosen position other than its own {shares[failed[0]]:.2%} of the time"
                  if failed else f"{same / k:.1%} kept their id and {to_mask / k:.1%} hold mask_id")
        raise Wrong(f"{detail} {where}", RANDOM_IDS)


def _mlm_error_hint(message: str) -> str | None:
    if "random_ expects 'from' to be less than 'to'" in message:
        return "draw random ids from the whole vocabulary, 0 included: " + RANDOM_IDS
    return None


@exercise("8.1", "BERT's masking, 80/10/10", section="Masked language modelling (BERT)",
          references=("attnbook.data.mlm_mask",))
def check_mlm_mask(mlm_mask) -> str:
    """mlm_mask(ids, mask_id, vocab_size, generator) -> (masked_ids, labels) with BERT's 15% and 80/10/10."""
    # structure first, on small inputs that are easy to read
    small = [
        ("ids of shape (2, 8) with vocab_size=1000, mask_id=3", _ids((2, 8), 4, _V, 801), _MASK, _V),
        ("a batch of 1: ids of shape (1, 5)", _ids((1, 5), 4, _V, 802), _MASK, _V),
        ("ids of shape (64, 30) with a small vocabulary: vocab_size=6, mask_id=5", _ids((64, 30), 0, 5, 803), 5, 6),
    ]
    counts = []  # (chosen, positions) per call
    for on, ids, mask_id, vocab_size in small:
        masked, labels = _mlm_call(mlm_mask, ids, mask_id, vocab_size, 11, on)
        counts.append((int(_check_structure(ids, masked, labels, mask_id, vocab_size, on).sum()), ids.numel()))
    # the proportions, on 100,000 positions
    on = "ids of shape (200, 500) with vocab_size=1000, mask_id=3"
    ids = _ids((200, 500), 4, _V, 810)  # never the [MASK] id 3
    masked, labels = _mlm_call(mlm_mask, ids, _MASK, _V, 1234, on)
    chosen = _check_structure(ids, masked, labels, _MASK, _V, on)
    _check_proportions(ids, masked, chosen, on)
    # the generator: the same seed, whatever the global generators; another seed, another mask
    again = _mlm_call(mlm_mask, ids, _MASK, _V, 1234, on, seed=1)
    if not (torch.equal(again[0], masked) and torch.equal(again[1], labels)):
        raise Wrong("two calls with generators seeded alike (torch.Generator().manual_seed(1234)) gave different "
                    "masks when the global random generator was in another state", GENERATOR_HINT)
    other = _mlm_call(mlm_mask, ids, _MASK, _V, 4321, on)
    if torch.equal(other[0], masked) and torch.equal(other[1], labels):
        raise Wrong("generators seeded with 1234 and with 4321 gave exactly the same masks",
                    "use the generator argument for every random draw, not a generator you create and seed yourself")
    # the random ids, with a vocabulary of 5 and ids only 0 and 1: every id must come, 0, 3 and 4 (not in the
    # batch), mask_id 2 and the original included (300,000 positions, so that 1/5 of the 10% shows)
    on = "ids of shape (600, 500) holding only 0 and 1, with vocab_size=5, mask_id=2"
    ids = _ids((600, 500), 0, 2, 811)
    masked, labels = _mlm_call(mlm_mask, ids, 2, 5, 99, on)
    chosen_small = _check_structure(ids, masked, labels, 2, 5, on)
    _check_random_ids(ids, masked, chosen_small, 2, 5, on)
    # A binomial count hits its mean exactly with probability about 1 / sqrt(2 pi n p (1 - p)): 0.026, 0.0035 (twice)
    # and 0.002 here, all four together below 7e-10 for a right answer.
    counts = [counts[2], (int(chosen.sum()), chosen.numel()), (int((other[1] != -100).sum()), chosen.numel()),
              (int(chosen_small.sum()), chosen_small.numel())]
    if all(k == round(_P_CHOOSE * n) for k, n in counts):
        raise Wrong("exactly 15% of the positions are chosen in every call: " + ", ".join(
            f"{k:,} of {n:,}" for k, n in counts), INDEPENDENT_HINT)
    return ("15% chosen and 80/10/10 within statistical bounds on 100,000 positions; random ids uniform over the "
            "whole vocabulary; labels, unchosen positions and the generator are right")


# ---------------------------------------------------------------------------------------------------------
# 8.2 causal-LM loss
# ---------------------------------------------------------------------------------------------------------

# a pattern, matched by name when called: resolving the path would import transformers (1 s or more)
LM_LOSS_FORBIDDEN = [("transformers.loss.loss_utils.*", "shift the logits and the ids yourself")]
CLASS_DIM_HINT = ("F.cross_entropy wants the classes in dimension 1: flatten the logits to (batch * positions, "
                  "vocab_size) and the targets to (batch * positions,), or pass logits.transpose(1, 2)")


def _loss_error_hint(message: str) -> str | None:
    if "Expected target size" in message or ("Expected input batch_size" in message and "target batch_size" in message):
        return CLASS_DIM_HINT
    if "expected scalar type Long" in message or "expected target dtype" in message:
        return "the targets of F.cross_entropy are class indices: pass the integer ids (no .float())"
    return None


def _lm_mistakes(logits: Tensor, ids: Tensor) -> dict[str, Tensor]:
    """The results of plausible mistakes on this input, keyed by the hint for each."""
    B, T, V = logits.shape

    def ce(lg: Tensor, tg: Tensor, reduction: str = "mean") -> Tensor:
        return F.cross_entropy(lg.reshape(-1, V), tg.reshape(-1), reduction=reduction)

    right = ce(logits[:, :-1], ids[:, 1:])
    out = {
        "no shift: the output at position t predicts the NEXT token, the one at position t + 1, not its own":
            ce(logits, ids),
        "the shift goes the wrong way: the output at position t predicts the token at t + 1, not the one at t - 1":
            ce(logits[:, 1:], ids[:, :-1]),
        "you summed the losses; take the mean over all batch * (seq - 1) predictions": ce(logits[:, :-1], ids[:, 1:],
                                                                                          "sum"),
        "you applied a softmax before F.cross_entropy, which applies log-softmax itself: pass the raw logits":
            ce(torch.softmax(logits, dim=-1)[:, :-1], ids[:, 1:]),
        "F.nll_loss expects log-probabilities: apply log_softmax first, or use F.cross_entropy on the raw logits":
            F.nll_loss(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)),
        "shift by exactly one position: the output at t predicts the token at t + 1, not t + 2":
            ce(logits[:, :-2], ids[:, 2:]) if T > 2 else right + 1.0,
        "the loss is the NEGATIVE log-probability of the right token (cross-entropy is positive)": -right,
        "you took the mean over each sequence, then summed over the batch; take one mean over all predictions":
            ce(logits[:, :-1], ids[:, 1:], "none").view(B, T - 1).mean(dim=1).sum(),
    }
    out.update({
        "you summed over the positions of each sequence, then took the mean over the batch; take one mean over all "
        "batch * (seq - 1) predictions": ce(logits[:, :-1], ids[:, 1:], "none").view(B, T - 1).sum(dim=1).mean(),
        "ignore_index=0 skips the targets that are token 0, a real token here; keep the default (-100) or leave "
        "ignore_index out": F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), ignore_index=0)
        if bool((ids[:, 1:] == 0).any()) else right + 1.0,
        "your log-softmax runs over the positions (dim=1): take it over the vocabulary, dim=-1": F.nll_loss(
            torch.log_softmax(logits, dim=1)[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)),
    })
    out.update({
        "you divided the summed loss by batch * seq; there are batch * (seq - 1) predictions":
            ce(logits[:, :-1], ids[:, 1:], "sum") / (B * T),
        "you scored only the last prediction of each sequence; the mean runs over all batch * (seq - 1) predictions":
            ce(logits[:, -2], ids[:, -1]),
        "your logits and targets are flattened in different orders (one position-major, one batch-major), so "
        "predictions are scored against the tokens of other positions: flatten both the same way":
            ce(logits[:, :-1].transpose(0, 1), ids[:, 1:]),
        "label_smoothing changes the loss: the task asks for the plain cross-entropy": F.cross_entropy(
            logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), label_smoothing=0.1),
    })
    if B > 1:
        out["you used only the first sequence of the batch; the mean runs over every sequence"] = ce(
            logits[:1, :-1], ids[:1, 1:])
    return {hint: value for hint, value in out.items() if not torch.allclose(value, right)}


@exercise("8.2", "The causal language-modelling loss", section="Next-token prediction (GPT)")
def check_causal_lm_loss(causal_lm_loss) -> str:
    """causal_lm_loss(logits, ids) = mean cross-entropy of logits[:, t] against ids[:, t + 1]."""

    def case(B: int, T: int, V: int, seed: int, dtype=torch.float64, scale: float = 2.0):
        g = torch.Generator().manual_seed(seed)
        logits = scale * torch.randn(B, T, V, generator=g, dtype=dtype)
        ids = torch.randint(V, (B, T), generator=g)
        if scale > 10:  # targets alternate between the largest logit (exp overflows) and the smallest (underflows)
            ids[:, 1:] = torch.where(torch.arange(T - 1) % 2 == 0, logits[:, :-1].argmax(-1), logits[:, :-1].argmin(-1))
        return logits.requires_grad_(), ids

    cases = [
        ("logits of shape (2, 5, 7) and ids of shape (2, 5)", *case(2, 5, 7, 820)),
        ("logits (3, 9, 11) and ids (3, 9)", *case(3, 9, 11, 821)),
        ("a batch of 1: logits (1, 6, 13) and ids (1, 6)", *case(1, 6, 13, 822)),
        ("two tokens, so one prediction: logits (4, 2, 5) and ids (4, 2)", *case(4, 2, 5, 823)),
        ("float32 logits (2, 12, 50) and ids (2, 12)", *case(2, 12, 50, 824, torch.float32)),
    ]
    large = ("large float32 logits, from about -300 to 300, of shape (2, 4, 9) and ids (2, 4)",
             *case(2, 4, 9, 825, torch.float32, 100.0))  # not counted in the success message, which predates it
    for on, logits, ids in cases + [large]:
        got = call(causal_lm_loss, logits, ids, what="causal_lm_loss", on=on, forbid=LM_LOSS_FORBIDDEN,
                   explain=_loss_error_hint)
        if isinstance(got, numbers.Real) and not isinstance(got, bool):
            raise Wrong(f"causal_lm_loss returned a Python {type(got).__name__} on {on}, expected a tensor",
                        "return the loss tensor itself, without .item() or float(): training calls "
                        "loss.backward() on it")
        got = expect_tensor(got, what="your loss", on=on, finite=False)
        V = logits.size(-1)
        right = F.cross_entropy(logits.detach()[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))  # ()
        if got.numel() != 1:
            per_position = F.cross_entropy(logits.detach()[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1),
                                           reduction="none")
            hint = ("you returned one loss per prediction (reduction='none'): return their mean, a single number"
                    if got.numel() == per_position.numel() else "return one number: the mean loss over all predictions")
            raise Wrong(f"your loss has shape {tuple(got.shape)} on {on}, expected a single number (shape ())", hint)
        if got.dim() != 0:
            raise Wrong(f"your loss has shape {tuple(got.shape)} on {on}, expected a 0-dimensional tensor (shape ())",
                        "the mean over all predictions is already 0-dimensional: no reshape, view or unsqueeze")
        if not got.is_floating_point():
            raise Wrong(f"your loss has dtype {got.dtype} on {on}, expected floating point",
                        "keep the loss in floating point (no .long() or .int())")
        if not torch.isfinite(got).all():
            raise Wrong(f"your loss is {got.item()} on {on}, expected {right.item():.6g}", (
                "exp of a large logit overflows (inf / inf is NaN): compute log-probabilities with log_softmax or "
                "logsumexp, which subtract the maximum, or use F.cross_entropy on the raw logits" if got.isnan() else
                "a probability that underflows to 0 has log -inf: take log_softmax (or logsumexp), not the log of a "
                "softmax, or use F.cross_entropy on the raw logits"))
        expect_close(got.detach(), right, what="your loss", on=on, atol=1e-5, rtol=1e-5,
                     mistakes=_lm_mistakes(logits.detach(), ids))
        if not got.requires_grad:
            raise Wrong(f"your loss has the right value on {on} but no gradient can flow back to the logits",
                        "compute it from logits with tensor operations; .item(), float() or torch.tensor(...) "
                        "cut it off from the graph, and training calls loss.backward()")
    return f"right on {len(cases)} inputs, including a batch of 1, a single prediction and float32"


# ---------------------------------------------------------------------------------------------------------
# 8.3 temperature and top-k sampling
# ---------------------------------------------------------------------------------------------------------

SAMPLE_FORBIDDEN = [(name, "write the sampling yourself, step by step as the task describes it")
                    for name in ("attnbook.models.gpt.sample_next", "attnbook.models.gpt.GPT.generate")]
_ROWS = torch.tensor([[1.0, -1.5, 2.2, 0.3, -0.4, 1.6],  # two different rows, the largest logits not first
                      [-0.5, 0.8, -2.0, 1.9, 0.1, 1.2]], dtype=torch.float64)
_N = 20_000  # samples per row


def _sample_error_hint(message: str, top_k) -> str | None:
    if top_k is None and "NoneType" in message:
        return "top_k=None means no cut: keep every logit, and skip the top-k step when top_k is None"
    if "probability tensor contains either `inf`, `nan` or element < 0" in message or "invalid multinomial" in message:
        return ("torch.multinomial takes probabilities (non-negative, finite): apply the softmax over the vocabulary "
                "(dim=-1) to the (scaled) logits first (over another dimension a column of -inf gives NaN); and with "
                "temperature 0 return the argmax without dividing by it")
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
        "you multiplied the logits by the temperature; divide them: softmax(logits / temperature)":
            _probs(_ROWS, 1 / temperature, top_k),
        "the temperature changes nothing in your samples: divide the logits by it before the softmax":
            _probs(_ROWS, 1.0, top_k),
    }
    if top_k is None:  # softmax over the batch (dim=0) of _N copies of each row; multinomial renormalises each row
        over_batch = torch.softmax(_ROWS / temperature, dim=0)  # (R, V): the _N factor cancels
        out["you applied the softmax over the batch (dim=0): take it over the vocabulary, dim=-1"] = (
            over_batch / over_batch.sum(dim=-1, keepdim=True))
    if top_k is not None:
        unmapped = torch.zeros_like(_ROWS)  # sampled a position among the top k and returned it as the id
        unmapped[:, :top_k] = torch.softmax(torch.topk(_ROWS / temperature, top_k, dim=-1).values, dim=-1)
        out.update({
            "your samples include tokens outside the top_k: set every logit below the k-th largest to -inf before "
            "the softmax": _probs(_ROWS, temperature, None),
            "you kept the top_k SMALLEST logits: keep the largest (torch.topk returns the largest by default)":
                _probs(_ROWS, temperature, top_k, smallest=True),
            "you returned the position within the top k (0 .. top_k - 1) instead of the token id: map it back "
            "through the indices that torch.topk returns (topk.indices.gather(-1, choice))": unmapped,
        })
        V = _ROWS.size(-1)
        if top_k < V:
            out["keep exactly top_k logits: you kept top_k + 1"] = _probs(_ROWS, temperature, top_k + 1)
        if top_k > 1:
            out["keep exactly top_k logits: you kept top_k - 1"] = _probs(_ROWS, temperature, top_k - 1)
        for fill, what in ((0.0, "to 0"), ("min", "to the row's smallest logit")):
            out[f"you set the logits outside the top k {what}, so they keep some probability: set them to -inf, "
                "whose exp is 0"] = _probs(_ROWS, temperature, top_k, fill=fill)
        keep = (_probs(_ROWS, temperature, top_k) > 0).double()  # (R, V): the top k of each row
        out["you sampled the top_k tokens uniformly: weight them by softmax(logits / temperature)"] = (
            keep / keep.sum(dim=-1, keepdim=True))
    return out


def _counts(ids: Tensor, rows: int, vocab: int) -> Tensor:
    """(rows, vocab) counts of each id among the samples of each row (the samples come in blocks of _N per row)."""
    return torch.stack([torch.bincount(ids[r * _N:(r + 1) * _N].long(), minlength=vocab)[:vocab]
                        for r in range(rows)]).double()


def _fits(counts: Tensor, probs: Tensor) -> bool:
    """Whether every count fits its binomial(_N, p) window (and ids with probability 0 never occur)."""
    return all(_within(float(c), _N, float(p)) for c, p in zip(counts.flatten(), probs.flatten()))


def _sample_call(sample_next, logits: Tensor, temperature, top_k, gen_seed: int, on: str, seed: int = 0):
    """The learner's ids (checked for type, shape, range) and whether the generator was drawn from."""
    generator = torch.Generator().manual_seed(gen_seed)
    got = call(sample_next, logits, temperature, top_k, generator, what="sample_next", on=on, forbid=SAMPLE_FORBIDDEN,
               seed=seed, explain=lambda message: _sample_error_hint(message, top_k))
    got = expect_tensor(got, what="your result", on=on, finite=False)
    B = logits.size(0)
    if tuple(got.shape) != (B,):
        hint = ("return one id per row, shape (batch,): torch.multinomial(probs, 1) gives (batch, 1), so "
                "squeeze the last dimension (.squeeze(-1))" if tuple(got.shape) == (B, 1) else
                "return one token id per row of logits, a tensor of shape (batch,)")
        raise Wrong(f"your result has shape {tuple(got.shape)} on {on}, expected ({B},)", hint)
    if not _is_integer_tensor(got):
        raise Wrong(f"your result has dtype {got.dtype} on {on}, expected integer token ids (torch.long)",
                    "return the indices (argmax, torch.multinomial, topk indices), not probabilities or logits")
    V = logits.size(-1)
    if int(got.min()) < 0 or int(got.max()) >= V:
        raise Wrong(f"your result holds ids in [{int(got.min())}, {int(got.max())}] on {on}, outside [0, {V})")
    used = not torch.equal(generator.get_state(), torch.Generator().manual_seed(gen_seed).get_state())
    return got, used


SAMPLE_GENERATOR_HINT = ("draw with generator=generator (torch.multinomial(..., generator=generator)); reseeding the "
                         "global generator or making a generator of your own does not count")


@exercise("8.3", "Temperature and top-k sampling", section="Temperature and top-k",
          references=("attnbook.models.gpt.sample_next",))
def check_sample_next(sample_next) -> str:
    """sample_next(logits, temperature, top_k, generator) -> (B,) ids: greedy at 0, else softmax(l/T) on the top k."""
    g = torch.Generator().manual_seed(830)
    greedy = [  # temperature 0 first, top_k=1 (sampled from one logit) after the frequencies
        ("logits of shape (3, 10), temperature=0, top_k=None", torch.randn(3, 10, generator=g), 0.0, None),
        ("a batch of 1: logits (1, 7), temperature=0, top_k=3", torch.randn(1, 7, generator=g), 0.0, 3),
        ("logits (5, 12), temperature=1.0, top_k=1 (only the largest logit is left)",
         torch.randn(5, 12, generator=g), 1.0, 1),
    ]
    for on, logits, temperature, top_k in greedy[:2]:
        _expect_argmax(*_sample_call(sample_next, logits, temperature, top_k, 5, on), logits, temperature, top_k, on)
    configs = [(1.0, None), (0.5, None), (1.0, 3), (2.0, 4), (0.7, 2)]
    R, V = _ROWS.shape
    for temperature, top_k in configs:
        on = (f"logits of shape ({R * _N}, {V}) ({_N:,} copies of each of two rows), temperature={temperature}, "
              f"top_k={top_k}")
        logits = _ROWS.float().repeat_interleave(_N, dim=0)  # (R * _N, V): row r fills block r
        got, used = _sample_call(sample_next, logits, temperature, top_k, 7, on)
        if torch.equal(got, logits.argmax(dim=-1)):
            raise Wrong(f"your result is the argmax of every row on {on}",
                        "the argmax of every row is for temperature 0 only: at temperature > 0, draw a random id "
                        "from softmax(logits / temperature) over the top_k largest logits")
        if not used:
            raise Wrong(f"sample_next drew no random number from `generator` on {on} (its state is unchanged after "
                        "the call)", SAMPLE_GENERATOR_HINT)
        counts = _counts(got, R, V)
        expected = _probs(_ROWS, temperature, top_k)
        if _fits(counts, expected):
            if (temperature, top_k) == configs[0]:
                _check_generator(sample_next, logits, got, on)
            continue
        for hint, probs in _sample_mistakes(temperature, top_k).items():
            if not torch.allclose(probs, expected) and _fits(counts, probs):
                raise Wrong(f"the frequencies of your samples do not match softmax(logits / temperature) over the "
                            f"top_k largest logits on {on}", hint)
        r, j = divmod(int(((counts - _N * expected).abs() / (_N * expected * (1 - expected)).clamp_min(1e-12).sqrt()
                           ).flatten().argmax()), V)
        raise Wrong(f"the frequencies of your samples do not match softmax(logits / temperature) over the top_k "
                    f"largest logits on {on}: in row {r}, token {j} came {int(counts[r, j]):,} times in {_N:,} "
                    f"draws, expected about {_N * float(expected[r, j]):,.0f}",
                    "each row must be sampled from softmax(logits / temperature) over its own top_k largest logits")
    on, logits, temperature, top_k = greedy[2]
    _expect_argmax(*_sample_call(sample_next, logits, temperature, top_k, 5, on), logits, temperature, top_k, on)
    return (f"greedy at temperature 0, the argmax at top_k=1, and frequencies within statistical bounds for "
            f"{len(configs)} settings of temperature and top_k")


def _expect_argmax(got: Tensor, used: bool, logits: Tensor, temperature: float, top_k, on: str) -> None:
    """Wrong unless `got` is the argmax of each row (and, at temperature 0, drawn without the generator)."""
    if torch.equal(got, logits.argmax(dim=-1)):
        if temperature == 0 and used:
            raise Wrong(f"sample_next drew random numbers from `generator` at temperature 0 on {on}",
                        "temperature 0 means greedy: the argmax of each row, with no randomness (no sampling, not "
                        "even at a tiny temperature)")
        return
    if top_k == 1 and not got.any() and logits.argmax(dim=-1).any():
        raise Wrong(f"your result is 0 in every row on {on}, expected the argmax of each row",
                    "you returned the position within the top k (always 0 when top_k=1) instead of the token "
                    "id: map it back through the indices that torch.topk returns")
    if torch.equal(got, logits.argmin(dim=-1)):
        raise Wrong(f"your result is the argmin of each row on {on}, expected the argmax",
                    "the most likely token has the LARGEST logit" + ("; torch.topk returns the largest by default"
                                                                     if top_k else ""))
    raise Wrong(f"your result is not the argmax of each row on {on}",
                "temperature 0 means greedy: the argmax of each row, with no randomness" if temperature == 0 else
                "with top_k=1 only the largest logit survives, so the sample must be the argmax of each row")


def _check_generator(sample_next, logits: Tensor, first: Tensor, on: str) -> None:
    """The same generator seed gives the same samples whatever the global generators; another seed others."""
    again, _ = _sample_call(sample_next, logits, 1.0, None, 7, on, seed=1)
    if not torch.equal(again, first):
        raise Wrong("two calls with generators seeded alike (torch.Generator().manual_seed(7)) gave different "
                    "samples when the global random generator was in another state", SAMPLE_GENERATOR_HINT)
    other, _ = _sample_call(sample_next, logits, 1.0, None, 8, on)
    if torch.equal(other, first):
        raise Wrong("generators seeded with 7 and with 8 gave exactly the same samples",
                    "use the generator argument in torch.multinomial, not a generator you create and seed yourself")
