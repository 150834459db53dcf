"""Chapters 9–10's GPU measurements, recorded once to JSON with their provenance, and shown in the chapters.

    python -m attnbook.bench --record [--out DIR]   # every measurement below; one file per run in book/data/gpu/

A record holds chapter 9's sweep over N (naive, every SDPA backend that runs, tiled, the Triton kernel; float16
and bfloat16; forward and forward+backward), the measured matmul throughput and memory bandwidth of its roofline,
and chapter 10's decoding batch sweep and GQA step sweep. Every timing is a median with its IQR and the
parameters it was taken with; one that fails (a backend that refuses the input, no backward pass, out of memory)
is recorded as skipped with its reason, and the run goes on. `provenance` says where and when: GPU, driver, CUDA,
torch, triton, commit, UTC date, host CPU, command line.

Reading and showing records is `gpu_display`'s, whose names this module re-exports: the chapters call
`gpu_record.show(9)` or `show(10)`, the newest record's tables under a "Recorded on ..." line, or a line saying that
there is none yet.
"""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from . import decoding
from .attention import scaled_dot_product_attention, tiled_attention
from .bench import _sdpa_with
from .cost import attention_flops, attention_matmul_shapes
from .device import _cpu_name, device_report, sdpa_backends
from .gpu_display import (NO_RECORD, PASSES, SCHEMA, attention_table, decode_table, gqa_table, header,  # noqa: F401
                          latest, load, roofline_points, show, validate)
from .kernels.triton_attention import triton_attention  # imports triton only when called
from .roofline import flash_attention_bytes, memory_bandwidth, standard_attention_bytes
from .timing import DEFAULT_MATMUL_SIZES, benchmark, matmul_throughput, peak_memory

__all__ = ["SCHEMA", "RECORD_SIZES", "NO_RECORD", "provenance", "record", "estimate_seconds", "load", "validate",
           "latest", "header", "attention_table", "decode_table", "gqa_table", "roofline_points", "show"]

BACKWARD_FACTOR = 2  # attention's backward is 4 products of the forward's 2 sizes: dV, dP, dQ, dK (no recompute)
H100_FLOPS, H100_BANDWIDTH, H100_SRAM = 989e12, 3.35e12, 228 * 2**10  # float16 dense, HBM3, per SM: datasheet

# Per (device type, quick): chapter 9's GPU sizes (B, H, d_head and the N of its sweep) and chapter 10's sweeps.
_CUDA = dict(batch=1, heads=8, d_head=64, seq_lens=(512, 1024, 2048, 4096, 8192), dtypes=("float16", "bfloat16"),
             min_run_time=0.1, matmul_sizes=(2048, 4096, 8192), array_bytes=2**30, decode_dtype="float32",
             width=4096, layers=8, batches=(1, 4, 16, 64, 256, 1024), gqa_batches=(1, 8, 64),
             gqa_seq_lens=(64, 1024, 8192), rounds=3, sweep_min_run_time=0.05, max_rounds=10)
RECORD_SIZES = {
    ("cuda", False): _CUDA,
    ("cuda", True): dict(_CUDA, seq_lens=(512, 1024), min_run_time=0.02, matmul_sizes=(1024, 2048),
                         array_bytes=2**26, width=1024, layers=2, batches=(1, 16), gqa_batches=(1, 8),
                         gqa_seq_lens=(64, 1024), rounds=1, sweep_min_run_time=0.01),
    ("cpu", False): dict(_CUDA, heads=4, seq_lens=(256, 512, 1024), min_run_time=0.1, matmul_sizes=(256, 512),
                         array_bytes=2**26, width=2048, layers=4, batches=(1, 4, 16, 64), gqa_batches=(1, 4, 16),
                         gqa_seq_lens=(16, 256, 4096)),
    ("cpu", True): dict(_CUDA, heads=2, d_head=32, seq_lens=(32, 64), min_run_time=0.005, matmul_sizes=(64, 128),
                        array_bytes=2**22, width=64, layers=2, batches=(1, 4), gqa_batches=(1, 2),
                        gqa_seq_lens=(16, 64), rounds=1, sweep_min_run_time=0.005, max_rounds=2),
}
GQA_MARGIN = 1.25  # chapter 10's crossover margin


# ------------------------------------------------------------------------------------------------------------
# Provenance
# ------------------------------------------------------------------------------------------------------------

def _output(command: list[str], cwd=None) -> str | None:
    """A command's first line of output, or None when it is missing, fails or hangs: never an exception."""
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def _checkout() -> Path | None:
    """The git checkout this package was imported from (its src/attnbook is this file's folder), else None."""
    here = Path(__file__).resolve().parent
    top = _output(["git", "rev-parse", "--show-toplevel"], cwd=here)
    if top and (Path(top) / "src" / "attnbook").resolve() == here:
        return Path(top)
    return None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def provenance(device, argv=None) -> dict:
    """Where, when and how a record was made. Missing tools (git, nvidia-smi) give None or "unknown", not errors."""
    report = device_report(device)
    root = _checkout()
    commit = _output(["git", "rev-parse", "HEAD"], cwd=root) if root else None
    dirty = _output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root) if commit else None
    driver = None
    if report["device"].startswith("cuda"):
        index = str(torch.device(report["device"]).index or 0)
        driver = _output(["nvidia-smi", "-i", index, "--query-gpu=driver_version", "--format=csv,noheader"])
    return {"device": report["device"], "device_name": report["device_name"], "capability": report["capability"],
            "driver": driver, "cuda": torch.version.cuda, "torch": torch.__version__, "triton": _version("triton"),
            "python": sys.version.split()[0], "commit": commit or "unknown", "uncommitted_changes": bool(dirty),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "host_cpu": _cpu_name(),
            "threads": report["threads"], "tf32_matmul": report["tf32_matmul"],
            "command": "python -m attnbook.bench " + shlex.join(sys.argv[1:] if argv is None else list(argv))}


# ------------------------------------------------------------------------------------------------------------
# Measuring
# ------------------------------------------------------------------------------------------------------------

class _Progress:
    """Prints each step with the seconds elapsed since the run began."""

    def __init__(self, out):
        self.out, self.start = out, time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.start:6.1f} s] {message}", file=self.out, flush=True)


def _skipped(error: BaseException) -> dict:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    text = str(error).strip().splitlines()
    return {"status": "skipped", "reason": f"{type(error).__name__}: {text[0] if text else ''}"[:300]}


def _measure(fn, args, min_run_time: float) -> dict:
    """Median and IQR of `fn(*args)` (`timing.benchmark`) and its peak memory; skipped with the reason on error."""
    try:
        t = benchmark(fn, *args, min_run_time=min_run_time)
        if not (0 < t.median_s < math.inf and 0 <= t.iqr_s < math.inf):
            raise ArithmeticError(f"the Timer gave a median of {t.median_s} s and an IQR of {t.iqr_s} s")
        return {"status": "ok", "median_s": t.median_s, "iqr_s": t.iqr_s, "n_runs": t.n_runs,
                "calls_per_run": t.calls_per_run, "peak_bytes": peak_memory(fn, *args)}
    except Exception as e:  # noqa: BLE001 - any failure is a result to record, never the end of the run
        return _skipped(e)


def _methods(device, dtype, d_head: int) -> dict:
    """Chapter 9's implementations: naive, SDPA's default and each backend that runs here, tiled, Triton."""
    methods = {"naive": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],  # chapter 9's names
               "SDPA, default": F.scaled_dot_product_attention}
    for backend in sdpa_backends(device, dtype, d_head):
        methods[f"SDPA, {backend.name}"] = _sdpa_with(backend)
    methods["tiled (ours)"] = tiled_attention  # blocks of 64, as in chapter 9
    methods["Triton (ours)"] = triton_attention
    return methods


def _with_backward(fn):
    """fn's forward and the gradients of q, k and v for the output gradient `grad`."""
    def run(q, k, v, grad):
        out = fn(q, k, v)
        if not out.requires_grad:
            raise NotImplementedError("no backward pass: the output carries no gradient (forward only)")
        return torch.autograd.grad(out, (q, k, v), grad)
    return run


def _attention(device, sizes: dict, say) -> tuple[list, dict]:
    """Chapter 9's N sweep (rows) and, per dtype, the measured matmul throughput the rows are a percentage of."""
    B, H, d = sizes["batch"], sizes["heads"], sizes["d_head"]
    rows, matmul = [], {}
    for name in sizes["dtypes"]:
        dtype = getattr(torch, name)
        methods = _methods(device, dtype, d)
        for n in sizes["seq_lens"]:
            g = torch.Generator(device=device).manual_seed(n)
            q, k, v = (torch.randn(B, H, n, d, generator=g, device=device, dtype=dtype) for _ in range(3))
            for pass_ in PASSES:
                say(f"chapter 9 · {name} · {pass_} · N = {n}")
                flops = attention_flops(B, H, n, n, d) * (1 if pass_ == "forward" else 1 + BACKWARD_FACTOR)
                for method, fn in methods.items():
                    if pass_ == "forward":
                        with torch.no_grad():
                            row = _measure(fn, (q, k, v), sizes["min_run_time"])
                    else:
                        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
                        row = _measure(_with_backward(fn), (*leaves, torch.ones_like(q)), sizes["min_run_time"])
                    row = {"dtype": name, "pass": pass_, "n": n, "method": method, "flops": flops, **row}
                    if row["status"] == "ok":
                        row["flops_per_s"] = flops / row["median_s"]
                    rows.append(row)
        say(f"chapter 9 · {name} · the measured matmul throughput")
        rates = [r["flops_per_s"] for r in rows if r["dtype"] == name and r["status"] == "ok"]
        shapes = [(1, s, s, s) for s in sizes["matmul_sizes"]]
        shapes += [s for n in sizes["seq_lens"] for s in attention_matmul_shapes(B, H, n, n, d)]
        try:
            ref = matmul_throughput(device, dtype, shapes=shapes, min_run_time=min(sizes["min_run_time"], 0.05),
                                    at_least=max(rates, default=0.0), max_rounds=sizes["max_rounds"])
        except Exception as e:  # noqa: BLE001 - the rows stay, without percentages
            matmul[name] = _skipped(e)
            continue
        matmul[name] = {"status": "ok", "flops_per_s": ref.flops_per_s, "best_shape": list(ref.best_shape),
                        "rounds": ref.rounds, "rates": [[*shape, rate] for shape, rate in ref.rates.items()]}
        for r in rows:
            if r["dtype"] == name and r["status"] == "ok":
                r["percent_of_matmul"] = _percent(ref, r["flops_per_s"])
    return rows, matmul


def _percent(reference, rate: float) -> float | None:
    try:
        return reference.percent(rate)
    except ValueError:  # above a reference that missed the machine's best: no percentage rather than > 100
        return None


def _bandwidth(device, sizes: dict) -> dict:
    try:
        bw = memory_bandwidth(device, getattr(torch, sizes["dtypes"][0]), array_bytes=sizes["array_bytes"],
                              min_run_time=sizes["sweep_min_run_time"])
    except Exception as e:  # noqa: BLE001
        return _skipped(e)
    return {"status": "ok", "copy_bytes_per_s": bw.copy, "triad_bytes_per_s": bw.triad, "bytes_per_s": bw.best,
            "array_bytes": bw.array_bytes, "copy_median_s": bw.copy_timing.median_s,
            "copy_iqr_s": bw.copy_timing.iqr_s, "triad_median_s": bw.triad_timing.median_s,
            "triad_iqr_s": bw.triad_timing.iqr_s, "min_run_time": sizes["sweep_min_run_time"]}


def _batch_sweep(device, sizes: dict) -> dict:
    """Chapter 10's batch sweep over a stack of weight matrices, with its matmul throughput."""
    dtype = getattr(torch, sizes["decode_dtype"])
    width, rounds, mrt = sizes["width"], sizes["rounds"], sizes["sweep_min_run_time"]
    try:
        stack = decoding.weight_stack(width, sizes["layers"], dtype=dtype, device=device)
        rows = decoding.batch_sweep(stack, sizes["batches"], rounds=rounds, min_run_time=mrt)
        squares = [(1, n, n, n) for n in DEFAULT_MATMUL_SIZES[torch.device(device).type]]
        squares = squares if torch.device(device).type == "cuda" else [(1, width, width, width)]
        ref = matmul_throughput(device, dtype, shapes=squares + [(1, b, width, width) for b in sizes["batches"]],
                                min_run_time=mrt, at_least=max(r["flop_rate"] for r in rows))
    except Exception as e:  # noqa: BLE001
        return _skipped(e)
    for r in rows:
        r.update(status="ok", median_s=r.pop("step_s"), iqr_s=r.pop("step_iqr_s"),
                 percent_of_matmul=_percent(ref, r["flop_rate"]))
    return {"status": "ok", "dtype": sizes["decode_dtype"], "width": width, "layers": sizes["layers"],
            "rounds": rounds, "min_run_time": mrt, "matmul_flops_per_s": ref.flops_per_s, "rows": rows}


def _gqa_sweep(device, sizes: dict) -> dict:
    """Chapter 10's GQA sweep: one decoding step's attention for MHA, GQA and MQA over a (B, S) grid."""
    heads, d_head, kv = 8, 64, {"MHA": 8, "GQA": 2, "MQA": 1}
    dtype, rounds, mrt = getattr(torch, sizes["decode_dtype"]), sizes["rounds"], sizes["sweep_min_run_time"]
    try:
        cells = decoding.attention_step_sweep(sizes["gqa_batches"], sizes["gqa_seq_lens"], heads, kv, d_head,
                                              dtype=dtype, device=device, rounds=rounds, min_run_time=mrt)
    except Exception as e:  # noqa: BLE001
        return _skipped(e)
    rows = [{"status": "ok", "batch": c["batch"], "seq_len": c["seq_len"], "tokens": c["tokens"], "variant": name,
             "n_kv_heads": kv[name], "cache_bytes": c["cache_bytes"][name], "median_s": c["time_s"][name],
             "iqr_s": c["iqr_s"][name], "speed_vs_mha": c["time_s"]["MHA"] / c["time_s"][name]}
            for c in cells for name in kv]
    return {"status": "ok", "dtype": sizes["decode_dtype"], "n_heads": heads, "d_head": d_head, "kv_heads": kv,
            "rounds": rounds, "min_run_time": mrt, "margin": GQA_MARGIN,
            "crossover": decoding.gqa_crossover(cells, "MHA", "GQA", GQA_MARGIN), "rows": rows}


def _sram_bytes(device) -> int:
    """On-chip memory per streaming multiprocessor (FlashAttention's M), from the device, else an H100's."""
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(torch.device(device))
        return int(getattr(props, "shared_memory_per_multiprocessor", 0) or H100_SRAM)
    return H100_SRAM


def record(device="cuda", quick: bool = False, out_dir=None, argv=None, out=None) -> Path:
    """Measure everything on `device` and write one JSON file in `out_dir` (default book/data/gpu); its path."""
    out = sys.stdout if out is None else out
    device = torch.device(device)
    sizes = RECORD_SIZES[(device.type, bool(quick))]
    say = _Progress(out)
    say(f"recording on {device}; the model of this run's time on an H100 is {estimate_seconds(sizes):.0f} s")
    result = {"schema": SCHEMA, "provenance": provenance(device, argv), "quick": bool(quick),
              "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()}}
    rows, matmul = _attention(device, sizes, say)
    result["attention"] = {"batch": sizes["batch"], "heads": sizes["heads"], "d_head": sizes["d_head"],
                           "backward_factor": BACKWARD_FACTOR, "rows": rows}
    result["matmul"] = matmul
    say("roofline · memory bandwidth (STREAM copy and triad)")
    result["roofline"] = {"bandwidth": _bandwidth(device, sizes), "sram_bytes": _sram_bytes(device)}
    say("chapter 10 · batch sweep")
    result["decode"] = {"batch_sweep": _batch_sweep(device, sizes)}
    say("chapter 10 · GQA step sweep")
    result["decode"]["gqa"] = _gqa_sweep(device, sizes)
    result["elapsed_s"] = time.perf_counter() - say.start
    try:
        validate(result, "the new record")
    except ValueError:  # keep the measurements for inspection, under a name that `latest` passes over
        say(f"the record is malformed; kept as {_write(result, out_dir, '.json.invalid')}")
        raise
    path = _write(result, out_dir)
    say(f"wrote {path}")
    return path


def _write(result: dict, out_dir, suffix: str = ".json") -> Path:
    """One file per run, named from the device and the UTC date: nvidia-h100-80gb-hbm3_20250101T120000Z.json."""
    root = _checkout()
    folder = Path(out_dir) if out_dir is not None else (root or Path(".")) / "book" / "data" / "gpu"
    folder.mkdir(parents=True, exist_ok=True)
    p = result["provenance"]
    slug = re.sub(r"[^a-z0-9]+", "-", p["device_name"].lower()).strip("-") or "device"
    stamp = _dt.datetime.fromisoformat(p["date"]).strftime("%Y%m%dT%H%M%SZ")
    path, i = folder / f"{slug}_{stamp}{suffix}", 1
    while path.exists():
        path, i = folder / f"{slug}_{stamp}_{i}{suffix}", i + 1
    path.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def estimate_seconds(sizes: dict, flops_per_s: float = H100_FLOPS, bytes_per_s: float = H100_BANDWIDTH) -> float:
    """A model of a run's time on a GPU with these rates (an H100's datasheet by default), from FLOPs and bytes.

    Each timing costs its `min_run_time`, plus five calls (warm-up, the Timer's calibration, two for peak memory)
    and 50 ms of overhead; a call takes max(FLOPs / P, bytes / W) with Dao et al.'s byte counts, an unfused call
    four times those bytes with the backward, and tiled attention ~10 µs per launch of its loop. 60 s for
    start-up and Triton's compilation. Chapter 10's sweeps are small: each cell costs its min_run_time + 50 ms,
    after their random weights and caches are drawn on the CPU (taken as 250 MB/s).
    """
    B, H, d, mrt = sizes["batch"], sizes["heads"], sizes["d_head"], sizes["min_run_time"]
    total = 60.0
    for n in sizes["seq_lens"]:
        for factor in (1, 1 + BACKWARD_FACTOR):
            flops = attention_flops(B, H, n, n, d) * factor
            unfused = standard_attention_bytes(B, H, n, d, torch.float16) * (1 if factor == 1 else 4)
            fused = flash_attention_bytes(B, H, n, d, torch.float16, H100_SRAM) * factor
            calls = [unfused, unfused, fused, fused, fused, fused, unfused] + [fused]  # the 8 methods
            for i, moved in enumerate(calls):
                t = max(flops / flops_per_s, moved / bytes_per_s)
                t += (n // 64) * 16 * factor * 10e-6 if i == 6 else 0  # tiled: a Python loop of launches
                total += len(sizes["dtypes"]) * (max(mrt, t) + 5 * t + 0.05)
    shapes = len(sizes["matmul_sizes"]) + 2 * len(sizes["seq_lens"])
    total += len(sizes["dtypes"]) * 2 * shapes * (min(mrt, 0.05) + 0.05) + 2 * (sizes["sweep_min_run_time"] + 0.1)
    cells = len(sizes["batches"]) * 2 + 3 * len(sizes["gqa_batches"]) * len(sizes["gqa_seq_lens"])
    drawn = 4 * (sizes["layers"] * sizes["width"] ** 2  # the weight stack and the (B, S) grid of MHA, GQA, MQA caches
                 + 2 * 64 * (8 + 2 + 1) * sum(sizes["gqa_batches"]) * sum(sizes["gqa_seq_lens"]))
    return total + sizes["rounds"] * cells * (sizes["sweep_min_run_time"] + 0.05) + drawn / 250e6
