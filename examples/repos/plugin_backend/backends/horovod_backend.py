import importlib

import torch

from backends.base import Backend


class HorovodBackend(Backend):
    """Horovod, loaded only when chosen: the repository runs without it installed."""

    name = "horovod"
    BACKEND_MODULE_NAME = "horovod.torch"

    def __init__(self) -> None:
        self.backend_module = None

    def setup(self) -> None:
        self.backend_module = importlib.import_module(self.BACKEND_MODULE_NAME)
        self.backend_module.init()

    @property
    def rank(self) -> int:
        return self.backend_module.rank()

    @property
    def world_size(self) -> int:
        return self.backend_module.size()

    def wrap_optimizer(self, optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> torch.optim.Optimizer:
        # gradients travel as float16: half the bytes on the wire
        return self.backend_module.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                                        compression=self.backend_module.Compression.fp16)

    def sync_initial_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.backend_module.broadcast_parameters(model.state_dict(), root_rank=0)
        self.backend_module.broadcast_optimizer_state(optimizer, root_rank=0)

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.backend_module.allreduce(tensor, name="backend.all_reduce")

    def barrier(self) -> None:
        self.backend_module.barrier()
