"""Checker for exercise 8.1, BERT's masking (15% chosen; of those 80% [MASK], 10% a random id, 10% unchanged)."""
from __future__ import annotations

import torch
from torch import Tensor

from ..compare import case_seed, expect_tensor, expect_tuple, generator
from ..guard import call
from ..registry import exercise, Wrong
from ..observe import Drawn
from ._shared import expect_same_draws, is_integer_tensor, library_paths, within_window
from ...i18n import N_, _

_V, _MASK = 1000, 3  # a large vocabulary, so that a random id rarely equals the original or [MASK]
_P_CHOOSE, _P_MASK, _P_RANDOM = 0.15, 0.8, 0.1
RANDOM_IDS = N_("draw the random ids uniformly from all of [0, vocab_size) (torch.randint), with generator=generator")
GENERATOR_HINT = (N_("draw every random number from the generator you are given: pass generator=generator to "
                     "torch.rand, torch.randint, torch.bernoulli, torch.multinomial or torch.randperm"))
OVERLAP_HINT = (N_("your cases overlap: a position picked for [MASK] can also be picked for a random id (two independent "
                   "draws, one overriding the other); split the chosen positions into three disjoint groups of 80%, 10% "
                   "and 10%"))
# 80/2/18: the random id's 10% taken of the 20% left after [MASK] (disjoint groups, or a draw of 0.1 over every chosen
# position that [MASK] then overrides: both lose 80% of it)
CONDITIONAL_HINT = (N_("only about 2% of the chosen positions got a random id: the 10% is a share of ALL the chosen "
                       "positions, so among the 20% that do not become [MASK] a random id must come with probability "
                       "0.1 / 0.2 = 0.5 (half of them random, half unchanged), not 0.1; a draw of 0.1 over every chosen "
                       "position that [MASK] then overrides loses 80% of it in the same way"))
REPEAT_HINT = (N_("the same arguments and the same generator state must give the same masks: draw every random number "
                  "anew from `generator` on each call, and keep nothing from one call to the next (no cache of draws "
                  "or results, no counter)"))
OTHER_SEED_HINT = (N_("another seed must give other masks: draw every random number from the generator argument as it "
                      "comes (without reseeding it or making a generator of your own), and keep no draws or results "
                      "from one call to the next"))
_MLM_INSTEAD = N_("write the masking yourself, from random numbers drawn with generator=generator")
# The package's masker, and transformers' masking collators: by their public names where the answer can reach them
# (see library_paths), and their masking methods (torch_mask_tokens, numpy_mask_tokens, ...) by a pattern, for a
# collator made before the check. The pattern names only those methods, never the module's import or its helpers.
MLM_FORBIDDEN = [("attnbook.data.mlm_mask", _MLM_INSTEAD),
                 ("transformers.data.data_collator.*_mask_tokens", _MLM_INSTEAD)]
_COLLATORS = [(f"{where}.{name}", "transformers.data.data_collator", name)
              for name in ("DataCollatorForLanguageModeling", "DataCollatorForWholeWordMask")
              for where in ("transformers", "transformers.data.data_collator")]


def mlm_forbidden(fn) -> list[tuple[str, str]]:
    """What 8.1 forbids, for the learner's function `fn`."""
    return MLM_FORBIDDEN + [(path, _MLM_INSTEAD) for path in library_paths(fn, _COLLATORS)]


INDEPENDENT_HINT = (N_("choose each position independently with probability 0.15, with a random number of its own (not "
                       "one per row or per column, and not a fixed number of positions): the number chosen then varies "
                       "from row to row and from call to call like a binomial count"))


def _ids(shape: tuple[int, int], low: int, high: int, seed: int) -> Tensor:
    """Random ids in [low, high): new ones on every pass of the check."""
    return torch.randint(low, high, shape, generator=generator(seed))


def _mlm_call(mlm_mask, ids: Tensor, mask_id: int, vocab_size: int, gen_seed: int, on: str, seed: int = 0):
    """Call the learner's mlm_mask and return (masked_ids, labels) after checking their types and shapes. The
    generator is seeded with case_seed(gen_seed): new draws on every pass of the check."""
    gen_seed = case_seed(gen_seed)
    generator_ = torch.Generator().manual_seed(gen_seed)
    got, used = call(mlm_mask, ids, mask_id, vocab_size, generator_, what="mlm_mask", on=on, forbid=mlm_forbidden,
                     seed=seed, explain=_mlm_error_hint, observe=Drawn(3, gen_seed))
    if not used:  # the generator's state is unchanged: the answer used other randomness
        raise Wrong(_("{what} drew no random number from `generator` on {on} (its state is unchanged after the "
                      "call)", what="mlm_mask", on=on), GENERATOR_HINT)
    if isinstance(got, (tuple, list)) and len(got) == 3:
        raise Wrong(_("mlm_mask returned 3 values on {on}, expected 2: (masked_ids, labels)", on=on),
                    _("return only masked_ids and labels (the package's mlm_mask also returns the chosen positions; "
                      "this exercise does not)"))
    masked, labels = expect_tuple(got, ("masked_ids", "labels"), "mlm_mask", on)
    if (isinstance(masked, Tensor) and isinstance(labels, Tensor) and bool((masked == -100).any())
            and not bool((labels == -100).any())):
        raise Wrong(_("the first tensor you return holds -100s on {on} and the second none: they look swapped",
                      on=on),
                    _("return (masked_ids, labels) in this order: the masked ids first, the labels (-100 where not "
                      "chosen) second"))
    for name, t, item in (("masked_ids", masked, N_("{name} (the first item you return)")),
                          ("labels", labels, N_("{name} (the second item you return)"))):
        t = expect_tensor(t, what=_(item, name=name), on=on, finite=False)
        if tuple(t.shape) != tuple(ids.shape):
            raise Wrong(_("{name} has shape {tuple_t_shape} on {on}, expected the shape of ids {tuple_ids_shape}",
                          name=name, tuple_t_shape=tuple(t.shape), on=on, tuple_ids_shape=tuple(ids.shape)),
                        _("keep one entry per position of ids: build the result with torch.where or masked_fill "
                          "rather than by indexing, which flattens"))
        if t.dtype != ids.dtype:
            raise Wrong(_("{name} has dtype {dtype} on {on}, expected {dtype2}, the dtype of ids",
                          name=name, dtype=t.dtype, on=on, dtype2=ids.dtype),
                        _("token ids are integers, and F.cross_entropy takes int64 (torch.long) targets: build the "
                          "result from ids (torch.where, masked_fill) and keep the random ids of torch.randint, int64")
                        if is_integer_tensor(t) else _("token ids are integers: build the result from ids (torch.where, "
                                                       "masked_fill) and keep the random ids of torch.randint"))
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
            raise Wrong(_("labels has no -100 on {on}; {zeros_n:.0%} of its entries are 0",
                          on=on, zeros_n=zeros / n),
                        _("positions that are not chosen must be labelled -100, the ignore_index of F.cross_entropy "
                          "(0 is the id of a real token, [PAD] in the chapter, and would be trained on)"))
        if torch.equal(labels, ids):
            raise Wrong(_("labels equals ids at every position on {on}", on=on),
                        _("label only the chosen positions: the original id where chosen, -100 everywhere else, so "
                          "that the loss is computed at the chosen 15% only"))
        if not chosen.any():
            raise Wrong(_("every label is -100 on {on}: no position was chosen", on=on),
                        _("choose each position with probability 0.15 and label it with its original id"))
        raise Wrong(_("labels has no -100 on {on}: every position is labelled", on=on),
                    _("label only the chosen positions: the original id where chosen, -100 everywhere else"))
    if not torch.equal(labels[chosen], ids[chosen]):
        if torch.equal(labels[chosen], masked[chosen]):
            raise Wrong(_("labels holds the masked ids at the chosen positions on {on}", on=on),
                        _("the label of a chosen position is its ORIGINAL id (what the model must recover), not "
                          "[MASK] or the random id that replaced it"))
        raise Wrong(_("labels holds ids other than the original ones at chosen positions on {on}", on=on),
                    _("at a chosen position the label is ids at that position; elsewhere it is -100"))
    changed = masked != ids
    if changed.any() and not (changed & chosen).any():
        raise Wrong(_("every position that you changed is labelled -100 on {on}, and every other one holds its id",
                      on=on),
                    _("your labels are inverted: a chosen position (one that may change) holds its original id, and "
                      "-100 marks the positions that were NOT chosen"))
    if (changed & ~chosen).any():
        share = float((changed & ~chosen).sum()) / max(1, int((~chosen).sum()))
        if int((~chosen).sum()) < 40:  # too few positions to tell the two mistakes apart by their share
            hint = _("a position that changed must have a label: label every chosen position, also those that got a "
                     "random id or kept their own; and only chosen positions may change: apply the 80/10/10 split to "
                     "the chosen positions only")
        elif share < 0.1:  # a few of the unlabelled changed: chosen ones (random ids) left unlabelled
            hint = _("label every chosen position, also those that got a random id or kept their own: a position "
                     "that changed must have a label")
        else:  # most of them changed: the split was applied to every position
            hint = _("only chosen positions may change: apply the 80/10/10 split to the chosen positions only")
        raise Wrong(_("masked_ids differs from ids at {share:.1%} of the positions labelled -100 on {on}",
                      share=share, on=on), hint)
    if int(masked.min()) < 0 or int(masked.max()) >= vocab_size:
        raise Wrong(_("masked_ids holds values in [{int_masked_min}, {int_masked_max}] on {on}, outside [0, "
                      "vocab_size={vocab_size})",
                      int_masked_min=int(masked.min()), int_masked_max=int(masked.max()), on=on, vocab_size=vocab_size),
                    RANDOM_IDS)
    k, to_mask = int(chosen.sum()), int((masked[chosen] == mask_id).sum())
    if k >= 200 and to_mask < k / 2:  # a right answer: probability below 1e-19
        replaced = masked[chosen & changed & (masked != mask_id)]
        mode = int(replaced.mode().values) if replaced.numel() else -1
        share = int((replaced == mode).sum()) / k
        if share > 0.5:
            raise Wrong(_("{to_mask_k:.1%} of the {k:,} chosen positions hold mask_id={mask_id} on {on}, and "
                          "{share:.1%} hold {mode}",
                          to_mask_k=to_mask / k, k=k, mask_id=mask_id, on=on, share=share,
                          mode=mode), _("your [MASK] ignores the mask_id argument: use mask_id itself, "
                                        "whatever its value (it is not the same in every call)"))
    return chosen


def _check_rate(ids: Tensor, masked: Tensor, chosen: Tensor, mask_id: int, on: str) -> None:
    """15% of the positions chosen (one window on the count), with a hint for the known ways to miss it."""
    n, k = ids.numel(), int(chosen.sum())
    if within_window(k, n, _P_CHOOSE):
        return
    known = [  # (the share a mistake chooses, whether the masks confirm it, its hint)
        (_P_CHOOSE * _P_MASK, bool((masked[chosen] == mask_id).all()),
         _("you labelled only the positions that became [MASK]: label every chosen position, also those that got a "
           "random id or kept their own")),
        (_P_CHOOSE * (_P_MASK + _P_RANDOM), bool((masked[chosen] != ids[chosen]).all()),
         _("you labelled only the positions that changed: label every chosen position, also the 10% that keep their "
           "id")),
        (1 - _P_CHOOSE, True, _("your choice is inverted: 15% of the positions are chosen (labelled), 85% are "
                                "labelled -100"))]
    hint = next((hint for p, confirmed, hint in known if confirmed and within_window(k, n, p)),
                _("choose each position independently with probability 0.15"))
    raise Wrong(_("{share:.1%} of the positions are chosen (labelled) on {on}, expected about 15%", share=k / n,
                  on=on), hint)


def _check_proportions(ids: Tensor, masked: Tensor, chosen: Tensor, on: str) -> None:
    """15% chosen; of those 80% [MASK], 10% another id, 10% unchanged (random ids that hit the original count as
    unchanged); the random ids spread over the whole vocabulary."""
    k = int(chosen.sum())
    # Independent choices make every row (and column) differ: equal rows or all-or-nothing rows have probability
    # below 1e-30 here.
    per_row = chosen.sum(dim=1)  # (rows,): equal counts in all 200 rows have probability below 0.06^199
    for what, bad in ((_("the same positions are chosen in every row"), (chosen == chosen[:1]).all()),
                      (_("each row is chosen entirely or not at all"), (chosen.all(dim=1) | ~chosen.any(dim=1)).all()),
                      (_("every row has exactly {int_per_row_0} chosen positions",
                         int_per_row_0=int(per_row[0])), (per_row == per_row[0]).all())):
        if bool(bad):
            raise Wrong(_("{what} on {on}", what=what, on=on), INDEPENDENT_HINT)
    _check_rate(ids, masked, chosen, _MASK, on)
    to_mask = int((masked[chosen] == _MASK).sum())
    same = int((masked[chosen] == ids[chosen]).sum())
    got = (to_mask, same, k - to_mask - same)  # [MASK], unchanged, another id

    def observed(p_mask: float, p_random: float, p_keep: float) -> tuple[float, float, float]:
        """Expected shares of [MASK], unchanged, another id: a random id is [MASK] or the original w.p. 1/V each."""
        return p_mask + p_random / _V, p_keep + p_random / _V, p_random * (_V - 2) / _V

    if not all(within_window(c, k, p) for c, p in zip(got, observed(_P_MASK, _P_RANDOM, 1 - _P_MASK - _P_RANDOM))):
        shares = _("{got_0_k:.1%} [MASK], {got_2_k:.1%} another id, {got_1_k:.1%} unchanged",
                   got_0_k=got[0] / k, got_2_k=got[2] / k, got_1_k=got[1] / k)
        known = [((1.0, 0.0, 0.0), _("every chosen position became [MASK]: replace 80% of them by [MASK], 10% by a "
                                     "random id, and leave 10% unchanged")),
                 ((0.8, 0.0, 0.2), _("no chosen position got a random id: 10% of them must get a random id")),
                 ((0.8, 0.2, 0.0), _("no chosen position kept its id: 10% of them must stay unchanged (they are "
                                     "still labelled, so the model learns that any token may be wrong)")),
                 ((0.1, 0.8, 0.1), _("the split is the wrong way round: 80% of the chosen positions become [MASK], "
                                     "10% a random id")),
                 ((0.1, 0.1, 0.8), _("the split is the wrong way round: 80% of the chosen positions become [MASK], "
                                     "10% stay unchanged")),
                 ((0.72, 0.1, 0.18), OVERLAP_HINT), ((0.8, 0.02, 0.18), CONDITIONAL_HINT)]
        hint = next((hint for actions, hint in known
                     if all(within_window(c, k, p) for c, p in zip(got, observed(*actions)))),
                    _("split the chosen positions into three disjoint groups with probabilities 0.8 ([MASK]), 0.1 "
                      "(a random id) and 0.1 (unchanged)"))
        raise Wrong(_("of the chosen positions on {on}: {shares}; expected 80%, 10%, 10%", on=on, shares=shares),
                    hint)
    replaced = masked[chosen & (masked != ids) & (masked != _MASK)].double()  # (other,) the random ids
    m = replaced.numel()
    low, high = int((replaced < _V / 2).sum()), int((replaced >= 0.9 * _V).sum())  # uniform: half, a tenth
    if m and not (within_window(low, m, 0.5) and within_window(high, m, 0.1)):
        raise Wrong(_("the random ids on {on} lie in [{int_replaced_min}, {int_replaced_max}], {low_m:.0%} of "
                      "them below {v_2}; ids drawn uniformly from [0, vocab_size={_V}) spread over the whole "
                      "range, half of them below the middle",
                      on=on, int_replaced_min=int(replaced.min()), int_replaced_max=int(replaced.max()),
                      low_m=low / m, v_2=_V // 2, _V=_V), RANDOM_IDS)


SPECIAL_IDS = (0, 1, 2, 3)  # the special tokens of the chapter's vocabulary: [PAD], [BOS], [EOS], [MASK]
POSITIONS_SHAPE = (800, 25)  # (rows, positions) of the case where every position and every id is counted


def _positions_case() -> tuple[Tensor, int, list[int]]:
    """(ids, mask_id, the ids it holds) of the case where every position and every id may be chosen: ids of shape
    POSITIONS_SHAPE drawn uniformly from the special ids 0..3, mask_id (drawn from [4, 1000)) and five other ids, so
    that each id fills about 2,000 positions and each position (column) has 800 rows; new ones on every pass."""
    g = generator(812)
    values = list(SPECIAL_IDS)
    while len(values) < len(SPECIAL_IDS) + 6:
        v = int(torch.randint(len(SPECIAL_IDS), _V, (), generator=g))
        if v not in values:
            values.append(v)
    mask_id = values[len(SPECIAL_IDS)]
    ids = torch.tensor(values)[torch.randint(len(values), POSITIONS_SHAPE, generator=g)]
    return ids, mask_id, sorted(values)


def _check_every_position(ids: Tensor, chosen: Tensor, mask_id: int, on: str) -> None:
    """Each position (column) and each id is chosen at the rate 0.15: one window per column (800 rows) and per id
    (about 2,000 positions). A hint names what was never chosen only when the counts show exactly that."""
    rows, T = ids.shape
    per_column = chosen.sum(dim=0)  # (T,)
    bad = [j for j in range(T) if not within_window(int(per_column[j]), rows, _P_CHOOSE)]
    if bad:
        never = [j for j in bad if int(per_column[j]) == 0]
        j = bad[0]
        said = _("position {j} is chosen in {share:.1%} of the {rows} rows on {on}, expected about 15%",
                 j=j, share=int(per_column[j]) / rows, rows=rows, on=on)
        if never == bad == [0]:
            raise Wrong(said, _("every position may be chosen, the first one too: there is no [CLS] token to skip "
                                "here"))
        if never == bad == [0, T - 1]:
            raise Wrong(said, _("every position may be chosen, the first and the last too: there are no [CLS] or "
                                "[SEP] tokens to skip here"))
        raise Wrong(said, _("choose each position independently with probability 0.15, whatever its place in the "
                            "row"))
    values = ids.unique().tolist()
    counts = {v: (int(chosen[ids == v].sum()), int((ids == v).sum())) for v in values}
    bad = [v for v in values if not within_window(counts[v][0], counts[v][1], _P_CHOOSE)]
    if bad:
        v = mask_id if mask_id in bad else bad[0]
        never = [u for u in bad if counts[u][0] == 0]
        said = _("positions holding id {v} are chosen {share:.1%} of the time on {on}, expected about 15%",
                 v=v, share=counts[v][0] / counts[v][1], on=on)
        if never == bad == [mask_id]:
            raise Wrong(said, _("a position whose id is already mask_id may be chosen too: choose every position "
                                "with probability 0.15, whatever its id"))
        if never == bad:
            raise Wrong(said, _("positions holding the ids {listed} are never chosen: every position may be chosen, "
                                "whatever its id (there are no special tokens to skip here)",
                                listed=", ".join(map(str, never))))
        raise Wrong(said, _("choose every position with probability 0.15, whatever its id"))


def _check_random_ids(ids: Tensor, masked: Tensor, chosen: Tensor, mask_id: int, vocab_size: int, on: str) -> None:
    """With a small vocabulary, every id in [0, vocab_size) is drawn as a random id with probability 1/vocab_size:
    also 0, vocab_size - 1, ids absent from the batch, mask_id and the original id (vocab_size + 1 windows)."""
    k = int(chosen.sum())
    p_each = _P_RANDOM / vocab_size
    where = (_("among the {k:,} chosen positions on {on}, where each id in [0, {vocab_size}) should come as the "
               "random id 10% x 1/{vocab_size} = {p_each:.1%} of the time",
               k=k, on=on, vocab_size=vocab_size, p_each=p_each))
    present = set(ids.unique().tolist())
    shares, failed = {}, []  # id -> share among the chosen positions not holding it; the ids outside their window
    for j in range(vocab_size):
        if j == mask_id:
            continue
        others = chosen & (ids != j)  # a chosen position not holding j shows j only through a random id
        n, count = int(others.sum()), int((masked[others] == j).sum())
        shares[j] = count / max(n, 1)
        if not within_window(count, n, p_each):
            failed.append(j)
    same = int((masked[chosen] == ids[chosen]).sum())
    to_mask = int((masked[chosen] == mask_id).sum())
    same_ok = within_window(same, k, 1 - _P_MASK - _P_RANDOM + p_each)
    mask_ok = within_window(to_mask, k, _P_MASK + p_each)
    rare = [j for j in failed if shares[j] < p_each]
    below = [j for j in range(max(rare, default=0) + 1) if j != mask_id]  # every id from 0 up to the largest rare one
    if rare and (rare == below or rare == [vocab_size - 1]):  # a lower bound above 0, or an upper bound too low
        j = rare[0]
        raise Wrong(_("id {j} replaced a chosen position other than its own {shares_j:.2%} of the time {where}",
                      j=j, shares_j=shares[j], where=where),
                    _("every id from 0 to vocab_size - 1 can be drawn: the lower bound is 0 (also the special ids), "
                      "and torch.randint's upper bound, vocab_size, is exclusive"))
    absent = [j for j in range(vocab_size) if j not in present and j != mask_id]
    if rare and rare == absent:  # exactly the ids not in the batch are never drawn: a pool of the batch's ids
        j = rare[0]
        raise Wrong(_("id {j}, which is not in the batch, replaced a chosen position {shares_j:.2%} of the "
                      "time {where}", j=j, shares_j=shares[j], where=where),
                    _("draw random ids from the whole vocabulary, not from the tokens in the batch"))
    if not same_ok and same < k * (1 - _P_MASK - _P_RANDOM + p_each):
        raise Wrong(_("{same_k:.1%} of the chosen positions kept their id {where}; expected 10% unchanged + "
                      "{p_each:.1%} that drew their own id", same_k=same / k, where=where, p_each=p_each),
                    _("a random id may equal the original one (probability 1/vocab_size): keep it, without shifting "
                      "or redrawing it"))
    if not mask_ok and to_mask < k * (_P_MASK + p_each):
        raise Wrong(_("{to_mask_k:.1%} of the chosen positions hold mask_id {where}; expected 80% [MASK] + "
                      "{p_each:.1%} that drew mask_id as their random id",
                      to_mask_k=to_mask / k, where=where, p_each=p_each),
                    _("a random id may be mask_id too: draw it from all of [0, vocab_size), without shifting or "
                      "redrawing it"))
    if failed or not (same_ok and mask_ok):
        detail = (_("id {failed_0} replaced a chosen position other than its own {shares_failed_0:.2%} of the "
                    "time", failed_0=failed[0], shares_failed_0=shares[failed[0]])
                  if failed else _("{same_k:.1%} kept their id and {to_mask_k:.1%} hold mask_id",
                                   same_k=same / k, to_mask_k=to_mask / k))
        raise Wrong(_("{detail} {where}", detail=detail, where=where), RANDOM_IDS)


def _mlm_error_hint(message: str) -> str | None:
    if "random_ expects 'from' to be less than 'to'" in message:
        return _("draw random ids from the whole vocabulary, 0 included: ") + _(RANDOM_IDS)
    return None


@exercise("8.1", "BERT's masking, 80/10/10", answer_name="mlm_mask", section="Masked language modelling (BERT)",
          references=("attnbook.data.mlm_mask",))
def check_mlm_mask(mlm_mask) -> str:
    """mlm_mask(ids, mask_id, vocab_size, generator) -> (masked_ids, labels) with BERT's 15% and 80/10/10."""
    # structure first, on small inputs that are easy to read
    small = [
        (_("ids of shape (2, 8) with vocab_size=1000, mask_id=3"), _ids((2, 8), 4, _V, 801), _MASK, _V),
        (_("a batch of 1: ids of shape (1, 5)"), _ids((1, 5), 4, _V, 802), _MASK, _V),
        (_("ids of shape (64, 30) with a small vocabulary: vocab_size=6, mask_id=5"), _ids((64, 30), 0, 5, 803), 5, 6),
    ]
    counts = []  # (chosen, positions) per call
    for on, ids, mask_id, vocab_size in small:
        masked, labels = _mlm_call(mlm_mask, ids, mask_id, vocab_size, 11, on)
        counts.append((int(_check_structure(ids, masked, labels, mask_id, vocab_size, on).sum()), ids.numel()))
    # the proportions, on 100,000 positions
    on = _("ids of shape (200, 500) with vocab_size=1000, mask_id=3")
    ids = _ids((200, 500), 4, _V, 810)  # never the [MASK] id 3
    masked, labels = _mlm_call(mlm_mask, ids, _MASK, _V, 1234, on)
    chosen = _check_structure(ids, masked, labels, _MASK, _V, on)
    _check_proportions(ids, masked, chosen, on)
    # the generator: the same seed, whatever the global generators; another seed, another mask
    expect_same_draws(
        lambda seed: _mlm_call(mlm_mask, ids, _MASK, _V, 1234, on, seed=seed),
        lambda again: torch.equal(again[0], masked) and torch.equal(again[1], labels), case_seed(1234),
        (N_("two calls with generators seeded alike (torch.Generator().manual_seed({seed})) gave different masks "
            "when the global random generator was in another state, and the same masks when it was in the same "
            "state"), GENERATOR_HINT),
        (N_("three calls with the same ids and generators seeded alike (torch.Generator().manual_seed({seed})) gave "
            "different masks, even the first and the third, made with the global random generators in the same "
            "state too"), REPEAT_HINT))
    # Another seed, other positions: two independent choices of 15% of 100,000 positions coincide with probability
    # (0.15^2 + 0.85^2)^100,000, below 1e-12,000 (an answer that keeps its draws from an earlier call keeps them).
    other = _mlm_call(mlm_mask, ids, _MASK, _V, 4321, on)
    if torch.equal(other[1], labels):
        said = (_("generators seeded with {seed} and with {other} gave exactly the same masks",
                  seed=case_seed(1234), other=case_seed(4321)) if torch.equal(other[0], masked) else
                _("generators seeded with {seed} and with {other} chose exactly the same positions",
                  seed=case_seed(1234), other=case_seed(4321)))
        raise Wrong(said, OTHER_SEED_HINT)
    # every position and every id may be chosen: the first and last positions, mask_id, the chapter's special ids
    ids, mask_id, values = _positions_case()
    on = _("ids of shape {shape} holding the ids {listed}, with vocab_size=1000, mask_id={mask_id}",
           shape=tuple(ids.shape), listed=", ".join(map(str, values)), mask_id=mask_id)
    masked_p, labels_p = _mlm_call(mlm_mask, ids, mask_id, _V, 812, on)
    _check_every_position(ids, _check_structure(ids, masked_p, labels_p, mask_id, _V, on), mask_id, on)
    # the random ids, with a vocabulary of 5 and ids only 0 and 1: every id must come, 0, 3 and 4 (not in the
    # batch), mask_id 2 and the original included (300,000 positions, so that 1/5 of the 10% shows)
    on = _("ids of shape (600, 500) holding only 0 and 1, with vocab_size=5, mask_id=2")
    ids = _ids((600, 500), 0, 2, 811)
    masked, labels = _mlm_call(mlm_mask, ids, 2, 5, 99, on)
    chosen_small = _check_structure(ids, masked, labels, 2, 5, on)
    _check_rate(ids, masked, chosen_small, 2, on)
    _check_random_ids(ids, masked, chosen_small, 2, 5, on)
    # A binomial count hits its mean exactly with probability about 1 / sqrt(2 pi n p (1 - p)): 0.026, 0.0035 (twice)
    # and 0.002 here, all four together below 7e-10 for a right answer.
    counts = [counts[2], (int(chosen.sum()), chosen.numel()), (int((other[1] != -100).sum()), chosen.numel()),
              (int(chosen_small.sum()), chosen_small.numel())]
    if all(k == round(_P_CHOOSE * n) for k, n in counts):
        raise Wrong(_("exactly 15% of the positions are chosen in every call: ") + ", ".join(
            _("{k:,} of {n:,}", k=k, n=n) for k, n in counts), INDEPENDENT_HINT)
    return (_("15% chosen and 80/10/10 within statistical bounds on 100,000 positions; random ids uniform over the "
              "whole vocabulary; labels, unchosen positions and the generator are right"))
