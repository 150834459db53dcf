"""attnbook.pretokenizers: the published pre-tokenization patterns, checked as strings against their sources and
as splits against Hugging Face `tokenizers` (a Rust engine with its own regular expressions, Oniguruma), word for
word, on text with Unicode letters, numbers, marks, contractions, digit runs, white space and punctuation."""
from __future__ import annotations

import subprocess
import sys

import pytest

from attnbook.pretokenizers import BYTE_TO_CHAR, PATTERNS, pretokenize

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, pre_tokenizers  # noqa: E402

# The published strings, copied from their sources (not from attnbook):
# openai/gpt-2, src/encoder.py, `pat` (also tiktoken's `gpt2` and `r50k_base` pat_str)
GPT2_ENCODER_PY = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# openai/tiktoken, tiktoken_ext/openai_public.py, cl100k_base's pat_str as first released ...
TIKTOKEN_CL100K = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                   r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
# ... and as later releases spell it, with possessive quantifiers for speed
TIKTOKEN_CL100K_LATER = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
                         r"""|\s*[\r\n]|\s+(?!\S)|\s+""")


def llama3_from_transformers() -> str:
    """Llama 3's pattern as Hugging Face `transformers` builds Llama 3 tokenizers (the GGUF pre-tokenizer table),
    checked against the default of its tiktoken converter."""
    import inspect

    pytest.importorskip("transformers")
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    converter_default = inspect.signature(TikTokenConverter.__init__).parameters["pattern"].default
    assert GGUF_PRE_TOKENIZER_SPLITS["llama3"] == converter_default
    return GGUF_PRE_TOKENIZER_SPLITS["llama3"]


def gpt2_reference(text: str) -> list[str]:
    """`tokenizers`' GPT-2 split, built into its ByteLevel pre-tokenizer (no pattern passed in)."""
    return [w for w, _ in pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True).pre_tokenize_str(text)]


def split_reference(pattern: str, text: str) -> list[str]:
    """How `transformers` builds a tiktoken-style tokenizer's pre-tokenizer (TikTokenConverter): the pattern's
    matches kept as words, then their bytes written as characters."""
    sequence = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    return [w for w, _ in sequence.pre_tokenize_str(text)]


CORPUS = [
    "x²", "x² + y³ = z⁴, H₂O",
    "½ cup, ¾ hour, Ⅻ o'clock, ١٢٣ and ١٢٣٤٥, ４５６７ in full width, ௰ and 〇",
    "中文字符和日本語のテキスト, 한국어 문장, Ελληνικά, русский текст, עברית, العربية",
    "emoji 😀👍🏽 👨‍👩‍👧 🇫🇷!! ❤️",
    "combining: e\u0301te\u0301 vs été, n\u0303, नमस्ते दुनिया, ก้าว",
    "I'M you're YOU'RE we'Ll it's IT'S she'd He'D they've THEY'VE don't DON'T i'm 'sun' ''s '''",
    "1 12 123 1234 12345 1234567890 3.14159 2,500,000 007 x1y22z333",
    "a  b   c\t\td\n\ne\r\nf \n g\n\n\n  h\u00a0i\u3000j   ",
    "Hello!!! What?! (yes) [no] {maybe} -- 'quoted' \"double\" ... @user #tag $5 100% a_b snake_case C++ -> ;)\n",
    "   leading spaces", "trailing\n\n", " ", "\n", "", "!!!\n\nword\n", "tab\tthen\n\ttab",
]
WHOLE = "\n".join(CORPUS)


def test_the_pattern_strings_are_the_published_ones():
    assert PATTERNS["gpt2"] == GPT2_ENCODER_PY
    assert PATTERNS["cl100k"] == TIKTOKEN_CL100K
    assert PATTERNS["llama3"] == llama3_from_transformers()  # Llama 3 kept cl100k's pattern ...
    assert llama3_from_transformers() == TIKTOKEN_CL100K  # ... character for character
    with pytest.raises(TypeError):
        PATTERNS["gpt2"] = "."  # read-only


@pytest.mark.parametrize("text", [*CORPUS, WHOLE])
def test_gpt2_splits_as_tokenizers_byte_level(text):
    assert pretokenize(text) == gpt2_reference(text)
    assert pretokenize(text, pattern="gpt2") == pretokenize(text)  # the default


@pytest.mark.parametrize("text", [*CORPUS, WHOLE])
def test_cl100k_splits_as_tokenizers_split_with_tiktokens_string(text):
    assert pretokenize(text, pattern="cl100k") == split_reference(TIKTOKEN_CL100K, text)
    assert pretokenize(text, pattern="cl100k") == split_reference(TIKTOKEN_CL100K_LATER, text)


@pytest.mark.parametrize("text", [*CORPUS, WHOLE])
def test_llama3_splits_as_transformers_llama3_pre_tokenizer(text):
    assert pretokenize(text, pattern="llama3") == split_reference(llama3_from_transformers(), text)


def test_x_squared_is_a_letter_then_a_number():
    """Python's re has no \\p{N}: the earlier stand-in, [^\\W\\d_] for a letter, took the '²' (a number, but not a
    decimal digit) into the word."""
    assert pretokenize("x²") == gpt2_reference("x²")
    assert pretokenize("x²") == ["x", BYTE_TO_CHAR[0xC2] + BYTE_TO_CHAR[0xB2]]  # '²' is U+00B2, UTF-8 C2 B2


def test_gpt2_and_cl100k_differ_on_contractions_and_numbers():
    text = "DON'T pay 1234567 now"
    gpt2, cl100k = gpt2_reference(text), split_reference(TIKTOKEN_CL100K, text)
    assert pretokenize(text) == gpt2 and pretokenize(text, pattern="cl100k") == cl100k
    assert gpt2 != cl100k
    assert "'T" in cl100k and "'" in gpt2  # contractions: any case in cl100k, lower case only in GPT-2
    assert "Ġ1234567" in gpt2  # GPT-2: a number run of any length, with its space
    assert [w for w in cl100k if w.isdigit()] == ["123", "456", "7"]  # cl100k: at most 3 digits, no space


def test_the_book_splits_alike(book_part):
    assert pretokenize(book_part) == gpt2_reference(book_part)
    assert pretokenize(book_part, pattern="cl100k") == split_reference(TIKTOKEN_CL100K, book_part)


@pytest.fixture(scope="module")
def book_part() -> str:
    from attnbook.text import load_war_and_peace

    return load_war_and_peace()[:200_000]


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(text=b"bytes"), TypeError, "text must be a str"),
    (dict(text=None), TypeError, "text must be a str"),
    (dict(text="a", pattern="gpt3"), ValueError, r"pattern must be one of 'gpt2', 'cl100k', 'llama3', got 'gpt3'"),
    (dict(text="a", pattern="GPT2"), ValueError, "pattern must be one of"),
    (dict(text="a", pattern=None), TypeError, "pattern must be a str naming one of"),
    (dict(text="a", pattern=PATTERNS["gpt2"]), ValueError, "pattern must be one of"),  # a name, not a regex
])
def test_pretokenize_rejects_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        pretokenize(**kwargs)


def test_importing_the_package_does_not_import_regex():
    """`regex` is imported when a text is first split: the package's modules import where it is missing
    (tests/test_colab.py installs the package without its dependencies)."""
    code = ("import sys, attnbook.text, attnbook.pretokenizers; assert 'regex' not in sys.modules; "
            "attnbook.pretokenizers.pretokenize('a'); assert 'regex' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- special tokens --------------------------------------------------------------------------------------------

EOT = "<|endoftext|>"  # GPT-2's end-of-text token (tiktoken's ENDOFTEXT)


@pytest.mark.parametrize("text, special, expected", [
    ("a<|endoftext|>b", (EOT,), ["a", EOT, "b"]),
    (EOT, (EOT,), ["", EOT, ""]),
    (EOT + EOT + "x", (EOT,), ["", EOT, "", EOT, "x"]),
    ("no special token <|endoftext", (EOT,), ["no special token <|endoftext"]),
    ("a<|end b<|endoftext|>c", ("<|end", EOT), ["a", "<|end", " b", EOT, "c"]),  # the longer wins
    ("a<|end b<|endoftext|>c", (EOT, "<|end"), ["a", "<|end", " b", EOT, "c"]),  # whatever the order
    ("a.b*c", (".", "*"), ["a", ".", "b", "*", "c"]),  # regex characters are literal
    ("a<|endoftext|>b", (), ["a<|endoftext|>b"]),
])
def test_split_special_by_hand(text, special, expected):
    from attnbook.pretokenizers import split_special

    pieces = split_special(text, special)
    assert pieces == expected
    assert "".join(pieces) == text


def test_split_special_defaults_to_end_of_text():
    from attnbook.pretokenizers import END_OF_TEXT, split_special

    assert END_OF_TEXT == EOT
    assert split_special("one" + EOT + "two") == ["one", EOT, "two"]


@pytest.mark.parametrize("args, exc, match", [
    ((b"a", (EOT,)), TypeError, "text must be a str"),
    (("a", EOT), TypeError, "special_tokens must be a list or tuple of str"),
    (("a", [EOT, None]), TypeError, "special_tokens must hold str"),
    (("a", [""]), ValueError, "special_tokens must be non-empty"),
    (("a", [EOT, EOT]), ValueError, "special_tokens must be distinct"),
])
def test_split_special_rejects_bad_arguments(args, exc, match):
    from attnbook.pretokenizers import split_special

    with pytest.raises(exc, match=match):
        split_special(*args)
