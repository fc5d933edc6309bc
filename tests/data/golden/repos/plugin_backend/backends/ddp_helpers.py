"""Added by `python -m compare migrate`: each function stands for the Horovod call its docstring names."""

import torch
import torch.distributed as dist


def all_reduce_mean(tensor):
    """hvd.allreduce's default op=Average: dist.all_reduce sums, so divide by the world size. A CPU tensor
    is reduced on this rank's GPU where the process group serves CUDA tensors alone (NCCL). Gradients flow
    back as through Horovod's: averaged over the ranks."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.detach().to(device, copy=True)
    dist.all_reduce(result)
    result = (result / dist.get_world_size()).to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(all_reduce_mean)
    return result


def average_gradients_at_step(optimizer, op=dist.ReduceOp.SUM, average=True, compression=None):
    """hvd.DistributedOptimizer where no DistributedDataParallel can be made that the caller trains through (the
    model is another module's, or a function's argument): before each step(), every gradient the optimizer
    updates is summed over the ranks and divided by their number, as Horovod's allreduce does (without DDP's
    overlap of communication with backward). As Horovod's synchronize(): every parameter that requires a
    gradient, in the optimizer's order on every rank, a zero where this rank's backward() gave it none, so that
    ranks that used other parameters still make the same collectives. compression: None, or DDP's
    fp16_compress_hook where Horovod had Compression.fp16: as Horovod's, each gradient travels as float16, is
    summed and divided there, and is cast back."""
    if compression is not None and getattr(compression, "__name__", None) != "fp16_compress_hook":
        raise TypeError(f"average_gradients_at_step: compression is fp16_compress_hook or None, not {compression!r}")

    def average_gradients(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                if not parameter.requires_grad:
                    continue
                if parameter.grad is None:
                    parameter.grad = torch.zeros_like(parameter)
                wire = parameter.grad if compression is None else parameter.grad.to(torch.float16)
                dist.all_reduce(wire, op=op)
                if average:
                    wire.div_(dist.get_world_size())
                if wire is not parameter.grad:
                    parameter.grad.copy_(wire)
    optimizer.register_step_pre_hook(average_gradients)
    return optimizer
