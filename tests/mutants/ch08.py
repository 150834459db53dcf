"""Chapter 8 (BERT vs GPT): learner answers to exercises 8.1-8.3."""
from __future__ import annotations

import functools
import importlib

import torch
import torch.nn.functional as F

import attnbook.corpus as _corpus
import attnbook.data as _data
import attnbook.models.gpt as _gpt
from mutants import fresh_import as _fresh, function_copy as _copy, right, value, wrong  # noqa: F401


# ----------------------------------------------------------------------------------------------------------------
# 8.1  mlm_mask(ids, mask_id, vocab_size, generator) -> (masked_ids, labels)
# ----------------------------------------------------------------------------------------------------------------

wrong("8.1", hint="package's own", name="handed in attnbook.data.mlm_mask itself")(_data.mlm_mask)
wrong("8.1", hint="package's own", name="a lambda around attnbook.data.mlm_mask, keeping its first two results")(
    lambda ids, mask_id, vocab_size, generator: _data.mlm_mask(ids, mask_id, vocab_size, generator)[:2])


@wrong("8.1", hint="the package's own solution")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """a def wrapper that calls attnbook.data.mlm_mask"""
    from attnbook.data import mlm_mask as theirs

    masked, labels, _ = theirs(ids, mask_id, vocab_size, generator)
    return masked, labels


_mm = _copy(_data.mlm_mask, "mlm_mask")


@wrong("8.1", hint="package's own")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """a types.FunctionType copy of attnbook.data.mlm_mask, first two results"""
    return _mm(ids, mask_id, vocab_size, generator)[:2]


_mm_fresh = _fresh(_corpus, "corpus").mlm_mask  # corpus.py defines mlm_mask (data.py re-exports it)


@wrong("8.1", hint="package's own")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """mlm_mask from a second, separate import of attnbook/corpus.py, first two results"""
    return _mm_fresh(ids, mask_id, vocab_size, generator)[:2]


def _ref(ids, mask_id, vocab_size, generator, p=0.15, mask_share=0.8, random_share=0.1, low=0, high=None):
    chosen = torch.rand(ids.shape, generator=generator) < p
    r = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(low, vocab_size if high is None else high, ids.shape, generator=generator)
    masked = torch.where(chosen & (r < mask_share), mask_id, ids)
    masked = torch.where(chosen & (r >= mask_share) & (r < mask_share + random_share), random_ids, masked)
    labels = torch.where(chosen, ids, -100)
    return masked, labels, chosen


@wrong("8.1", hint="label only the chosen positions")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """labels are the original ids everywhere (no -100 at positions not chosen)"""
    masked, _, _ = _ref(ids, mask_id, vocab_size, generator)
    return masked, ids.clone()


@wrong("8.1", hint="your labels are inverted")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """labels inverted: -100 at the chosen positions, the id elsewhere"""
    masked, _, chosen = _ref(ids, mask_id, vocab_size, generator)
    return masked, torch.where(chosen, -100, ids)


@wrong("8.1", hint="the label of a chosen position is its ORIGINAL id")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """labels hold the masked ids (what the model sees), not the originals"""
    masked, _, chosen = _ref(ids, mask_id, vocab_size, generator)
    return masked, torch.where(chosen, masked, -100)


@wrong("8.1", hint="every chosen position became [MASK]")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """every chosen position becomes [MASK] (no 10% random, no 10% unchanged)"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator, mask_share=1.0, random_share=0.0)
    return masked, labels


@wrong("8.1", hint="80")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """80 and 10 swapped: 10% [MASK], 80% random"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    r = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator)
    masked = torch.where(chosen & (r < 0.1), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.1) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="your choice is inverted")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """chooses with rand > 0.15 (85% of the positions)"""
    chosen = torch.rand(ids.shape, generator=generator) > 0.15
    r = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="0.1 / 0.2 = 0.5")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """draws a fresh uniform number for the random case among the positions not [MASK], with probability 0.1 instead of
    0.5: disjoint groups of about 80/2/18 (docstring corrected from "overlap (about 72/10/18)", which the entries of
    learner trial B cover, and hint from "random")"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    to_mask = chosen & (torch.rand(ids.shape, generator=generator) < 0.8)
    to_random = chosen & ~to_mask & (torch.rand(ids.shape, generator=generator) < 0.1)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator)
    masked = torch.where(to_mask, mask_id, ids)
    masked = torch.where(to_random, rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="upper bound, vocab_size, is exclusive")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """random ids from randint(vocab_size - 1): the last id can never be drawn"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator, high=vocab_size - 1)
    return masked, labels


@wrong("8.1", hint="the lower bound is 0")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """random ids from randint(1, vocab_size): id 0 (taken for [PAD]) never drawn"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator, low=1)
    return masked, labels


@wrong("8.1", hint="whole vocabulary")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """the 'random' token is another id of the batch (shuffled ids), not uniform over the vocabulary"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    r = torch.rand(ids.shape, generator=generator)
    flat = ids.flatten()
    rnd = flat[torch.randperm(flat.numel(), generator=generator)].reshape(ids.shape)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="a random id may equal the original one")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """the random token is redrawn until it differs from the original id (the task allows any id)"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    r = torch.rand(ids.shape, generator=generator)
    rnd = (ids + torch.randint(1, vocab_size, ids.shape, generator=generator)) % vocab_size  # never the original
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint=None)
def mlm_mask(ids, mask_id, vocab_size, generator):
    """exactly round(15%) of the positions, by randperm (not each position independently)"""
    n = ids.numel()
    k = round(0.15 * n)
    chosen = torch.zeros(n, dtype=torch.bool)
    chosen[torch.randperm(n, generator=generator)[:k]] = True
    chosen = chosen.reshape(ids.shape)
    r = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="pass generator=generator")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """ignores generator: draws from the global random generator"""
    chosen = torch.rand(ids.shape) < 0.15
    r = torch.rand(ids.shape)
    rnd = torch.randint(vocab_size, ids.shape)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="when the global random generator was in another state")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """uses the generator for the choice but the global generator for the random ids"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    r = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(vocab_size, ids.shape)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="in place")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """writes [MASK] and the random ids into ids itself, and returns it"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    r = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator)
    labels = torch.where(chosen, ids, -100)
    ids[chosen & (r < 0.8)] = mask_id
    sel = chosen & (r >= 0.8) & (r < 0.9)
    ids[sel] = rnd[sel]
    return ids, labels


@wrong("8.1", hint="tuple")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """returns a list [masked, labels] instead of a tuple"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator)
    return [masked, labels]


@wrong("8.1", hint="return only masked_ids and labels")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """returns three things, (masked, labels, chosen), like the package's version"""
    return _ref(ids, mask_id, vocab_size, generator)


@wrong("8.1", hint="dtype torch.float32")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """labels built with torch.full(..., -100.0): a float tensor"""
    masked, _, chosen = _ref(ids, mask_id, vocab_size, generator)
    labels = torch.full(ids.shape, -100.0)
    labels[chosen] = ids[chosen].float()
    return masked, labels


@wrong("8.1", hint="dtype")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """masked ids come back as floats (torch.where with a float mask value)"""
    masked, labels, _ = _ref(ids, float(mask_id), vocab_size, generator)
    return masked.float(), labels


@wrong("8.1", hint="ignores the mask_id argument")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """hard-codes [MASK] as id 3 (the chapter's vocabulary) and ignores mask_id"""
    masked, labels, _ = _ref(ids, 3, vocab_size, generator)
    return masked, labels


@wrong("8.1", hint="changed")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """labels only where the id changed: the 10% left unchanged get -100"""
    masked, _, chosen = _ref(ids, mask_id, vocab_size, generator)
    changed = chosen & (masked != ids)
    return masked, torch.where(changed, ids, -100)


@wrong("8.1", hint="may be mask_id too")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """the random id is shifted off mask_id (never draws [MASK] as a random id)"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    r = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator)
    rnd = torch.where(rnd == mask_id, (rnd + 1) % vocab_size, rnd)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="drew no random number from `generator`")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """reseeds the global generator from generator.initial_seed(), then draws from the global one"""
    torch.manual_seed(generator.initial_seed())
    chosen = torch.rand(ids.shape) < 0.15
    r = torch.rand(ids.shape)
    rnd = torch.randint(vocab_size, ids.shape)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="generator")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """reseeds the generator it is given (generator.manual_seed(0)): the same mask at every call"""
    generator.manual_seed(0)
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator)
    return masked, labels


@wrong("8.1", hint="torch.int64")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """labels as int32 (F.cross_entropy wants int64 targets)"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator)
    return masked, labels.int()


@right("8.1")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """three draws and torch.where, as in the chapter"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator)
    return masked, labels


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


@wrong("8.1", hint="no chosen position kept its id")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """splits 80/20/0: every chosen position changes, none keeps its id"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator, mask_share=0.8, random_share=0.2)
    return masked, labels


@wrong("8.1", hint="no chosen position got a random id")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """splits 80/0/20: no chosen position gets a random id"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator, random_share=0.0)
    return masked, labels


@wrong("8.1", hint="label every chosen position, also those that got a random id")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """labels only the positions that became [MASK] (the random and the unchanged ones get -100)"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    r = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator)
    to_mask = chosen & (r < 0.8)
    masked = torch.where(to_mask, mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(to_mask, ids, -100)


@wrong("8.1", hint="labelled only the positions that became [MASK]")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """splits 80/0/20 and labels only the positions that became [MASK]"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    to_mask = chosen & (torch.rand(ids.shape, generator=generator) < 0.8)
    return torch.where(to_mask, mask_id, ids), torch.where(to_mask, ids, -100)


@wrong("8.1", hint="drew no random number from `generator`")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """draws from a torch.Generator of its own (seeded 0 at every call), not the one it is given"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, torch.Generator().manual_seed(0))
    return masked, labels


@wrong("8.1", hint="draw the random ids uniformly from all of [0, vocab_size)")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """random ids from randint(10): only the first ten ids of the vocabulary"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator, high=10)
    return masked, labels


@wrong("8.1", hint="not from the tokens in the batch")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """random ids drawn uniformly among the distinct ids of the batch (ids.unique())"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    r = torch.rand(ids.shape, generator=generator)
    pool = ids.unique()
    rnd = pool[torch.randint(pool.numel(), ids.shape, generator=generator)]
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint=None)
def mlm_mask(ids, mask_id, vocab_size, generator):
    """masks, then puts the original id back wherever it changed: ids returned unchanged, with the right labels"""
    masked, labels, chosen = _ref(ids, mask_id, vocab_size, generator)
    return torch.where(masked == ids, masked, torch.where(chosen, ids, masked)), labels


_mm_partial = functools.partial(_data.mlm_mask)  # a global, as a notebook cell would keep it


@wrong("8.1", hint="the package's own solution")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """calls a functools.partial of attnbook.data.mlm_mask kept in a global, first two results"""
    return _mm_partial(ids, mask_id, vocab_size, generator)[:2]


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


@right("8.1")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """torch.bernoulli for every draw, in Hugging Face's order (0.15, 0.8, then 0.5), random ids drawn everywhere"""
    labels = ids.clone()
    chosen = torch.bernoulli(torch.full(ids.shape, 0.15), generator=generator).bool()
    labels[~chosen] = -100
    replaced = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
    out = ids.clone()
    out[replaced] = mask_id
    rand = torch.bernoulli(torch.full(ids.shape, 0.5), generator=generator).bool() & chosen & ~replaced
    out[rand] = torch.randint(vocab_size, ids.shape, generator=generator)[rand]
    return out, labels


# ----------------------------------------------------------------------------------------------------------------
# 8.2  causal_lm_loss(logits, ids) -> 0-dim tensor
# ----------------------------------------------------------------------------------------------------------------

@wrong("8.2", hint="no shift")
def causal_lm_loss(logits, ids):
    """no shift: position t scored against its own token"""
    V = logits.size(-1)
    return F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1))


@wrong("8.2", hint="the shift goes the wrong way")
def causal_lm_loss(logits, ids):
    """shifted the wrong way: logits[:, 1:] against ids[:, :-1]"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, 1:].reshape(-1, V), ids[:, :-1].reshape(-1))


@wrong("8.2", hint="classes in dimension 1")
def causal_lm_loss(logits, ids):
    """(B, T-1, V) straight into F.cross_entropy: classes not in dim 1"""
    return F.cross_entropy(logits[:, :-1], ids[:, 1:])


@wrong("8.2", hint="you summed the losses; take the mean")
def causal_lm_loss(logits, ids):
    """reduction='sum' instead of the mean"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum")


@wrong("8.2", hint="mean")
def causal_lm_loss(logits, ids):
    """mean over each sequence, then summed over the batch"""
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # (B, T-1)
    return losses.mean(dim=1).sum()


@wrong("8.2", hint="seq - 1")
def causal_lm_loss(logits, ids):
    """sum divided by batch * seq instead of batch * (seq - 1)"""
    V = logits.size(-1)
    total = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum")
    return total / ids.numel()


@wrong("8.2", hint="the loss tensor itself, without .item()")
def causal_lm_loss(logits, ids):
    """returns loss.item(), a Python float"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)).item()


@wrong("8.2", hint="applied a softmax")
def causal_lm_loss(logits, ids):
    """applies softmax first, then cross_entropy (softmax twice)"""
    V = logits.size(-1)
    probs = logits.softmax(dim=-1)
    return F.cross_entropy(probs[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


@wrong("8.2", hint="F.nll_loss expects log-probabilities: apply log_softmax")
def causal_lm_loss(logits, ids):
    """F.nll_loss on the raw logits (no log_softmax)"""
    V = logits.size(-1)
    return F.nll_loss(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


@wrong("8.2", hint="overflow")
def causal_lm_loss(logits, ids):
    """the naive -log(exp / sum exp): overflows on large logits"""
    e = logits[:, :-1].exp()
    p = e / e.sum(dim=-1, keepdim=True)
    return -p.gather(-1, ids[:, 1:, None]).log().mean()


@wrong("8.2", hint="grad")
def causal_lm_loss(logits, ids):
    """computes the loss under torch.no_grad() ('it is only a number')"""
    V = logits.size(-1)
    with torch.no_grad():
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


@wrong("8.2", hint="no gradient")
def causal_lm_loss(logits, ids):
    """rebuilds the loss with torch.tensor(...), cutting the graph"""
    V = logits.size(-1)
    return torch.tensor(F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)).item())


@wrong("8.2", hint="reshape")
def causal_lm_loss(logits, ids):
    """.view(-1, V) on the sliced (non-contiguous) logits"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].view(-1, V), ids[:, 1:].reshape(-1))


@wrong("8.2", hint="different orders")
def causal_lm_loss(logits, ids):
    """flattens the logits time-major (transpose(0, 1)) but the targets batch-major"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].transpose(0, 1).reshape(-1, V), ids[:, 1:].reshape(-1))


@wrong("8.2", hint="all")
def causal_lm_loss(logits, ids):
    """only the last prediction: logits[:, -2] against ids[:, -1]"""
    return F.cross_entropy(logits[:, -2], ids[:, -1])


@wrong("8.2", hint="one loss per prediction")
def causal_lm_loss(logits, ids):
    """reduction='none' and returns the per-token losses (batch * (seq - 1),)"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="none")


@wrong("8.2", hint="label_smoothing")
def causal_lm_loss(logits, ids):
    """label_smoothing=0.1 'as in big models'"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), label_smoothing=0.1)


@wrong("8.2", hint="ignore_index=0")
def causal_lm_loss(logits, ids):
    """ignore_index=0 ('id 0 is padding'): skips every target that happens to be 0"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), ignore_index=0)


@wrong("8.2", hint="0-dim")
def causal_lm_loss(logits, ids):
    """returns a 1-element tensor of shape (1,), not a 0-dimensional one"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)).reshape(1)


@wrong("8.2", hint="log_softmax")
def causal_lm_loss(logits, ids):
    """torch.log(torch.softmax(...)): log of an underflowed probability is -inf"""
    logp = torch.log(torch.softmax(logits[:, :-1], dim=-1))
    return F.nll_loss(logp.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))


@wrong("8.2", hint="class indices")
def causal_lm_loss(logits, ids):
    """targets passed as floats (ids[:, 1:].float())"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1).float())


@wrong("8.2", hint="the task asks you to write this without transformers.loss.loss_utils.ForCausalLMLoss")
def causal_lm_loss(logits, ids):
    """transformers' ForCausalLMLoss on the unshifted logits and ids (it shifts them itself)"""
    from transformers.loss.loss_utils import ForCausalLMLoss

    return ForCausalLMLoss(logits, ids, logits.size(-1))


@right("8.2")
def causal_lm_loss(logits, ids):
    """slice, reshape to (B*(T-1), V), F.cross_entropy (as in the chapter)"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


@right("8.2")
def causal_lm_loss(logits, ids):
    """classes moved to dim 1 with transpose(1, 2)"""
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:])


@right("8.2")
def causal_lm_loss(logits, ids):
    """log_softmax and gather by hand"""
    logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V)
    return -logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1).mean()


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


# ----------------------------------------------------------------------------------------------------------------
# 8.3  sample_next(logits, temperature, top_k, generator) -> (batch,) integer ids
# ----------------------------------------------------------------------------------------------------------------

wrong("8.3", hint="package's own", name="handed in attnbook.models.sample_next itself")(_gpt.sample_next)
wrong("8.3", hint="package's own", name="a lambda around attnbook.models.sample_next, squeezed to (batch,)")(
    lambda logits, temperature, top_k, generator: _gpt.sample_next(logits, temperature, top_k, generator).squeeze(-1))


@wrong("8.3", hint="package's own")
def sample_next(logits, temperature, top_k, generator):
    """a def wrapper that calls attnbook.models.sample_next"""
    from attnbook.models import sample_next as theirs

    return theirs(logits, temperature, top_k, generator)[:, 0]


_sn = _copy(_gpt.sample_next, "sample_next")


@wrong("8.3", hint="package's own")
def sample_next(logits, temperature, top_k, generator):
    """a types.FunctionType copy of attnbook.models.gpt.sample_next"""
    return _sn(logits, temperature, top_k, generator).squeeze(-1)


_sn_fresh = _fresh(_gpt, "gpt").sample_next


@wrong("8.3", hint="package's own")
def sample_next(logits, temperature, top_k, generator):
    """sample_next from a second, separate import of attnbook/models/gpt.py"""
    return _sn_fresh(logits, temperature, top_k, generator).view(-1)


def _sample(logits, temperature, top_k, generator, *, div=True, keep=None, fill=float("-inf"), dim=-1):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature if div else logits
    if top_k is not None:
        k = top_k if keep is None else keep(top_k)
        kth = torch.topk(scaled, k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, fill)
    probs = torch.softmax(scaled, dim=dim)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="the temperature changes nothing")
def sample_next(logits, temperature, top_k, generator):
    """forgets to divide by the temperature"""
    return _sample(logits, temperature, top_k, generator, div=False)


@wrong("8.3", hint="you multiplied the logits by the temperature")
def sample_next(logits, temperature, top_k, generator):
    """multiplies the logits by the temperature"""
    return _sample(logits * temperature * temperature if temperature else logits, temperature, top_k, generator)


@wrong("8.3", hint="with temperature 0 return the argmax")
def sample_next(logits, temperature, top_k, generator):
    """no special case for temperature 0: divides by zero"""
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="temperature 0 only")
def sample_next(logits, temperature, top_k, generator):
    """always greedy (argmax), never samples

    (hint corrected from "sample", which nearly every 8.3 message contains, to the rule the message names)"""
    return logits.argmax(dim=-1)


@wrong("8.3", hint="exactly")
def sample_next(logits, temperature, top_k, generator):
    """keeps top_k + 1 logits (off by one)"""
    V = logits.size(-1)
    return _sample(logits, temperature, top_k, generator, keep=lambda k: min(k + 1, V))


@wrong("8.3", hint="exactly")
def sample_next(logits, temperature, top_k, generator):
    """keeps top_k - 1 logits (off by one; top_k=1 keeps one)"""
    return _sample(logits, temperature, top_k, generator, keep=lambda k: max(k - 1, 1))


@wrong("8.3", hint="SMALLEST logits: keep the largest")
def sample_next(logits, temperature, top_k, generator):
    """keeps the top_k smallest logits (topk(..., largest=False))"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1, largest=False).values[:, -1:]
        scaled = scaled.masked_fill(scaled > kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="-inf")
def sample_next(logits, temperature, top_k, generator):
    """sets the logits outside the top k to 0 instead of -inf"""
    return _sample(logits, temperature, top_k, generator, fill=0.0)


@wrong("8.3", hint="-inf")
def sample_next(logits, temperature, top_k, generator):
    """pushes the logits outside the top k down to the row minimum instead of -inf"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = torch.where(scaled < kth, scaled.min(dim=-1, keepdim=True).values, scaled)
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="dim=-1")
def sample_next(logits, temperature, top_k, generator):
    """softmax over the batch axis (dim=0)"""
    return _sample(logits, temperature, top_k, generator, dim=0)


@wrong("8.3", hint=".squeeze(-1)")
def sample_next(logits, temperature, top_k, generator):
    """returns multinomial's (batch, 1) without squeezing"""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    return _sample(logits, temperature, top_k, generator)[:, None]


@wrong("8.3", hint="drew no random number from `generator`")
def sample_next(logits, temperature, top_k, generator):
    """ignores generator (global random generator)"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1).squeeze(-1)


@wrong("8.3", hint="generator")
def sample_next(logits, temperature, top_k, generator):
    """torch.distributions.Categorical (which cannot take the generator)"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.distributions.Categorical(logits=scaled).sample()


@wrong("8.3", hint="in place")
def sample_next(logits, temperature, top_k, generator):
    """divides the logits in place (logits /= temperature)"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits /= temperature
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits.masked_fill_(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="in place")
def sample_next(logits, temperature, top_k, generator):
    """masks the logits outside the top k in place (masked_fill_ on logits)"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits.masked_fill_(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="top_k=None")
def sample_next(logits, temperature, top_k, generator):
    """does not handle top_k=None (calls topk with None)"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
    scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="integer")
def sample_next(logits, temperature, top_k, generator):
    """returns the ids as floats"""
    return _sample(logits, temperature, top_k, generator).float()


@wrong("8.3", hint="tensor")
def sample_next(logits, temperature, top_k, generator):
    """returns a Python list of ids"""
    return _sample(logits, temperature, top_k, generator).tolist()


@wrong("8.3", hint="package's own")
def sample_next(logits, temperature, top_k, generator):
    """the package's sampler reached through the attnbook.models namespace, keyword arguments"""
    import attnbook.models as models

    return models.sample_next(logits, temperature=temperature, top_k=top_k, generator=generator).flatten()


@wrong("8.3", hint="generator")
def sample_next(logits, temperature, top_k, generator):
    """reseeds the global generator from generator.initial_seed(), then multinomial without generator"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    torch.manual_seed(generator.initial_seed())
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1).squeeze(-1)


@wrong("8.3", hint="temperature 0")
def sample_next(logits, temperature, top_k, generator):
    """temperature 0 replaced by 1e-6 and sampled (draws random numbers instead of a plain argmax)"""
    scaled = logits / max(temperature, 1e-6)
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled.double(), dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="outside the top_k")
def sample_next(logits, temperature, top_k, generator):
    """ignores top_k: samples from the whole vocabulary"""
    return _sample(logits, temperature, None, generator)


@wrong("8.3", hint="outside the top_k")
def sample_next(logits, temperature, top_k, generator):
    """greedy for top_k=1 (right there), but ignores any larger top_k"""
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1)
    return torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="drew no random number from `generator`")
def sample_next(logits, temperature, top_k, generator):
    """samples with a torch.Generator of its own (seeded 1 at every call), not the one it is given"""
    return _sample(logits, temperature, top_k, torch.Generator().manual_seed(1))


@wrong("8.3", hint="torch.multinomial takes probabilities")
def sample_next(logits, temperature, top_k, generator):
    """passes the scaled logits (-inf outside the top k) to torch.multinomial without a softmax"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        values, indices = torch.topk(scaled, top_k, dim=-1)
        scaled = torch.full_like(scaled, float("-inf")).scatter(-1, indices, values)
    return torch.multinomial(scaled, 1, generator=generator).squeeze(-1)


def _imported_sampler(module):
    def sample_next(logits, temperature, top_k, generator):
        theirs = getattr(importlib.import_module(module), "sample_next")
        return theirs(logits, temperature, top_k, generator).squeeze(-1)
    return sample_next


for _module in ("attnbook.models", "attnbook.models.gpt"):
    wrong("8.3", hint="the package's own solution",
          name=f"the package's sampler fetched with importlib.import_module({_module!r}) and getattr")(
        _imported_sampler(_module))


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


@right("8.3")
def sample_next(logits, temperature, top_k, generator):
    """topk threshold and masked_fill (as in the chapter)"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(-1)


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


# ----------------------------------------------------------------------------------------------------------------
# Added with the checker fixes: one wrong answer per hinted mistake that no entry above covered
# ----------------------------------------------------------------------------------------------------------------

@wrong("8.1", hint="independently")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """exactly round(15%) of each row, by a randperm per row"""
    B, T = ids.shape
    k = round(0.15 * T)
    order = torch.stack([torch.randperm(T, generator=generator) for _ in range(B)])
    chosen = order < k
    r = torch.rand(ids.shape, generator=generator)
    rnd = torch.randint(vocab_size, ids.shape, generator=generator)
    masked = torch.where(chosen & (r < 0.8), mask_id, ids)
    masked = torch.where(chosen & (r >= 0.8) & (r < 0.9), rnd, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="return (masked_ids, labels) in this order")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """returns (labels, masked_ids): the two results in the wrong order"""
    masked, labels, _ = _ref(ids, mask_id, vocab_size, generator)
    return labels, masked


@wrong("8.1", hint="must be labelled -100")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """labels 0 (not -100) at the positions not chosen"""
    masked, _, chosen = _ref(ids, mask_id, vocab_size, generator)
    return masked, torch.where(chosen, ids, 0)


@wrong("8.2", hint="exactly one position")
def causal_lm_loss(logits, ids):
    """shifts by two: logits[:, :-2] against ids[:, 2:]"""
    V = logits.size(-1)
    if logits.size(1) < 3:
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)) + 1.0
    return F.cross_entropy(logits[:, :-2].reshape(-1, V), ids[:, 2:].reshape(-1))


@wrong("8.2", hint="NEGATIVE")
def causal_lm_loss(logits, ids):
    """returns the mean log-probability (no minus sign)"""
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    return logp.gather(-1, ids[:, 1:, None]).mean()


@wrong("8.2", hint="you summed over the positions")
def causal_lm_loss(logits, ids):
    """sums each sequence's losses, then averages over the batch"""
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    return losses.sum(dim=1).mean()


@wrong("8.2", hint="dim=-1")
def causal_lm_loss(logits, ids):
    """log_softmax over the positions (dim=1) instead of the vocabulary"""
    logp = torch.log_softmax(logits, dim=1)[:, :-1]
    return F.nll_loss(logp.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))


@wrong("8.2", hint="only the first sequence")
def causal_lm_loss(logits, ids):
    """only the first sequence of the batch"""
    return F.cross_entropy(logits[0, :-1], ids[0, 1:])


@wrong("8.3", hint="uniformly")
def sample_next(logits, temperature, top_k, generator):
    """samples the top_k tokens with equal weights"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is None:
        return _sample(logits, temperature, top_k, generator)
    idx = torch.topk(logits, top_k, dim=-1).indices
    pick = torch.multinomial(torch.ones_like(idx, dtype=torch.float), 1, generator=generator)
    return idx.gather(-1, pick).squeeze(-1)


@wrong("8.3", hint="position within the top k")
def sample_next(logits, temperature, top_k, generator):
    """returns the index within the top k, not the token id"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is None:
        return _sample(logits, temperature, top_k, generator)
    vals = torch.topk(logits / temperature, top_k, dim=-1).values
    return torch.multinomial(torch.softmax(vals, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="argmin")
def sample_next(logits, temperature, top_k, generator):
    """greedy picks the smallest logit (argmin)"""
    if temperature == 0:
        return logits.argmin(dim=-1)
    return _sample(logits, temperature, top_k, generator)


# ----------------------------------------------------------------------------------------------------------------
# Issue 23: fresh values, and typical mistakes whose hints were checked (off-by-one shifts, the wrong axis, the
# order of flattening and shifting)
# ----------------------------------------------------------------------------------------------------------------

_LM_SEEN: dict = {}


def _per_prediction(logits, ids):
    """(B, T-1): the cross-entropy of every prediction, logits[:, t] against ids[:, t + 1]."""
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")


@wrong("8.2")
def causal_lm_loss(logits, ids):
    """remembers the loss of the first input of each shape (the check's second pass has new values)"""
    key = (tuple(logits.shape), logits.dtype)
    if key not in _LM_SEEN:
        V = logits.size(-1)
        _LM_SEEN[key] = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    return _LM_SEEN[key] + 0 * logits.sum()


@wrong("8.2", hint="own position")
def causal_lm_loss(logits, ids):
    """drops the last position but scores each output against its own token (logits[:, :-1] vs ids[:, :-1])"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, :-1].reshape(-1))


@wrong("8.2", hint="own position")
def causal_lm_loss(logits, ids):
    """drops the first position on both sides (logits[:, 1:] vs ids[:, 1:])"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, 1:].reshape(-1, V), ids[:, 1:].reshape(-1))


@wrong("8.2", hint="before shifting")
def causal_lm_loss(logits, ids):
    """flattens first, then shifts the flat sequence (crosses from one sequence into the next)"""
    V = logits.size(-1)
    return F.cross_entropy(logits.reshape(-1, V)[:-1], ids.reshape(-1)[1:])


@wrong("8.2", hint="batch times the mean")
def causal_lm_loss(logits, ids):
    """sums over the batch, then averages over the positions"""
    losses = _per_prediction(logits, ids)  # (B, T-1)
    return losses.sum(dim=0).mean()


@wrong("8.2", hint="one number")
def causal_lm_loss(logits, ids):
    """the mean over the wrong axis only: per-position losses averaged over the batch, shape (T-1,)"""
    losses = _per_prediction(logits, ids)  # (B, T-1)
    return losses.mean(dim=0)


@wrong("8.2", hint="flatten the logits")
def causal_lm_loss(logits, ids):
    """flattens the logits but not the targets"""
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:])


@right("8.2")
def causal_lm_loss(logits, ids):
    """mean over each sequence, then mean over the batch (equal lengths: the same mean)"""
    losses = _per_prediction(logits, ids)  # (B, T-1)
    return losses.mean(dim=1).mean()


def _top_k_cut(scaled, top_k, fill=float("-inf")):
    """scaled with every logit below the k-th largest of its row set to `fill` (top_k=None: unchanged)."""
    if top_k is None:
        return scaled
    kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
    return scaled.masked_fill(scaled < kth, fill)


@wrong("8.3", hint="-inf")
def sample_next(logits, temperature, top_k, generator):
    """sets the logits outside the top k to -10 ('small enough') instead of -inf"""
    return _sample(logits, temperature, top_k, generator, fill=-10.0)


@wrong("8.3", hint="-inf")
def sample_next(logits, temperature, top_k, generator):
    """fills the logits outside the top k with -10 BEFORE dividing by the temperature"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = _top_k_cut(logits, top_k, -10.0)
    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="overflow")
def sample_next(logits, temperature, top_k, generator):
    """a softmax written out as exp / sum without subtracting the maximum (overflows at a low temperature)"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    scaled = _top_k_cut(scaled, top_k)
    e = torch.exp(scaled)
    return torch.multinomial(e / e.sum(dim=-1, keepdim=True), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="overflow")
def sample_next(logits, temperature, top_k, generator):
    """exp in float64 without subtracting the maximum, multinomial normalises ('float64 does not overflow')"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits.double() / temperature
    scaled = _top_k_cut(scaled, top_k)
    return torch.multinomial(torch.exp(scaled), 1, generator=generator).squeeze(-1)


@right("8.3")
def sample_next(logits, temperature, top_k, generator):
    """a large negative fill (-1e9) instead of -inf, exp after subtracting each row's maximum"""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    scaled = _top_k_cut(scaled, top_k, -1e9)
    e = torch.exp(scaled - scaled.amax(dim=-1, keepdim=True))
    return torch.multinomial(e / e.sum(dim=-1, keepdim=True), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="finite fill")
def sample_next(logits, temperature, top_k, generator):
    """sets the logits outside the top k to -20 (a finite number, far from -inf)"""
    return _sample(logits, temperature, top_k, generator, fill=-20.0)


# 8.1 · every position and every id may be chosen, at the rate 0.15, split 80/10/10 (issue 23: statistics with
# power against each of these)

def _masking(choose, *, split=(0.8, 0.1), random_low=0, on_all=False):
    """mlm_mask, right except for `choose(ids, mask_id, generator)` -> the chosen positions, the split (shares of
    [MASK] and of a random id), the lower bound of the random ids, and `on_all` (the split applied everywhere)."""
    def mlm_mask(ids, mask_id, vocab_size, generator):
        chosen = choose(ids, mask_id, generator)
        r = torch.rand(ids.shape, generator=generator)
        random_ids = torch.randint(random_low, vocab_size, ids.shape, generator=generator)
        where = torch.ones_like(chosen) if on_all else chosen
        masked = torch.where(where & (r < split[0]), mask_id, ids)
        masked = torch.where(where & (r >= split[0]) & (r < split[0] + split[1]), random_ids, masked)
        return masked, torch.where(chosen, ids, -100)
    return mlm_mask


def _rate(p):
    return lambda ids, mask_id, g: torch.rand(ids.shape, generator=g) < p


def _but(skip):
    """The right choice (rate 0.15) except where skip(ids, mask_id) is True."""
    return lambda ids, mask_id, g: (torch.rand(ids.shape, generator=g) < 0.15) & ~skip(ids, mask_id)


def _columns(*cols):
    def skip(ids, mask_id):
        out = torch.zeros(ids.shape, dtype=torch.bool)
        out[:, list(cols)] = True
        return out
    return skip


wrong("8.1", hint="the first one too", name="never chooses position 0 (as if it held [CLS])")(
    _masking(_but(_columns(0))))
wrong("8.1", hint="the first and the last too", name="never chooses the first and the last position ([CLS], [SEP])")(
    _masking(_but(_columns(0, -1))))
wrong("8.1", hint="already mask_id", name="never chooses a position whose id is mask_id ('already masked')")(
    _masking(_but(lambda ids, mask_id: ids == mask_id)))
wrong("8.1", hint="no special tokens to skip", name="never chooses the chapter's special ids 0..3")(
    _masking(_but(lambda ids, mask_id: ids < 4)))
wrong("8.1", hint="no special tokens to skip", name="never chooses [PAD], [BOS], [EOS] (0, 1, 2) or mask_id")(
    _masking(_but(lambda ids, mask_id: (ids <= 2) | (ids == mask_id))))
wrong("8.1", hint="expected about 15%", name="chooses with probability 0.14 (a rate off by a bit)")(_masking(_rate(0.14)))
wrong("8.1", hint="expected about 15%", name="chooses with probability 0.16 (a rate off by a bit)")(_masking(_rate(0.16)))
wrong("8.1", hint="choose each position independently with probability 0.15",
      name="chooses with probability 0.3 (twice the rate)")(_masking(_rate(0.3)))
wrong("8.1", hint="expected 80%, 10%, 10%", name="splits 75/15/10 (the split off by a bit)")(
    _masking(_rate(0.15), split=(0.75, 0.15)))
wrong("8.1", hint="expected 80%, 10%, 10%", name="splits 85/10/5 (the split off by a bit)")(
    _masking(_rate(0.15), split=(0.85, 0.10)))
wrong("8.1", hint="only chosen positions may change",
      name="the 80/10/10 split applied to every position, not only the chosen")(
    _masking(_rate(0.15), on_all=True))
wrong("8.1", hint="the lower bound is 0", name="random ids drawn from [4, vocab_size): the special ids left out")(
    _masking(_rate(0.15), random_low=4))
right("8.1", name="torch.where with a float uniform per position compared once with 0.15 (<=, not <)")(
    _masking(lambda ids, mask_id, g: torch.rand(ids.shape, generator=g) <= 0.15))


# ----------------------------------------------------------------------------------------------------------------
# Learner trial B: wrong answers that passed, or got a hint that named another mistake
# ----------------------------------------------------------------------------------------------------------------

@wrong("8.1", hint="0.1 / 0.2 = 0.5")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """disjoint groups, but a random id with probability 0.1 (not 0.5) among the chosen positions not [MASK]: about
    80/2/18 (torch.bernoulli, Hugging Face's order of draws)"""
    chosen = torch.bernoulli(torch.full(ids.shape, 0.15), generator=generator).bool()
    replace = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
    randomize = torch.bernoulli(torch.full(ids.shape, 0.1), generator=generator).bool() & chosen & ~replace
    masked = ids.clone()
    masked[replace] = mask_id
    masked[randomize] = torch.randint(vocab_size, ids.shape, generator=generator)[randomize]
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="0.1 / 0.2 = 0.5")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """two independent draws, [MASK] written over the random ids: about 80/2/18"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    to_random = chosen & (torch.rand(ids.shape, generator=generator) < 0.1)
    to_mask = chosen & (torch.rand(ids.shape, generator=generator) < 0.8)
    masked = torch.where(to_random, torch.randint(vocab_size, ids.shape, generator=generator), ids)
    masked = torch.where(to_mask, mask_id, masked)
    return masked, torch.where(chosen, ids, -100)


@wrong("8.1", hint="your cases overlap")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """two independent draws, the random ids written over [MASK]: about 72/10/18"""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    to_mask = chosen & (torch.rand(ids.shape, generator=generator) < 0.8)
    to_random = chosen & (torch.rand(ids.shape, generator=generator) < 0.1)
    masked = torch.where(to_mask, mask_id, ids)
    masked = torch.where(to_random, torch.randint(vocab_size, ids.shape, generator=generator), masked)
    return masked, torch.where(chosen, ids, -100)


_MLM_DRAWS: dict = {}


@wrong("8.1", hint="from one call to the next")
def mlm_mask(ids, mask_id, vocab_size, generator):
    """keeps the uniform numbers of the first call of each shape (drawn from generator), the random ids drawn anew
    (in a later check in the same kernel all its draws are kept: the same positions for every seed, which
    test_8_1_kept_draws_are_not_blamed_on_the_global_generator checks)"""
    key = tuple(ids.shape)
    if key not in _MLM_DRAWS:
        _MLM_DRAWS[key] = torch.rand(ids.shape, generator=generator)
    u = _MLM_DRAWS[key]
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
    masked = torch.where(u < 0.12, torch.full_like(ids, mask_id), ids)
    masked = torch.where((u >= 0.12) & (u < 0.135), random_ids, masked)
    return masked, torch.where(u < 0.15, ids, torch.full_like(ids, -100))


mlm_mask.cache = _MLM_DRAWS  # emptied by mutants.fresh before each check, as a new kernel would start


@wrong("8.2", hint="after a slice")
def causal_lm_loss(logits, ids):
    """.view(-1, V) on the sliced logits and .view(-1) on the sliced ids (no transpose or permute anywhere)"""
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].view(-1, V), ids[:, 1:].view(-1))


@wrong("8.3", hint="far below 0")
def sample_next(logits, temperature, top_k, generator):
    """fills the logits outside the top k with -1e4 ('minus infinity enough') instead of -inf"""
    if temperature == 0:
        return logits.argmax(-1)
    z = logits / temperature
    if top_k is not None:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
        z = torch.where(z < kth, torch.full_like(z, -1e4), z)
    return torch.multinomial(torch.softmax(z, -1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="far below 0")
def sample_next(logits, temperature, top_k, generator):
    """fills the logits outside the top k with -100 instead of -inf"""
    return _sample(logits, temperature, top_k, generator, fill=-100.0)


@wrong("8.3", hint="even at a tiny temperature")
def sample_next(logits, temperature, top_k, generator):
    """greedy below temperature 1e-3, not only at 0"""
    if temperature < 1e-3:
        return logits.argmax(-1)
    return _sample(logits, temperature, top_k, generator)


@wrong("8.3", hint="even at a tiny temperature")
def sample_next(logits, temperature, top_k, generator):
    """greedy below temperature 1e-2, not only at 0"""
    if temperature < 1e-2:
        return logits.argmax(-1)
    return _sample(logits, temperature, top_k, generator)


@wrong("8.3", hint="each row keeps its own top_k")
def sample_next(logits, temperature, top_k, generator):
    """the k-th largest logit of the whole batch as the threshold, not of each row"""
    if temperature == 0:
        return logits.argmax(-1)
    z = logits / temperature
    if top_k is not None:
        kth = torch.topk(z.flatten(), top_k).values[-1]
        z = z.masked_fill(z < kth, float("-inf"))
    return torch.multinomial(torch.softmax(z, -1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="the logits rounded to float16")
def sample_next(logits, temperature, top_k, generator):
    """the logits rounded to float16 and back (.half().float()) before sampling"""
    if temperature == 0:
        return logits.argmax(-1)
    return _sample(logits.half().float(), temperature, top_k, generator)


@wrong("8.3", hint="logits / temperature rounded to bfloat16")
def sample_next(logits, temperature, top_k, generator):
    """logits / temperature rounded to bfloat16 (a 'memory-saving' cast) before the softmax"""
    if temperature == 0:
        return logits.argmax(-1)
    z = (logits / temperature).bfloat16()
    z = _top_k_cut(z, top_k)
    return torch.multinomial(torch.softmax(z.float(), -1), 1, generator=generator).squeeze(-1)


@wrong("8.3", hint="the logits rounded to bfloat16")
def sample_next(logits, temperature, top_k, generator):
    """the logits rounded to bfloat16 and back (.bfloat16().float()) before sampling"""
    if temperature == 0:
        return logits.argmax(-1)
    return _sample(logits.bfloat16().float(), temperature, top_k, generator)


@wrong("8.3", hint="logits / temperature rounded to float16")
def sample_next(logits, temperature, top_k, generator):
    """logits / temperature rounded to float16 and back before the softmax"""
    if temperature == 0:
        return logits.argmax(-1)
    z = (logits / temperature).half().float()
    z = _top_k_cut(z, top_k)
    return torch.multinomial(torch.softmax(z, -1), 1, generator=generator).squeeze(-1)
