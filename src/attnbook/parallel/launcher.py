"""Running a function in several processes that talk through `torch.distributed` (gloo, on this machine only).

`launch(fn, world_size, *args)` starts `world_size` processes, joins each to one process group (the gloo
backend, every socket on the loopback interface 127.0.0.1), calls `fn(rank, world_size, *args)` in each and
returns the list of their results, rank 0's first. The pieces are PyTorch's: `torch.multiprocessing`
starts the processes, a `torch.distributed.TCPStore` is where they meet, `init_process_group` joins them.

- The meeting point is a TCPStore that the caller opens on port 0 (the operating system picks a free port) and
  keeps open until every process has ended: no other program can take the port between choosing and using it,
  which picking a free port and closing it again cannot promise on a busy machine.
- Processes are forked from a server process that has imported torch once (`start_method="forkserver"`, with
  torch and this package preloaded): a second launch starts in a fraction of a second instead of several seconds.
  The fork server is Python's (`multiprocessing`); it waits for the next launch and ends with the calling process.
  `fn` is sent by name, so it must be defined in a module (the package's workers, or a file you import), not in a
  notebook cell.
- A rank that raises ends the launch at once: the other ranks are stopped and `RankError`, which names the rank
  and shows its traceback, is raised in the caller, with the rank's own exception as its `__cause__` when it can
  be sent back. A launch that runs past `timeout` seconds stops every rank and raises `TimeoutError`.
"""
from __future__ import annotations

import datetime
import math
import os
import pickle
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .._validate import require_int

__all__ = ["LOOPBACK", "launch", "RankError", "loopback_interface"]

LOOPBACK = "127.0.0.1"
# Imported once by the fork server, so that each launched process starts with them already loaded.
PRELOAD = ["torch", "torch._dynamo", "torch.distributed", "torch.distributed.fsdp",
           "torch.distributed.tensor.parallel", "torch.nn.parallel", "attnbook.models.llama", "attnbook.lm",
           "attnbook.parallel.launcher", "attnbook.parallel.toy", "attnbook.parallel.data_parallel",
           "attnbook.parallel.zero", "attnbook.parallel.tensor_parallel", "attnbook.parallel.pipeline",
           "attnbook.parallel.comm"]  # torch._dynamo: an optimizer's first step imports it (seconds, per process)


class RankError(RuntimeError):
    """A launched rank raised. `rank` is its number, `kind` the exception's class name, `remote_traceback` the
    traceback as the rank printed it; `__cause__` is the exception itself when it could be sent back."""

    def __init__(self, rank: int, kind: str, message: str, remote_traceback: str):
        super().__init__(f"rank {rank} raised {kind}: {message}\n\n--- traceback of rank {rank} ---\n"
                         f"{remote_traceback}")
        self.rank, self.kind, self.remote_traceback = rank, kind, remote_traceback


def loopback_interface() -> str | None:
    """The name of the loopback network interface ('lo' on Linux, 'lo0' on macOS), or None if none is found.

    gloo opens its sockets on the interface named by the environment variable GLOO_SOCKET_IFNAME; without it,
    gloo uses the address the host name resolves to, which may be a real network interface."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return None
    return next((n for n in names if n in ("lo", "lo0")), next((n for n in names if n.startswith("lo")), None))


def _run_rank(rank: int, fn: Callable, world_size: int, port: int, args: tuple, out_dir: str, backend: str,
              timeout: float, threads: int) -> None:
    """One launched process: join the group, run fn, write its result (or its error) to out_dir/<rank>."""
    interface = loopback_interface()
    if interface is not None:
        os.environ["GLOO_SOCKET_IFNAME"] = interface  # gloo's sockets on 127.0.0.1 only
    torch.set_num_threads(threads)
    limit = datetime.timedelta(seconds=timeout)
    try:
        store = dist.TCPStore(LOOPBACK, port, world_size, is_master=False, timeout=limit)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=limit)
        result = fn(rank, world_size, *args)
        torch.save(result, os.path.join(out_dir, f"{rank}.result"))
    except BaseException as e:
        record = {"time": time.time(), "kind": type(e).__name__, "message": str(e),
                  "traceback": traceback.format_exc(), "exception": None}
        try:
            pickle.loads(pickle.dumps(e))
            record["exception"] = e
        except Exception:  # an exception that cannot be sent back is described by its text only
            pass
        with open(os.path.join(out_dir, f"{rank}.error"), "wb") as f:
            pickle.dump(record, f)
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _first_error(out_dir: str, world_size: int) -> tuple[int, dict] | None:
    """The rank whose error was recorded first (the others usually fail because it stopped), with its record."""
    found = []
    for rank in range(world_size):
        path = os.path.join(out_dir, f"{rank}.error")
        if os.path.exists(path):
            with open(path, "rb") as f:
                found.append((rank, pickle.load(f)))
    return min(found, key=lambda item: item[1]["time"]) if found else None


def _raise_first_error(out_dir: str, world_size: int) -> None:
    first = _first_error(out_dir, world_size)
    if first is not None:
        rank, record = first
        raise RankError(rank, record["kind"], record["message"], record["traceback"]) from record["exception"]


def _check_sendable(fn) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be a function fn(rank, world_size, *args), got {type(fn).__name__}")
    main = sys.modules.get("__main__")
    if getattr(fn, "__module__", None) == "__main__" and not getattr(main, "__file__", None):
        raise ValueError(f"fn={getattr(fn, '__qualname__', fn)!r} is defined in a notebook or an interactive "
                         "session: launched processes cannot import it. Define it in a module (a .py file) and "
                         "import it")
    try:
        pickle.dumps(fn)
    except Exception as e:
        raise TypeError(f"fn must be a module-level function that processes can import by name, got "
                        f"{getattr(fn, '__qualname__', fn)!r} ({e})") from None


def launch(fn: Callable, world_size: int, *args, timeout: float = 120.0, backend: str = "gloo",
           start_method: str = "forkserver", threads: int = 1) -> list:
    """Run fn(rank, world_size, *args) in `world_size` processes joined by torch.distributed; their results.

    Each process joins the default process group (`backend`, gloo on the CPU) through a TCPStore on 127.0.0.1,
    with gloo's sockets on the loopback interface, and uses `threads` PyTorch threads. Returns
    [result of rank 0, result of rank 1, ...]; results travel back pickled (`torch.save`), so tensors, numbers,
    lists and dicts are fine. `args` are pickled to every process too.

    Raises RankError (naming the rank, with its traceback) if a rank raises, the other ranks then being stopped;
    TimeoutError if the ranks have not all finished after `timeout` seconds (every rank is then stopped; the
    process group's collectives time out after `timeout` seconds too). Every process has ended when this returns.
    `fn` must be importable by name: define it in a module, not in a notebook cell.
    """
    _check_sendable(fn)
    try:
        pickle.dumps(args)  # before any process starts: a rank that started could not be told to stop
    except Exception as e:
        raise TypeError(f"args must be picklable (tensors, numbers, lists, dicts, dataclasses): {e}") from None
    require_int(world_size, "world_size", minimum=1)
    require_int(threads, "threads", minimum=1)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (math.isfinite(timeout)
                                                                                 and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if backend not in ("gloo", "nccl", "mpi"):
        raise ValueError(f"backend must be 'gloo' (CPU), 'nccl' or 'mpi', got {backend!r}")
    if start_method not in ("forkserver", "spawn", "fork"):
        raise ValueError(f"start_method must be 'forkserver', 'spawn' or 'fork', got {start_method!r}")
    if start_method == "forkserver":
        mp.get_context("forkserver").set_forkserver_preload(PRELOAD)  # no effect once the server runs
    store = dist.TCPStore(LOOPBACK, 0, world_size, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=timeout))  # port 0: a free port, held until the end
    out_dir = tempfile.mkdtemp(prefix="attnbook-launch-")
    context = None
    try:
        context = mp.start_processes(_run_rank, nprocs=world_size, join=False, start_method=start_method,
                                     args=(fn, world_size, store.port, args, out_dir, backend, float(timeout),
                                           threads))
        deadline = time.monotonic() + timeout
        while True:
            try:
                if context.join(timeout=min(0.05, max(0.0, deadline - time.monotonic())), grace_period=1.0):
                    break
            except (mp.ProcessRaisedException, mp.ProcessExitedException) as e:
                _raise_first_error(out_dir, world_size)
                # died before fn ran (killed, out of memory, or fn could not be unpickled)
                raise RankError(e.error_index, "ProcessExitedException", str(e), "(no Python traceback)") from e
            if time.monotonic() >= deadline:
                running = [r for r, p in enumerate(context.processes) if p.is_alive()]
                raise TimeoutError(f"launch of {getattr(fn, '__qualname__', fn)} on {world_size} processes ran past "
                                   f"timeout={timeout} s; ranks {running} were still running and were stopped")
        _raise_first_error(out_dir, world_size)  # a KeyboardInterrupt or SystemExit(0) in fn ends with exit code 0
        return [torch.load(os.path.join(out_dir, f"{rank}.result"), weights_only=False)
                for rank in range(world_size)]
    finally:
        if context is not None:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
            for process in context.processes:
                process.join(timeout=30)
        del store
        shutil.rmtree(out_dir, ignore_errors=True)
