import importlib

import torch

from backends.base import Backend
import torch.distributed as dist
from .ddp_helpers import all_reduce_mean, average_gradients_at_step
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks


class HorovodBackend(Backend):
    """Horovod, loaded only when chosen: the repository runs without it installed."""

    name = "horovod"

    def __init__(self) -> None:
        self.backend_module = None

    def setup(self) -> None:
        if not dist.is_initialized():
            dist.init_process_group()

    @property
    def rank(self) -> int:
        return dist.get_rank()

    @property
    def world_size(self) -> int:
        return dist.get_world_size()

    def wrap_optimizer(self, optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
        # gradients travel as float16: half the bytes on the wire
        return average_gradients_at_step(optimizer, compression=default_hooks.fp16_compress_hook)

    def sync_initial_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        for tensor in (model.state_dict()).values():
            dist.broadcast(tensor, src=0)
        optimizer_state = [optimizer.state_dict()]
        dist.broadcast_object_list(optimizer_state, src=0)
        optimizer.load_state_dict(optimizer_state[0])

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return all_reduce_mean(tensor)

    def barrier(self) -> None:
        dist.barrier()
