"""Allreduce throughput over message sizes, for one framework, next to this host's memory-copy bandwidth.

    torchrun --standalone --nproc-per-node 2 -m benchmarks.allreduce --framework torch --out ar.json
    horovodrun -np 2 --mpi  python -m benchmarks.allreduce --framework horovod --out ar.json
    horovodrun -np 2 --gloo python -m benchmarks.allreduce --framework horovod --out ar.json

Each size runs a few untimed calls, then timed calls until --min-time has passed (at least --min-iters);
the time of a call is the slowest rank's, and a size's time is the median call. Bandwidths follow
nccl-tests: algorithm bandwidth = bytes / time, bus bandwidth = algbw x 2(n-1)/n. The memory copy (one
thread, numpy, and torch's copy_ with its thread pool; bytes read + bytes written) is measured on rank 0
in the same process just before, as the ceiling for moving bytes within one host.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch

from workload.files import write_json_atomic

COPY_BYTES = 256 * 2**20  # far beyond any cache


def memory_copy_gbps(repeats: int = 5) -> dict[str, float]:
    """Best of `repeats` copies of a 256 MiB buffer, counting bytes read plus bytes written."""
    src = np.ones(COPY_BYTES // 8)
    dst = np.empty_like(src)
    results = {}
    for name, copy in (("numpy_1_thread", lambda: np.copyto(dst, src)),
                       ("torch_copy", lambda: torch.from_numpy(dst).copy_(torch.from_numpy(src)))):
        copy()  # fault the pages in
        best = min(_timed(copy) for _ in range(repeats))
        results[name] = 2 * COPY_BYTES / best / 1e9
    results["threads"] = torch.get_num_threads()
    return results


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclass(frozen=True)
class Collectives:
    """The few collectives the benchmark needs, from one framework: the only part that differs."""

    rank: int
    world_size: int
    controller: str
    barrier: Callable[[], object]
    allreduce: Callable[[torch.Tensor], None]  # in place, summed
    any_rank: Callable[[bool], bool]  # every rank must agree on when a size ends
    slowest: Callable[[torch.Tensor, str], torch.Tensor]  # element-wise max over ranks
    shutdown: Callable[[], None]


def torch_collectives() -> Collectives:
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(minutes=5))

    def any_rank(flag: bool) -> bool:
        t = torch.tensor([float(flag)])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def slowest(t: torch.Tensor, name: str) -> torch.Tensor:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t

    def shutdown() -> None:
        dist.destroy_process_group()
        sys.stdout.flush()
        os._exit(0)  # no finalization for Gloo's thread to abort in (docs/fault-tolerance.md)

    return Collectives(dist.get_rank(), dist.get_world_size(), "gloo", dist.barrier, dist.all_reduce, any_rank,
                       slowest, shutdown)


def horovod_collectives() -> Collectives:
    import horovod.torch as hvd

    hvd.init()
    return Collectives(
        hvd.rank(), hvd.size(), "mpi" if hvd.mpi_enabled() else "gloo", hvd.barrier,
        lambda t: hvd.allreduce_(t, op=hvd.Sum, name="bench.allreduce"),
        lambda flag: bool(hvd.allreduce(torch.tensor([float(flag)]), op=hvd.Max, name="bench.stop").item()),
        lambda t, name: hvd.allreduce(t, op=hvd.Max, name=name), hvd.shutdown)


def measure(comm: Collectives, size: int, args: argparse.Namespace) -> dict:
    """One message size: untimed calls, then timed ones until --min-time (at least --min-iters); the slowest
    rank's time of each call, and their median."""
    tensor = torch.ones(size // 4)
    for _ in range(args.warmup):
        comm.allreduce(tensor)
    times: list[float] = []
    started = time.perf_counter()
    while True:
        times.append(_timed(lambda: comm.allreduce(tensor)))
        enough = len(times) >= args.max_iters or (
            len(times) >= args.min_iters and time.perf_counter() - started >= args.min_time)
        if comm.any_rank(enough):
            break
    slowest = comm.slowest(torch.tensor(times, dtype=torch.float64), f"bench.times.{size}")
    median = float(np.median(slowest.numpy()))
    algbw = size / median / 1e9
    return {"bytes": size, "iters": len(times), "median_s": median, "algbw_gbps": algbw,
            "busbw_gbps": algbw * 2 * (comm.world_size - 1) / comm.world_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=["torch", "horovod"], required=True)
    parser.add_argument("--sizes", default="4096,16384,65536,262144,1048576,4194304,16777216,67108864",
                        help="message sizes in bytes (float32 tensors)")
    parser.add_argument("--min-time", type=float, default=0.25, help="seconds of timed calls per size")
    parser.add_argument("--min-iters", type=int, default=5)
    parser.add_argument("--max-iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    comm = torch_collectives() if args.framework == "torch" else horovod_collectives()
    copy = memory_copy_gbps() if comm.rank == 0 else {}
    comm.barrier()
    rows = [measure(comm, int(size), args) for size in args.sizes.split(",")]
    if comm.rank == 0:
        write_json_atomic(args.out, {"framework": args.framework, "controller": comm.controller,
                                     "world_size": comm.world_size, "memory_copy_gbps": copy, "sizes": rows})
    comm.barrier()
    comm.shutdown()


if __name__ == "__main__":
    main()
