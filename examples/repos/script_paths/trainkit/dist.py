"""Horovod when it is installed and chosen by the launcher; one process otherwise."""

import torch

try:
    import horovod.torch as hvd
except ImportError:  # no Horovod: one process
    hvd = None


def init() -> None:
    if hvd is not None:
        hvd.init()


def rank() -> int:
    return hvd.rank() if hvd is not None else 0


def size() -> int:
    return hvd.size() if hvd is not None else 1


def average(tensor: torch.Tensor) -> torch.Tensor:
    """The mean of the tensor over the workers."""
    return hvd.allreduce(tensor, name="average") if hvd is not None else tensor
