"""The data of chapter 8: sentences of a toy grammar in which a word depends on words to its right, and BERT's masking.

- `grammar_corpus`: seeded, disjoint train and test sentences of the grammar (`GrammarCorpus`), encoded with a
  `vocab.WordVocab` over `GRAMMAR_WORDS`; `parse_sentence` says whether a sentence belongs to the grammar and
  where its auxiliary stands, the word the BERT and GPT of chapter 8 are asked to predict.
- `mlm_mask`: BERT's masking (15% of the positions chosen; of those 80% [MASK], 10% a random id, 10% unchanged),
  with labels `IGNORE_INDEX` (-100) where the loss skips a position.

`data` re-exports every name here (`from attnbook.data import grammar_corpus, mlm_mask` keeps working).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import Tensor

from ._validate import require_int, require_tensor
from .vocab import WordVocab

__all__ = [
    "IGNORE_INDEX",
    "GRAMMAR_WORDS",
    "AUXILIARIES",
    "NOUNS",
    "GrammarBatch",
    "GrammarCorpus",
    "parse_sentence",
    "grammar_corpus",
    "mlm_mask",
]

IGNORE_INDEX = -100  # the label of a position that the loss skips (F.cross_entropy's default ignore_index)


# The grammar: two kinds of sentence, nine words each.
#   question:   why AUX the SIZE NOUN DEGREE STATE ADVERB ?    why are the old dogs so hungry today ?
#   statement:  the SIZE NOUN AUX STATE and STATE ADVERB .     the small cat is tired and happy again .
# The auxiliary AUX agrees in number with the noun: "is" for a singular noun, "are" for a plural one. In a
# question the noun comes after AUX, in a statement before it. Every other word is drawn uniformly and
# independently, so in a question the words to the left of AUX ("why") say nothing about it (is and are are
# equally likely), while the words to its right determine it. In a statement the words to its left determine it.
NOUNS = ("cat", "dog", "bird", "cow", "horse", "goat", "duck", "frog")  # plurals add an "s"
SIZES = ("old", "young", "small", "big")
DEGREES = ("so", "very", "still")
STATES = ("hungry", "tired", "happy", "sleepy", "angry", "quiet", "cold", "busy")
ADVERBS = ("now", "today", "again", "tonight")
AUXILIARIES = ("is", "are")  # singular, plural
GRAMMAR_WORDS = ("why", "the", "and", "?", ".", *AUXILIARIES, *SIZES, *NOUNS, *(n + "s" for n in NOUNS), *DEGREES,
                 *STATES, *ADVERBS)
SENTENCE_LENGTH = 9  # words; the ids add [BOS] and [EOS]
AUX_INDEX = {"question": 1, "statement": 3}  # where the auxiliary stands among the words
NOUN_INDEX = {"question": 4, "statement": 2}  # where the noun it agrees with stands


class GrammarBatch(NamedTuple):
    """Encoded sentences of the toy grammar."""

    ids: Tensor  # (N, 11): [BOS], the nine words, [EOS]
    aux_pos: Tensor  # (N,): the position of the auxiliary in ids (2 in a question, 4 in a statement)
    question: Tensor  # (N,) bool: True for a question, False for a statement


def parse_sentence(sentence) -> tuple[str, int] | None:
    """("question" or "statement", index of the auxiliary among the words) for a sentence of the toy grammar,
    None for anything else (a word out of place, or an auxiliary that does not agree with the noun)."""
    words = sentence.split() if isinstance(sentence, str) else list(sentence)
    if len(words) != SENTENCE_LENGTH:
        return None
    if words[0] == "why":  # why AUX the SIZE NOUN DEGREE STATE ADVERB ?
        kind = "question"
        fixed = words[2] == "the" and words[3] in SIZES and words[5] in DEGREES and words[6] in STATES
        fixed = fixed and words[8] == "?"
    elif words[0] == "the":  # the SIZE NOUN AUX STATE and STATE ADVERB .
        kind = "statement"
        fixed = words[1] in SIZES and words[4] in STATES and words[5] == "and" and words[6] in STATES
        fixed = fixed and words[4] != words[6] and words[8] == "."
    else:
        return None
    noun, aux = words[NOUN_INDEX[kind]], words[AUX_INDEX[kind]]
    number = 0 if noun in NOUNS else 1 if noun.endswith("s") and noun[:-1] in NOUNS else None
    if not fixed or words[7] not in ADVERBS or number is None or aux != AUXILIARIES[number]:
        return None
    return kind, AUX_INDEX[kind]


@dataclass
class GrammarCorpus:
    """Train and test sentences of the toy grammar (disjoint, no repeats) and their vocabulary."""

    train: list[str]
    test: list[str]
    vocab: WordVocab = field(default_factory=lambda: WordVocab(GRAMMAR_WORDS))

    def split(self, name: str) -> list[str]:
        """The sentences of split "train" or "test"."""
        if name not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {name!r}")
        return self.train if name == "train" else self.test

    def encode(self, sentences: Sequence[str]) -> GrammarBatch:
        """[BOS] + words + [EOS] for each sentence (all have the same length, so there is no padding)."""
        if isinstance(sentences, str) or not isinstance(sentences, Sequence) or not sentences:
            raise TypeError(f"sentences must be a non-empty list of str, got {type(sentences).__name__}")
        parsed = []
        for s in sentences:
            p = parse_sentence(s) if isinstance(s, str) else None
            if p is None:
                raise ValueError(f"{s!r} is not a sentence of the toy grammar")
            parsed.append(p)
        return GrammarBatch(
            ids=torch.tensor([self.vocab.encode(s) for s in sentences], dtype=torch.long),  # (N, 11)
            aux_pos=torch.tensor([1 + index for _, index in parsed]),  # (N,): +1 for [BOS]
            question=torch.tensor([kind == "question" for kind, _ in parsed]),  # (N,)
        )

    @staticmethod
    def is_grammatical(sentence: str) -> bool:
        """Whether `sentence` is a sentence of the toy grammar, with an auxiliary that agrees."""
        return parse_sentence(sentence) is not None


def _random_sentence(g: torch.Generator) -> str:
    """One sentence: the kind, the number, then every slot, drawn uniformly with `g`."""

    def pick(options):
        return options[int(torch.randint(len(options), (1,), generator=g))]

    question, plural = (bool(torch.randint(2, (1,), generator=g)) for _ in range(2))
    noun, aux = pick(NOUNS) + ("s" if plural else ""), AUXILIARIES[plural]
    if question:
        words = ["why", aux, "the", pick(SIZES), noun, pick(DEGREES), pick(STATES), pick(ADVERBS), "?"]
    else:
        first, second = torch.randperm(len(STATES), generator=g)[:2].tolist()  # two different states
        words = ["the", pick(SIZES), noun, aux, STATES[first], "and", STATES[second], pick(ADVERBS), "."]
    return " ".join(words)


def grammar_corpus(n_train: int = 2000, n_test: int = 1000, seed: int = 0) -> GrammarCorpus:
    """Distinct sentences of the toy grammar (see `parse_sentence`), drawn with a torch.Generator seeded with
    `seed`: about half questions, half statements; test sentences never occur in training."""
    require_int(n_train, "n_train", minimum=1)
    require_int(n_test, "n_test", minimum=1)
    require_int(seed, "seed", minimum=0)
    n_states = len(STATES) * (len(STATES) - 1)  # ordered pairs of different states
    questions = 2 * len(SIZES) * len(NOUNS) * len(DEGREES) * len(STATES) * len(ADVERBS)  # 2 numbers
    statements = 2 * len(SIZES) * len(NOUNS) * n_states * len(ADVERBS)
    if n_train + n_test > questions:  # about half are questions: at most half of the distinct ones are drawn
        raise ValueError(f"n_train + n_test = {n_train + n_test} is too many: the grammar has {questions} "
                         f"questions and {statements} statements; ask for at most {questions} sentences")
    g = torch.Generator().manual_seed(seed)
    seen: dict[str, None] = {}  # insertion-ordered set
    while len(seen) < n_train + n_test:
        seen.setdefault(_random_sentence(g), None)
    sentences = list(seen)
    return GrammarCorpus(sentences[:n_train], sentences[n_train:])


def mlm_mask(ids: Tensor, mask_id: int, vocab_size: int, generator: torch.Generator | None = None,
             p: float = 0.15, special_ids: Sequence[int] = ()) -> tuple[Tensor, Tensor, Tensor]:
    """BERT's masking. Returns (masked_ids, labels, chosen), each of the shape of `ids`.

    Each position is chosen with probability `p`, except those holding one of `special_ids`. A chosen position
    becomes `mask_id` with probability 0.8, a random id drawn uniformly from [0, vocab_size) with probability
    0.1 (as Hugging Face's data collator: it may draw a special id, or the original one), and keeps its id
    otherwise. `labels` holds the original id at chosen positions and IGNORE_INDEX (-100) elsewhere. Every
    random number comes from `generator` (the global generator when None), so a seeded generator reproduces
    the masks.
    """
    require_tensor(ids, "ids")
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"ids must be an integer tensor, got dtype {ids.dtype}")
    require_int(vocab_size, "vocab_size", minimum=1)
    require_int(mask_id, "mask_id", minimum=0)
    if mask_id >= vocab_size:
        raise ValueError(f"mask_id={mask_id} must be smaller than vocab_size={vocab_size}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"ids must lie in [0, vocab_size={vocab_size}), got values in "
                         f"[{int(ids.min())}, {int(ids.max())}]")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a float in [0, 1], got {p!r}")
    if isinstance(special_ids, (str, bytes)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in special_ids):
        raise TypeError(f"special_ids must be a sequence of ints, got {special_ids!r}")
    chosen = torch.rand(ids.shape, generator=generator, device=ids.device) < p  # (...): 15% of the positions
    if len(special_ids):
        chosen &= ~torch.isin(ids, torch.tensor(list(special_ids), device=ids.device))  # never a special token
    action = torch.rand(ids.shape, generator=generator, device=ids.device)  # (...): what happens to a chosen one
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator, device=ids.device)  # (...)
    masked = torch.where(chosen & (action < 0.8), mask_id, ids)  # 80% of the chosen: [MASK]
    masked = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, masked)  # 10%: a random id
    labels = ids.masked_fill(~chosen, IGNORE_INDEX)  # (...): the original id where chosen, -100 elsewhere
    return masked, labels, chosen
