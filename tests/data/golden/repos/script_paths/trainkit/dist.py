"""Horovod when it is installed and chosen by the launcher; one process otherwise."""

import torch
import os
import torch.distributed as dist
from .ddp_helpers import all_reduce_mean

if dist.is_available() and "WORLD_SIZE" in os.environ:
    hvd = dist
else:  # no Horovod: one process
    hvd = None


def init() -> None:
    if hvd is not None:
        if not dist.is_initialized():
            dist.init_process_group()


def rank() -> int:
    return dist.get_rank() if hvd is not None else 0


def size() -> int:
    return dist.get_world_size() if hvd is not None else 1


def average(tensor: torch.Tensor) -> torch.Tensor:
    """The mean of the tensor over the workers."""
    return all_reduce_mean(tensor) if hvd is not None else tensor
