"""torch.distributed behind a few names. Metrics are reduced on CPU tensors: right for the Gloo group used
here; a job that moves to NCCL must move these tensors to the GPU (or reduce them on a Gloo group)."""

import torch
import torch.distributed as torch_dist


def setup() -> None:
    torch_dist.init_process_group("gloo")


def get_rank() -> int:
    return torch_dist.get_rank()


def get_world_size() -> int:
    return torch_dist.get_world_size()


def reduce_tensor(tensor: torch.Tensor, average: bool = True, name: str | None = None) -> torch.Tensor:
    reduced = tensor.detach().cpu().clone()
    torch_dist.all_reduce(reduced, op=torch_dist.ReduceOp.SUM)
    if average:
        reduced /= torch_dist.get_world_size()
    return reduced


def sum_counts(counts: list[float], name: str) -> list[float]:
    reduced = torch.tensor(counts, dtype=torch.float64)
    torch_dist.all_reduce(reduced, op=torch_dist.ReduceOp.SUM)
    return reduced.tolist()


def cleanup() -> None:
    torch_dist.barrier()
    torch_dist.destroy_process_group()
