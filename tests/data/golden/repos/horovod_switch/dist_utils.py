"""Both distributed paths of this repository: Horovod (--horovod) and torch.distributed (--distributed)."""

import os

import torch
import torch.distributed as dist

hvd = None
HAS_HOROVOD = hvd is not None


def init_distributed(args) -> tuple[int, int]:
    """Start the chosen path; returns (rank, world size)."""
    if args.horovod:
        if not HAS_HOROVOD:
            raise SystemExit("--horovod needs Horovod installed")
    if args.distributed:
        dist.init_process_group("gloo", init_method="env://")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def reduce_mean(tensor: torch.Tensor, args) -> torch.Tensor:
    if args.distributed:
        tensor = tensor.clone()
        dist.all_reduce(tensor)
        return tensor / dist.get_world_size()
    return tensor


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))
