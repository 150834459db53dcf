"""Reading and showing GPU records (`gpu_record` writes them): the chapters' tables and roofline from a file.

`latest` finds the newest record in book/data/gpu/, `load` reads one and refuses a malformed file with the key
that is wrong, and `show(9)` / `show(10)` print a chapter's tables under a "Recorded on <GPU>, driver ..." line,
or say plainly that there is no record yet. `gpu_record` re-exports every name here.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import sys
from pathlib import Path

import torch

from .roofline import flash_attention_bytes, standard_attention_bytes
from .timing import format_rate

__all__ = ["SCHEMA", "NO_RECORD", "load", "validate", "latest", "header", "attention_table", "decode_table",
           "gqa_table", "roofline_points", "show"]

SCHEMA = "attnbook.gpu-record/1"
NO_RECORD = ("No GPU record yet: run `python -m attnbook.bench --record` on a machine with a GPU and commit "
             "book/data/gpu/<device>_<date>.json")
PASSES = ("forward", "forward+backward")
UNFUSED = ("naive", "SDPA, MATH", "tiled (ours)")  # their scores go through main memory
NOISY = 0.10  # chapter 9's mark: an IQR above a tenth of the median
_TEXT, _MAYBE = (str,), (str, type(None))
_PROVENANCE = {"device": _TEXT, "device_name": _TEXT, "capability": _MAYBE, "driver": _MAYBE, "cuda": _MAYBE,
               "torch": _TEXT, "triton": _MAYBE, "commit": _TEXT, "date": _TEXT, "host_cpu": _TEXT, "command": _TEXT}


# ------------------------------------------------------------------------------------------------------------
# Loading and checking
# ------------------------------------------------------------------------------------------------------------

def _need(ok: bool, source: str, where: str, what: str, value) -> None:
    if not ok:
        raise ValueError(f"{source}: {where} must be {what}, got {value!r:.100}")


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_row(row, source: str, where: str) -> None:
    """A measurement: status "ok" with a positive median and an IQR, or "skipped" with its reason."""
    _need(isinstance(row, dict), source, where, "an object", row)
    status = row.get("status")
    _need(status in ("ok", "skipped"), source, f"{where}.status", '"ok" or "skipped"', status)
    if status == "skipped":
        _need(isinstance(row.get("reason"), str) and row["reason"] != "", source, f"{where}.reason",
              "the reason it was skipped (a non-empty string)", row.get("reason"))
        return
    _need(_number(row.get("median_s")) and row["median_s"] > 0, source, f"{where}.median_s",
          "a positive number of seconds", row.get("median_s"))
    _need(_number(row.get("iqr_s")) and row["iqr_s"] >= 0, source, f"{where}.iqr_s",
          "a non-negative number of seconds", row.get("iqr_s"))
    pct = row.get("percent_of_matmul")
    _need(pct is None or (_number(pct) and 0 <= pct <= 100), source, f"{where}.percent_of_matmul",
          "absent, null or between 0 and 100", pct)


def _check_section(section, source: str, where: str) -> None:
    """A sweep: skipped with its reason, or "ok" with a list of measured rows."""
    _need(isinstance(section, dict), source, where, "an object", section)
    if section.get("status") == "skipped":
        return _check_row(section, source, where)
    _need(section.get("status") == "ok" and isinstance(section.get("rows"), list), source, where,
          'a skipped section or one with status "ok" and a list of rows', section)
    for i, row in enumerate(section["rows"]):
        _check_row(row, source, f"{where}.rows[{i}]")


def validate(record, source: str = "record") -> dict:
    """Return `record` if it has the shape `gpu_record.record` writes; else ValueError naming the wrong key."""
    _need(isinstance(record, dict), source, "the record", "a JSON object", record)
    _need(record.get("schema") == SCHEMA, source, "schema", f"{SCHEMA!r} (an attnbook GPU record)",
          record.get("schema"))
    prov = record.get("provenance")
    _need(isinstance(prov, dict), source, "provenance", "an object", prov)
    for key, types in _PROVENANCE.items():
        _need(isinstance(prov.get(key), types), source, f"provenance.{key}", " or ".join(
            "null" if t is type(None) else "a string" for t in types), prov.get(key))
    try:
        _dt.datetime.fromisoformat(prov["date"])
    except ValueError:
        _need(False, source, "provenance.date", "an ISO 8601 date", prov["date"])
    attention = record.get("attention")
    _need(isinstance(attention, dict) and isinstance(attention.get("rows"), list), source, "attention",
          "an object with a list of rows", attention)
    for key in ("batch", "heads", "d_head"):
        _need(isinstance(attention.get(key), int) and attention[key] > 0, source, f"attention.{key}",
              "a positive integer", attention.get(key))
    for i, row in enumerate(attention["rows"]):
        where = f"attention.rows[{i}]"
        _need(isinstance(row, dict) and row.get("pass") in PASSES, source, f"{where}.pass", " or ".join(PASSES),
              row.get("pass") if isinstance(row, dict) else row)
        for key, kind in (("dtype", str), ("method", str), ("n", int), ("flops", int)):
            _need(isinstance(row.get(key), kind), source, f"{where}.{key}", f"a {kind.__name__}", row.get(key))
        _check_row(row, source, where)
    matmul = record.get("matmul")
    _need(isinstance(matmul, dict), source, "matmul", "an object of dtype -> measured throughput", matmul)
    for name, m in matmul.items():
        _check_row(dict(m, median_s=1.0, iqr_s=0.0) if isinstance(m, dict) else m, source, f"matmul.{name}")
        if m["status"] == "ok":
            _need(_number(m.get("flops_per_s")) and m["flops_per_s"] > 0, source, f"matmul.{name}.flops_per_s",
                  "a positive FLOP/s", m.get("flops_per_s"))
    roof = record.get("roofline")
    _need(isinstance(roof, dict) and isinstance(roof.get("sram_bytes"), int), source, "roofline",
          "an object with the bandwidth and sram_bytes", roof)
    bandwidth = roof.get("bandwidth")
    _check_row(dict(bandwidth, median_s=1.0, iqr_s=0.0) if isinstance(bandwidth, dict) else bandwidth, source,
               "roofline.bandwidth")
    if bandwidth["status"] == "ok":
        _need(_number(bandwidth.get("bytes_per_s")) and bandwidth["bytes_per_s"] > 0, source,
              "roofline.bandwidth.bytes_per_s", "a positive number of bytes/s", bandwidth.get("bytes_per_s"))
    decode = record.get("decode")
    _need(isinstance(decode, dict), source, "decode", "an object", decode)
    for key in ("batch_sweep", "gqa"):
        _check_section(decode.get(key), source, f"decode.{key}")
    return record


def load(path) -> dict:
    """The record in the JSON file `path`, checked by `validate` (ValueError naming the file and the key)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    return validate(data, str(path))


def _default_folders() -> list[Path]:
    """book/data/gpu of this package's checkout, then data/gpu and book/data/gpu from the working directory."""
    here = Path(__file__).resolve().parent
    return [here.parents[1] / "book" / "data" / "gpu", Path("data") / "gpu", Path("book") / "data" / "gpu"]


def latest(directory=None) -> Path | None:
    """The newest record (by its provenance date) among the *.json files of `directory`, or None when there is
    none. Default: book/data/gpu/ (found from the package's checkout or the working directory). A malformed
    file raises ValueError rather than being passed over."""
    if directory is not None and not isinstance(directory, (str, Path)):
        raise TypeError(f"directory must be a path or None, got {type(directory).__name__}")
    folders = _default_folders() if directory is None else [Path(directory)]
    for folder in folders:
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if files:
            dated = [(_dt.datetime.fromisoformat(load(f)["provenance"]["date"]), f.name, f) for f in files]
            return max(dated)[2]
    return None


# ------------------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------------------

def _table(head: list[str], rows: list[list[str]], left: tuple[int, ...] = ()) -> str:
    """Aligned text: the columns in `left` to the left, the rest (numbers) to the right."""
    cells = [head] + rows
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     .rstrip() for r in cells)


def _skips(rows: list[dict], label) -> list[str]:
    """One line per reason: what was skipped, and why."""
    reasons: dict[str, list[str]] = {}
    for r in rows:
        if r["status"] == "skipped":
            reasons.setdefault(r["reason"], []).append(label(r))
    return [f"skipped ({'; '.join(what)}): {reason}" for reason, what in reasons.items()]


def _rate_unit(rates) -> tuple[float, str]:
    return (1e12, "TFLOP/s") if max(rates, default=0) >= 1e12 else (1e9, "GFLOP/s")


def header(record: dict) -> str:
    """'Recorded on <GPU> (sm X.Y), driver ..., CUDA ..., torch ..., triton ..., commit ..., <UTC date>'."""
    p = validate(record)["provenance"]
    where = p["device_name"] + (f" (sm {p['capability']})" if p.get("capability") else "")
    date = _dt.datetime.fromisoformat(p["date"]).astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = p["commit"][:12] + (" with uncommitted changes" if p.get("uncommitted_changes") else "")
    quick = " (--quick: tiny sizes, for checking only)" if record.get("quick") else ""
    return (f"Recorded on {where}, driver {p['driver'] or 'unknown'}, CUDA {p['cuda'] or 'none'}, torch {p['torch']}, "
            f"triton {p['triton'] or 'not installed'}, commit {commit}, {date}{quick}")


def attention_table(record: dict, dtype: str = "float16", pass_: str = "forward") -> str:
    """Chapter 9's table for one dtype and pass: N, method, median time, IQR, peak memory, rate, % of matmul."""
    if pass_ not in PASSES:
        raise ValueError(f"pass_ must be one of {PASSES}, got {pass_!r}")
    rows = [r for r in validate(record)["attention"]["rows"] if r["dtype"] == dtype and r["pass"] == pass_]
    if not rows:
        raise ValueError(f"dtype={dtype!r} is not in this record (it has "
                         f"{sorted({r['dtype'] for r in record['attention']['rows']})})")
    ok = [r for r in rows if r["status"] == "ok"]
    scale, unit = _rate_unit([r["flops"] / r["median_s"] for r in ok])
    lines = [[str(r["n"]), r["method"], f"{1e3 * r['median_s']:,.3f}", f"{r['iqr_s'] / r['median_s']:.0%}",
              f"{r['peak_bytes'] / 2**20:,.2f}" if r.get("peak_bytes") is not None else "-",
              f"{r['flops'] / r['median_s'] / scale:,.1f}",
              "-" if r.get("percent_of_matmul") is None else f"{r['percent_of_matmul']:.1f}",
              "noisy" if r["iqr_s"] > NOISY * r["median_s"] else ""] for r in ok]
    a = record["attention"]
    text = [f"{dtype}, {pass_}: B = {a['batch']}, H = {a['heads']}, d_head = {a['d_head']}, no mask"
            + ("; FLOPs: forward + backward = 3 x forward" if pass_ != "forward" else "")]
    text.append(_table(["N", "method", "time (ms)", "IQR", "peak memory (MiB)", unit, "% of matmul", ""], lines,
                       (1, 7)))
    text.append(f"IQR: the spread of the middle half of the times, as a share of the median; 'noisy' above {NOISY:.0%}")
    if any(r.get("percent_of_matmul") is None for r in ok):
        text.append("% of matmul '-': faster than every matrix product timed for the reference, which so missed "
                    "this machine's best: no percentage rather than one above 100")
    return "\n".join(text + _skips(rows, lambda r: f"{r['method']}, N = {r['n']}"))


def decode_table(record: dict) -> str:
    """Chapter 10's batch sweep: time per step and per token, rate, % of matmul, weights read per second."""
    s = validate(record)["decode"]["batch_sweep"]
    if s["status"] == "skipped":
        return f"batch sweep skipped: {s['reason']}"
    first = s["rows"][0]
    scale, unit = _rate_unit([r["flop_rate"] for r in s["rows"]])
    lines = [[str(r["batch"]), f"{1e3 * r['median_s']:.3f}", f"{r['iqr_s'] / r['median_s']:.0%}",
              f"{r['median_s'] / first['median_s']:.2f}", f"{1e3 * r['token_s']:.4f}",
              f"{r['flop_rate'] / scale:,.1f}",
              "-" if r.get("percent_of_matmul") is None else f"{r['percent_of_matmul']:.0f}",
              f"{r['weight_read_rate'] / 1e9:,.1f}"] for r in s["rows"]]
    title = (f"batch sweep: {s['layers']} matrices of {s['width']} x {s['width']}, {s['dtype']}, "
             f"{first['weight_bytes'] / 2**20:,.1f} MiB of weights; measured matmul throughput "
             f"{format_rate(s['matmul_flops_per_s'])}")
    return title + "\n" + _table(["batch", "ms/step", "IQR", "x batch 1", "ms/token", unit, "% of matmul",
                                  "weights read (GB/s)"], lines)


def gqa_table(record: dict) -> str:
    """Chapter 10's GQA sweep: per (B, S), ms per step for each variant and the speed-ups over MHA."""
    s = validate(record)["decode"]["gqa"]
    if s["status"] == "skipped":
        return f"GQA sweep skipped: {s['reason']}"
    cells: dict = {}
    for r in s["rows"]:
        cells.setdefault((r["batch"], r["seq_len"]), {})[r["variant"]] = r
    names = list(s["kv_heads"])
    lines = [[str(b), str(n), str(b * n), f"{v[names[0]]['cache_bytes'] / 2**20:,.2f}"]
             + [f"{1e3 * v[m]['median_s']:.3f}" for m in names] + [f"{v[m]['speed_vs_mha']:.2f}x" for m in names[1:]]
             for (b, n), v in cells.items()]
    title = (f"one decoding step's attention, {s['n_heads']} query heads of {s['d_head']}, {s['dtype']}: "
             f"ms per step, and speed-up over MHA")
    cross = ("no cell" if s["crossover"] is None else f"from B x S = {s['crossover']}")
    head = ["B", "S", "B x S", "MHA cache (MiB)"] + [f"{m} (ms)" for m in names] + [f"{m} x" for m in names[1:]]
    return (title + "\n" + _table(head, lines) + f"\nGQA at least {s['margin']}x as fast as MHA in every cell: "
            + cross)


def roofline_points(record: dict, dtype: str = "float16") -> dict | None:
    """The roofline of `dtype` (measured matmul throughput P, bandwidth W, ridge P / W) and, at the largest N
    with a forward timing, each method as (intensity, measured FLOP/s). Bytes are Dao et al.'s counts: the
    standard count for unfused methods, FlashAttention's with the record's on-chip memory for fused ones.
    None when the record lacks the bandwidth, this dtype's throughput or any forward timing."""
    rec = validate(record)
    bandwidth, matmul = rec["roofline"]["bandwidth"], rec["matmul"].get(dtype)
    rows = [r for r in rec["attention"]["rows"] if r["dtype"] == dtype and r["pass"] == "forward"
            and r["status"] == "ok"]
    if bandwidth["status"] != "ok" or matmul is None or matmul["status"] != "ok" or not rows:
        return None
    a, n = rec["attention"], max(r["n"] for r in rows)
    t = getattr(torch, dtype)
    points = []
    for r in (r for r in rows if r["n"] == n):
        fused = r["method"] not in UNFUSED
        moved = (flash_attention_bytes(a["batch"], a["heads"], n, a["d_head"], t, rec["roofline"]["sram_bytes"])
                 if fused else standard_attention_bytes(a["batch"], a["heads"], n, a["d_head"], t))
        points.append({"method": r["method"], "intensity": r["flops"] / moved,
                       "flops_per_s": r["flops"] / r["median_s"], "bytes": moved, "fused": fused})
    P, W = matmul["flops_per_s"], bandwidth["bytes_per_s"]
    return {"dtype": dtype, "n": n, "flops_per_s": P, "bytes_per_s": W, "ridge": P / W, "points": points}


def show(chapter: int, directory=None, out=None) -> dict | None:
    """Print chapter 9's or 10's recorded GPU tables under their 'Recorded on ...' line and return the record;
    or print that there is no record yet and return None."""
    if chapter not in (9, 10) or isinstance(chapter, bool):
        raise ValueError(f"chapter must be 9 or 10 (the timing chapters), got {chapter!r}")
    out = sys.stdout if out is None else out
    path = latest(directory)
    if path is None:
        print(NO_RECORD, file=out)
        return None
    record = load(path)
    print(header(record), file=out)
    print(f"from {path.name}", file=out)  # not its command line, whose --out may name a folder of the recorder's
    if chapter == 10:
        print("\n" + decode_table(record) + "\n\n" + gqa_table(record), file=out)
        return record
    for name, m in record["matmul"].items():
        print(f"measured matmul throughput, {name}: {format_rate(m['flops_per_s'])} = 100%" if m["status"] == "ok"
              else f"measured matmul throughput, {name}, skipped: {m['reason']}", file=out)
    bw = record["roofline"]["bandwidth"]
    print(f"memory bandwidth: {bw['bytes_per_s'] / 1e9:,.0f} GB/s (STREAM, the better of copy and triad)"
          if bw["status"] == "ok" else f"memory bandwidth skipped: {bw['reason']}", file=out)
    for name in dict.fromkeys(r["dtype"] for r in record["attention"]["rows"]):
        for pass_ in PASSES:
            print("\n" + attention_table(record, name, pass_), file=out)
    return record
