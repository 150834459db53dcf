"""attnbook.bench: both timing chapters' tables from the command line; runs on a CPU with --quick."""
import time

import pytest
import torch

from attnbook.bench import attention_table, format_table, gqa_variants, main
from attnbook.models import GPTConfig


def test_quick_cpu_run_prints_the_device_line_and_both_tables(capsys):
    threads = torch.get_num_threads()
    start = time.perf_counter()
    assert main(["--device", "cpu", "--quick"]) == 0
    elapsed = time.perf_counter() - start
    out = capsys.readouterr().out
    assert elapsed < 20, f"--quick took {elapsed:.1f} s"
    assert torch.get_num_threads() == threads  # restored after the run
    report = "cpu (" in out and f"torch {torch.__version__}, 1 thread" in out
    assert report, out
    assert out.count(f"torch {torch.__version__}, 1 thread") == 2  # each table states its device line
    # chapter 9: every method at every size, with time, throughput, % of the measured matmul throughput, memory
    assert "Chapter 9 · attention kernels" in out and "measured matmul throughput: " in out
    assert "of peak" not in out and "peak measured" not in out  # a percentage is of a measurement, not a "peak"
    header = next(line for line in out.splitlines() if line.lstrip().startswith("N "))
    for column in ("method", "time (ms)", "GFLOP/s", "% of matmul", "peak memory (MiB)"):
        assert column in header
    for n in (128, 256):
        for method in ("naive (chapter 2)", "SDPA math", "tiled, blocks of 128"):
            assert any(line.split()[:1] == [str(n)] and method in line for line in out.splitlines()), (n, method)
    chapter_9 = out[out.index("Chapter 9"):out.index("Chapter 10")]
    percents = [float(line.split()[-2]) for line in chapter_9.splitlines() if line.split()[:1] in (["128"], ["256"])]
    assert len(percents) >= 6 and all(0 < p <= 100 for p in percents), percents
    # chapter 10: cached against uncached generation, and MHA / GQA / MQA
    assert "Chapter 10 · decoding with a KV cache" in out
    assert "without the KV cache" in out and "with the KV cache" in out
    assert "identical tokens: yes" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split()[:1] in (["MHA"], ["GQA"], ["MQA"])}
    # the cache column follows the formula, computed here by hand: --quick has 2 layers, 4 heads of 16,
    # 2 sequences at 96 - 64 = 32 tokens, float32: 2 · 2 · kv_heads · 16 · 32 · 2 · 4 bytes
    for name, kv in (("MHA", 4), ("GQA", 2), ("MQA", 1)):
        assert int(rows[name][1]) == kv
        assert float(rows[name][3]) == pytest.approx(2 * 2 * kv * 16 * 32 * 2 * 4 / 2**20, abs=0.005)


def test_gqa_variants_are_divisors():
    for heads, expected in ((4, {"MHA": 4, "GQA": 2, "MQA": 1}), (8, {"MHA": 8, "GQA": 2, "MQA": 1}),
                            (16, {"MHA": 16, "GQA": 4, "MQA": 1}), (2, {"MHA": 2, "MQA": 1})):
        assert gqa_variants(heads) == expected
        GPTConfig(d_model=16 * heads, n_heads=heads, n_kv_heads=expected.get("GQA", 1))  # valid configs


def test_format_table_aligns_text_left_and_numbers_right():
    rows = [{"name": "a", "x": 1.5}, {"name": "longer", "x": 12.25}]
    text = format_table(rows, [("name", "name", "s"), ("x", "x", ".2f")])
    assert text.splitlines() == ["name        x", "a        1.50", "longer  12.25"]


def test_bad_arguments_are_clear_errors(capsys):
    with pytest.raises(SystemExit):
        main(["--device", "tpu"])
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--device", "cpu", "--threads", "0"])
    assert "--threads must be at least 1" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            main(["--device", "cuda"])
        assert "needs a CUDA GPU" in capsys.readouterr().err


def test_attention_table_percentages_are_of_a_reference_that_includes_attentions_own_products():
    reference, rows = attention_table("cpu", torch.float32, (64,), heads=2, d_head=16, min_run_time=0.01,
                                      matmul_sizes=(32,))
    assert set(reference.rates) == {(1, 32, 32, 32), (2, 64, 16, 64), (2, 64, 64, 16)}  # squares, QK^T, PV
    assert {row["method"] for row in rows} >= {"naive (chapter 2)", "SDPA math", "tiled, blocks of 128"}
    for row in rows:
        assert row["flops_per_s"] <= reference.flops_per_s
        assert row["percent_of_matmul"] == pytest.approx(100 * row["flops_per_s"] / reference.flops_per_s)
        assert 0 < row["percent_of_matmul"] <= 100
