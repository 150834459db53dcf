"""Training on many devices (chapter 13), with `torch.distributed` on the CPU: gloo over the loopback interface.

- `launcher`: `launch(fn, world_size, *args)` runs fn in processes joined in one process group; their results
- `env`: a script that runs alone and under torchrun (`init_from_env`, `shard_batch`, `mean_over_ranks`)
- `toy`: the tiny float64 Llama, its batches and the one-process reference run every method is checked against
- `data_parallel`: gradients averaged by hand and by DistributedDataParallel; DDP's buckets measured
- `zero`: ZeRO's memory per device (Rajbhandari et al. 2020); a hand-written ZeRO-1 optimizer; FSDP2
- `tensor_parallel`: Megatron-LM's column- and row-parallel MLP and head-parallel attention by hand; DTensor's
- `pipeline`: GPipe's schedule and bubble, and a pipeline run with send/recv
- `comm`: the ring all-reduce simulated, its bytes, an alpha-beta model fitted to measured all-reduces
- `costs`: communication per training step of data, tensor and pipeline parallelism at published bandwidths

Names load on first use (`from attnbook.parallel import launch`), so importing one part does not import the rest.
"""
from __future__ import annotations

import importlib

_EXPORTS: dict[str, str] = {  # public name -> submodule that defines it
    **{name: "launcher" for name in ("launch", "RankError", "loopback_interface")},
    **{name: "env" for name in ("init_from_env", "rank_and_world", "shard_batch", "mean_over_ranks", "wrap_ddp",
                                "unwrap", "close", "launched_by_torchrun")},
    **{name: "toy" for name in ("tiny_config", "tiny_llama", "token_batches", "train_reference",
                                "parameter_bytes")},
    **{name: "data_parallel" for name in ("average_gradients", "train_data_parallel", "ddp_bucket_sweep",
                                          "bucket_sweep")},
    **{name: "zero" for name in ("zero_memory", "ShardedAdamW", "optimizer_state_bytes", "train_zero1",
                                 "train_fsdp2")},
    **{name: "tensor_parallel" for name in ("copy_to_parallel", "reduce_from_parallel", "column_slice", "row_slice",
                                            "ParallelSwiGLU", "ParallelLlamaAttention", "tp_swiglu", "tp_attention",
                                            "dtensor_swiglu")},
    **{name: "pipeline" for name in ("gpipe_schedule", "bubble_fraction", "idle_fraction", "format_schedule",
                                     "split_llama", "run_gpipe", "measured_idle_fraction", "measure_bubble",
                                     "run_pipelining")},
    **{name: "comm" for name in ("ring_all_reduce", "ring_bytes_per_rank", "time_all_reduce", "AlphaBeta",
                                 "fit_alpha_beta", "measure_alpha_beta")},
    **{name: "costs" for name in ("step_communication", "communication_table", "format_table")},
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
