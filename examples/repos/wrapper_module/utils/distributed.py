"""The repository's one door to Horovod: every other module calls these, never hvd itself."""

import horovod.torch as hvd
import torch


def init() -> None:
    hvd.init()
    torch.set_num_threads(1)


def rank() -> int:
    return hvd.rank()


def size() -> int:
    return hvd.size()


def is_main() -> bool:
    return hvd.rank() == 0


def all_reduce_mean(tensor: torch.Tensor, name: str | None = None) -> torch.Tensor:
    """The tensor averaged over workers (a new tensor; the argument is left as it was)."""
    return hvd.allreduce(tensor, name=name)


def all_reduce_sum(tensor: torch.Tensor, name: str | None = None) -> torch.Tensor:
    """The tensor summed over workers: counts, totals."""
    return hvd.allreduce(tensor, average=False, name=name)


def distributed_optimizer(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
    return hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def broadcast_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root: int = 0) -> None:
    """Every worker starts from the root's weights and optimizer state."""
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    hvd.broadcast_optimizer_state(optimizer, root_rank=root)


def barrier() -> None:
    hvd.barrier()
