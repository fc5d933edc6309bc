"""The repository's three ways to run, all on torch.distributed now: horovod (the default: the job Horovod ran,
launched with torchrun), torch (the repository's own DDP path, as it was), or one process."""

import torch
import torch.distributed as dist
import torch.distributed.nn


def init_distributed(args) -> tuple[int, int]:
    """Start the chosen path; returns (rank, world size)."""
    if args.distributed in ("horovod", "torch"):
        dist.init_process_group("gloo")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class _GatherAveragingGradient(torch.autograd.Function):
    """Every rank's rows, concatenated in rank order; backward sums the gathered gradient over the ranks and
    divides by their number (as Horovod's allgather did), then keeps this rank's rows."""

    @staticmethod
    def forward(ctx, features: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(features) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, features.contiguous())
        ctx.rows = len(features)
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad)
        start = dist.get_rank() * ctx.rows
        return grad[start:start + ctx.rows] / dist.get_world_size()


def gather_features(features: torch.Tensor, args) -> torch.Tensor:
    """Every rank's features, concatenated in rank order; the gradient flows back to each rank's own rows."""
    if args.distributed == "horovod":
        return _GatherAveragingGradient.apply(features)
    if args.distributed == "torch":
        return torch.cat(torch.distributed.nn.all_gather(features))
    return features


def average(tensor: torch.Tensor, args) -> torch.Tensor:
    """The mean over the ranks (for printing)."""
    if args.distributed in ("horovod", "torch"):
        tensor = tensor.clone()
        dist.all_reduce(tensor)
        return tensor / dist.get_world_size()
    return tensor
