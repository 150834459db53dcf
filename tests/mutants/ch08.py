"""Chapter 8 (BERT vs GPT): learner answers to exercises 8.1-8.4."""
from __future__ import annotations

import functools
import importlib
import math

import torch
import torch.nn.functional as F

import attnbook.corpus as _corpus
import attnbook.data as _data
import attnbook.models as _models
import attnbook.models.gpt as _gpt
from mutants import RIGHT, WRONG, fresh_import as _fresh, function_copy as _copy, right, table, wrong


# ----------------------------------------------------------------------------------------------------------------
# 8.1  mlm_mask(ids, mask_id, vocab_size, generator) -> (masked_ids, labels)
# ----------------------------------------------------------------------------------------------------------------

_COMPARE = {"<": torch.lt, "<=": torch.le, ">": torch.gt}


def mm(*, rate=0.15, compare="<", choose=None, skip=None, split=(0.8, 0.1), on_all=False,
       ids_range=lambda vocab_size: (0, vocab_size), random_ids="uniform", rng="given", mask_as=None,
       labels="chosen", ignore=-100, finish=None):
    """8.1's learner template: three draws (the chosen positions, one uniform number r per position for the 80/10/10
    split, the random ids) and torch.where, with the named mistakes switched on (the defaults: a right answer).
    Knobs: the choice (`rate`, `compare` of a uniform number with it, or `choose(ids, g)`; `skip(ids, mask_id)`:
    positions never chosen), `split` (the shares of [MASK] and of a random id), `on_all` (the split over every
    position), `ids_range(vocab_size)` -> the randint bounds, `random_ids` ("uniform", "shuffled" ids of the batch,
    "not the original", "not mask_id", "batch ids": the distinct ids), `rng` (where the draws come from: "given",
    "global", "global ids" (the random ids only), "reseed global", "own" generator seeded 0, "reseed given"),
    `mask_as` (a fixed [MASK] id), `labels` ("chosen", "everywhere", "inverted", "masked", "changed", "mask only")
    with `ignore` (the label of the others), `finish(ids, masked, labels, chosen)` -> what is returned."""
    def mlm_mask(ids, mask_id, vocab_size, generator):
        g = torch.Generator().manual_seed(0) if rng == "own" else generator
        if rng == "reseed given":
            generator.manual_seed(0)
        if rng == "reseed global":
            torch.manual_seed(generator.initial_seed())
        g_choice = None if rng in ("global", "reseed global") else g  # None: the global random generator
        g_ids = None if rng in ("global", "global ids", "reseed global") else g
        if choose is None:
            chosen = _COMPARE[compare](torch.rand(ids.shape, generator=g_choice), rate)
        else:
            chosen = choose(ids, g_choice)
        if skip is not None:
            chosen = chosen & ~skip(ids, mask_id)
        r = torch.rand(ids.shape, generator=g_choice)
        low, high = ids_range(vocab_size)
        if random_ids == "uniform":
            random = torch.randint(low, high, ids.shape, generator=g_ids)
        elif random_ids == "shuffled":
            flat = ids.flatten()
            random = flat[torch.randperm(flat.numel(), generator=g_ids)].reshape(ids.shape)
        elif random_ids == "not the original":
            random = (ids + torch.randint(1, vocab_size, ids.shape, generator=g_ids)) % vocab_size
        elif random_ids == "not mask_id":
            random = torch.randint(vocab_size, ids.shape, generator=g_ids)
            random = torch.where(random == mask_id, (random + 1) % vocab_size, random)
        else:  # "batch ids"
            pool = ids.unique()
            random = pool[torch.randint(pool.numel(), ids.shape, generator=g_ids)]
        where = torch.ones_like(chosen) if on_all else chosen
        to_mask = where & (r < split[0])
        masked = torch.where(to_mask, mask_id if mask_as is None else mask_as, ids)
        masked = torch.where(where & (r >= split[0]) & (r < split[0] + split[1]), random, masked)
        if labels == "everywhere":
            out = ids.clone()
        elif labels == "inverted":
            out = torch.where(chosen, -100, ids)
        elif labels == "masked":
            out = torch.where(chosen, masked, -100)
        else:
            labelled = {"chosen": chosen, "changed": chosen & (masked != ids), "mask only": to_mask}[labels]
            out = torch.where(labelled, ids, ignore)
        return (masked, out) if finish is None else finish(ids, masked, out, chosen)
    return mlm_mask


def hf(random_share=0.5):
    """8.1 in Hugging Face's order, torch.bernoulli for every draw: the choice (0.15), [MASK] (0.8), then a random id
    among the chosen positions not [MASK] with probability `random_share` (right: 0.5); random ids drawn everywhere."""
    def mlm_mask(ids, mask_id, vocab_size, generator):
        chosen = torch.bernoulli(torch.full(ids.shape, 0.15), generator=generator).bool()
        replaced = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
        randomized = torch.bernoulli(torch.full(ids.shape, random_share), generator=generator).bool()
        randomized = randomized & chosen & ~replaced
        masked = ids.clone()
        masked[replaced] = mask_id
        masked[randomized] = torch.randint(vocab_size, ids.shape, generator=generator)[randomized]
        return masked, torch.where(chosen, ids, -100)
    return mlm_mask


def two_draws(order):
    """8.1 with two independent draws over the chosen positions, [MASK] with 0.8 and a random id with 0.1; `order`:
    which is written last ("mask-last", "random-last"), or "disjoint" (a random id only where [MASK] was not drawn,
    still with 0.1). All three give the wrong shares (72/10/18 or 80/2/18)."""
    def mlm_mask(ids, mask_id, vocab_size, generator):
        chosen = torch.rand(ids.shape, generator=generator) < 0.15
        to_mask = chosen & (torch.rand(ids.shape, generator=generator) < 0.8)
        to_random = chosen & (torch.rand(ids.shape, generator=generator) < 0.1)
        random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
        if order == "disjoint":
            to_random = to_random & ~to_mask
        if order == "mask-last":
            masked = torch.where(to_mask, mask_id, torch.where(to_random, random_ids, ids))
        else:
            masked = torch.where(to_random, random_ids, torch.where(to_mask, mask_id, ids))
        return masked, torch.where(chosen, ids, -100)
    return mlm_mask


def keeping_draws():
    """A new 8.1 answer that keeps the uniform numbers of its first call of each shape (drawn from generator) and
    draws the random ids anew: in a later check in the same kernel all its draws are kept."""
    kept: dict = {}

    def mlm_mask(ids, mask_id, vocab_size, generator):
        if tuple(ids.shape) not in kept:
            kept[tuple(ids.shape)] = torch.rand(ids.shape, generator=generator)
        u = kept[tuple(ids.shape)]
        random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
        masked = torch.where(u < 0.12, mask_id, ids)
        masked = torch.where((u >= 0.12) & (u < 0.135), random_ids, masked)
        return masked, torch.where(u < 0.15, ids, -100)
    mlm_mask.cache = kept  # emptied by mutants.fresh before each check, as a new kernel would start
    return mlm_mask


def _exactly_15(ids, g):
    n = ids.numel()
    chosen = torch.zeros(n, dtype=torch.bool)
    chosen[torch.randperm(n, generator=g)[:round(0.15 * n)]] = True
    return chosen.reshape(ids.shape)


def _kthvalue_per_row(ids, g):
    scores = torch.rand(ids.shape, generator=g)
    return scores <= scores.kthvalue(round(0.15 * ids.size(1)), dim=1, keepdim=True).values


def _columns(ids, *columns):
    out = torch.zeros(ids.shape, dtype=torch.bool)
    out[:, list(columns)] = True
    return out


_mm_copy = _copy(_data.mlm_mask, "mlm_mask")
_mm_fresh = _fresh(_corpus, "corpus").mlm_mask  # corpus.py defines mlm_mask (data.py re-exports it)
_mm_partial = functools.partial(_data.mlm_mask)  # a global, as a notebook cell would keep it

table("8.1", [
    ("three draws and torch.where, as in the chapter", RIGHT, mm()),
    ("torch.where with a float uniform per position compared once with 0.15 (<=, not <)", RIGHT, mm(compare="<=")),
    ("torch.bernoulli for every draw, in Hugging Face's order (0.15, 0.8, then 0.5), random ids drawn everywhere",
     RIGHT, hf()),
    # the package's own solution
    ("handed in attnbook.data.mlm_mask itself", "package's own", _data.mlm_mask),
    ("a lambda around attnbook.data.mlm_mask, keeping its first two results", "package's own",
     lambda ids, mask_id, vocab_size, generator: _data.mlm_mask(ids, mask_id, vocab_size, generator)[:2]),
    ("a types.FunctionType copy of attnbook.data.mlm_mask, first two results", "package's own",
     lambda ids, mask_id, vocab_size, generator: _mm_copy(ids, mask_id, vocab_size, generator)[:2]),
    ("mlm_mask from a second, separate import of attnbook/corpus.py, first two results", "package's own",
     lambda ids, mask_id, vocab_size, generator: _mm_fresh(ids, mask_id, vocab_size, generator)[:2]),
    ("calls a functools.partial of attnbook.data.mlm_mask kept in a global, first two results",
     "the package's own solution",
     lambda ids, mask_id, vocab_size, generator: _mm_partial(ids, mask_id, vocab_size, generator)[:2]),
    # the labels
    ("labels are the original ids everywhere (no -100 at positions not chosen)", "label only the chosen positions",
     mm(labels="everywhere")),
    ("labels inverted: -100 at the chosen positions, the id elsewhere", "your labels are inverted",
     mm(labels="inverted")),
    ("labels hold the masked ids (what the model sees), not the originals",
     "the label of a chosen position is its ORIGINAL id", mm(labels="masked")),
    ("labels only where the id changed: the 10% left unchanged get -100", "changed", mm(labels="changed")),
    ("labels only the positions that became [MASK] (the random and the unchanged ones get -100)",
     "label every chosen position, also those that got a random id", mm(labels="mask only")),
    ("splits 80/0/20 and labels only the positions that became [MASK]",
     "labelled only the positions that became [MASK]", mm(split=(0.8, 0.0), labels="mask only")),
    ("labels 0 (not -100) at the positions not chosen", "must be labelled -100", mm(ignore=0)),
    # the choice
    ("chooses with rand > 0.15 (85% of the positions)", "your choice is inverted", mm(compare=">")),
    ("chooses with probability 0.14 (a rate off by a bit)", "expected about 15%", mm(rate=0.14)),
    ("chooses with probability 0.16 (a rate off by a bit)", "expected about 15%", mm(rate=0.16)),
    ("chooses with probability 0.3 (twice the rate)", "choose each position independently with probability 0.15",
     mm(rate=0.3)),
    ("exactly round(15%) of the positions, by randperm (not each position independently)", WRONG,
     mm(choose=_exactly_15)),
    ("exactly round(15%) of each row, by a randperm per row", "independently", mm(choose=lambda ids, g: torch.stack(
        [torch.randperm(ids.size(1), generator=g) for _ in range(ids.size(0))]) < round(0.15 * ids.size(1)))),
    ("exactly round(15%) of each row, by kthvalue of uniform scores", "independently", mm(choose=_kthvalue_per_row)),
    ("the same columns chosen in every row (one uniform number per column)", "choose each position independently",
     mm(choose=lambda ids, g: (torch.rand(ids.shape[1], generator=g) < 0.15).expand(ids.shape))),
    ("one choice per row (a whole row chosen or not)", "choose each position independently",
     mm(choose=lambda ids, g: (torch.rand(ids.shape[0], 1, generator=g) < 0.15).expand(ids.shape))),
    ("never chooses position 0 (as if it held [CLS])", "the first one too",
     mm(skip=lambda ids, mask_id: _columns(ids, 0))),
    ("never chooses the first and the last position ([CLS], [SEP])", "the first and the last too",
     mm(skip=lambda ids, mask_id: _columns(ids, 0, -1))),
    ("never chooses a position whose id is mask_id ('already masked')", "already mask_id",
     mm(skip=lambda ids, mask_id: ids == mask_id)),
    ("never chooses the chapter's special ids 0..3", "no special tokens to skip",
     mm(skip=lambda ids, mask_id: ids < 4)),
    ("never chooses [PAD], [BOS], [EOS] (0, 1, 2) or mask_id", "no special tokens to skip",
     mm(skip=lambda ids, mask_id: (ids <= 2) | (ids == mask_id))),
    # the 80/10/10 split
    ("every chosen position becomes [MASK] (no 10% random, no 10% unchanged)", "every chosen position became [MASK]",
     mm(split=(1.0, 0.0))),
    ("80 and 10 swapped: 10% [MASK], 80% random", "80", mm(split=(0.1, 0.8))),
    ("splits 80/20/0: every chosen position changes, none keeps its id", "no chosen position kept its id",
     mm(split=(0.8, 0.2))),
    ("splits 80/0/20: no chosen position gets a random id", "no chosen position got a random id",
     mm(split=(0.8, 0.0))),
    ("splits 75/15/10 (the split off by a bit)", "expected 80%, 10%, 10%", mm(split=(0.75, 0.15))),
    ("splits 85/10/5 (the split off by a bit)", "expected 80%, 10%, 10%", mm(split=(0.85, 0.10))),
    ("the 80/10/10 split applied to every position, not only the chosen", "only chosen positions may change",
     mm(on_all=True)),
    ("draws a fresh uniform number for the random case among the positions not [MASK], with probability 0.1 instead of",
     "0.1 / 0.2 = 0.5", two_draws("disjoint")),
    ("two independent draws, [MASK] written over the random ids: about 80/2/18", "0.1 / 0.2 = 0.5",
     two_draws("mask-last")),
    ("two independent draws, the random ids written over [MASK]: about 72/10/18", "your cases overlap",
     two_draws("random-last")),
    ("disjoint groups, but a random id with probability 0.1 (not 0.5) among the chosen positions not [MASK]: about",
     "0.1 / 0.2 = 0.5", hf(random_share=0.1)),
    # the random ids
    ("random ids from randint(vocab_size - 1): the last id can never be drawn", "upper bound, vocab_size, is exclusive",
     mm(ids_range=lambda vocab_size: (0, vocab_size - 1))),
    ("random ids from randint(1, vocab_size): id 0 (taken for [PAD]) never drawn", "the lower bound is 0",
     mm(ids_range=lambda vocab_size: (1, vocab_size))),
    ("random ids drawn from [4, vocab_size): the special ids left out", "the lower bound is 0",
     mm(ids_range=lambda vocab_size: (4, vocab_size))),
    ("random ids from randint(10): only the first ten ids of the vocabulary",
     "draw the random ids uniformly from all of [0, vocab_size)", mm(ids_range=lambda vocab_size: (0, 10))),
    ("the 'random' token is another id of the batch (shuffled ids), not uniform over the vocabulary",
     "whole vocabulary", mm(random_ids="shuffled")),
    ("the random token is redrawn until it differs from the original id (the task allows any id)",
     "a random id may equal the original one", mm(random_ids="not the original")),
    ("the random id is shifted off mask_id (never draws [MASK] as a random id)", "may be mask_id too",
     mm(random_ids="not mask_id")),
    ("random ids drawn uniformly among the distinct ids of the batch (ids.unique())",
     "not from the tokens in the batch", mm(random_ids="batch ids")),
    ("hard-codes [MASK] as id 3 (the chapter's vocabulary) and ignores mask_id", "ignores the mask_id argument",
     mm(mask_as=3)),
    # the random generator
    ("ignores generator: draws from the global random generator", "pass generator=generator", mm(rng="global")),
    ("uses the generator for the choice but the global generator for the random ids",
     "when the global random generator was in another state", mm(rng="global ids")),
    ("reseeds the global generator from generator.initial_seed(), then draws from the global one",
     "drew no random number from `generator`", mm(rng="reseed global")),
    ("draws from a torch.Generator of its own (seeded 0 at every call), not the one it is given",
     "drew no random number from `generator`", mm(rng="own")),
    ("reseeds the generator it is given (generator.manual_seed(0)): the same mask at every call", "generator",
     mm(rng="reseed given")),
    ("keeps the uniform numbers of the first call of each shape (drawn from generator), the random ids drawn anew",
     "from one call to the next", keeping_draws()),
    # what is returned
    ("returns a list [masked, labels] instead of a tuple", "tuple",
     mm(finish=lambda ids, masked, labels, chosen: [masked, labels])),
    ("returns three things, (masked, labels, chosen), like the package's version", "return only masked_ids and labels",
     mm(finish=lambda ids, masked, labels, chosen: (masked, labels, chosen))),
    ("returns (labels, masked_ids): the two results in the wrong order", "return (masked_ids, labels) in this order",
     mm(finish=lambda ids, masked, labels, chosen: (labels, masked))),
    ("labels built with torch.full(..., -100.0): a float tensor", "dtype torch.float32",
     mm(finish=lambda ids, masked, labels, chosen: (masked, labels.float()))),
    ("labels as int32 (F.cross_entropy wants int64 targets)", "torch.int64",
     mm(finish=lambda ids, masked, labels, chosen: (masked, labels.int()))),
    ("masked ids come back as floats (torch.where with a float mask value)", "dtype",
     mm(finish=lambda ids, masked, labels, chosen: (masked.float(), labels))),
    ("writes [MASK] and the random ids into ids itself, and returns it", "in place",
     mm(finish=lambda ids, masked, labels, chosen: (ids.copy_(masked), labels))),
    ("masks, then puts the original id back wherever it changed: ids returned unchanged, with the right labels", WRONG,
     mm(finish=lambda ids, masked, labels, chosen: (torch.where(masked != ids, ids, masked), labels))),
])


@right("8.1")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """one uniform number per position: <0.12 mask, <0.135 random, <0.15 unchanged"""
    u = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(0, vocab_size, ids.shape, generator=generator)
    masked = ids.clone()
    masked[u < 0.12] = mask_id
    sel = (u >= 0.12) & (u < 0.135)
    masked[sel] = rnd[sel]
    labels = torch.full_like(ids, -100)
    labels[u < 0.15] = ids[u < 0.15]
    return masked, labels


@right("8.1")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """torch.bernoulli for the choice, torch.multinomial for the 80/10/10 action, masked_fill"""
    chosen = torch.bernoulli(torch.full(ids.shape, 0.15), generator=generator).bool()
    action = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), ids.numel(), replacement=True,
                               generator=generator).reshape(ids.shape)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator, dtype=ids.dtype)
    masked = ids.masked_fill(chosen & (action == 0), mask_id)
    masked = torch.where(chosen & (action == 1), rnd, masked)
    labels = ids.masked_fill(~chosen, -100)
    return masked, labels


@right("8.1")
def mlm_mask(ids, mask_id, vocab_size, generator, p=0.15):
    """random ids drawn only where needed, as in Hugging Face's collator; extra keyword p"""
    chosen = torch.rand(ids.shape, generator=generator) < p
    replace = chosen & (torch.rand(ids.shape, generator=generator) < 0.8)
    randomize = chosen & ~replace & (torch.rand(ids.shape, generator=generator) < 0.5)
    masked = ids.clone()
    masked[replace] = mask_id
    masked[randomize] = torch.randint(vocab_size, (int(randomize.sum()),), generator=generator, dtype=ids.dtype)
    labels = ids.clone()
    labels[~chosen] = -100
    return masked, labels


@wrong("8.1", hint="the package's own solution")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """a def wrapper that calls attnbook.data.mlm_mask"""
    from attnbook.data import mlm_mask as theirs

    masked, labels, _ = theirs(ids, mask_id, vocab_size, generator)
    return masked, labels


@wrong("8.1", hint="the task asks you to write this without transformers")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """transformers' DataCollatorForLanguageModeling.torch_mask_tokens with a minimal tokenizer"""
    from transformers import DataCollatorForLanguageModeling

    class Tok:
        mask_token, pad_token, pad_token_id = "[MASK]", "[PAD]", 0

        def __init__(self, vocab_size, mask_id):
            self.vocab_size, self.mask_token_id = vocab_size, mask_id

        def __len__(self):
            return self.vocab_size

        def get_special_tokens_mask(self, v, already_has_special_tokens=True):
            return [0] * len(v)

        def convert_tokens_to_ids(self, t):
            return self.mask_token_id

    collator = DataCollatorForLanguageModeling(Tok(vocab_size, mask_id), mlm_probability=0.15)
    collator.generator = generator
    return collator.torch_mask_tokens(ids.clone(), special_tokens_mask=torch.zeros_like(ids, dtype=torch.bool))


# ----------------------------------------------------------------------------------------------------------------
# 8.2  causal_lm_loss(logits, ids) -> 0-dim tensor
# ----------------------------------------------------------------------------------------------------------------

def _flat(logits, targets):
    """(..., V) logits and their targets flattened to (N, V) and (N,)."""
    return logits.reshape(-1, logits.size(-1)), targets.reshape(-1)


def _per_prediction(logits, ids):
    """(B, T-1): the cross-entropy of every prediction, logits[:, t] against ids[:, t + 1]."""
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")


table("8.2", [
    ("slice, reshape to (B*(T-1), V), F.cross_entropy (as in the chapter)", RIGHT,
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]))),
    ("classes moved to dim 1 with transpose(1, 2)", RIGHT,
     lambda logits, ids: F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:])),
    ("log_softmax and gather by hand", RIGHT,
     lambda logits, ids: -torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).mean()),
    ("mean over each sequence, then mean over the batch (equal lengths: the same mean)", RIGHT,
     lambda logits, ids: _per_prediction(logits, ids).mean(dim=1).mean()),
    # the shift
    ("no shift: position t scored against its own token", "no shift",
     lambda logits, ids: F.cross_entropy(*_flat(logits, ids))),
    ("shifted the wrong way: logits[:, 1:] against ids[:, :-1]", "the shift goes the wrong way",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, 1:], ids[:, :-1]))),
    ("drops the last position but scores each output against its own token (logits[:, :-1] vs ids[:, :-1])",
     "own position", lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, :-1]))),
    ("drops the first position on both sides (logits[:, 1:] vs ids[:, 1:])", "own position",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, 1:], ids[:, 1:]))),
    ("flattens first, then shifts the flat sequence (crosses from one sequence into the next)", "before shifting",
     lambda logits, ids: F.cross_entropy(logits.flatten(0, 1)[:-1], ids.flatten()[1:])),
    ("shifts by two: logits[:, :-2] against ids[:, 2:]", "exactly one position",  # off by 1 where T = 2
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-2], ids[:, 2:])) if logits.size(1) >= 3
     else F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:])) + 1.0),
    ("only the last prediction: logits[:, -2] against ids[:, -1]", "all",
     lambda logits, ids: F.cross_entropy(logits[:, -2], ids[:, -1])),
    ("only the first sequence of the batch", "only the first sequence",
     lambda logits, ids: F.cross_entropy(logits[0, :-1], ids[0, 1:])),
    # the shapes handed to F.cross_entropy
    ("(B, T-1, V) straight into F.cross_entropy: classes not in dim 1", "classes in dimension 1",
     lambda logits, ids: F.cross_entropy(logits[:, :-1], ids[:, 1:])),
    ("flattens the logits but not the targets", "flatten the logits",
     lambda logits, ids: F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:])),
    (".view(-1, V) on the sliced (non-contiguous) logits", "reshape",
     lambda logits, ids: F.cross_entropy(logits[:, :-1].view(-1, logits.size(-1)), ids[:, 1:].reshape(-1))),
    (".view(-1, V) on the sliced logits and .view(-1) on the sliced ids (no transpose or permute anywhere)",
     "after a slice",
     lambda logits, ids: F.cross_entropy(logits[:, :-1].view(-1, logits.shape[-1]), ids[:, 1:].view(-1))),
    ("flattens the logits time-major (transpose(0, 1)) but the targets batch-major", "different orders",
     lambda logits, ids: F.cross_entropy(logits[:, :-1].transpose(0, 1).reshape(-1, logits.size(-1)),
                                         ids[:, 1:].reshape(-1))),
    ("targets passed as floats (ids[:, 1:].float())", "class indices",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:].float()))),
    # the reduction
    ("reduction='sum' instead of the mean", "you summed the losses; take the mean",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]), reduction="sum")),
    ("sum divided by batch * seq instead of batch * (seq - 1)", "seq - 1",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]), reduction="sum") / ids.numel()),
    ("reduction='none' and returns the per-token losses (batch * (seq - 1),)", "one loss per prediction",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]), reduction="none")),
    ("mean over each sequence, then summed over the batch", "mean",
     lambda logits, ids: _per_prediction(logits, ids).mean(dim=1).sum()),
    ("sums each sequence's losses, then averages over the batch", "you summed over the positions",
     lambda logits, ids: _per_prediction(logits, ids).sum(dim=1).mean()),
    ("sums over the batch, then averages over the positions", "batch times the mean",
     lambda logits, ids: _per_prediction(logits, ids).sum(dim=0).mean()),
    ("the mean over the wrong axis only: per-position losses averaged over the batch, shape (T-1,)", "one number",
     lambda logits, ids: _per_prediction(logits, ids).mean(dim=0)),
    ("label_smoothing=0.1 'as in big models'", "label_smoothing",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]), label_smoothing=0.1)),
    ("ignore_index=0 ('id 0 is padding'): skips every target that happens to be 0", "ignore_index=0",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]), ignore_index=0)),
    # the softmax and the logarithm
    ("applies softmax first, then cross_entropy (softmax twice)", "applied a softmax",
     lambda logits, ids: F.cross_entropy(*_flat(logits.softmax(dim=-1)[:, :-1], ids[:, 1:]))),
    ("F.nll_loss on the raw logits (no log_softmax)", "F.nll_loss expects log-probabilities: apply log_softmax",
     lambda logits, ids: F.nll_loss(*_flat(logits[:, :-1], ids[:, 1:]))),
    ("torch.log(torch.softmax(...)): log of an underflowed probability is -inf", "log_softmax",
     lambda logits, ids: F.nll_loss(*_flat(torch.log(torch.softmax(logits[:, :-1], dim=-1)), ids[:, 1:]))),
    ("log_softmax over the positions (dim=1) instead of the vocabulary", "dim=-1",
     lambda logits, ids: F.nll_loss(*_flat(torch.log_softmax(logits, dim=1)[:, :-1], ids[:, 1:]))),
    ("the naive -log(exp / sum exp): overflows on large logits", "overflow",
     lambda logits, ids: -(logits[:, :-1].exp() / logits[:, :-1].exp().sum(dim=-1, keepdim=True))
     .gather(-1, ids[:, 1:, None]).log().mean()),
    ("returns the mean log-probability (no minus sign)", "NEGATIVE",
     lambda logits, ids: torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).mean()),
    # what is returned
    ("returns loss.item(), a Python float", "the loss tensor itself, without .item()",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:])).item()),
    ("rebuilds the loss with torch.tensor(...), cutting the graph", "no gradient",
     lambda logits, ids: torch.tensor(F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:])).item())),
    ("returns a 1-element tensor of shape (1,), not a 0-dimensional one", "0-dim",
     lambda logits, ids: F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:])).reshape(1)),
])


@right("8.2")
def causal_lm_loss(logits, ids, ignore_index=-100):
    """logsumexp minus the target logit, flatten(0, 1); an extra harmless keyword argument"""
    pred = logits[:, :-1].flatten(0, 1)  # (B*(T-1), V)
    tgt = ids[:, 1:].flatten()
    picked = pred[torch.arange(tgt.numel()), tgt]
    return (torch.logsumexp(pred, dim=-1) - picked).mean()


@right("8.2")
def causal_lm_loss(logits, ids):
    """Python loop over the positions, averaged"""
    B, T, V = logits.shape
    total = 0
    for t in range(T - 1):
        total = total + F.cross_entropy(logits[:, t], ids[:, t + 1], reduction="sum")
    return total / (B * (T - 1))


@wrong("8.2", hint="grad")
def causal_lm_loss(logits, ids):
    """computes the loss under torch.no_grad() ('it is only a number')"""
    with torch.no_grad():
        return F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]))


_LM_SEEN: dict = {}


@wrong("8.2")
def causal_lm_loss(logits, ids):
    """remembers the loss of the first input of each shape (the check's second pass has new values)"""
    key = (tuple(logits.shape), logits.dtype)
    if key not in _LM_SEEN:
        _LM_SEEN[key] = F.cross_entropy(*_flat(logits[:, :-1], ids[:, 1:]))
    return _LM_SEEN[key] + 0 * logits.sum()


@wrong("8.2", hint="the task asks you to write this without transformers.loss.loss_utils.ForCausalLMLoss")
def causal_lm_loss(logits, ids):
    """transformers' ForCausalLMLoss on the unshifted logits and ids (it shifts them itself)"""
    from transformers.loss.loss_utils import ForCausalLMLoss

    return ForCausalLMLoss(logits, ids, logits.size(-1))


# ----------------------------------------------------------------------------------------------------------------
# 8.3  sample_next(logits, temperature, top_k, generator) -> (batch,) integer ids
# ----------------------------------------------------------------------------------------------------------------

def sampler(*, greedy=lambda temperature, top_k: temperature == 0, greedy_by=torch.argmax, floor=None, dtype=None,
            round_logits=None, scale="divide", round_scaled=None, cut_first=False, in_place=False, use_top_k=True,
            none_ok=True, keep=lambda top_k, vocab: top_k, largest=True, per_row=True, fill=float("-inf"), dim=-1,
            probs="softmax", rng="given", finish=lambda ids: ids):
    """8.3's learner template: argmax at temperature 0, else logits / temperature, the logits below the top_k-th
    largest of their row set to -inf (topk, masked_fill), softmax, torch.multinomial with `generator` (the defaults: a
    right answer). Knobs: `greedy(temperature, top_k)` (when to return `greedy_by(logits)`), `floor` (of the
    temperature), `dtype` (the logits cast first), `round_logits` / `round_scaled` (a dtype the logits, or logits /
    temperature, are rounded to and back), `scale` ("divide", "none", "multiply"), `cut_first` (cut, then divide),
    `in_place` (/= and masked_fill_ on the logits), `use_top_k`, `none_ok` (False: topk(..., None) too), `keep(top_k,
    vocab)` (how many are kept), `largest` (False: the smallest), `per_row` (False: one threshold for the batch),
    `fill` (a number, or fill(scaled)), `dim` (of the softmax), `probs` ("softmax", "softmax64", "exp" (exp / sum
    without subtracting the maximum), "raw exp" (multinomial normalises), "stable exp" (the maximum subtracted),
    "logits"), `rng` ("given", "global", "reseed global", "own" (seeded 1), "categorical"), `finish(ids)`."""
    def cut(z, top_k):
        k = keep(top_k, z.size(-1))
        if per_row:
            kth = torch.topk(z, k, dim=-1, largest=largest).values[:, -1:]
        else:
            kth = torch.topk(z.flatten(), k).values[-1]
        outside = z < kth if largest else z > kth
        if callable(fill):
            return torch.where(outside, fill(z), z)
        return z.masked_fill_(outside, fill) if in_place else z.masked_fill(outside, fill)

    def sample_next(logits, temperature, top_k, generator):
        if floor is not None:
            temperature = max(temperature, floor)
        if greedy(temperature, top_k):
            return finish(greedy_by(logits, dim=-1))
        z = logits if dtype is None else logits.to(dtype)
        if round_logits is not None:
            z = z.to(round_logits).float()
        if scale == "divide" and not cut_first:
            z = z.div_(temperature) if in_place else z / temperature
        elif scale == "multiply":
            z = z * temperature
        if round_scaled is not None:
            z = z.to(round_scaled).float()
        if use_top_k and (top_k is not None or not none_ok):
            z = cut(z, top_k)
        if scale == "divide" and cut_first:
            z = z / temperature
        if rng == "categorical":
            return finish(torch.distributions.Categorical(logits=z).sample())
        if probs == "softmax":
            p = torch.softmax(z, dim=dim)
        elif probs == "softmax64":
            p = torch.softmax(z.double(), dim=dim)
        elif probs == "exp":
            e = torch.exp(z)
            p = e / e.sum(dim=-1, keepdim=True)
        elif probs == "raw exp":
            p = torch.exp(z)
        elif probs == "stable exp":
            e = torch.exp(z - z.amax(dim=-1, keepdim=True))
            p = e / e.sum(dim=-1, keepdim=True)
        else:  # "logits"
            p = z
        if rng == "reseed global":
            torch.manual_seed(generator.initial_seed())
        g = {"given": generator, "own": torch.Generator().manual_seed(1)}.get(rng)  # None: the global generator
        return finish(torch.multinomial(p, 1, generator=g).squeeze(-1))
    return sample_next


@right("8.3")
def sample_next(logits, temperature, top_k, generator):
    """softmax first, then probs ** (1 / T) (multinomial renormalises), returned as int32 ('an integer tensor')"""
    if temperature == 0:
        return logits.argmax(dim=-1).int()
    logp = torch.log_softmax(logits, dim=-1) / temperature
    if top_k is not None:
        kth = torch.topk(logp, top_k, dim=-1).values[:, -1:]
        logp = logp.masked_fill(logp < kth, float("-inf"))
    weights = torch.exp(logp - logp.amax(dim=-1, keepdim=True))
    return torch.multinomial(weights, 1, generator=generator).squeeze(-1).int()


def _imported_sampler(module):
    def sample_next(logits, temperature, top_k, generator):
        theirs = getattr(importlib.import_module(module), "sample_next")
        return theirs(logits, temperature, top_k, generator).squeeze(-1)
    return sample_next


_sn_copy = _copy(_gpt.sample_next, "sample_next")
_sn_fresh = _fresh(_gpt, "gpt").sample_next

table("8.3", [
    ("topk threshold and masked_fill (as in the chapter)", RIGHT, sampler()),
    ("a large negative fill (-1e9) instead of -inf, exp after subtracting each row's maximum", RIGHT,
     sampler(fill=-1e9, probs="stable exp")),
    # the package's own solution
    ("handed in attnbook.models.sample_next itself", "package's own", _gpt.sample_next),
    ("a lambda around attnbook.models.sample_next, squeezed to (batch,)", "package's own",
     lambda logits, temperature, top_k, generator: _gpt.sample_next(logits, temperature, top_k, generator).squeeze(-1)),
    ("a types.FunctionType copy of attnbook.models.gpt.sample_next", "package's own",
     lambda logits, temperature, top_k, generator: _sn_copy(logits, temperature, top_k, generator).squeeze(-1)),
    ("sample_next from a second, separate import of attnbook/models/gpt.py", "package's own",
     lambda logits, temperature, top_k, generator: _sn_fresh(logits, temperature, top_k, generator).view(-1)),
    ("the package's sampler reached through the attnbook.models namespace, keyword arguments", "package's own",
     lambda logits, temperature, top_k, generator: _models.sample_next(
         logits, temperature=temperature, top_k=top_k, generator=generator).flatten()),
    ("the package's sampler fetched with importlib.import_module('attnbook.models') and getattr",
     "the package's own solution", _imported_sampler("attnbook.models")),
    ("the package's sampler fetched with importlib.import_module('attnbook.models.gpt') and getattr",
     "the package's own solution", _imported_sampler("attnbook.models.gpt")),
    # the temperature
    ("forgets to divide by the temperature", "the temperature changes nothing", sampler(scale="none")),
    ("multiplies the logits by the temperature", "you multiplied the logits by the temperature",
     sampler(scale="multiply")),
    ("no special case for temperature 0: divides by zero", "with temperature 0 return the argmax",
     sampler(greedy=lambda temperature, top_k: False)),
    ("always greedy (argmax), never samples", "temperature 0 only",
     lambda logits, temperature, top_k, generator: logits.argmax(dim=-1)),
    ("greedy picks the smallest logit (argmin)", "argmin", sampler(greedy_by=torch.argmin)),
    ("temperature 0 replaced by 1e-6 and sampled (draws random numbers instead of a plain argmax)", "temperature 0",
     sampler(floor=1e-6, probs="softmax64")),
    ("greedy below temperature 1e-3, not only at 0", "even at a tiny temperature",
     sampler(greedy=lambda temperature, top_k: temperature < 1e-3)),
    ("greedy below temperature 1e-2, not only at 0", "even at a tiny temperature",
     sampler(greedy=lambda temperature, top_k: temperature < 1e-2)),
    # the top-k cut
    ("keeps top_k + 1 logits (off by one)", "exactly", sampler(keep=lambda top_k, vocab: min(top_k + 1, vocab))),
    ("keeps top_k - 1 logits (off by one; top_k=1 keeps one)", "exactly",
     sampler(keep=lambda top_k, vocab: max(top_k - 1, 1))),
    ("keeps the top_k smallest logits (topk(..., largest=False))", "SMALLEST logits: keep the largest",
     sampler(largest=False)),
    ("the k-th largest logit of the whole batch as the threshold, not of each row", "each row keeps its own top_k",
     sampler(per_row=False)),
    ("ignores top_k: samples from the whole vocabulary", "outside the top_k", sampler(use_top_k=False)),
    ("greedy for top_k=1 (right there), but ignores any larger top_k", "outside the top_k",
     sampler(greedy=lambda temperature, top_k: temperature == 0 or top_k == 1, use_top_k=False)),
    ("does not handle top_k=None (calls topk with None)", "top_k=None", sampler(none_ok=False)),
    ("sets the logits outside the top k to 0 instead of -inf", "-inf", sampler(fill=0.0)),
    ("pushes the logits outside the top k down to the row minimum instead of -inf", "-inf",
     sampler(fill=lambda z: z.amin(dim=-1, keepdim=True))),
    ("sets the logits outside the top k to -10 ('small enough') instead of -inf", "-inf", sampler(fill=-10.0)),
    ("fills the logits outside the top k with -10 BEFORE dividing by the temperature", "-inf",
     sampler(fill=-10.0, cut_first=True)),
    ("sets the logits outside the top k to -20 (a finite number, far from -inf)", "finite fill", sampler(fill=-20.0)),
    ("fills the logits outside the top k with -100 instead of -inf", "far below 0", sampler(fill=-100.0)),
    ("fills the logits outside the top k with -1e4 ('minus infinity enough') instead of -inf", "far below 0",
     sampler(fill=-1e4)),
    # the probabilities
    ("softmax over the batch axis (dim=0)", "dim=-1", sampler(dim=0)),
    ("passes the scaled logits (-inf outside the top k) to torch.multinomial without a softmax",
     "torch.multinomial takes probabilities", sampler(probs="logits")),
    ("a softmax written out as exp / sum without subtracting the maximum (overflows at a low temperature)", "overflow",
     sampler(probs="exp")),
    ("exp in float64 without subtracting the maximum, multinomial normalises ('float64 does not overflow')",
     "overflow", sampler(dtype=torch.float64, probs="raw exp")),
    ("the logits rounded to float16 and back (.half().float()) before sampling", "the logits rounded to float16",
     sampler(round_logits=torch.float16)),
    ("the logits rounded to bfloat16 and back (.bfloat16().float()) before sampling", "the logits rounded to bfloat16",
     sampler(round_logits=torch.bfloat16)),
    ("logits / temperature rounded to float16 and back before the softmax", "logits / temperature rounded to float16",
     sampler(round_scaled=torch.float16)),
    ("logits / temperature rounded to bfloat16 (a 'memory-saving' cast) before the softmax",
     "logits / temperature rounded to bfloat16", sampler(round_scaled=torch.bfloat16)),
    # the random generator
    ("ignores generator (global random generator)", "drew no random number from `generator`", sampler(rng="global")),
    ("reseeds the global generator from generator.initial_seed(), then multinomial without generator", "generator",
     sampler(rng="reseed global")),
    ("samples with a torch.Generator of its own (seeded 1 at every call), not the one it is given",
     "drew no random number from `generator`", sampler(rng="own")),
    ("torch.distributions.Categorical (which cannot take the generator)", "generator", sampler(rng="categorical")),
    # the logits changed in place, and what is returned
    ("divides the logits in place (logits /= temperature)", "in place", sampler(in_place=True)),
    ("masks the logits outside the top k in place (masked_fill_ on logits)", "in place",
     sampler(in_place=True, cut_first=True)),
    ("returns multinomial's (batch, 1) without squeezing", ".squeeze(-1)", sampler(finish=lambda ids: ids[:, None])),
    ("returns the ids as floats", "integer", sampler(finish=lambda ids: ids.float())),
    ("returns a Python list of ids", "tensor", sampler(finish=lambda ids: ids.tolist())),
])


@right("8.3")
def sample_next(logits, temperature, top_k, generator):
    """scatter the top-k values into a -inf tensor"""
    if not temperature:
        return torch.argmax(logits, dim=1)
    scaled = logits / temperature
    if top_k is not None:
        vals, idx = scaled.topk(top_k, dim=-1)
        scaled = torch.full_like(scaled, float("-inf")).scatter(-1, idx, vals)
    return torch.multinomial(scaled.softmax(-1), num_samples=1, generator=generator)[:, 0]


@right("8.3")
def sample_next(logits, temperature, top_k, generator):
    """sample among the top-k values, then map back with gather"""
    if temperature == 0:
        return logits.max(dim=-1).indices
    scaled = logits / temperature
    k = scaled.size(-1) if top_k is None else top_k
    vals, idx = torch.topk(scaled, k, dim=-1)
    pick = torch.multinomial(F.softmax(vals, dim=-1), 1, generator=generator)  # (B, 1) index into the top k
    return idx.gather(-1, pick).squeeze(1)


@right("8.3")
def sample_next(logits, temperature, top_k, generator, min_tokens_to_keep=1):
    """sort descending and cut by rank; an extra harmless keyword argument"""
    if temperature == 0:
        return logits.argmax(-1)
    scaled = logits.clone() / temperature
    if top_k is not None:
        order = scaled.argsort(dim=-1, descending=True)
        ranks = order.argsort(dim=-1)
        scaled[ranks >= max(top_k, min_tokens_to_keep)] = float("-inf")
    probs = torch.exp(scaled - scaled.max(dim=-1, keepdim=True).values)
    probs = probs / probs.sum(dim=-1, keepdim=True)
    return torch.multinomial(probs, 1, generator=generator).view(-1)


@right("8.3")
def sample_next(logits, temperature, top_k, generator):
    """kth value by torch.kthvalue on the negated logits, softmax in float64, then multinomial"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits.double() / temperature
    if top_k is not None:
        kth = -torch.kthvalue(-scaled, top_k, dim=-1, keepdim=True).values
        scaled = torch.where(scaled >= kth, scaled, torch.full_like(scaled, -torch.inf))
    probs = torch.softmax(scaled, dim=-1)
    return torch.multinomial(probs, 1, replacement=True, generator=generator).squeeze(-1)


@right("8.3")
def sample_next(logits, temperature, top_k, generator):
    """the Gumbel-max trick with noise from generator (same distribution as the softmax sample)"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    u = torch.rand(scaled.shape, generator=generator, dtype=scaled.dtype).clamp_min(1e-20)
    return (scaled - torch.log(-torch.log(u))).argmax(dim=-1)


@wrong("8.3", hint="package's own")
def sample_next(logits, temperature, top_k, generator):
    """a def wrapper that calls attnbook.models.sample_next"""
    from attnbook.models import sample_next as theirs

    return theirs(logits, temperature, top_k, generator)[:, 0]


@wrong("8.3", hint="without transformers.TopKLogitsWarper")
def sample_next(logits, temperature, top_k, generator):
    """transformers' TopKLogitsWarper for the top-k cut"""
    from transformers import TopKLogitsWarper

    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        scaled = TopKLogitsWarper(top_k)(None, scaled)
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="uniformly")
def sample_next(logits, temperature, top_k, generator):
    """samples the top_k tokens with equal weights"""
    if temperature == 0 or top_k is None:
        return sampler()(logits, temperature, top_k, generator)
    idx = torch.topk(logits, top_k, dim=-1).indices
    pick = torch.multinomial(torch.ones_like(idx, dtype=torch.float), 1, generator=generator)
    return idx.gather(-1, pick).squeeze(-1)


@wrong("8.3", hint="position within the top k")
def sample_next(logits, temperature, top_k, generator):
    """returns the index within the top k, not the token id"""
    if temperature == 0 or top_k is None:
        return sampler()(logits, temperature, top_k, generator)
    vals = torch.topk(logits / temperature, top_k, dim=-1).values
    return torch.multinomial(torch.softmax(vals, dim=-1), 1, generator=generator).squeeze(-1)


# ----------------------------------------------------------------------------------------------------------------
# 8.4  top_p_filter(logits, p) -> logits of the same shape and dtype, -inf outside each row's nucleus
# ----------------------------------------------------------------------------------------------------------------

_OPS = {">=": torch.ge, ">": torch.gt, "<=": torch.le, "<": torch.lt}


def tp(*, score="softmax", dim=-1, descending=True, sort=True, cum="exclusive", op=">=", threshold=lambda p: p,
       shift=False, reset_first=True, roll=False, unsort="scatter", per_row=True, fill=float("-inf"),
       returns="logits", in_place=False, finish=lambda out: out):
    """8.4's learner template: probabilities (softmax over `dim`), sorted (`descending`), their cumulative sum, a
    removal mask in rank order, scattered back and filled with -inf (the defaults: a right answer, remove where the
    probability ranked above a token is >= p). Knobs: `score` ("softmax", "logits" (no softmax), "exp" (exp without
    normalising), "naive" (exp / sum, no maximum subtracted), "global" (exp(logits - logits.max()) / sum)), `dim`
    (of the softmax), `descending`, `sort` (False: the cumulative sum in the vocabulary's order), `cum`
    ("exclusive": the probability above each token; "inclusive": with the token itself), `op` (the comparison that
    removes), `threshold(p)`, `shift` (the inclusive mask moved one place right, as in the well-known snippet) with
    `reset_first` (its first entry set to keep) or `roll` (torch.roll: the first gets the last one's verdict),
    `unsort` ("scatter", "none" (the rank-order mask used on the vocabulary's order), "gather", "sorted" (the sorted
    logits returned)), `per_row` (False: one flat list of the token ids to remove, for every row, as in the snippet
    for a single row), `fill`, `returns` ("logits", "probs", "logprobs", "mask"), `in_place` (masked_fill_ on
    logits), `finish(out)`."""
    def top_p_filter(logits, p):
        if score == "softmax":
            probs = torch.softmax(logits, dim=dim)
        elif score == "naive":
            e = torch.exp(logits)
            probs = e / e.sum(dim=-1, keepdim=True)
        elif score == "global":  # stabilised with the whole tensor's maximum, not each row's
            e = torch.exp(logits - logits.max())
            probs = e / e.sum(dim=-1, keepdim=True)
        elif score == "exp":
            probs = torch.exp(logits)
        else:
            probs = logits
        if sort:
            sorted_probs, order = probs.sort(dim=-1, descending=descending)
        else:
            sorted_probs, order = probs, torch.arange(probs.size(-1)).expand(probs.shape)
        total = sorted_probs.cumsum(dim=-1)
        if cum == "exclusive":
            total = total - sorted_probs
        remove = _OPS[op](total, threshold(p))
        if roll:
            remove = remove.roll(1, dims=-1)
        elif shift:
            remove[..., 1:] = remove[..., :-1].clone()
            if reset_first:
                remove[..., 0] = False
        if unsort == "scatter":
            remove = remove.scatter(-1, order, remove)
        elif unsort == "gather":
            remove = remove.gather(-1, order)
        if not per_row:  # the snippet for one row, used on a batch: the ids removed in any row, removed in every row
            ids = order[remove] if unsort == "none" else torch.arange(logits.size(-1)).expand(logits.shape)[remove]
            remove = torch.zeros(logits.size(-1), dtype=torch.bool)
            remove[ids] = True
        base = logits.sort(dim=-1, descending=True).values if unsort == "sorted" else logits
        if returns == "mask":
            return finish(~remove)
        if returns == "probs":
            base = torch.softmax(logits, dim=-1)
        elif returns == "logprobs":
            base = torch.log_softmax(logits, dim=-1)
        out = base.masked_fill_(remove, fill) if in_place else base.masked_fill(remove, fill)
        return finish(out)
    return top_p_filter


@right("8.4")  # the first right answer (the generated entries are named after it), so registered before the table
def top_p_filter(logits, p):
    """sort descending, the probability ranked above each token, scatter the mask back (as in the chapter)"""
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
    remove = (probs.cumsum(dim=-1) - probs) >= p
    return logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


def _hf_style(logits, p):
    """transformers' way, written out: ascending order, remove where the cumulative probability is <= 1 - p"""
    sorted_logits, order = torch.sort(logits, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove = cumulative <= 1 - p
    remove[..., -1:] = False
    return logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


def _threshold_logit(logits, p):
    """count the nucleus, then cut at its smallest logit (a top-k with a k of its own per row)"""
    sorted_logits = logits.sort(dim=-1, descending=True).values
    cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    k = ((cumulative < p).sum(dim=-1, keepdim=True) + 1).clamp(max=logits.size(-1))  # the nucleus' size
    smallest = sorted_logits.gather(-1, k - 1)
    return torch.where(logits < smallest, torch.full_like(logits, float("-inf")), logits)


def _loop(logits, p):
    """a Python loop over the rows, adding probabilities until they reach p"""
    flat = logits.reshape(-1, logits.size(-1))
    out = torch.full_like(flat, float("-inf"))
    for i, row in enumerate(flat):
        probs = torch.softmax(row.double(), dim=0)
        total = 0.0
        for j in torch.argsort(probs, descending=True).tolist():
            out[i, j] = row[j]
            total += float(probs[j])
            if total >= p:
                break
    return out.reshape(logits.shape)


def _log_space(logits, p):
    """in log space: logcumsumexp of the sorted log-probabilities against log(p), in float64"""
    logp, order = torch.log_softmax(logits.double(), dim=-1).sort(dim=-1, descending=True)
    before = torch.logcumsumexp(logp, dim=-1)
    before = torch.cat([torch.full_like(before[..., :1], float("-inf")), before[..., :-1]], dim=-1)
    remove = before >= math.log(p)
    return logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


def _warper(logits, p):
    from transformers import TopPLogitsWarper

    flat = logits.reshape(-1, logits.size(-1))
    return TopPLogitsWarper(top_p=p)(None, flat).reshape(logits.shape)


def _warper_generation(logits, p):
    import transformers.generation as generation

    return generation.TopPLogitsWarper(p)(None, logits.reshape(-1, logits.size(-1))).view(logits.shape)


table("8.4", [
    ("transformers' rule written out (ascending, remove where the cumulative probability <= 1 - p)", RIGHT, _hf_style),
    ("counts the nucleus and cuts at its smallest logit", RIGHT, _threshold_logit),
    ("a Python loop over the rows, in float64", RIGHT, _loop),
    ("in log space (logcumsumexp against log p)", RIGHT, _log_space),
    ("the well-known snippet's shift, with >= (remove where the sum reaches p, move one right, keep the first)",
     RIGHT, tp(cum="inclusive", op=">=", shift=True)),
    ("in float64, cast back to the logits' dtype", RIGHT,
     lambda logits, p: tp()(logits.double(), p).to(logits.dtype)),
    # the package's own and the library's
    ("a lambda around attnbook.models.top_p_filter", "package's own", lambda logits, p: _gpt.top_p_filter(logits, p)),
    ("transformers' TopPLogitsWarper", "without transformers.TopPLogitsWarper", _warper),
    ("transformers.generation.TopPLogitsWarper, reached through the submodule", "TopPLogitsWarper", _warper_generation),
    # the boundary and the top token
    ("the well-known snippet: remove where the cumulative sum > p, shifted right, the first kept (strict at p)",
     ">= p", tp(cum="inclusive", op=">", shift=True)),
    ("removes where the probability ranked above is > p (strict)", ">= p", tp(op=">")),
    ("the snippet without the reset of the first entry (the top token goes where it alone holds more than p)",
     "most probable token must always be kept", tp(cum="inclusive", op=">", shift=True, reset_first=False)),
    ("the snippet's shift done with torch.roll (the first entry gets the last one's verdict)",
     "most probable token must always be kept", tp(cum="inclusive", op=">=", roll=True)),
    ("no shift: removes where the cumulative sum (with the token itself) reaches p, the top token not kept",
     "most probable token must always be kept", tp(cum="inclusive", op=">=")),
    ("no shift but the first kept: removes where the inclusive sum exceeds p", "crosses p",
     lambda logits, p: torch.where(torch.softmax(logits, -1) == torch.softmax(logits, -1).amax(-1, keepdim=True),
                                   logits, tp(cum="inclusive", op=">")(logits, p))),
    ("keeps one token too many (the mask shifted twice)", "one token more",
     tp(cum="exclusive", op=">=", shift=True)),
    # the order
    ("adds the probabilities up in the vocabulary's order (no sort)", "vocabulary's order", tp(sort=False)),
    ("sorts in ascending order", "DESCENDING", tp(descending=False)),
    ("transformers' rule with p where 1 - p belongs", "1 - p", lambda logits, p: _hf_style(logits, 1 - p)),
    ("the mask left in rank order, used on the vocabulary's order (no scatter)", "vocabulary's order",
     tp(unsort="none")),
    ("gather instead of scatter to put the mask back", "scatter it back", tp(unsort="gather")),
    ("returns the sorted logits, filtered", "scatter it back", tp(unsort="sorted")),
    ("the one-row snippet on a batch: one flat list of the ids to remove, removed in every row", "its own nucleus",
     tp(per_row=False)),
    # what is added up, and over which dimension
    ("softmax over the batch (dim=0)", "dim=-1", tp(dim=0)),
    ("cumulative sum of the logits themselves (no softmax)", "added up the logits", tp(score="logits")),
    ("cumulative sum of exp(logits), not normalised", "added up the logits", tp(score="exp")),
    ("exp / sum without subtracting the maximum (overflows on large logits)", "exp overflows", tp(score="naive")),
    ("exp(logits - logits.max()) / sum: the whole tensor's maximum, not each row's (a learner trial)",
     "softmax each row on its own", tp(score="global")),
    ("keeps the tokens whose own probability is >= p", "not the probability of each",
     lambda logits, p: logits.masked_fill(torch.softmax(logits, -1) < p, float("-inf"))),
    ("keeps round(p * vocab_size) tokens, as top-k", "not of the vocabulary",
     lambda logits, p: logits.masked_fill(
         logits < torch.topk(logits, max(round(p * logits.size(-1)), 1), dim=-1).values[..., -1:], float("-inf"))),
    # what is returned
    ("fills with -1e9 instead of -inf", "float('-inf')", tp(fill=-1e9)),
    ("fills with 0 instead of -inf (a learner trial)", "you set them to 0", tp(fill=0.0)),
    ("multiplies the logits by the mask of the kept tokens (a learner trial)", "you set them to 0",
     lambda logits, p: logits * tp(returns="mask")(logits, p)),
    ("fills with torch.finfo(dtype).min", "float('-inf')",
     lambda logits, p: tp(fill=torch.finfo(logits.dtype).min)(logits, p)),
    ("returns the probabilities, 0 outside the nucleus", "you returned probabilities", tp(returns="probs", fill=0.0)),
    ("returns log_softmax, -inf outside the nucleus", "log-probabilities", tp(returns="logprobs")),
    ("returns the mask of the kept tokens", "not the mask", tp(returns="mask")),
    ("fills the logits in place (masked_fill_ on logits)", "in place", tp(in_place=True)),
    ("returns float32 for float64 logits", "dtype", tp(finish=lambda out: out.float())),
    ("returns a NumPy array", WRONG, tp(finish=lambda out: out.numpy())),
    ("returns the kept logits only (a 1-D tensor)", "shape", tp(finish=lambda out: out[torch.isfinite(out)])),
])
