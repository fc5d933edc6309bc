"""Added by `python -m compare migrate`: each function stands for the Horovod call its docstring names."""

import torch
import torch.distributed as dist


def all_reduce(tensor, op=dist.ReduceOp.SUM):
    """Horovod's allreduce(op=Sum/Min/Max/Product), or average=False (a sum): a reduced copy (torch.distributed
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


def broadcast_object(obj, src=0):
    """Horovod's broadcast_object: rank src's object on every rank."""
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]
