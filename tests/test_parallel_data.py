"""attnbook.parallel.data_parallel: gradients averaged by hand and by DDP give the one-process training on the whole
batch to float64 precision; DDP's buckets counted against the model's own parameter list.

The reference is written here, from PyTorch alone: the same Llama (seeded), torch.optim.AdamW with weight decay
on the matrices, the mean cross-entropy of the whole batch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnbook.models.llama import Llama
from attnbook.parallel.data_parallel import average_gradients, bucket_sweep, train_data_parallel
from attnbook.parallel.launcher import launch
from attnbook.parallel.toy import tiny_config, tiny_llama, token_batches, train_reference
from parallel_reference import reference_run as _reference_run

TIMEOUT = 120
SEED, LR, STEPS = 3, 1e-2, 4


def reference_run(batches, config=None, seed=SEED, lr=LR):
    return _reference_run(batches, config, seed=seed, lr=lr)


@pytest.fixture(scope="module")
def batches():
    return token_batches(STEPS, 12, 8, tiny_config().vocab_size, seed=1)  # 12 rows: 2 or 3 ranks


@pytest.fixture(scope="module")
def reference(batches):
    return reference_run(batches)


def max_state_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_the_reference_trains_and_train_reference_is_the_same_run(batches, reference):
    losses, state = reference
    torch.manual_seed(SEED)
    untrained = Llama(tiny_config()).double().state_dict()
    assert max_state_difference(state, untrained) > 1e-3  # AdamW moved the weights: the comparisons mean something
    model = tiny_llama(seed=SEED)
    assert train_reference(model, batches, LR) == pytest.approx(losses, abs=1e-12)
    assert max_state_difference(model.state_dict(), state) < 1e-12


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("mode", ["manual", "ddp"])
def test_data_parallel_training_equals_one_process_on_the_whole_batch(batches, reference, mode, world_size):
    losses, state = reference
    results = launch(train_data_parallel, world_size, mode, None, SEED, batches, LR, timeout=TIMEOUT)
    for result in results:  # every rank ends with the same model: the one-process model
        assert result["losses"] == pytest.approx(losses, abs=1e-12)
        assert max_state_difference(result["state"], state) < 1e-12


def two_halves(rank, world_size, batches):
    """Average_gradients on a model that saw half a batch: the mean of the two halves' gradients."""
    model = tiny_llama(seed=SEED)
    x, y = batches[0]
    rows = slice(rank * 6, rank * 6 + 6)  # contiguous halves this time: any split of equal size works
    logits = model(x[rows])
    F.cross_entropy(logits.reshape(-1, logits.size(-1)), y[rows].reshape(-1)).backward()
    calls = average_gradients(model)
    return calls, {n: p.grad for n, p in model.named_parameters()}


def test_average_gradients_gives_the_whole_batch_gradient_with_one_call_per_parameter(batches):
    results = launch(two_halves, 2, batches, timeout=TIMEOUT)
    model = tiny_llama(seed=SEED)
    x, y = batches[0]
    logits = model(x)
    F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).backward()
    for calls, grads in results:
        assert calls == len(list(model.parameters())) == 21  # embedding, 2 x 9 per block, final norm, head
        for name, p in model.named_parameters():
            assert (grads[name] - p.grad).abs().max().item() < 1e-12


def test_ddp_buckets_one_per_parameter_when_tiny_and_one_in_all_when_large():
    config = tiny_config()
    model = tiny_llama(config, dtype=torch.float32)
    params = list(model.parameters())
    grad_bytes = 4 * sum(p.numel() for p in params)  # float32 gradients
    assert grad_bytes < 2**20  # smaller than 1 MiB: a 25 MiB cap holds them all
    tiny, large = bucket_sweep(caps_mb=(1e-9, 25.0), world_size=2, config=config, steps=3, seq_len=8,
                               timeout=TIMEOUT)
    assert tiny["calls"] == len(params)  # every gradient fills a bucket of its own
    assert sorted(tiny["bucket_bytes"]) == sorted(4 * p.numel() for p in params)
    assert large["calls"] == 1 and large["bucket_bytes"] == [grad_bytes]
    for row in (tiny, large):
        assert row["grad_bytes"] == grad_bytes
        assert row["start_s"] == sorted(row["start_s"])
        assert 0 < row["start_s"][0] < row["backward_s"]  # the first all-reduce starts while backward runs
        assert row["backward_s"] > 0 and row["backward_no_sync_s"] > 0


def test_bucket_sweep_refuses_bad_caps():
    with pytest.raises(ValueError, match="caps_mb"):
        bucket_sweep(caps_mb=(0,))
    with pytest.raises(ValueError, match="max_len"):
        bucket_sweep(caps_mb=(1.0,), config=tiny_config(), seq_len=64)
