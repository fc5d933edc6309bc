import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from backends.base import Backend


class DDPBackend(Backend):
    """torch.distributed with DistributedDataParallel; launched by torchrun, which sets the rendezvous."""

    name = "ddp"

    def setup(self) -> None:
        dist.init_process_group("gloo")

    @property
    def rank(self) -> int:
        return dist.get_rank()

    @property
    def world_size(self) -> int:
        return dist.get_world_size()

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        wrapped = DistributedDataParallel(model)  # broadcasts rank 0's weights, averages gradients in backward
        wrapped.register_comm_hook(None, default_hooks.fp16_compress_hook)  # as Horovod's Compression.fp16
        return wrapped

    def sync_initial_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        pass  # the weights are broadcast by DDP; the optimizer has no state before its first step

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        reduced = tensor.detach().clone()
        dist.all_reduce(reduced)
        return reduced / dist.get_world_size()

    def barrier(self) -> None:
        dist.barrier()

    def teardown(self) -> None:
        dist.barrier()  # a barrier last narrows the window of Gloo's abort at exit (PyTorch's bug)
        dist.destroy_process_group()
