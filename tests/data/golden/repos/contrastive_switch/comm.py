"""The repository's three ways to run: Horovod (the default), torch.distributed, or one process."""

import torch
import torch.distributed as dist
import torch.distributed.nn
import os
import torch.distributed as torch_dist
from ddp_helpers import all_gather_cat, all_reduce_mean

if torch_dist.is_available() and "WORLD_SIZE" in os.environ:
    hvd = torch_dist
else:
    hvd = None


def init_distributed(args) -> tuple[int, int]:
    """Start the chosen path; returns (rank, world size)."""
    if args.distributed == "horovod":
        if hvd is None:
            raise SystemExit("--distributed horovod needs Horovod installed (or pass --distributed torch)")
        if not torch_dist.is_initialized():
            torch_dist.init_process_group()
        return torch_dist.get_rank(), torch_dist.get_world_size()
    if args.distributed == "torch":
        dist.init_process_group("gloo")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_features(features: torch.Tensor, args) -> torch.Tensor:
    """Every rank's features, concatenated in rank order; the gradient flows back to each rank's own rows."""
    if args.distributed == "horovod":
        return all_gather_cat(features)
    if args.distributed == "torch":
        return torch.cat(torch.distributed.nn.all_gather(features))
    return features


def average(tensor: torch.Tensor, args) -> torch.Tensor:
    """The mean over the ranks (for printing)."""
    if args.distributed == "horovod":
        return all_reduce_mean(tensor)
    if args.distributed == "torch":
        tensor = tensor.clone()
        dist.all_reduce(tensor)
        return tensor / dist.get_world_size()
    return tensor
