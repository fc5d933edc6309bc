"""Added by `python -m compare migrate`: each function stands for the Horovod call its docstring names."""

import torch
import torch.distributed as dist


def all_reduce(tensor, op=dist.ReduceOp.SUM):
    """hvd.allreduce(op=Sum/Min/Max/Product), or average=False (a sum): a reduced copy (torch.distributed
    reduces in place). A CPU tensor is reduced on this rank's GPU where the process group serves CUDA
    tensors alone (NCCL; on GPUs also a group made with no backend named); Horovod took either. Gradients
    flow back through it as through Horovod's (HorovodAllreduce.backward): reduced over the ranks alike."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.detach().to(device, copy=True)
    dist.all_reduce(result, op=op)
    result = result.to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(lambda grad: all_reduce(grad, op))
    return result


def all_reduce_average_or_op(tensor, average=None, op=None, in_place=False):
    """hvd.allreduce(tensor, average=..., op=...) (in_place: hvd.allreduce_) where the reduction is known
    only at run time, resolved as Horovod resolves it: op if given (with average too: ValueError, as
    Horovod), else a sum for average=False, else the mean. Horovod's Average is dist.ReduceOp.AVG here,
    its Sum/Min/Max/Product dist.ReduceOp's. A CPU tensor is reduced on this rank's GPU where the process
    group serves CUDA tensors alone (NCCL). Not in place, gradients flow back as through Horovod's: the
    gradient reduced the same way."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if op is None:
        op = dist.ReduceOp.AVG if average is None or average else dist.ReduceOp.SUM
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.to(device) if in_place else tensor.detach().to(device, copy=True)
    dist.all_reduce(result, op=dist.ReduceOp.SUM if op == dist.ReduceOp.AVG else op)
    if op == dist.ReduceOp.AVG:
        result = result.div_(dist.get_world_size()) if in_place else result / dist.get_world_size()
    if in_place:
        return tensor.copy_(result) if result is not tensor else result
    result = result.to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(lambda grad: all_reduce_average_or_op(grad, average, op))
    return result
