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


class _AllGatherCat(torch.autograd.Function):
    """hvd.allgather's autograd function. Forward: every rank's tensor concatenated along dimension 0,
    whose length may differ per rank (the lengths are gathered first, each tensor padded to the longest,
    gathered, and trimmed back). Backward, as Horovod's: the incoming gradient averaged over the ranks
    (torch.distributed.nn's all_gather sums it instead), then this rank's rows."""

    @staticmethod
    def forward(ctx, tensor):
        device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
        local = tensor.to(device).contiguous()
        length = torch.tensor([local.shape[0]], device=device)
        lengths = [torch.zeros_like(length) for _ in range(dist.get_world_size())]
        dist.all_gather(lengths, length)
        lengths = [int(n.item()) for n in lengths]
        padded = local.new_zeros((max(lengths), *local.shape[1:]))
        padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in lengths]
        dist.all_gather(parts, padded)
        ctx.rows = sum(lengths[: dist.get_rank()]), local.shape[0]
        return torch.cat([part[:n] for part, n in zip(parts, lengths)]).to(tensor.device)

    @staticmethod
    def backward(ctx, grad):
        device = "cuda" if grad.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else grad.device
        summed = grad.to(device, copy=True).contiguous()
        dist.all_reduce(summed)
        start, rows = ctx.rows
        return (summed.narrow(0, start, rows) / dist.get_world_size()).to(grad.device)


def all_gather_cat(tensor):
    """hvd.allgather: every rank's tensor concatenated along dimension 0 (each rank's length may differ),
    with gradients passed back to each rank's rows, averaged over the ranks, as Horovod does. Where no
    gradient is wanted (torch.no_grad(), a tensor that does not require one) autograd records nothing."""
    return _AllGatherCat.apply(tensor)
