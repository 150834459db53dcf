"""Communication per training step of data, tensor and pipeline parallelism, at published link bandwidths.

A back-of-the-envelope table, every assumption a named constant with its source:

- Links. NVLink 4 on an H100 SXM moves 900 GB/s per GPU counting both directions, 450 GB/s each way (NVIDIA H100
  Tensor Core GPU datasheet, "NVLink: 900GB/s"); it joins the 8 GPUs of one server (DGX/HGX H100). Between
  servers, each GPU has its own InfiniBand NDR adapter, 400 Gb/s = 50 GB/s each way (NVIDIA DGX H100 datasheet:
  8 ConnectX-7 single-port 400 Gb/s adapters for the 8 GPUs). A collective over more than 8 GPUs goes as fast as
  its slowest link, the InfiniBand one.
- Models. Llama 2 7B and 70B (Touvron et al. 2023, arXiv:2307.09288; sizes of the released configurations:
  d_model 4096 and 8192, 32 and 80 layers, 6.74 and 68.98 billion parameters), trained on 4M-token batches of
  4096-token sequences (the paper's section 2.2), bfloat16 gradients and activations (2 bytes).
- Compute, for scale: 6·Ψ FLOPs per token (Kaplan et al. 2020) at 40% of an H100 SXM's 989 TFLOP/s of dense
  bfloat16 (the datasheet's 1,979 counts 2:4 sparsity); Llama 3's 16K-GPU training reports 38-43% (Dubey et al.
  2024, arXiv:2407.21783, Table 4).

Per step, on N GPUs, bytes each GPU sends (ring all-reduces: 2(N - 1)/N of the data, `comm.ring_bytes_per_rank`):
- data parallel (DP): one all-reduce of the 2Ψ bytes of gradients;
- tensor parallel (TP, Megatron-LM, every GPU one slice of every layer): per layer two all-reduces forward and two
  backward of the activations of every token, tokens·d_model·2 bytes each (no recomputation, no sequence
  parallelism);
- pipeline parallel (PP, N stages of whole layers): each GPU sends its stage's output activations forward and the
  gradient of its input backward, tokens·d_model·2 bytes each.
Seconds = bytes / the slowest link's one-way bandwidth: the time if nothing overlaps with computation.
"""
from __future__ import annotations

from .._validate import require_int
from .comm import ring_bytes_per_rank
from .zero import zero_memory

__all__ = ["NVLINK4_H100_BIDIRECTIONAL", "NVLINK4_H100", "INFINIBAND_NDR", "GPUS_PER_NODE", "H100_BF16_DENSE",
           "MFU", "LLAMA2", "TOKENS_PER_STEP", "SEQ_LEN", "BYTES_PER_VALUE", "link_bandwidth", "step_communication",
           "communication_table", "format_table"]

NVLINK4_H100_BIDIRECTIONAL = 900e9  # bytes/s per GPU, both directions together (H100 SXM datasheet)
NVLINK4_H100 = NVLINK4_H100_BIDIRECTIONAL / 2  # 450 GB/s each way
INFINIBAND_NDR = 400e9 / 8  # 400 Gb/s per GPU's ConnectX-7 adapter = 50 GB/s each way (DGX H100 datasheet)
GPUS_PER_NODE = 8  # an HGX/DGX H100 server: 8 GPUs on NVLink
H100_BF16_DENSE = 989e12  # FLOP/s, dense bfloat16 tensor cores, H100 SXM (datasheet: 1,979 with sparsity)
MFU = 0.40  # the share of that peak a large training run achieves (Llama 3: 38-43%)
# Llama 2 (Touvron et al. 2023): parameters, layers and width of the released 7B and 70B configurations
LLAMA2 = {"7B": {"params": 6.74e9, "n_layers": 32, "d_model": 4096},
          "70B": {"params": 68.98e9, "n_layers": 80, "d_model": 8192}}
TOKENS_PER_STEP = 4 * 2**20  # Llama 2's global batch: 4M tokens
SEQ_LEN = 4096  # Llama 2's context length
BYTES_PER_VALUE = 2  # bfloat16 gradients and activations


def link_bandwidth(n_gpus: int) -> tuple[str, float]:
    """(link name, bytes/s each way) of the slowest link a collective over n_gpus GPUs uses: NVLink 4 within one
    8-GPU server, InfiniBand NDR beyond."""
    require_int(n_gpus, "n_gpus", minimum=1)
    return ("NVLink 4", NVLINK4_H100) if n_gpus <= GPUS_PER_NODE else ("InfiniBand NDR", INFINIBAND_NDR)


def step_communication(strategy: str, n_params: float, n_layers: int, d_model: int, n_gpus: int,
                       tokens: float = TOKENS_PER_STEP, bytes_per_value: int = BYTES_PER_VALUE) -> float | None:
    """Bytes each GPU sends in one training step of `tokens` tokens under strategy "DP", "TP" or "PP" (see the
    module's docstring), or None where the strategy cannot use n_gpus GPUs (PP with more stages than layers)."""
    if strategy not in ("DP", "TP", "PP"):
        raise ValueError(f"strategy must be 'DP', 'TP' or 'PP', got {strategy!r}")
    require_int(n_layers, "n_layers", minimum=1)
    require_int(d_model, "d_model", minimum=1)
    n = require_int(n_gpus, "n_gpus", minimum=1)
    activations = tokens * d_model * bytes_per_value  # one layer's output for every token of the step
    if strategy == "DP":
        return ring_bytes_per_rank(n_params * bytes_per_value, n)
    if strategy == "TP":
        return 4 * n_layers * ring_bytes_per_rank(activations, n)  # 2 all-reduces forward, 2 backward, per layer
    if n > n_layers:
        return None
    return 2 * activations if n > 1 else 0.0  # activations forward, their gradients backward


def communication_table(models=("7B", "70B"), gpu_counts=(8, 64), strategies=("DP", "TP", "PP"),
                        tokens: float = TOKENS_PER_STEP, mfu: float = MFU) -> list[dict]:
    """One row per (model, number of GPUs, strategy): bytes sent per GPU per step, the link, its one-way
    bandwidth, the seconds that takes, the seconds of computation per step (6·Ψ·tokens FLOPs shared by the
    GPUs at `mfu` of the H100's dense bfloat16 peak) and the model states per GPU (16 bytes per parameter for
    mixed-precision Adam, `zero.zero_memory`: every GPU holds them all under DP, 1/N of them under TP and PP;
    activations not counted). A strategy that cannot use that many GPUs has None for bytes and seconds."""
    if isinstance(mfu, bool) or not isinstance(mfu, (int, float)) or not 0 < mfu <= 1:
        raise ValueError(f"mfu must be a number in (0, 1], got {mfu!r}")
    rows = []
    for name in models:
        if name not in LLAMA2:
            raise ValueError(f"models must be among {sorted(LLAMA2)}, got {name!r}")
        m = LLAMA2[name]
        for n in gpu_counts:
            link, bandwidth = link_bandwidth(n)
            compute = 6 * m["params"] * tokens / (n * H100_BF16_DENSE * mfu)
            for strategy in strategies:
                sent = step_communication(strategy, m["params"], m["n_layers"], m["d_model"], n, tokens)
                shards = 1 if strategy == "DP" else n
                rows.append({"model": name, "gpus": n, "strategy": strategy, "bytes_per_gpu": sent, "link": link,
                             "bandwidth": bandwidth, "comm_s": None if sent is None else sent / bandwidth,
                             "compute_s": compute,
                             "model_states_gb": None if sent is None else
                             zero_memory(m["params"] / shards, 1, 0) / 1e9})
    return rows


def format_table(rows: list[dict]) -> str:
    """`communication_table`'s rows as aligned text: GB sent, link, seconds of communication and of compute."""
    head = f"{'model':<6}{'GPUs':>5} {'':<4}{'GB sent':>10} {'link':<15}{'comm s':>9}{'compute s':>11}{'states GB':>11}"
    lines = [head]
    for r in rows:
        sent = "n/a" if r["bytes_per_gpu"] is None else f"{r['bytes_per_gpu'] / 1e9:.1f}"
        comm = "n/a" if r["comm_s"] is None else f"{r['comm_s']:.2f}"
        states = "n/a" if r["model_states_gb"] is None else f"{r['model_states_gb']:.1f}"
        lines.append(f"{r['model']:<6}{r['gpus']:>5} {r['strategy']:<4}{sent:>10} {r['link']:<15}{comm:>9}"
                     f"{r['compute_s']:>11.1f}{states:>11}")
    return "\n".join(lines)
