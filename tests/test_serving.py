"""attnbook.serving against independent references: plain concatenation, hand counts and a hand-run schedule."""
import pytest
import torch

from attnbook.models import GPT, GPTConfig
from attnbook.serving import (
    PagedKVCache, Request, StepCost, cat_copied_bytes, gather_pages, mla_cache_bytes, paged_waste_bytes,
    preallocated_waste_bytes, prefill_decode_times, seeded_trace, simulate_continuous, simulate_static, summarize,
    window_cache_bytes,
)


def test_gathered_cache_equals_the_plain_concatenation_of_what_was_appended():
    g = torch.Generator().manual_seed(0)
    cache = PagedKVCache(num_blocks=12, block_size=3, n_heads=2, d_head=5, dtype=torch.float64)
    appended = {s: ([], []) for s in "abc"}
    order = ["a", "b", "a", "c", "a", "a", "b", "c", "a", "b", "b", "a", "a", "c"]  # interleaved: blocks mix
    for s in order:
        k, v = torch.randn(2, 5, generator=g, dtype=torch.float64), torch.randn(2, 5, generator=g, dtype=torch.float64)
        cache.append(s, k, v)
        appended[s][0].append(k)
        appended[s][1].append(v)
    for s, (ks, vs) in appended.items():
        k, v = cache.gather(s)
        assert torch.equal(k, torch.stack(ks)) and torch.equal(v, torch.stack(vs))
    assert cache.tables["a"] != list(range(cache.tables["a"][0], cache.tables["a"][0] + 3))  # not contiguous
    # 7 tokens of a in blocks of 3: 3 blocks, 2 unused slots; b: 4 tokens, 2 blocks, 2 unused; c: 3, 1 block, 0
    assert cache.wasted_slots() == 2 + 2 + 0
    cache.release("a")
    assert len(cache.free_blocks) == 12 - 2 - 1


def test_gather_pages_follows_the_table_by_hand():
    pool = torch.arange(4 * 2).view(4, 2, 1, 1).float()  # block b, slot s holds 2b + s
    got = gather_pages(pool, torch.tensor([3, 0, 2]), 5)
    assert got.flatten().tolist() == [6, 7, 0, 1, 4]  # blocks 3, 0, then the first slot of block 2
    assert gather_pages(pool, torch.tensor([], dtype=torch.long), 0).shape == (0, 1, 1)


def test_a_full_pool_and_unknown_sequences_raise():
    cache = PagedKVCache(1, 2, 1, 1)
    one = torch.zeros(1, 1)
    cache.append(0, one, one)
    cache.append(0, one, one)
    with pytest.raises(RuntimeError, match="all in use"):
        cache.append(1, one, one)
    with pytest.raises(KeyError):
        cache.gather(7)
    with pytest.raises(ValueError, match="k must have shape"):
        cache.append(0, torch.zeros(2, 1), one)


@pytest.mark.parametrize("args, error, match", [
    ((torch.zeros(2, 2, 2), torch.tensor([0]), 1), ValueError, "pool must be"),
    ((torch.zeros(2, 2, 1, 1), torch.tensor([0.0]), 1), TypeError, "block_table must be a 1-D integer"),
    ((torch.zeros(2, 2, 1, 1), torch.tensor([0, 1]), 2), ValueError, "ceil"),
    ((torch.zeros(2, 2, 1, 1), torch.tensor([2]), 1), ValueError, "outside 0..1"),
    ((torch.zeros(2, 2, 1, 1), torch.tensor([0]), -1), ValueError, "length must be >= 0"),
])
def test_gather_pages_refuses_bad_arguments(args, error, match):
    with pytest.raises(error, match=match):
        gather_pages(*args)


def test_waste_formulas_by_hand():
    # blocks of 4: 5 tokens fill 2 blocks (3 unused slots), 8 fill 2 exactly, 1 uses 1 of 4 (3 unused)
    assert paged_waste_bytes([5, 8, 1], 4, bytes_per_token=10) == 60
    assert paged_waste_bytes([5, 8, 1], 1, bytes_per_token=10) == 0
    assert preallocated_waste_bytes([5, 8, 1], 10, bytes_per_token=10) == (5 + 2 + 9) * 10
    with pytest.raises(ValueError, match="max_len"):
        preallocated_waste_bytes([11], 10, 1)
    with pytest.raises(TypeError, match="lengths"):
        paged_waste_bytes(5, 4, 1)


def test_cat_copies_what_a_real_cat_loop_copies():
    cache, copied = torch.zeros(0, 2, 3), 0
    for _ in range(9):
        copied += cache.nbytes  # torch.cat reads the old cache into a new tensor
        cache = torch.cat([cache, torch.ones(1, 2, 3)])
    assert cat_copied_bytes(9, bytes_per_token=2 * 3 * 4) == copied == 36 * 24


def test_window_sink_and_mla_cache_bytes_by_hand():
    # Mistral 7B: 32 layers, 8 kv heads of 128, window 4096, float16: 2 x 32 x 8 x 128 x 4096 x 2 bytes
    assert window_cache_bytes(32, 8, 128, 32768, 4096) == 2 * 32 * 8 * 128 * 4096 * 2 == 2**29
    assert window_cache_bytes(32, 8, 128, 1000, 4096) == 2 * 32 * 8 * 128 * 1000 * 2
    assert window_cache_bytes(1, 1, 1, 100, 10, n_sink=4, dtype=torch.float32) == 2 * 14 * 4
    # DeepSeek-V2: 60 layers, latent 512 + RoPE key 64 per token and layer, float16
    assert mla_cache_bytes(60, 512, 64, 1) == 60 * 576 * 2
    with pytest.raises(TypeError, match="dtype"):
        mla_cache_bytes(1, 1, 1, 1, dtype="float16")


# A 3-request trace run by hand. Cost of a step: 1 + 0.5 per token. A arrives at 0 (prompt 2, output 3),
# B at 0 (prompt 4, output 1), C at 1 (prompt 2, output 2); at most 2 running.
TRACE = [Request(0.0, 2, 3), Request(0.0, 4, 1), Request(1.0, 2, 2)]
COST = StepCost(1.0, 0.5)


def test_continuous_batching_by_hand():
    # step 1, t 0 -> 4: A and B prefill (6 tokens): first tokens at 4, B (1 token) is done.
    # step 2, t 4 -> 6.5: C joins (2 tokens) beside A's decode (1): C's first token at 6.5.
    # step 3, t 6.5 -> 8.5: A and C decode one token each: A's third and C's second, both done.
    done = {f.request: (f.first_token, f.done) for f in simulate_continuous(TRACE, COST, 2)}
    assert done == {TRACE[0]: (4.0, 8.5), TRACE[1]: (4.0, 4.0), TRACE[2]: (6.5, 8.5)}


def test_static_batching_by_hand():
    # batch A, B: prefill padded to 2 x 4 tokens, 0 -> 5; two decode steps of 2 rows (3 - 1 for A), 5 -> 9.
    # batch C (it waited): prefill 2 tokens, 9 -> 11; one decode step of 1 row, 11 -> 12.5.
    done = {f.request: (f.first_token, f.done) for f in simulate_static(TRACE, COST, 2)}
    assert done == {TRACE[0]: (5.0, 9.0), TRACE[1]: (5.0, 9.0), TRACE[2]: (11.0, 12.5)}


def test_summary_by_hand():
    s = summarize(simulate_continuous(TRACE, COST, 2))
    assert s["throughput"] == pytest.approx(6 / 8.5)
    assert s["mean"] == pytest.approx((8.5 + 4 + 7.5) / 3) and s["p50"] == 7.5 and s["p99"] == 8.5
    assert s["ttft"] == pytest.approx((4 + 4 + 5.5) / 3)
    assert summarize(simulate_static(TRACE, COST, 2))["throughput"] == pytest.approx(6 / 12.5)


def test_a_batch_of_one_is_the_same_schedule_both_ways():
    trace = seeded_trace(20, seed=3, prompt=(1, 8), output=(1, 8))
    assert simulate_static(trace, COST, 1) == simulate_continuous(trace, COST, 1)


def test_identical_requests_are_each_served():
    twins = [Request(0.0, 3, 2)] * 3
    for simulate in (simulate_static, simulate_continuous):
        assert len(simulate(twins, COST, 2)) == 3


def test_seeded_trace_is_seeded_and_in_range():
    a = seeded_trace(50, seed=1, prompt=(3, 9), output=(2, 4))
    b = seeded_trace(50, seed=1, prompt=(3, 9), output=(2, 4))
    assert a == b != seeded_trace(50, seed=2, prompt=(3, 9), output=(2, 4))
    assert all(3 <= r.prompt <= 9 and 2 <= r.output <= 4 for r in a)
    assert all(x.arrival < y.arrival for x, y in zip(a, a[1:]))


@pytest.mark.parametrize("call, error, match", [
    (lambda: simulate_static(TRACE, (1.0, 0.5), 2), TypeError, "cost must be a StepCost"),
    (lambda: simulate_continuous(TRACE, COST, 0), ValueError, "max_batch must be >= 1"),
    (lambda: simulate_continuous([Request(0.0, 2, 0)], COST, 1), ValueError, "output >= 1"),
    (lambda: simulate_continuous(TRACE, StepCost(-1.0, 0.5), 1), ValueError, "cost.fixed"),
    (lambda: seeded_trace(3, prompt=(9, 3)), ValueError, "low <= high"),
    (lambda: summarize([]), ValueError, "at least one"),
])
def test_simulator_refuses_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_prefill_decode_times_are_positive():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=32, d_model=16, n_layers=1, n_heads=2)).eval()
    ttft, tpot = prefill_decode_times(model, torch.zeros(1, 8, dtype=torch.long), 4, repeats=1)
    assert ttft > 0 and tpot > 0
    with pytest.raises(ValueError, match="n_new"):
        prefill_decode_times(model, torch.zeros(1, 8, dtype=torch.long), 1)
