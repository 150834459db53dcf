"""attnbook.parallel.zero: ZeRO's memory formula against the paper's own numbers; the hand-written ZeRO-1 and FSDP2
train like one process on the whole batch (float64, 1e-12); the bytes each rank holds against the formula."""
from __future__ import annotations

import math

import pytest
import torch

from attnbook.parallel.launcher import launch
from attnbook.parallel.toy import tiny_config, token_batches
from attnbook.parallel.zero import PAPER_FIGURE_1, train_fsdp2, train_zero1, zero_memory
from parallel_reference import reference_run

TIMEOUT = 120
SEED, LR, STEPS = 5, 1e-2, 3


def test_zero_memory_gives_the_papers_figure_1():
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64 GPUs, K = 12; GB as printed there, typed by hand
    printed = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
    assert PAPER_FIGURE_1["gb"] == printed
    for stage, gb in printed.items():
        assert round(zero_memory(7.5e9, 64, stage) / 1e9, 1) == gb
    # the exact values, by hand: 16 Ψ; 4 Ψ + 12 Ψ / 64; 2 Ψ + 14 Ψ / 64; 16 Ψ / 64
    psi = 7.5e9
    assert zero_memory(psi, 64, 0) == pytest.approx(120e9)
    assert zero_memory(psi, 64, 1) == pytest.approx(30e9 + 1.40625e9)
    assert zero_memory(psi, 64, 2) == pytest.approx(15e9 + 1.640625e9)
    assert zero_memory(psi, 64, 3) == pytest.approx(1.875e9)
    assert zero_memory(1000, 1, 3) == zero_memory(1000, 1, 0) == 16000  # one device: nothing to share


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_params=0, n_devices=2, stage=1), "n_params"),
    (dict(n_params=10, n_devices=0, stage=1), "n_devices"),
    (dict(n_params=10, n_devices=2, stage=4), "stage"),
    (dict(n_params=10, n_devices=2, stage=1, optimizer_bytes=-1), "optimizer_bytes"),
])
def test_zero_memory_refuses_bad_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        zero_memory(**kwargs)


@pytest.fixture(scope="module")
def batches():
    return token_batches(STEPS, 12, 8, tiny_config().vocab_size, seed=2)  # 12 rows: 2 and 3 ranks


@pytest.fixture(scope="module")
def reference(batches):
    """Plain PyTorch in one process (tests/parallel_reference.py): the Llama, AdamW with decay on matrices, the whole
    batches; and the numbers of matrix and vector parameters."""
    losses, state = reference_run(batches, seed=SEED, lr=LR)
    sizes = (sum(t.numel() for t in state.values() if t.dim() >= 2),
             sum(t.numel() for t in state.values() if t.dim() < 2))
    return losses, state, sizes


def close_to_reference(result, reference):
    losses, state, _ = reference
    assert result["losses"] == pytest.approx(losses, abs=1e-12)
    assert result["state"].keys() == state.keys()
    assert max((result["state"][k] - v).abs().max().item() for k, v in state.items()) < 1e-12


@pytest.mark.parametrize("world_size", [2, 3])
def test_hand_written_zero1_trains_like_one_process_and_keeps_a_shard_of_the_state(batches, reference, world_size):
    results = launch(train_zero1, world_size, None, SEED, batches, LR, timeout=TIMEOUT)
    matrices, vectors = reference[2]
    psi = matrices + vectors
    for result in results:
        close_to_reference(result, reference)
        # each group padded to a multiple of N and cut in N: AdamW's two float64 moments of one shard per group
        shard = math.ceil(matrices / world_size) + math.ceil(vectors / world_size)
        assert result["optimizer_bytes"] == 2 * 8 * shard
        assert result["param_bytes"] == result["grad_bytes"] == 8 * psi  # stage 1: all parameters and gradients
        measured = result["param_bytes"] + result["grad_bytes"] + result["optimizer_bytes"]
        formula = zero_memory(psi, world_size, 1, param_bytes=8, grad_bytes=8, optimizer_bytes=16)
        assert 0 <= measured - formula <= 2 * 16 * (world_size - 1)  # the padding of two groups, at most
        assert result["optimizer_bytes"] < 2 * 8 * psi  # what an unsharded AdamW holds on every rank


def test_fsdp2_trains_like_one_process_and_holds_a_shard_of_everything(batches, reference):
    results = launch(train_fsdp2, 2, None, SEED, batches, LR, timeout=TIMEOUT)
    psi = sum(reference[2])
    for result in results:
        close_to_reference(result, reference)
        # every dimension 0 of the tiny model is even: each rank holds exactly half of each tensor (stage 3)
        assert result["param_bytes"] == result["grad_bytes"] == 8 * psi // 2
        assert result["optimizer_bytes"] == 2 * 8 * psi // 2
        measured = result["param_bytes"] + result["grad_bytes"] + result["optimizer_bytes"]
        assert measured == zero_memory(psi, 2, 3, param_bytes=8, grad_bytes=8, optimizer_bytes=16)


def test_sharded_adamw_needs_a_process_group():
    from attnbook.parallel.zero import ShardedAdamW

    with pytest.raises(RuntimeError, match="process group"):
        ShardedAdamW([torch.zeros(3, requires_grad=True)])
