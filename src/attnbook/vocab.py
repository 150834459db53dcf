"""Vocabularies: the maps between tokens and ids that the models of the toy tasks read and write.

- `CharVocab`: one id per character after <pad>, <bos> and <eos> (ids `PAD_ID`, `BOS_ID`, `EOS_ID` = 0, 1, 2),
  for the digit strings of chapter 6 (`data.reversal_task`).
- `WordVocab`: one id per whole word after [PAD], [BOS], [EOS] (the same ids) and [MASK] (`MASK_ID` = 3), for
  the grammar corpus of chapter 8 (`corpus.grammar_corpus`).

`data` re-exports every name here (`from attnbook.data import CharVocab, PAD_ID` keeps working).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from ._validate import require_tensor

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "SPECIAL_TOKENS",
    "CharVocab",
    "MASK_ID",
    "WORD_SPECIAL_TOKENS",
    "WordVocab",
]

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")  # ids 0, 1, 2; the symbols follow from id 3


# ----------------------------------------------------------------------------------------------------------
# Characters (chapter 6)
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CharVocab:
    """Single-character symbols after the special tokens: id = 3 + index of the character in `symbols`."""

    symbols: str = "0123456789"
    pad_id: int = field(default=PAD_ID, init=False)
    bos_id: int = field(default=BOS_ID, init=False)
    eos_id: int = field(default=EOS_ID, init=False)

    def __post_init__(self):
        if not isinstance(self.symbols, str) or not self.symbols:
            raise TypeError(f"symbols must be a non-empty str, got {self.symbols!r}")
        if len(set(self.symbols)) != len(self.symbols):
            raise ValueError(f"symbols must not repeat a character, got {self.symbols!r}")

    @property
    def size(self) -> int:
        """Number of ids, special tokens included (the `vocab_size` of a model)."""
        return len(SPECIAL_TOKENS) + len(self.symbols)

    def __len__(self) -> int:
        return self.size

    @property
    def tokens(self) -> list[str]:
        """The token of every id, in id order: ['<pad>', '<bos>', '<eos>', '0', '1', ...]."""
        return list(SPECIAL_TOKENS) + list(self.symbols)

    def encode(self, text: str) -> list[int]:
        """Ids of the characters of `text` (no special tokens added)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        offset = len(SPECIAL_TOKENS)
        try:
            return [offset + self.symbols.index(ch) for ch in text]
        except ValueError:
            bad = sorted(set(text) - set(self.symbols))
            raise ValueError(f"text {text!r} has characters {bad} outside the vocabulary {self.symbols!r}") from None

    def decode(self, ids) -> str:
        """The string spelled by `ids` (list or 1-D tensor): BOS and PAD are skipped, reading stops at EOS."""
        if isinstance(ids, Tensor):
            if ids.dim() != 1:
                raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}; use decode_batch for a batch")
            ids = ids.tolist()
        out = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"ids must hold ints, got {type(i).__name__}")
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            if not 0 <= i < self.size:
                raise ValueError(f"id {i} is outside the vocabulary (0..{self.size - 1})")
            out.append(self.symbols[i - len(SPECIAL_TOKENS)])
        return "".join(out)

    def decode_batch(self, ids: Tensor) -> list[str]:
        """decode() for every row of a (B, T) tensor of ids."""
        require_tensor(ids, "ids")
        if ids.dim() != 2:
            raise ValueError(f"ids must be 2-D (batch, seq), got shape {tuple(ids.shape)}")
        return [self.decode(row) for row in ids.tolist()]


# ----------------------------------------------------------------------------------------------------------
# Words (chapter 8)
# ----------------------------------------------------------------------------------------------------------

MASK_ID = 3
WORD_SPECIAL_TOKENS = ("[PAD]", "[BOS]", "[EOS]", "[MASK]")  # ids 0..3; PAD, BOS, EOS have CharVocab's ids


@dataclass(frozen=True)
class WordVocab:
    """Whole words after four special tokens: id = 4 + index of the word in `words`."""

    words: tuple[str, ...]
    pad_id: int = field(default=PAD_ID, init=False)
    bos_id: int = field(default=BOS_ID, init=False)
    eos_id: int = field(default=EOS_ID, init=False)
    mask_id: int = field(default=MASK_ID, init=False)

    def __post_init__(self):
        if isinstance(self.words, str) or not isinstance(self.words, (tuple, list)) or not self.words:
            raise TypeError(f"words must be a non-empty tuple of str, got {self.words!r}")
        object.__setattr__(self, "words", tuple(self.words))
        for w in self.words:
            if not isinstance(w, str) or not w or len(w.split()) != 1 or w != w.strip():
                raise ValueError(f"words must be non-empty strings without spaces, got {w!r}")
        if len(set(self.words)) != len(self.words):
            raise ValueError("words must not repeat a word")
        clash = set(self.words) & set(WORD_SPECIAL_TOKENS)
        if clash:
            raise ValueError(f"words must not contain the special tokens, got {sorted(clash)}")

    @property
    def size(self) -> int:
        """Number of ids, special tokens included (the `vocab_size` of a model)."""
        return len(WORD_SPECIAL_TOKENS) + len(self.words)

    def __len__(self) -> int:
        return self.size

    @property
    def tokens(self) -> list[str]:
        """The token of every id, in id order: ['[PAD]', '[BOS]', '[EOS]', '[MASK]', first word, ...]."""
        return list(WORD_SPECIAL_TOKENS) + list(self.words)

    @property
    def special_ids(self) -> tuple[int, ...]:
        """The ids of [PAD], [BOS], [EOS] and [MASK]: (0, 1, 2, 3)."""
        return tuple(range(len(WORD_SPECIAL_TOKENS)))

    def token_id(self, token: str) -> int:
        """The id of one word or special token."""
        tokens = self.tokens
        if token not in tokens:
            raise ValueError(f"token {token!r} is not in the vocabulary")
        return tokens.index(token)

    def encode(self, sentence, *, bos: bool = True, eos: bool = True) -> list[int]:
        """Ids of a sentence (a str split at spaces, or a list of words), with [BOS] first and [EOS] last."""
        if isinstance(sentence, str):
            sentence = sentence.split()
        if not isinstance(sentence, (list, tuple)) or not all(isinstance(w, str) for w in sentence):
            raise TypeError(f"sentence must be a str or a list of str, got {type(sentence).__name__}")
        index = {w: len(WORD_SPECIAL_TOKENS) + i for i, w in enumerate(self.words)}
        unknown = sorted({w for w in sentence if w not in index})
        if unknown:
            raise ValueError(f"sentence has words outside the vocabulary: {unknown}")
        return [self.bos_id] * bos + [index[w] for w in sentence] + [self.eos_id] * eos

    def decode(self, ids) -> str:
        """The words of `ids` (a list or 1-D tensor) joined by spaces: [BOS] and [PAD] are skipped, reading
        stops at [EOS], and [MASK] is shown as '[MASK]'."""
        if isinstance(ids, Tensor):
            if ids.dim() != 1:
                raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}; use decode_batch for a batch")
            ids = ids.tolist()
        tokens, out = self.tokens, []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"ids must hold ints, got {type(i).__name__}")
            if not 0 <= i < self.size:
                raise ValueError(f"id {i} is outside the vocabulary (0..{self.size - 1})")
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(tokens[i])
        return " ".join(out)

    def decode_batch(self, ids: Tensor) -> list[str]:
        """decode() for every row of a (B, T) tensor of ids."""
        require_tensor(ids, "ids")
        if ids.dim() != 2:
            raise ValueError(f"ids must be 2-D (batch, seq), got shape {tuple(ids.shape)}")
        return [self.decode(row) for row in ids.tolist()]
