"""Tests of attnbook.data: determinism, shapes, disjoint splits, encode/decode round trips, batching, digits."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from attnbook.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    CharVocab,
    Seq2SeqBatch,
    Seq2SeqTask,
    TensorBatches,
    decoder_inputs_and_labels,
    load_digits_tensors,
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
