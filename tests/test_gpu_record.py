"""attnbook.gpu_record and gpu_display: recording chapters 9-10's GPU numbers, and showing them, tested on a CPU.

The fixture tests/data/gpu_record/nvidia-fake-gpu_*.json was made by
`TRITON_INTERPRET=1 python -m attnbook.bench --record --device cpu --quick --out DIR` (so the Triton kernel has
forward timings, under Triton's interpreter), checked by hand, and given a fake CUDA device in its provenance
(device, device_name, capability, driver, cuda) so that the display takes the path of a GPU record.
"""
import copy
import json
import math
import re
import shutil
import time
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attnbook import gpu_record
from attnbook.attention import scaled_dot_product_attention
from attnbook.bench import main

FIXTURES = Path(__file__).parent / "data" / "gpu_record"
(FIXTURE,) = FIXTURES.glob("*.json")
METHODS = ("naive", "SDPA, default", "SDPA, MATH", "tiled (ours)", "Triton (ours)")


@pytest.fixture
def rec():
    return gpu_record.load(FIXTURE)


def test_the_fixture_is_a_plausible_record_of_every_measurement(rec):
    a = rec["attention"]
    B, H, d = a["batch"], a["heads"], a["d_head"]
    cells = {(r["dtype"], r["pass"], r["n"], r["method"]): r for r in a["rows"]}
    for dtype in ("float16", "bfloat16"):
        for pass_, factor in (("forward", 1), ("forward+backward", 3)):  # backward: 4 products of 2 forward sizes
            for n in rec["sizes"]["seq_lens"]:
                for method in METHODS:
                    r = cells[dtype, pass_, n, method]
                    assert r["flops"] == factor * 4 * B * H * n * n * d  # 2 products of 2 * n * n * d FLOPs each
                    if r["status"] == "ok":
                        assert r["median_s"] > 0 and 0 <= r["iqr_s"] and r["peak_bytes"] >= 0
                        assert r["flops_per_s"] == pytest.approx(r["flops"] / r["median_s"])
    # the kernel has no backward pass, and the interpreter no bfloat16: recorded as skipped, with why
    assert "no backward pass" in cells["float16", "forward+backward", 32, "Triton (ours)"]["reason"]
    assert "bfloat16" in cells["bfloat16", "forward", 32, "Triton (ours)"]["reason"]
    assert cells["float16", "forward", 32, "Triton (ours)"]["status"] == "ok"
    for row in rec["decode"]["gqa"]["rows"]:  # the cache is K and V: 2 * B * kv_heads * S * d_head * 4 bytes
        assert row["cache_bytes"] == 2 * row["batch"] * row["n_kv_heads"] * row["seq_len"] * 64 * 4


def test_backward_factor_is_what_pytorch_counts_for_attention():
    q, k, v = (torch.randn(2, 3, 10, 8, requires_grad=True) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        out = scaled_dot_product_attention(q, k, v)[0]
        out.backward(torch.ones_like(out))
    assert counter.get_total_flops() == (1 + gpu_record.BACKWARD_FACTOR) * 4 * 2 * 3 * 10 * 10 * 8


def test_show_prints_the_provenance_line_above_every_table(rec, tmp_path, capsys):
    shutil.copy(FIXTURE, tmp_path)
    assert gpu_record.show(9, tmp_path) == rec
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("Recorded on NVIDIA FAKE-GPU") and "(sm 9.0)" in first
    for part in ("driver 000.00 (fake)", f"torch {rec['provenance']['torch']}", "commit " +
                 rec["provenance"]["commit"][:12], "2026-11-28 03:40 UTC", "--quick"):
        assert part in first, part
    for dtype in ("float16", "bfloat16"):
        for pass_ in ("forward", "forward+backward"):
            assert f"{dtype}, {pass_}: B = 1, H = 2, d_head = 32" in out
    assert "measured matmul throughput, float16:" in out and "memory bandwidth:" in out
    assert gpu_record.show(10, tmp_path) == rec
    out = capsys.readouterr().out
    assert out.startswith("Recorded on NVIDIA FAKE-GPU") and "batch sweep:" in out and "MHA (ms)" in out


def test_attention_table_shows_each_measured_row_and_why_others_were_skipped(rec):
    text = gpu_record.attention_table(rec, "float16", "forward+backward")
    rows = [r for r in rec["attention"]["rows"] if r["dtype"] == "float16" and r["pass"] == "forward+backward"]
    for r in rows:
        if r["status"] == "ok":
            line = next(l for l in text.splitlines() if l.split()[:1] == [str(r["n"])] and r["method"] in l)
            cells = line.removesuffix("noisy").split()
            assert (line.endswith("noisy")) == (r["iqr_s"] > 0.1 * r["median_s"])  # chapter 9's mark
            assert float(cells[-5]) == pytest.approx(1e3 * r["median_s"], abs=6e-4)  # time (ms), 3 decimals
            assert float(cells[-2]) == pytest.approx(r["flops"] / r["median_s"] / 1e9, abs=0.06)  # GFLOP/s
    assert re.search(r"skipped \(Triton \(ours\), N = 32; Triton \(ours\), N = 64\): NotImplementedError: no "
                     r"backward pass", text)
    with pytest.raises(ValueError, match="dtype='float32' is not in this record"):
        gpu_record.attention_table(rec, "float32")
    with pytest.raises(ValueError, match="pass_ must be one of"):
        gpu_record.attention_table(rec, "float16", "backward")


def test_decode_and_gqa_tables(rec):
    sweep = rec["decode"]["batch_sweep"]
    text = gpu_record.decode_table(rec)
    assert f"{sweep['layers']} matrices of 64 x 64, float32" in text
    for r in sweep["rows"]:
        line = next(l for l in text.splitlines() if l.split()[:1] == [str(r["batch"])])
        assert float(line.split()[1]) == pytest.approx(1e3 * r["median_s"], abs=6e-4)
        assert r["flops"] == 2 * r["batch"] * 2 * 64 * 64  # 2 FLOPs per weight per sequence, 2 matrices
    gqa = rec["decode"]["gqa"]
    text = gpu_record.gqa_table(rec)
    by_cell = {}
    for r in gqa["rows"]:
        by_cell.setdefault((r["batch"], r["seq_len"]), {})[r["variant"]] = r["median_s"]
    for (b, s), t in by_cell.items():
        line = next(l for l in text.splitlines() if l.split()[:2] == [str(b), str(s)])
        assert line.split()[-2] == f"{t['MHA'] / t['GQA']:.2f}x" and line.split()[-1] == f"{t['MHA'] / t['MQA']:.2f}x"
    # the crossover: every cell with at least that many cached tokens has GQA 1.25x as fast as MHA
    if gqa["crossover"] is not None:
        assert all(t["MHA"] / t["GQA"] >= 1.25 for (b, s), t in by_cell.items() if b * s >= gqa["crossover"])


def test_roofline_points_use_dao_et_al_counts(rec):
    roof = gpu_record.roofline_points(rec, "float16")
    B, H, d, n, size = 1, 2, 32, 64, 2
    assert roof["n"] == n and roof["ridge"] == pytest.approx(roof["flops_per_s"] / roof["bytes_per_s"])
    flops = 4 * B * H * n * n * d
    standard = B * H * size * (4 * n * d + 4 * n * n)  # Q, K, V, O and the scores and weights, each twice
    rows_per_block = min(n, rec["roofline"]["sram_bytes"] // (4 * d * size))  # all 64 rows fit: one block
    fused = B * H * size * (2 * n * d + math.ceil(n / rows_per_block) * 2 * n * d)
    points = {p["method"]: p for p in roof["points"]}
    assert points["naive"]["intensity"] == pytest.approx(flops / standard)
    assert points["SDPA, FLASH_ATTENTION"]["intensity"] == pytest.approx(flops / fused)
    assert points["Triton (ours)"]["fused"] and not points["tiled (ours)"]["fused"]
    assert gpu_record.roofline_points(rec, "float64") is None


def test_no_record_says_so_plainly(tmp_path, capsys):
    assert gpu_record.latest(tmp_path) is None and gpu_record.latest(tmp_path / "missing") is None
    assert gpu_record.show(9, tmp_path) is None
    assert capsys.readouterr().out == (
        "No GPU record yet: run `python -m attnbook.bench --record` on a machine with a GPU and commit "
        "book/data/gpu/<device>_<date>.json\n")
    with pytest.raises(ValueError, match="chapter must be 9 or 10"):
        gpu_record.show(8, tmp_path)


def test_latest_is_the_newest_by_date(rec, tmp_path):
    older = copy.deepcopy(rec)
    older["provenance"]["date"] = "2020-01-01T00:00:00+00:00"
    (tmp_path / "zzz_older.json").write_text(json.dumps(older))
    shutil.copy(FIXTURE, tmp_path / "aaa_newer.json")
    assert gpu_record.latest(tmp_path).name == "aaa_newer.json"


def _broken(change):
    def make(rec):
        rec = copy.deepcopy(rec)
        change(rec)
        return rec
    return make


@pytest.mark.parametrize("change, where", [
    (lambda r: r.update(schema="something else"), "schema"),
    (lambda r: r["provenance"].pop("torch"), "provenance.torch"),
    (lambda r: r["provenance"].update(date="yesterday"), "provenance.date"),
    (lambda r: r["attention"].update(rows={}), "attention"),
    (lambda r: r["attention"]["rows"][0].update(median_s=-1.0), r"attention.rows\[0\].median_s"),
    (lambda r: r["attention"]["rows"][0].update(iqr_s=None), r"attention.rows\[0\].iqr_s"),
    (lambda r: r["attention"]["rows"][0].update(percent_of_matmul=120.0), r"attention.rows\[0\].percent_of_matmul"),
    (lambda r: r["attention"]["rows"][0].update(status="skipped"), r"attention.rows\[0\].reason"),
    (lambda r: r["attention"]["rows"][0].update(**{"pass": "sideways"}), r"attention.rows\[0\].pass"),
    (lambda r: r["matmul"]["float16"].update(flops_per_s=0), "matmul.float16.flops_per_s"),
    (lambda r: r["matmul"]["float16"].update(status="skipped"), "matmul.float16.reason"),
    (lambda r: r["decode"].pop("gqa"), "decode.gqa"),
    (lambda r: r["decode"]["batch_sweep"]["rows"][0].update(status="fine"), r"decode.batch_sweep.rows\[0\].status"),
])
def test_load_rejects_a_malformed_file_naming_the_key(rec, tmp_path, change, where):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_broken(change)(rec)))
    with pytest.raises(ValueError, match=f"bad.json: {where}"):
        gpu_record.load(path)
    with pytest.raises(ValueError, match="bad.json"):  # latest and show refuse it too
        gpu_record.latest(tmp_path)


def test_load_rejects_what_is_not_json(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match="x.json: not valid JSON"):
        gpu_record.load(tmp_path / "x.json")


def _fake_cuda_report(device):
    return {"device": "cuda:0", "device_name": "NVIDIA FAKE-GPU", "capability": "9.0", "threads": 1,
            "tf32_matmul": False}


def test_provenance_never_fails_without_git_or_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no git, no nvidia-smi
    p = gpu_record.provenance("cpu", ["--record"])
    assert p["commit"] == "unknown" and p["driver"] is None and p["command"] == "python -m attnbook.bench --record"
    assert p["cuda"] == torch.version.cuda and p["torch"] == torch.__version__ and p["host_cpu"]
    monkeypatch.setattr(gpu_record, "device_report", _fake_cuda_report)  # the GPU path, which asks nvidia-smi
    assert gpu_record.provenance("cuda")["driver"] is None
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 9\n")  # present but failing
    smi.chmod(0o755)
    assert gpu_record.provenance("cuda")["driver"] is None
    smi.write_text("#!/bin/sh\necho '550.54.15'\n")
    assert gpu_record.provenance("cuda")["driver"] == "550.54.15"
    monkeypatch.undo()
    commit = gpu_record.provenance("cpu")["commit"]
    assert commit == "unknown" or re.fullmatch(r"[0-9a-f]{40}", commit)


def test_the_full_gpu_sizes_fit_the_budget_by_the_model():
    # an H100's datasheet rates, the chapter's GPU sizes: well under the 8 minutes the run may take
    assert gpu_record.estimate_seconds(gpu_record.RECORD_SIZES["cuda", False]) < 0.5 * 8 * 60


def test_record_end_to_end_on_the_cpu(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the kernel is then skipped, saying why
    start = time.perf_counter()
    assert main(["--record", "--device", "cpu", "--quick", "--out", str(tmp_path)]) == 0
    elapsed = time.perf_counter() - start
    assert elapsed < 8, f"--record --quick took {elapsed:.1f} s"  # about 3 s here, with one thread
    (path,) = tmp_path.glob("*.json")
    rec = gpu_record.load(path)
    assert re.fullmatch(r"[a-z0-9-]+_\d{8}T\d{6}Z\.json", path.name)
    assert rec["provenance"]["command"] == "python -m attnbook.bench --record --device cpu --quick --out " + str(
        tmp_path)
    out = capsys.readouterr().out
    assert re.search(r"\[ +\d+\.\d s\] chapter 9 · bfloat16 · forward\+backward · N = 64", out)  # progress
    methods = {r["method"] for r in rec["attention"]["rows"]}
    assert set(METHODS) <= methods
    triton = [r for r in rec["attention"]["rows"] if r["method"] == "Triton (ours)"]
    assert all(r["status"] == "skipped" and "TRITON_INTERPRET" in r["reason"] for r in triton)
    assert rec["decode"]["batch_sweep"]["status"] == rec["decode"]["gqa"]["status"] == "ok"
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path)])
    assert "--out goes with --record" in capsys.readouterr().err


def test_a_skipped_sweep_shows_its_reason(rec):
    rec = copy.deepcopy(rec)
    rec["decode"]["gqa"] = {"status": "skipped", "reason": "OutOfMemoryError: CUDA out of memory"}
    rec["matmul"]["float16"] = {"status": "skipped", "reason": "RuntimeError: no"}
    assert gpu_record.gqa_table(rec) == "GQA sweep skipped: OutOfMemoryError: CUDA out of memory"
    assert gpu_record.roofline_points(rec, "float16") is None  # no throughput, no roofline
    assert gpu_record.roofline_points(rec, "bfloat16") is not None
