"""Added by `python -m compare migrate`: each function stands for the Horovod call its docstring names."""

import torch
import torch.distributed as dist


def all_reduce(tensor, op=dist.ReduceOp.SUM):
    """hvd.allreduce(op=Sum/Min/Max/Product), or average=False (a sum): a reduced copy (torch.distributed
    reduces in place). A CPU tensor is reduced on this rank's GPU where the process group serves CUDA
    tensors alone (NCCL; on GPUs also a group made with no backend named); Horovod took either."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.to(device, copy=True)
    dist.all_reduce(result, op=op)
    return result.to(tensor.device)
