"""Native PyTorch's side of the comparison: every torch.distributed call the training job makes is here.

Compare with hvd_impl/backend.py: the same methods, written the way each framework's own examples do.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from workload.backend import ReduceOp
from workload.options import Options

_OPS = {"mean": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "sum": dist.ReduceOp.SUM}


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launcher() -> str:
    if "WORKLOAD_LAUNCHER" in os.environ:  # started from Python (spawn.py)
        return os.environ["WORKLOAD_LAUNCHER"]
    if "TORCHELASTIC_RUN_ID" in os.environ:
        return "torchrun"
    if "RANK" in os.environ:
        return "env"
    # No launcher: one worker, on a process group of one that listens on loopback only.
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(free_loopback_port()))
    return "none"


class DDPBackend:
    framework = "ddp"

    def __init__(self, options: Options):
        self.launcher = _launcher()
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        if options.device == "cuda":
            torch.cuda.set_device(self.local_rank)
            self.comm_backend = "nccl"
            device_id = torch.device("cuda", self.local_rank)
        else:
            self.comm_backend = "gloo"
            device_id = None
        dist.init_process_group(self.comm_backend, timeout=timedelta(minutes=5), device_id=device_id)
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.device_ids = [self.local_rank] if options.device == "cuda" else None

    def data_shards(self) -> tuple[int, list[int]]:
        return dist.get_world_size(), [dist.get_rank()]

    def broadcast_initial_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        # Nothing to do here: DDP's constructor (in wrap) broadcasts rank 0's parameters and buffers,
        # and a fresh optimizer has no state.
        pass

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer,
             ) -> tuple[nn.Module, torch.optim.Optimizer]:
        return DDP(model, device_ids=self.device_ids), optimizer

    def allreduce(self, tensor: torch.Tensor, op: ReduceOp) -> torch.Tensor:
        result = tensor.clone()
        dist.all_reduce(result, op=_OPS[op])
        return result / dist.get_world_size() if op == "mean" else result

    def barrier(self) -> None:
        dist.barrier()

    def shutdown(self) -> None:
        # Leave together: a rank that tears gloo down while another still flushes its last collective
        # can abort at exit ("terminate called without an active exception").
        dist.barrier()
        dist.destroy_process_group()

    def versions(self) -> dict[str, str | None]:
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
        return {"nccl": nccl}
