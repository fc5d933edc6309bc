"""Launch from Python the way Horovod's own examples do: horovod.run.

    from hvd_impl import train
    from workload.options import Options
    run_dirs = train(Options(workload="mlp", steps=50, out=Path("runs/nb")), np=2)
"""

from __future__ import annotations

import os
from pathlib import Path

import horovod

from hvd_impl.backend import HorovodBackend
from workload.options import Options
from workload.trainer import run_dir, run_with_backend


def _worker(options: Options) -> None:
    os.environ["WORKLOAD_LAUNCHER"] = "horovod.run"
    run_with_backend(options, HorovodBackend)


def train(options: Options, np: int | None = None, controller: str = "gloo") -> list[Path]:
    """Train in this process (one worker, or one rank under horovodrun/mpirun), or in `np` processes
    started by horovod.run with the Gloo (default) or MPI controller.

    A failure in any worker ends the whole group and raises here. Returns the run directories (one per seed).
    """
    if np is None:
        return run_with_backend(options, HorovodBackend)
    horovod.run(_worker, args=(options,), np=np, hosts=f"localhost:{np}", use_gloo=controller == "gloo",
                use_mpi=controller == "mpi", network_interfaces=["lo"])
    return [run_dir(options, seed) for seed in options.seeds]
