"""Tests of attnbook.data: determinism, shapes, disjoint splits, encode/decode round trips, batching, digits."""
from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from attnbook.data import (
    BOS_ID,
    EOS_ID,
    GRAMMAR_WORDS,
    IGNORE_INDEX,
    MASK_ID,
    PAD_ID,
    CharVocab,
    GrammarCorpus,
    WordVocab,
    Seq2SeqBatch,
    Seq2SeqTask,
    TensorBatches,
    decoder_inputs_and_labels,
    grammar_corpus,
    load_digits_tensors,
    mlm_mask,
    parse_sentence,
    reversal_task,
)


@pytest.fixture(scope="module")
def task():
    return reversal_task(n_train=2000, n_test=300, min_len=3, max_len=8, seed=0)


# ----------------------------------------------------------------------------------------------------------
# Vocabulary
# ----------------------------------------------------------------------------------------------------------


def test_vocab_layout():
    v = CharVocab()
    assert (v.pad_id, v.bos_id, v.eos_id) == (PAD_ID, BOS_ID, EOS_ID) == (0, 1, 2)
    assert v.size == len(v) == 13
    assert v.tokens == ["<pad>", "<bos>", "<eos>"] + [str(i) for i in range(10)]
    assert v.encode("0912") == [3, 12, 4, 5]
    assert CharVocab("ab").size == 5


def test_vocab_decode_skips_specials_and_stops_at_eos():
    v = CharVocab()
    assert v.decode([BOS_ID, 4, 5, 6, EOS_ID, 7, 8]) == "123"
    assert v.decode(torch.tensor([BOS_ID, 12, EOS_ID, PAD_ID, PAD_ID])) == "9"
    assert v.decode([PAD_ID, 3, PAD_ID, 4]) == "01"
    assert v.decode([]) == ""
    assert v.decode_batch(torch.tensor([[1, 4, 2, 0], [1, 5, 6, 2]])) == ["1", "23"]


@pytest.mark.parametrize("text", ["", "0", "9876543210", "5555"])
def test_vocab_round_trip(text):
    v = CharVocab()
    assert v.decode(v.encode(text)) == text
    assert v.decode([BOS_ID, *v.encode(text), EOS_ID, PAD_ID]) == text


def test_vocab_rejects_bad_input():
    v = CharVocab("0123")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        v.encode("0129")
    with pytest.raises(TypeError, match="text"):
        v.encode(123)
    with pytest.raises(ValueError, match="id 99"):
        v.decode([99])
    with pytest.raises(TypeError, match="ids"):
        v.decode([1.5])
    with pytest.raises(ValueError, match="ids"):
        v.decode(torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="ids"):
        v.decode_batch(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="symbols"):
        CharVocab("aa")
    with pytest.raises(TypeError, match="symbols"):
        CharVocab("")


# ----------------------------------------------------------------------------------------------------------
# Reversal task
# ----------------------------------------------------------------------------------------------------------


def test_reversal_task_sizes_lengths_and_alphabet(task):
    assert len(task.train) == 2000 and len(task.test) == 300
    for s in task.train + task.test:
        assert 3 <= len(s) <= 8
        assert set(s) <= set("0123456789")
    assert set(len(s) for s in task.train) == set(range(3, 9))  # every length occurs
    assert task.target("1234") == "4321"
    assert task.vocab.size == 13


def test_reversal_task_train_and_test_do_not_overlap(task):
    assert not set(task.train) & set(task.test)
    assert len(set(task.train)) == len(task.train)
    assert len(set(task.test)) == len(task.test)


def test_reversal_task_is_deterministic_and_seed_dependent():
    a = reversal_task(n_train=300, n_test=50, seed=3)
    b = reversal_task(n_train=300, n_test=50, seed=3)
    c = reversal_task(n_train=300, n_test=50, seed=4)
    assert a.train == b.train and a.test == b.test
    assert a.train != c.train
    torch.testing.assert_close(a.encode(a.test), b.encode(b.test))


def test_reversal_task_digits_are_roughly_uniform(task):
    counts = Counter("".join(task.train))
    expected = sum(counts.values()) / 10
    assert all(abs(c - expected) < 0.1 * expected for c in counts.values())


def test_encode_shapes_and_contents(task):
    sources = ["123", "98765", "4040"]
    batch = task.encode(sources)
    assert isinstance(batch, Seq2SeqBatch)
    assert batch.src.shape == (3, 6) and batch.tgt.shape == (3, 7)
    assert batch.src.dtype == batch.tgt.dtype == torch.long
    torch.testing.assert_close(batch.src_lengths, torch.tensor([4, 6, 5]))
    torch.testing.assert_close(batch.tgt_lengths, torch.tensor([5, 7, 6]))
    d = {str(i): 3 + i for i in range(10)}
    expected_tgt = [[BOS_ID, d["3"], d["2"], d["1"], EOS_ID, PAD_ID, PAD_ID]]
    assert batch.tgt[:1].tolist() == expected_tgt
    assert batch.src[0].tolist() == [d["1"], d["2"], d["3"], EOS_ID, PAD_ID, PAD_ID]
    # padding comes exactly after each length
    for row, n in zip(batch.src, batch.src_lengths):
        assert (row[:n] != PAD_ID).all() and (row[n:] == PAD_ID).all()
    for row, n in zip(batch.tgt, batch.tgt_lengths):
        assert (row[:n] != PAD_ID).all() and (row[n:] == PAD_ID).all()


def test_encode_without_source_eos():
    task = reversal_task(n_train=20, n_test=5, src_eos=False)
    batch = task.encode(["12", "345"])
    assert batch.src.tolist() == [[4, 5, PAD_ID], [6, 7, 8]]
    assert batch.src_lengths.tolist() == [2, 3]


def test_decode_round_trip_of_a_whole_split(task):
    batch = task.encode(task.test)
    assert task.vocab.decode_batch(batch.src) == task.test
    assert task.vocab.decode_batch(batch.tgt) == [s[::-1] for s in task.test]


def test_decoder_inputs_and_labels_shift_by_one(task):
    batch = task.encode(["123", "45"])
    inputs, labels = decoder_inputs_and_labels(batch.tgt)
    assert inputs.shape == labels.shape == (2, 4)
    assert inputs[:, 0].tolist() == [BOS_ID, BOS_ID]
    assert torch.equal(inputs[:, 1:], labels[:, :-1])
    assert labels[0].tolist() == [6, 5, 4, EOS_ID]
    assert labels[1].tolist() == [8, 7, EOS_ID, PAD_ID]
    with pytest.raises(ValueError, match="tgt"):
        decoder_inputs_and_labels(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="tgt"):
        decoder_inputs_and_labels(torch.zeros(2, 1, dtype=torch.long))


def test_custom_task_in_one_line():
    sort_task = Seq2SeqTask(train=["312", "21"], test=["3300"], transform=lambda s: "".join(sorted(s)))
    assert sort_task.vocab.decode_batch(sort_task.encode(sort_task.test).tgt) == ["0033"]


def test_task_batches_cover_the_split_once_per_epoch(task):
    batches = task.batches(64, seed=0)
    assert len(batches) == -(-2000 // 64)
    seen = []
    for b in batches:
        assert isinstance(b, Seq2SeqBatch) and b.src.size(0) <= 64
        seen += task.vocab.decode_batch(b.src)
    assert sorted(seen) == sorted(task.train)
    test_batches = list(task.batches(100, split="test", shuffle=False))
    assert task.vocab.decode_batch(test_batches[0].src) == task.test[:100]
    with pytest.raises(ValueError, match="split"):
        task.batches(10, split="valid")


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"n_train": 0}, ValueError, "n_train"),
        ({"n_test": 1.5}, TypeError, "n_test"),
        ({"min_len": 0}, ValueError, "min_len"),
        ({"min_len": 5, "max_len": 4}, ValueError, "max_len"),
        ({"n_digits": 11}, ValueError, "n_digits"),
        ({"n_digits": 1}, ValueError, "n_digits"),
        ({"n_train": 900, "n_test": 200, "min_len": 3, "max_len": 3}, ValueError, "n_train \\+ n_test"),
        ({"seed": -1}, ValueError, "seed"),
        ({"src_eos": 1}, TypeError, "src_eos"),
    ],
)
def test_reversal_task_rejects_bad_arguments(kwargs, exc, match):
    args = {"n_train": 100, "n_test": 10} | kwargs
    with pytest.raises(exc, match=match):
        reversal_task(**args)


def test_encode_rejects_a_bare_string(task):
    with pytest.raises(TypeError, match="sources"):
        task.encode("123")


# ----------------------------------------------------------------------------------------------------------
# TensorBatches
# ----------------------------------------------------------------------------------------------------------


def test_tensor_batches_seeded_orders_are_reproducible_and_change_per_epoch():
    x = torch.arange(10)
    a = TensorBatches(x, 4, seed=1)
    first, second = [b.tolist() for b in a], [b.tolist() for b in a]
    assert first != second  # a new order each pass
    assert [b.tolist() for b in TensorBatches(x, 4, seed=1)] == first
    assert sorted(sum(first, [])) == list(range(10))
    assert [len(b) for b in first] == [4, 4, 2]


def test_tensor_batches_global_generator_when_seed_is_none():
    x = torch.arange(20)
    torch.manual_seed(5)
    a = [b.tolist() for b in TensorBatches(x, 8)]
    torch.manual_seed(5)
    b = [b.tolist() for b in TensorBatches(x, 8)]
    assert a == b


def test_tensor_batches_tuple_structure_drop_last_and_no_shuffle():
    x, y = torch.arange(10), torch.arange(10) * 10
    batches = TensorBatches((x, y), 3, shuffle=False, drop_last=True)
    assert len(batches) == 3
    out = list(batches)
    assert all(isinstance(b, tuple) and len(b) == 2 for b in out)
    assert out[1][0].tolist() == [3, 4, 5] and out[1][1].tolist() == [30, 40, 50]
    shuffled = list(TensorBatches((x, y), 5, seed=0))
    for bx, by in shuffled:
        assert torch.equal(by, bx * 10)  # rows stay aligned


def test_tensor_batches_rejects_bad_arguments():
    with pytest.raises(ValueError, match="first dimension"):
        TensorBatches((torch.zeros(3), torch.zeros(4)), 2)
    with pytest.raises(ValueError, match="batch_size"):
        TensorBatches(torch.zeros(3), 0)
    with pytest.raises(TypeError, match="data"):
        TensorBatches([1, 2, 3], 2)
    with pytest.raises(TypeError, match="data"):
        TensorBatches("abc", 2)


# ----------------------------------------------------------------------------------------------------------
# scikit-learn digits
# ----------------------------------------------------------------------------------------------------------


def test_load_digits_tensors_shapes_range_and_split():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    x_train, y_train, x_test, y_test = load_digits_tensors(seed=0, test_fraction=0.2)
    assert x_train.shape[1:] == x_test.shape[1:] == (1, 8, 8)
    assert x_train.dtype == torch.float32 and y_train.dtype == torch.long
    assert len(x_train) + len(x_test) == 1797 and len(y_train) == len(x_train) and len(y_test) == len(x_test)
    assert 0.18 < len(x_test) / 1797 < 0.22
    assert x_train.min() >= 0 and x_train.max() == 1 and x_test.max() <= 1
    # stratified: each class keeps its share in the test part (within one image of exact)
    reference = load_digits()
    totals = torch.bincount(torch.tensor(reference.target), minlength=10)
    assert torch.all((torch.bincount(y_test, minlength=10) - 0.2 * totals).abs() <= 1)
    # the images are the library's, scaled by 1/16, with their labels: every test image is found with its label
    images = torch.tensor(reference.images, dtype=torch.float32) / 16
    flat = images.reshape(1797, 64)
    for img, label in zip(x_test[:20], y_test[:20]):
        hits = (flat == img.reshape(64)).all(dim=1).nonzero().flatten()
        assert any(reference.target[h] == label for h in hits.tolist())
    # disjoint: the two parts together are a permutation of the data set
    all_x = torch.cat((x_train, x_test)).reshape(-1, 64)
    key = lambda t: sorted(map(tuple, t.tolist()))
    assert key(all_x) == key(flat)


def test_load_digits_tensors_is_deterministic_and_shuffled():
    pytest.importorskip("sklearn")
    a = load_digits_tensors(seed=1)
    b = load_digits_tensors(seed=1)
    c = load_digits_tensors(seed=2)
    for u, v in zip(a, b):
        assert torch.equal(u, v)
    assert not torch.equal(a[1], c[1])
    assert len(set(a[1][:20].tolist())) > 3  # not sorted by class


def test_load_digits_tensors_rejects_bad_arguments():
    with pytest.raises(ValueError, match="test_fraction"):
        load_digits_tensors(test_fraction=1.0)
    with pytest.raises(TypeError, match="seed"):
        load_digits_tensors(seed="0")


def test_load_digits_tensors_without_sklearn_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError("no sklearn")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        load_digits_tensors()


# ----------------------------------------------------------------------------------------------------------
# Word vocabulary, toy grammar corpus, MLM masking (chapter 8)
# ----------------------------------------------------------------------------------------------------------


def test_word_vocab_layout_encode_and_decode():
    v = WordVocab(("the", "cat", "is"))
    assert (v.pad_id, v.bos_id, v.eos_id, v.mask_id) == (PAD_ID, BOS_ID, EOS_ID, MASK_ID) == (0, 1, 2, 3)
    assert v.size == len(v) == 7 and v.special_ids == (0, 1, 2, 3)
    assert v.tokens == ["[PAD]", "[BOS]", "[EOS]", "[MASK]", "the", "cat", "is"]
    assert v.encode("the cat is") == [1, 4, 5, 6, 2]
    assert v.encode(["cat", "is"], bos=False, eos=False) == [5, 6]
    assert v.token_id("cat") == 5 and v.token_id("[MASK]") == 3
    assert v.decode([1, 4, 3, 6, 2, 5, 0]) == "the [MASK] is"  # BOS skipped, MASK shown, stops at EOS
    assert v.decode(torch.tensor([0, 4, 0, 5])) == "the cat"
    assert v.decode_batch(torch.tensor([[1, 4, 2], [1, 6, 2]])) == ["the", "is"]
    assert v.decode(v.encode("is the cat")) == "is the cat"


def test_word_vocab_rejects_bad_input():
    v = WordVocab(("a", "b"))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        v.encode("a c")
    with pytest.raises(TypeError, match="sentence"):
        v.encode(3)
    with pytest.raises(ValueError, match="id 9"):
        v.decode([9])
    with pytest.raises(TypeError, match="ids"):
        v.decode([1.0])
    with pytest.raises(ValueError, match="ids"):
        v.decode(torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="token"):
        v.token_id("c")
    with pytest.raises(ValueError, match="repeat"):
        WordVocab(("a", "a"))
    with pytest.raises(ValueError, match="special"):
        WordVocab(("a", "[MASK]"))
    with pytest.raises(ValueError, match="spaces"):
        WordVocab(("a b",))
    with pytest.raises(TypeError, match="words"):
        WordVocab("ab")


@pytest.fixture(scope="module")
def corpus():
    return grammar_corpus(n_train=3000, n_test=1000, seed=0)


def test_grammar_corpus_is_deterministic_and_seed_dependent():
    a, b, c = grammar_corpus(300, 100, seed=5), grammar_corpus(300, 100, seed=5), grammar_corpus(300, 100, seed=6)
    assert a.train == b.train and a.test == b.test
    assert a.train != c.train
    assert torch.equal(a.encode(a.test).ids, b.encode(b.test).ids)


def test_grammar_corpus_sizes_and_no_overlap(corpus):
    assert isinstance(corpus, GrammarCorpus)
    assert len(corpus.train) == 3000 and len(corpus.test) == 1000
    assert len(set(corpus.train)) == 3000 and len(set(corpus.test)) == 1000
    assert not set(corpus.train) & set(corpus.test)
    assert corpus.split("train") is corpus.train and corpus.split("test") is corpus.test
    assert corpus.vocab.words == GRAMMAR_WORDS and len(corpus.vocab) == 4 + len(GRAMMAR_WORDS)


def test_grammar_corpus_mixes_kinds_and_numbers(corpus):
    words = [s.split() for s in corpus.train]
    questions = sum(w[0] == "why" for w in words) / len(words)
    plural = sum(("are" in w) for w in words) / len(words)
    assert 0.4 < questions < 0.6 and 0.4 < plural < 0.6
    assert {len(w) for w in words} == {9}
    assert set(w for s in words for w in s) == set(GRAMMAR_WORDS)  # every word of the vocabulary occurs


def test_every_sentence_parses_and_encodes_with_its_auxiliary(corpus):
    batch = corpus.encode(corpus.test)
    assert batch.ids.shape == (1000, 11) and batch.ids.dtype == torch.long
    assert (batch.ids[:, 0] == BOS_ID).all() and (batch.ids[:, -1] == EOS_ID).all()
    is_id, are_id = corpus.vocab.token_id("is"), corpus.vocab.token_id("are")
    rows = torch.arange(1000)
    aux = batch.ids[rows, batch.aux_pos]
    assert ((aux == is_id) | (aux == are_id)).all()
    for sentence, pos, question in zip(corpus.test, batch.aux_pos.tolist(), batch.question.tolist()):
        words = sentence.split()
        assert corpus.is_grammatical(sentence)
        assert question == (words[0] == "why") and pos == (2 if question else 4)
        assert words[pos - 1] in ("is", "are") and words.count("is") + words.count("are") == 1


@pytest.mark.parametrize("sentence, expected", [
    ("why are the old dogs so hungry today ?", ("question", 1)),
    ("the small cat is tired and happy again .", ("statement", 3)),
    ("why is the old dogs so hungry today ?", None),  # no agreement
    ("the small cats is tired and happy again .", None),  # no agreement
    ("the small cat is tired and tired again .", None),  # the same state twice
    ("why are the old dogs so hungry today .", None),  # a question ends with ?
    ("are the old dogs so hungry today ?", None),  # eight words
    ("the cat is tired and happy again now .", None),  # a word out of place
    ("why are the old dogz so hungry today ?", None),  # not a noun
])
def test_parse_sentence(sentence, expected):
    assert parse_sentence(sentence) == expected
    assert parse_sentence(sentence.split()) == expected


def test_question_auxiliary_needs_the_right_context(corpus):
    """In a question the words left of the auxiliary say nothing about it: counted over the corpus, the best guess
    from the left context is right about half the time. The words to its right always determine it."""
    from collections import defaultdict

    by_left, by_right = defaultdict(Counter), defaultdict(Counter)
    statements_by_left = defaultdict(Counter)
    for sentence in corpus.train + corpus.test:
        words = sentence.split()
        kind, i = parse_sentence(words)
        if kind == "question":
            by_left[tuple(words[:i])][words[i]] += 1
            by_right[tuple(words[i + 1:])][words[i]] += 1
        else:
            statements_by_left[tuple(words[:i])][words[i]] += 1
    n = sum(sum(c.values()) for c in by_left.values())
    best_from_left = sum(max(c.values()) for c in by_left.values()) / n
    assert list(by_left) == [("why",)]  # one left context for every question
    assert abs(best_from_left - 0.5) <= 4 * math.sqrt(0.25 / n)  # a fair coin: within 4 binomial sd of 1/2
    assert all(len(c) == 1 for c in by_right.values())  # every right context allows one auxiliary only
    assert all(len(c) == 1 for c in statements_by_left.values())  # statements: the left context decides


def test_grammar_corpus_rejects_bad_arguments(corpus):
    with pytest.raises(ValueError, match="n_train"):
        grammar_corpus(n_train=0)
    with pytest.raises(ValueError, match="too many"):
        grammar_corpus(n_train=100_000)
    with pytest.raises(TypeError, match="seed"):
        grammar_corpus(seed="0")
    with pytest.raises(ValueError, match="not a sentence"):
        corpus.encode(["why is the cat"])
    with pytest.raises(TypeError, match="sentences"):
        corpus.encode("why are the old dogs so hungry today ?")
    with pytest.raises(ValueError, match="split"):
        corpus.split("valid")


def _mlm_ids(shape, vocab_size, seed, specials=()):
    """Random ids in [len(specials)... vocab_size), with the given special ids sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab_size, shape, generator=g)
    for s in specials:
        ids = torch.where(torch.rand(shape, generator=g) < 0.1, s, ids)
    return ids


def test_mlm_mask_structure_and_labels():
    ids = _mlm_ids((50, 40), 30, seed=1, specials=(0, 1, 2))
    before = ids.clone()
    masked, labels, chosen = mlm_mask(ids, MASK_ID, 30, torch.Generator().manual_seed(2), special_ids=(0, 1, 2, 3))
    assert torch.equal(ids, before)  # the input is not changed
    assert masked.shape == labels.shape == chosen.shape == ids.shape
    assert masked.dtype == labels.dtype == torch.long and chosen.dtype == torch.bool
    assert torch.equal(chosen, labels != IGNORE_INDEX) and IGNORE_INDEX == -100
    assert torch.equal(labels[chosen], ids[chosen]) and (labels[~chosen] == -100).all()
    assert torch.equal(masked[~chosen], ids[~chosen])  # only chosen positions may change
    assert not chosen[ids < 3].any()  # special tokens are never chosen
    assert masked.min() >= 0 and masked.max() < 30
    for shape in ((7,), (3, 4, 5)):  # any shape
        out = mlm_mask(torch.full(shape, 9), MASK_ID, 30, torch.Generator().manual_seed(0))
        assert all(t.shape == shape for t in out)


def test_mlm_mask_proportions_are_within_binomial_bounds():
    """15% of the non-special positions chosen; of those 80% [MASK], 10% another id, 10% unchanged. Over 10 seeds
    and 300,000 positions every share lies within 5 binomial standard deviations of its expected value (a
    right implementation fails with probability below 1e-5)."""
    V = 100
    n_chosen = n_words = n_mask = n_same = n_other = 0
    for seed in range(10):
        ids = _mlm_ids((300, 100), V, seed=100 + seed, specials=(0, 1, 2))
        masked, labels, chosen = mlm_mask(ids, MASK_ID, V, torch.Generator().manual_seed(seed),
                                          special_ids=(0, 1, 2, 3))
        words = ids >= 4
        n_words += int(words.sum())
        n_chosen += int(chosen.sum())
        now, was = masked[chosen], ids[chosen]
        n_mask += int((now == MASK_ID).sum())
        n_same += int((now == was).sum())
        n_other += int(((now != was) & (now != MASK_ID)).sum())

    def within(count, n, p):
        return abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p))

    assert within(n_chosen, n_words, 0.15)
    # a random id is [MASK] with probability 1/V and the original id with probability 1/V
    assert within(n_mask, n_chosen, 0.8 + 0.1 / V)
    assert within(n_same, n_chosen, 0.1 + 0.1 / V)
    assert within(n_other, n_chosen, 0.1 * (V - 2) / V)


def test_mlm_mask_random_ids_are_uniform_over_the_whole_vocabulary():
    V = 10
    ids = torch.full((1000, 1000), 7)
    masked, _, chosen = mlm_mask(ids, MASK_ID, V, torch.Generator().manual_seed(3))
    replaced = masked[chosen & (masked != MASK_ID) & (masked != 7)]  # random ids other than [MASK] and 7
    counts = torch.bincount(replaced, minlength=V).double()
    assert counts[MASK_ID] == 0 and counts[7] == 0
    others = torch.tensor([i for i in range(V) if i not in (MASK_ID, 7)])
    n, p = float(counts.sum()), 1 / (V - 2)  # uniform over the other 8 ids, special ids included
    assert (counts[others] - n * p).abs().max() <= 5 * math.sqrt(n * p * (1 - p))


def test_mlm_mask_uses_only_its_generator():
    ids = _mlm_ids((40, 30), 50, seed=4)
    torch.manual_seed(0)
    a = mlm_mask(ids, MASK_ID, 50, torch.Generator().manual_seed(9))
    torch.manual_seed(1)  # another state of the global generator changes nothing
    b = mlm_mask(ids, MASK_ID, 50, torch.Generator().manual_seed(9))
    c = mlm_mask(ids, MASK_ID, 50, torch.Generator().manual_seed(10))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[1], c[1])


def test_mlm_mask_probability_argument():
    ids = _mlm_ids((20, 20), 50, seed=5, specials=(1,))
    _, labels, chosen = mlm_mask(ids, MASK_ID, 50, torch.Generator().manual_seed(0), p=0.0)
    assert not chosen.any() and (labels == -100).all()
    _, _, chosen = mlm_mask(ids, MASK_ID, 50, torch.Generator().manual_seed(0), p=1.0, special_ids=[1])
    assert torch.equal(chosen, ids != 1)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"ids": torch.zeros(3)}, TypeError, "ids"),
    ({"ids": torch.tensor([1, 60])}, ValueError, "ids"),
    ({"mask_id": 50}, ValueError, "mask_id"),
    ({"vocab_size": 0}, ValueError, "vocab_size"),
    ({"generator": "seed"}, TypeError, "generator"),
    ({"p": 1.5}, ValueError, "p must"),
    ({"special_ids": "012"}, TypeError, "special_ids"),
])
def test_mlm_mask_rejects_bad_arguments(kwargs, exc, match):
    args = {"ids": torch.tensor([[4, 5]]), "mask_id": MASK_ID, "vocab_size": 50, "generator": None} | kwargs
    with pytest.raises(exc, match=match):
        mlm_mask(**args)
