"""Pre-tokenization for a byte-level BPE (chapter 12): the text cut into words by a published pattern, each word
written as GPT-2's byte characters, and special tokens such as `<|endoftext|>` cut out first.

The patterns (`PATTERNS`), each the exact string its source publishes, run with the `regex` package (Python's `re`
has no Unicode classes such as \\p{L}, a letter, and \\p{N}, a number):
- "gpt2": GPT-2's (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", section 2.2; the
  string is `pat` in openai/gpt-2's src/encoder.py and `pat_str` of tiktoken's `gpt2` and `r50k_base`): a lower-case
  contraction ('s 't 're 've 'm 'll 'd), a run of letters, a run of numbers or a run of other symbols, each with at
  most one space in front of it, then runs of white space, all but their last space when a word follows. Hugging
  Face `tokenizers` builds it into `pre_tokenizers.ByteLevel(use_regex=True)`.
- "cl100k": GPT-3.5's and GPT-4's, `pat_str` of tiktoken's `cl100k_base` (tiktoken_ext/openai_public.py; later
  releases spell it with possessive quantifiers, for speed, with the same splits). Contractions in any case
  ("DON'T" ends in 'T), a letter run takes in front of it one character that is not a newline, letter or number
  (a space, a tab, or a symbol: "(x", "'Hi"), numbers go in runs of at most three digits with nothing in front, a
  symbol run keeps the newlines after it, and newlines go together with the white space before them.
- "llama3": Llama 3's ("The Llama 3 Herd of Models", Meta 2024, arXiv:2407.21783, whose 128K vocabulary takes
  100K tokens from tiktoken's and adds 28K; the string is `pat_str` of meta-llama/llama3's llama/tokenizer.py):
  the same string as "cl100k", as Hugging Face `transformers` also has it (`TikTokenConverter`'s default pattern,
  the "llama3" entry of its GGUF pre-tokenizer table). One revision of Meta's file writes it with doubled
  backslashes inside a raw string, a different regular expression; the string here is the first revision's.

Not every tokenizer pre-tokenizes this way. SentencePiece (Kudo & Richardson 2018, arXiv:1808.06226), used by T5
and by LLaMA 1 and 2, reads the raw text as a sequence of Unicode characters, writes the space as the visible
symbol "▁" (U+2581) that starts a piece, and trains its BPE or unigram model on that without a language-specific
pre-tokenizer or GPT-2's byte table (it falls back to bytes only for characters it has no piece for, when so
configured).

Special tokens (`split_special`): a text made of documents joined with `END_OF_TEXT` ("<|endoftext|>", GPT-2's
only special token, id 50256, the last of its vocabulary) is cut at each special token before the pattern runs,
so no word, and so no merge of a BPE, spans two documents, and the special token itself stays whole.
Hugging Face `tokenizers` does the same with its added tokens (`Tokenizer.add_special_tokens`), longest match
first. tiktoken refuses a special token in the text unless `allowed_special` names it; this module always
treats it as special, as `tokenizers` does.
"""
from __future__ import annotations

import functools
import re
import types
from collections.abc import Sequence

__all__ = ["PATTERNS", "BYTE_TO_CHAR", "CHAR_TO_BYTE", "pretokenize", "END_OF_TEXT", "split_special"]

_PATTERNS = {
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "cl100k": (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""),
}
_PATTERNS["llama3"] = _PATTERNS["cl100k"]  # Meta's pat_str: tiktoken's cl100k pattern, character for character
PATTERNS = types.MappingProxyType(_PATTERNS)  # read-only: a name always means its published string

END_OF_TEXT = "<|endoftext|>"


def _byte_to_char() -> dict[int, str]:
    """GPT-2's table: printable bytes stand for themselves, the other 68 for the characters from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + i) for i, b in enumerate(others)}}


BYTE_TO_CHAR = _byte_to_char()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


@functools.cache
def _compiled(pattern: str):
    # `regex` is a dependency of attnbook (pyproject.toml), imported when a text is first split, so that every module
    # of the package imports where it is missing (tests/test_colab.py installs the package without its dependencies)
    try:
        import regex
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError("pretokenize needs the package 'regex' (a dependency of attnbook, for \\p{L} and "
                                  "\\p{N}): pip install regex") from e
    return regex.compile(PATTERNS[pattern])


def _pattern_name(pattern) -> str:
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str naming one of {', '.join(map(repr, PATTERNS))}, "
                        f"got {type(pattern).__name__}")
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(map(repr, PATTERNS))}, got {pattern!r}")
    return pattern


def pretokenize(text: str, *, pattern: str = "gpt2") -> list[str]:
    """The words of `text` under `pattern` (a name in `PATTERNS`), each written as byte characters (its UTF-8
    bytes through `BYTE_TO_CHAR`: a space is 'Ġ', a newline 'Ċ'): pretokenize("Hi there") == ['Hi', 'Ġthere'],
    pretokenize("x²") == ['x', 'Â²'] (a letter, then a number), pretokenize("1234", pattern="cl100k") ==
    ['123', '4']. Special tokens are not looked for here: see `split_special`."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    words = _compiled(_pattern_name(pattern)).findall(text)
    return ["".join(BYTE_TO_CHAR[b] for b in word.encode("utf-8")) for word in words]


def _special_tokens(special_tokens) -> tuple[str, ...]:
    if isinstance(special_tokens, str) or not isinstance(special_tokens, Sequence):
        raise TypeError(f"special_tokens must be a list or tuple of str, got {type(special_tokens).__name__}")
    tokens = tuple(special_tokens)
    if not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"special_tokens must hold str, got {tokens!r}")
    if not all(tokens):
        raise ValueError(f"special_tokens must be non-empty strings, got {tokens!r}")
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"special_tokens must be distinct, got {tokens!r}")
    return tokens


def split_special(text: str, special_tokens: Sequence[str] = (END_OF_TEXT,)) -> list[str]:
    """`text` cut at every occurrence of the special tokens: [text, special, text, special, ..., text], the
    special tokens at the odd positions and the text between them (possibly empty) at the even ones. Where two
    special tokens match at the same place, the longer wins. split_special("a<|endoftext|>b") ==
    ['a', '<|endoftext|>', 'b']; with no special tokens, [text]."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    tokens = _special_tokens(special_tokens)
    if not tokens:
        return [text]
    alternatives = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))  # the longest first
    return re.split(f"({alternatives})", text)  # the group keeps the special tokens in the list
