"""The timing tables of chapters 9 and 10 outside a notebook, so a reader with a GPU gets them in one command.

    python -m attnbook.bench                  # the default device: CUDA when there is a GPU, else the CPU
    python -m attnbook.bench --device cuda    # chapter sizes for a GPU (float16 attention, float32 decoding)
    python -m attnbook.bench --quick          # tiny sizes, a few seconds: checks that everything runs
    python -m attnbook.bench --record         # every GPU measurement of chapters 9-10 to book/data/gpu/*.json

Chapter 9's table: naive attention (materialised scores), every SDPA backend that runs here, and tiled attention
(FlashAttention's online softmax in plain PyTorch) as the sequence grows: median time, achieved FLOP/s as a
percentage of the measured matmul throughput (the best of square products and attention's own products, timed in
the same run, with the same dtype and threads: never above 100%), and measured peak memory.
Chapter 10's tables: greedy generation with and without a KV cache (identical tokens, time per token, speed-up),
then KV-cache memory and the time of one decoding step for multi-head, grouped-query and multi-query attention.

Every table starts with the line of `timing.format_device_report`: device, dtype, TF32, torch version, threads.
On a CPU the benchmark uses one thread, as the chapters do (timings that mean the same on a busy machine);
`--threads N` changes that.

`--record [--out DIR]` measures instead everything chapters 9 and 10 show from a GPU record (`attnbook.gpu_record`:
float16 and bfloat16, forward and backward, the roofline's rates, the decoding sweeps) and writes it with its
provenance to one JSON file in DIR (default: book/data/gpu/ of this checkout). It first prints the time its sizes
should take on an H100 by a model of FLOPs and bytes (`gpu_record.estimate_seconds`); the full sizes fit in 8 minutes.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from .attention import scaled_dot_product_attention, tiled_attention
from .models.gpt import GPT, GPTConfig
from .timing import (DEFAULT_MATMUL_SIZES, MatmulThroughput, attention_flops, attention_matmul_shapes, benchmark,
                     device_report, format_device_report, kv_cache_bytes, matmul_throughput, peak_memory,
                     sdpa_backends)

__all__ = ["SIZES", "attention_table", "decoding_runs", "gqa_table", "format_table", "main"]

# Sizes per (device type, quick). The full CPU and CUDA sizes are those of chapters 9 and 10.
SIZES = {
    ("cpu", False): dict(
        attention_dtype=torch.float32, seq_lens=(256, 512, 1024, 2048), matmul_sizes=(256, 512, 1024), min_run_time=0.2,
        gpt=GPTConfig(vocab_size=1000, block_size=512, d_model=192, n_layers=2, n_heads=8),
        batch=1, prompt_len=192, new_tokens=256, gqa_batch=8),
    ("cpu", True): dict(
        attention_dtype=torch.float32, seq_lens=(128, 256), matmul_sizes=(128, 256), min_run_time=0.02,
        gpt=GPTConfig(vocab_size=256, block_size=96, d_model=64, n_layers=2, n_heads=4),
        batch=1, prompt_len=16, new_tokens=32, gqa_batch=2),
    ("cuda", False): dict(
        attention_dtype=torch.float16, seq_lens=(1024, 2048, 4096, 8192), matmul_sizes=(2048, 4096, 8192),
        min_run_time=0.2,
        gpt=GPTConfig(vocab_size=1000, block_size=1024, d_model=1024, n_layers=8, n_heads=16),
        batch=8, prompt_len=384, new_tokens=256, gqa_batch=16),
    ("cuda", True): dict(
        attention_dtype=torch.float16, seq_lens=(512, 1024), matmul_sizes=(1024, 2048), min_run_time=0.02,
        gpt=GPTConfig(vocab_size=256, block_size=96, d_model=64, n_layers=2, n_heads=4),
        batch=1, prompt_len=16, new_tokens=32, gqa_batch=2),
}
DECODE_DTYPE = torch.float32  # as chapter 10: greedy tokens with and without the cache must match exactly
HEADS, D_HEAD = 8, 64  # chapter 9's attention shape: batch 1, 8 heads of 64


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _sdpa_with(backend):
    """SDPA restricted to one backend, as a function of (q, k, v)."""
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v)

    return run


def attention_table(device, dtype: torch.dtype, seq_lens, batch: int = 1, heads: int = HEADS, d_head: int = D_HEAD,
                    min_run_time: float = 0.2,
                    matmul_sizes: tuple[int, ...] | None = None) -> tuple[MatmulThroughput, list[dict]]:
    """(measured matmul throughput, rows): naive, each SDPA backend and tiled attention for every sequence length.

    A row holds n, method, median seconds, achieved FLOP/s, its percentage of the measured matmul throughput and
    peak memory in bytes. The reference is `matmul_throughput` over square products of `matmul_sizes` (the
    device's defaults when None) and attention's own two products at every length, measured after the attention
    timings with `at_least` the fastest attention rate, so no percentage exceeds 100.
    """
    device = torch.device(device)
    methods = {"naive (chapter 2)": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]}
    for backend in sdpa_backends(device, dtype, d_head):
        methods[f"SDPA {backend.name.lower()}"] = _sdpa_with(backend)
    methods["tiled, blocks of 128"] = lambda q, k, v: tiled_attention(q, k, v, block_size=128)
    rows = []
    for n in seq_lens:
        g = torch.Generator(device=device).manual_seed(n)
        q, k, v = (torch.randn(batch, heads, n, d_head, generator=g, device=device, dtype=dtype) for _ in range(3))
        flops = attention_flops(batch, heads, n, n, d_head)
        for name, fn in methods.items():
            t = benchmark(fn, q, k, v, min_run_time=min_run_time)
            rows.append({"n": n, "method": name, "time_s": t.median_s, "flops_per_s": flops / t.median_s,
                         "peak_bytes": peak_memory(fn, q, k, v)})
    if matmul_sizes is None:
        matmul_sizes = DEFAULT_MATMUL_SIZES.get(device.type, DEFAULT_MATMUL_SIZES["cuda"])
    shapes = [(1, s, s, s) for s in matmul_sizes]
    shapes += [shape for n in seq_lens for shape in attention_matmul_shapes(batch, heads, n, n, d_head)]
    fastest = max(row["flops_per_s"] for row in rows)
    reference = matmul_throughput(device, dtype, shapes=shapes, min_run_time=min(min_run_time, 0.05), at_least=fastest)
    for row in rows:
        row["percent_of_matmul"] = reference.percent(row["flops_per_s"])
    return reference, rows


def _timed_generate(model: GPT, prompt, n_new: int, use_cache: bool):
    """(tokens, seconds) of one model.generate call, synchronised on a GPU."""
    _sync(prompt.device)
    start = time.perf_counter()
    ids = model.generate(prompt, n_new, use_cache=use_cache)
    _sync(prompt.device)
    return ids, time.perf_counter() - start


def decoding_runs(model: GPT, prompt, new_tokens: int) -> dict:
    """Greedy generation with and without the cache, interleaved (cached 3 times, uncached once).

    Returns median seconds of each, their ratio and whether every run produced the same tokens.
    """
    _timed_generate(model, prompt, 2, True), _timed_generate(model, prompt, 2, False)  # warm-up
    runs = {True: [], False: []}
    for use_cache in (True, False, True, True):  # the uncached run is the long one
        runs[use_cache].append(_timed_generate(model, prompt, new_tokens, use_cache))
    cached = statistics.median(t for _, t in runs[True])
    uncached = statistics.median(t for _, t in runs[False])
    reference = runs[False][0][0]
    return {"cached_s": cached, "uncached_s": uncached, "speedup": uncached / cached,
            "identical": all(torch.equal(ids, reference) for ids, _ in runs[True])}


def _decode_step(model: GPT, cache, token) -> None:
    """One cached decoding step, after which every layer's cache is cut back to its former length."""
    model(token, cache=cache)
    for kv in cache:
        kv.k, kv.v = kv.k[:, :, :-1], kv.v[:, :, :-1]


def gqa_variants(n_heads: int) -> dict[str, int]:
    """{"MHA": n_heads, "GQA": a divisor in between, "MQA": 1}: the n_kv_heads of each kind of attention."""
    gqa = n_heads // 4 if n_heads // 4 > 1 else n_heads // 2
    return {"MHA": n_heads, "GQA": gqa, "MQA": 1} if 1 < gqa < n_heads else {"MHA": n_heads, "MQA": 1}


@torch.no_grad()
def gqa_table(config: GPTConfig, device, dtype: torch.dtype, batch: int, context: int,
              min_run_time: float = 0.2) -> list[dict]:
    """For MHA, GQA and MQA versions of `config`: parameters, KV-cache bytes after a prefill of `context` tokens
    (measured, and checked against the formula) and the time of one decoding step at that context.

    Each variant is timed three times, interleaved with the others; the fastest median counts.
    """
    device = torch.device(device)
    ids = torch.randint(0, config.vocab_size, (batch, context), generator=torch.Generator().manual_seed(3))
    ids = ids.to(device)  # (B, context)
    built = {}
    for name, n_kv in gqa_variants(config.n_heads).items():
        torch.manual_seed(0)
        model = GPT(dataclasses.replace(config, n_kv_heads=n_kv)).to(device, dtype).eval()
        cache = model.new_cache()
        model(ids, cache=cache)  # prefill
        allocated = sum(kv.nbytes() for kv in cache)
        formula = kv_cache_bytes(config.n_layers, n_kv, config.d_head, context, batch, dtype)
        if allocated != formula:  # pragma: no cover - a bug in the cache, not in the benchmark
            raise RuntimeError(f"{name}: the cache holds {allocated} bytes, the formula gives {formula}")
        built[name] = (n_kv, model, cache, allocated)
    times = {name: [] for name in built}
    for _ in range(3):
        for name, (_, model, cache, _) in built.items():
            times[name].append(benchmark(_decode_step, model, cache, ids[:, :1], min_run_time=min_run_time).median_s)
    mha = min(times["MHA"])
    return [{"attention": name, "n_kv_heads": n_kv, "parameters": sum(p.numel() for p in model.parameters()),
             "cache_bytes": allocated, "step_s": min(times[name]), "speed_vs_mha": mha / min(times[name])}
            for name, (n_kv, model, _, allocated) in built.items()]


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """Rows as aligned text; each column is (title, key, format spec), e.g. ("time (ms)", "time_ms", ".2f")."""
    cells = [[title for title, _, _ in columns]]
    cells += [[format(row[key], spec) for _, key, spec in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    left = [spec.endswith("s") for _, _, spec in columns]  # text to the left, numbers to the right
    return "\n".join("  ".join(c.ljust(w) if lft else c.rjust(w) for c, w, lft in zip(r, widths, left)).rstrip()
                     for r in cells)


def _chapter_9(device: torch.device, sizes: dict, out) -> None:
    dtype = sizes["attention_dtype"]
    reference, rows = attention_table(device, dtype, sizes["seq_lens"], min_run_time=sizes["min_run_time"],
                                      matmul_sizes=sizes["matmul_sizes"])
    for r in rows:
        r.update(time_ms=1e3 * r["time_s"], gflops=r["flops_per_s"] / 1e9, peak_mib=r["peak_bytes"] / 2**20)
    print("Chapter 9 · attention kernels", file=out)
    print(format_device_report(device_report(device, dtype)), file=out)
    print(f"batch 1, {HEADS} heads of {D_HEAD}, no mask; {reference}", file=out)
    print(f"  100% = the best rate of square products of {', '.join(map(str, sizes['matmul_sizes']))} and "
          f"attention's own two products at every N, over {reference.rounds} rounds", file=out)
    print(format_table(rows, [("N", "n", "d"), ("method", "method", "s"), ("time (ms)", "time_ms", ",.3f"),
                              ("GFLOP/s", "gflops", ",.1f"), ("% of matmul", "percent_of_matmul", ".1f"),
                              ("peak memory (MiB)", "peak_mib", ",.2f")]), file=out)


def _chapter_10(device: torch.device, sizes: dict, out) -> None:
    config, batch, prompt_len, new = sizes["gpt"], sizes["batch"], sizes["prompt_len"], sizes["new_tokens"]
    torch.manual_seed(0)
    model = GPT(config).to(device, DECODE_DTYPE).eval()
    prompt = torch.randint(0, config.vocab_size, (batch, prompt_len), generator=torch.Generator().manual_seed(1))
    result = decoding_runs(model, prompt.to(device), new)
    print("Chapter 10 · decoding with a KV cache", file=out)
    print(format_device_report(device_report(device, DECODE_DTYPE)), file=out)
    print(f"GPT: {config.n_layers} layers, d_model {config.d_model}, {config.n_heads} heads, vocabulary "
          f"{config.vocab_size}, random weights; greedy generation of {new} tokens after a prompt of {prompt_len}, "
          f"batch {batch}", file=out)
    rows = [{"way": "without the KV cache", "s": result["uncached_s"], "ms": 1e3 * result["uncached_s"] / new},
            {"way": "with the KV cache", "s": result["cached_s"], "ms": 1e3 * result["cached_s"] / new}]
    print(format_table(rows, [("generation", "way", "s"), ("total (s)", "s", ",.3f"),
                              ("per token (ms)", "ms", ",.2f")]), file=out)
    print(f"KV-cache speed-up: {result['speedup']:.1f}x; identical tokens: {'yes' if result['identical'] else 'NO'}",
          file=out)
    context = config.block_size - 64
    rows = gqa_table(config, device, DECODE_DTYPE, sizes["gqa_batch"], context, min_run_time=sizes["min_run_time"])
    for r in rows:
        r.update(cache_mib=r["cache_bytes"] / 2**20, step_ms=1e3 * r["step_s"])
    print(f"\nKV cache and one decoding step, {sizes['gqa_batch']} sequences at {context} tokens:", file=out)
    print(format_table(rows, [("attention", "attention", "s"), ("kv heads", "n_kv_heads", "d"),
                              ("parameters", "parameters", ",d"), ("KV cache (MiB)", "cache_mib", ",.2f"),
                              ("step (ms)", "step_ms", ",.2f"), ("speed vs MHA", "speed_vs_mha", ".2f")]), file=out)


def main(argv: list[str] | None = None, out=None) -> int:
    """Print both chapters' tables for the chosen device; returns 0 (an exit status)."""
    out = sys.stdout if out is None else out
    parser = argparse.ArgumentParser(prog="python -m attnbook.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="where to run (default: cuda when a GPU is available, else cpu)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test that takes seconds")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for PyTorch (default: 1 on a CPU, as the chapters; unchanged on a GPU)")
    parser.add_argument("--record", action="store_true",
                        help="record every GPU measurement of chapters 9-10 to a JSON file (see attnbook.gpu_record)")
    parser.add_argument("--out", default=None, help="with --record: the folder (default: book/data/gpu/)")
    args = parser.parse_args(argv)
    device_type = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device_type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA GPU, and torch.cuda.is_available() is False here")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.out is not None and not args.record:
        parser.error("--out goes with --record")
    threads_before = torch.get_num_threads()
    threads = args.threads if args.threads is not None else (1 if device_type == "cpu" else threads_before)
    device = torch.device(device_type)
    sizes = SIZES[(device_type, args.quick)]
    torch.set_num_threads(threads)
    try:
        if args.record:
            from .gpu_record import record
            record(device, args.quick, args.out, sys.argv[1:] if argv is None else argv, out)
            return 0
        print(f"attnbook benchmark{' (--quick: tiny sizes, for checking only)' if args.quick else ''}\n", file=out)
        _chapter_9(device, sizes, out)
        print(file=out)
        _chapter_10(device, sizes, out)
    finally:
        torch.set_num_threads(threads_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
