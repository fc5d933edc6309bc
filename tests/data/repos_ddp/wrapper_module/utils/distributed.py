"""The repository's one door to torch.distributed: every other module calls these, never dist itself."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def init() -> None:
    dist.init_process_group("gloo")  # torchrun sets the rank, world size and rendezvous address
    torch.set_num_threads(1)


def rank() -> int:
    return dist.get_rank()


def size() -> int:
    return dist.get_world_size()


def is_main() -> bool:
    return dist.get_rank() == 0


def all_reduce_mean(tensor: torch.Tensor, name: str | None = None) -> torch.Tensor:
    """The tensor averaged over workers (a new tensor; the argument is left as it was)."""
    reduced = tensor.detach().clone()
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
    return reduced / dist.get_world_size()


def all_reduce_sum(tensor: torch.Tensor, name: str | None = None) -> torch.Tensor:
    """The tensor summed over workers: counts, totals."""
    reduced = tensor.detach().clone()
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
    return reduced


def wrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """DDP averages the gradients in backward, as Horovod's DistributedOptimizer did in step."""
    return DistributedDataParallel(model)


def broadcast_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, root: int = 0) -> None:
    """Every worker starts from the root's weights (DDP broadcasts them again when it wraps the model) and
    optimizer state (empty before the first step, so there is nothing to send yet)."""
    for tensor in model.state_dict().values():
        dist.broadcast(tensor, src=root)
    state = [optimizer.state_dict()]
    dist.broadcast_object_list(state, src=root)
    optimizer.load_state_dict(state[0])


def barrier() -> None:
    dist.barrier()


def shutdown() -> None:
    dist.destroy_process_group()
