"""The repository's one door to Horovod: every other module calls these, never hvd itself."""

import torch.distributed as dist
import torch
from .ddp_helpers import all_reduce, all_reduce_mean_2, average_gradients_at_step


def init() -> None:
    if not dist.is_initialized():
        dist.init_process_group()
    torch.set_num_threads(1)


def rank() -> int:
    return dist.get_rank()


def size() -> int:
    return dist.get_world_size()


def is_main() -> bool:
    return dist.get_rank() == 0


def all_reduce_mean(tensor: torch.Tensor, name: str | None = None) -> torch.Tensor:
    """The tensor averaged over workers (a new tensor; the argument is left as it was)."""
    return all_reduce_mean_2(tensor)


def all_reduce_sum(tensor: torch.Tensor, name: str | None = None) -> torch.Tensor:
    """The tensor summed over workers: counts, totals."""
    return all_reduce(tensor, dist.ReduceOp.SUM)


def distributed_optimizer(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
    return average_gradients_at_step(optimizer)


def broadcast_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root: int = 0) -> None:
    """Every worker starts from the root's weights and optimizer state."""
    for tensor in (model.state_dict()).values():
        dist.broadcast(tensor, src=root)
    optimizer_state = [optimizer.state_dict()]
    dist.broadcast_object_list(optimizer_state, src=root)
    optimizer.load_state_dict(optimizer_state[0])


def barrier() -> None:
    dist.barrier()
