"""Horovod's side of the comparison: every Horovod call the training job makes is in this file.

Compare with native_impl/backend.py: the same methods, written the way each framework's own examples do.
"""

from __future__ import annotations

import os

import horovod
import horovod.torch as hvd
import psutil
import torch
from torch import nn

from workload.backend import ReduceOp
from workload.environment import mpi_library_version
from workload.options import Options

_OPS = {"mean": hvd.Average, "max": hvd.Max, "sum": hvd.Sum}


def _launcher() -> str:
    if "WORKLOAD_LAUNCHER" in os.environ:  # started from Python (spawn.py)
        return os.environ["WORKLOAD_LAUNCHER"]
    if "HOROVOD_RANK" in os.environ:  # horovodrun on Gloo sets it
        return "horovodrun"
    if "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ:
        return "horovodrun" if _under_horovodrun_mpi() else "mpirun"
    return "none"


def _under_horovodrun_mpi() -> bool:
    """horovodrun --mpi replaces itself (execve) with `/bin/sh -c "mpirun ..."` and marks the workers
    with no variable of its own; its mpirun line always exports NCCL_SOCKET_IFNAME. Local host only."""
    for process in psutil.Process().parents():
        try:
            cmdline = process.cmdline()
        except psutil.Error:
            continue
        if cmdline[:2] == ["/bin/sh", "-c"] and cmdline[2:3] and cmdline[2].startswith("mpirun ") \
                and "-x NCCL_SOCKET_IFNAME=" in cmdline[2]:
            return True
    return False


class HorovodBackend:
    framework = "horovod"

    def __init__(self, options: Options):
        hvd.init()
        self.rank, self.size, self.local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
        if options.device == "cuda":
            torch.cuda.set_device(self.local_rank)
            self.comm_backend = "nccl" if hvd.nccl_built() else ("mpi" if hvd.mpi_enabled() else "gloo")
        else:
            self.comm_backend = "mpi" if hvd.mpi_enabled() else "gloo"
        self.launcher = _launcher()

    def data_shards(self) -> tuple[int, list[int]]:
        return hvd.size(), [hvd.rank()]

    def broadcast_initial_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        # On a fresh optimizer, broadcast_optimizer_state first runs a zero-gradient step() to create
        # the state (horovod issues #2805, #3743): AdamW then starts at step 1, and momentum with weight
        # decay moves the parameters. Only a resumed optimizer has state worth broadcasting.
        if optimizer.state:
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer,
             ) -> tuple[nn.Module, torch.optim.Optimizer]:
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             op=hvd.Average)
        return model, optimizer

    def allreduce(self, tensor: torch.Tensor, op: ReduceOp) -> torch.Tensor:
        return hvd.allreduce(tensor, op=_OPS[op], name=f"metrics.{op}")

    def barrier(self) -> None:
        hvd.barrier()

    def shutdown(self) -> None:
        hvd.shutdown()

    def versions(self) -> dict[str, str | None]:
        return {"horovod": horovod.__version__, "mpi": mpi_library_version(),
                "horovod_controller": "mpi" if hvd.mpi_enabled() else "gloo"}
