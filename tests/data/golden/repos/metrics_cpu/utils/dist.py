"""Horovod behind a few names; metrics are reduced on CPU tensors (Horovod takes any device)."""

import torch.distributed as dist
import torch
from .ddp_helpers import all_reduce, all_reduce_average_or_op


def setup() -> None:
    if not dist.is_initialized():
        dist.init_process_group()


def get_rank() -> int:
    return dist.get_rank()


def get_world_size() -> int:
    return dist.get_world_size()


def reduce_tensor(tensor: torch.Tensor, average: bool = True, name: str | None = None) -> torch.Tensor:
    return all_reduce_average_or_op(tensor.cpu(), average=average)


def sum_counts(counts: list[float], name: str) -> list[float]:
    return all_reduce(torch.tensor(counts, dtype=torch.float64), dist.ReduceOp.SUM).tolist()
