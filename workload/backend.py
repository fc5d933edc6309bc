"""The framework-specific surface: everything the training loop needs from Horovod or from DDP.

`Backend` holds what most backends share: the defaults of a framework that needs no extra step there.
`hvd_impl/backend.py` and `native_impl/backend.py` override only what their framework does differently;
put the two files side by side and every difference between a Horovod job and a DDP job is there. The
loop in `trainer.py` is shared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Literal

import torch
from torch import nn

ReduceOp = Literal["mean", "max", "sum"]


class Backend:
    framework: str  # "horovod" | "ddp" | "reference"
    launcher: str  # how the processes were started, for the run record (workload/launchers.py)
    comm_backend: str  # "mpi" | "gloo" | "nccl" | "none"
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    def data_shards(self) -> tuple[int, list[int]]:
        """(num_replicas, the sampler ranks whose batches this process trains on)."""
        return self.size, [self.rank]

    def broadcast_initial_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Make every rank start from rank 0's parameters (and optimizer state, when there is any)."""

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer,
             ) -> tuple[nn.Module, torch.optim.Optimizer]:
        """Return the model to call and the optimizer to step, with gradient averaging attached."""
        return model, optimizer

    def convert_sync_batchnorm(self, model: nn.Module) -> nn.Module:
        """Batch norm whose statistics are computed over all ranks."""
        return model

    def no_sync(self, model: nn.Module, sync: bool) -> contextlib.AbstractContextManager:
        """Around forward and backward of a micro-batch; gradients are reduced only when `sync`."""
        return contextlib.nullcontext()

    def synchronize(self, optimizer: torch.optim.Optimizer) -> None:
        """Make the averaged gradients available now (before clipping or unscaling them)."""

    def optimizer_step(self, optimizer: torch.optim.Optimizer, step: Callable[[], object],
                       synchronized: bool) -> None:
        """Run `step` (optimizer.step or scaler.step), knowing whether synchronize() already ran."""
        step()

    def join(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> contextlib.AbstractContextManager:
        """Around an epoch whose number of batches differs between ranks (uneven inputs)."""
        return contextlib.nullcontext()

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict | None:
        """The full optimizer state for a checkpoint on rank 0 (called on every rank)."""
        return optimizer.state_dict()

    def allreduce(self, tensor: torch.Tensor, op: ReduceOp) -> torch.Tensor:
        """Reduce a metric tensor over ranks; returns a new tensor."""
        return tensor.clone()

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's tensor, concatenated along the first dimension in rank order."""
        return tensor.clone()

    def explain_failure(self, error: BaseException) -> str | None:
        """After a failed step: which ranks stopped answering, in words (None when it cannot tell).
        Called on every rank that is still alive, before shutdown()."""
        return None

    def shutdown(self) -> None:
        """Leave the framework."""

    def versions(self) -> dict[str, str | None]:
        """Versions of the framework's own parts (Horovod, MPI, NCCL), for the run record."""
        return {}
