"""Horovod behind a few names; metrics are reduced on CPU tensors (Horovod takes any device)."""

import horovod.torch as hvd
import torch


def setup() -> None:
    hvd.init()


def get_rank() -> int:
    return hvd.rank()


def get_world_size() -> int:
    return hvd.size()


def reduce_tensor(tensor: torch.Tensor, average: bool = True, name: str | None = None) -> torch.Tensor:
    return hvd.allreduce(tensor.cpu(), average=average, name=name)


def sum_counts(counts: list[float], name: str) -> list[float]:
    return hvd.allreduce(torch.tensor(counts, dtype=torch.float64), op=hvd.Sum, name=name).tolist()
