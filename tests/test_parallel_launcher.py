"""attnbook.parallel.launcher: processes joined by gloo on loopback, results back in rank order, a rank's error
re-raised naming it, a timeout that stops every rank. The workers are this file's module-level functions (launched
processes import them by name)."""
from __future__ import annotations

import os
import time

import pytest
import torch
import torch.distributed as dist

from attnbook.parallel.launcher import RankError, launch, loopback_interface

TIMEOUT = 120  # generous: the machine may be shared


def sum_of_ranks(rank, world_size, extra):
    """Each rank contributes rank + 1; the all-reduce must give 1 + 2 + ... + world_size on every rank."""
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    return {"rank": rank, "world_size": world_size, "total": t.item(), "extra": extra, "pid": os.getpid(),
            "backend": dist.get_backend(), "interface": os.environ.get("GLOO_SOCKET_IFNAME"),
            "tensor": torch.full((2,), float(rank))}


def fails_on_rank_one(rank, world_size):
    if rank == 1:
        raise ValueError("rank one cannot go on")
    dist.barrier()  # rank 0 waits here for a rank that never comes
    return rank


def sleeps(rank, world_size, folder):
    with open(os.path.join(folder, f"{rank}.pid"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(300)


def _ended(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_every_rank_runs_in_its_own_process_and_results_come_back_in_rank_order():
    results = launch(sum_of_ranks, 3, "x", timeout=TIMEOUT)
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert all(r["world_size"] == 3 and r["extra"] == "x" for r in results)
    assert [r["total"] for r in results] == [6.0, 6.0, 6.0]  # 1 + 2 + 3, by hand
    assert all(r["backend"] == "gloo" for r in results)
    assert all(r["interface"] == loopback_interface() for r in results)
    assert torch.equal(results[2]["tensor"], torch.tensor([2.0, 2.0]))
    pids = {r["pid"] for r in results}
    assert len(pids) == 3 and os.getpid() not in pids
    assert all(_ended(pid) for pid in pids)


def test_an_error_in_one_rank_is_raised_in_the_caller_naming_the_rank():
    start = time.monotonic()
    with pytest.raises(RankError, match="rank 1 raised ValueError: rank one cannot go on") as info:
        launch(fails_on_rank_one, 2, timeout=TIMEOUT)
    assert info.value.rank == 1 and info.value.kind == "ValueError"
    assert isinstance(info.value.__cause__, ValueError)
    assert "fails_on_rank_one" in info.value.remote_traceback
    assert time.monotonic() - start < TIMEOUT / 2  # rank 0, stuck in its barrier, was stopped, not waited for


def test_a_launch_past_its_timeout_stops_every_rank(tmp_path):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="timeout=3"):
        launch(sleeps, 2, str(tmp_path), timeout=3)
    assert time.monotonic() - start < 60
    pids = [int((tmp_path / f"{rank}.pid").read_text()) for rank in range(2)]
    assert all(_ended(pid) for pid in pids)


def not_module_level():
    return lambda rank, world_size: rank


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(fn=not_module_level(), world_size=2), TypeError, "module-level function"),
    (dict(fn=42, world_size=2), TypeError, "fn must be a function"),
    (dict(fn=sum_of_ranks, world_size=2, extra=lambda: 0), TypeError, "args must be picklable"),
    (dict(fn=sum_of_ranks, world_size=0), ValueError, "world_size must be >= 1"),
    (dict(fn=sum_of_ranks, world_size=2, timeout=0), ValueError, "timeout must be a positive"),
    (dict(fn=sum_of_ranks, world_size=2, backend="tcp"), ValueError, "backend must be"),
    (dict(fn=sum_of_ranks, world_size=2, start_method="thread"), ValueError, "start_method must be"),
])
def test_bad_arguments_are_refused_before_any_process_starts(kwargs, exc, match):
    fn, world_size, extra = kwargs.pop("fn"), kwargs.pop("world_size"), kwargs.pop("extra", "x")
    with pytest.raises(exc, match=match):
        launch(fn, world_size, extra, **kwargs)


def test_loopback_interface_is_the_loopback():
    name = loopback_interface()
    if name is None:
        pytest.skip("no loopback interface listed by socket.if_nameindex()")
    assert name.startswith("lo")


def test_every_name_the_package_lists_loads_from_its_module():
    import importlib

    import attnbook.parallel as parallel

    for name, module in parallel._EXPORTS.items():
        defined = importlib.import_module(f"attnbook.parallel.{module}")
        assert name in defined.__all__ and getattr(parallel, name) is getattr(defined, name)


def test_a_function_defined_in_a_notebook_is_refused_with_the_reason(monkeypatch):
    import sys
    import types

    def cell_function(rank, world_size):
        return rank

    cell_function.__module__ = "__main__"
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # a kernel's __main__: no file
    with pytest.raises(ValueError, match="notebook or an interactive session"):
        launch(cell_function, 2)
