"""Launch from Python the way PyTorch's introductory material does: torch.multiprocessing.spawn.

    from native_impl import train
    from workload.options import Options
    run_dirs = train(Options(workload="mlp", steps=50, out=Path("runs/nb")), nprocs=2)
"""

from __future__ import annotations

import os
from pathlib import Path

import torch.multiprocessing as mp

from native_impl.backend import DDPBackend
from workload.options import Options
from workload.processes import free_loopback_port
from workload.trainer import run_dir, run_with_backend


def _worker(local_rank: int, options: Options, nprocs: int, port: int) -> None:
    # What torchrun would set, for a process group on loopback.
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(nprocs),
                      LOCAL_WORLD_SIZE=str(nprocs), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      WORKLOAD_LAUNCHER="spawn")
    run_with_backend(options, DDPBackend)
    os._exit(0)  # all is written: no finalization for Gloo's thread to abort in (docs/fault-tolerance.md)


def train(options: Options, nprocs: int | None = None) -> list[Path]:
    """Train in this process (one worker, or one rank under torchrun), or in `nprocs` spawned processes.

    A failure in any worker ends the whole group and raises here with that worker's error.
    Returns the run directories (one per seed).
    """
    if nprocs is None:
        return run_with_backend(options, DDPBackend)
    mp.spawn(_worker, args=(options, nprocs, free_loopback_port()), nprocs=nprocs, join=True)
    return [run_dir(options, seed) for seed in options.seeds]
