"""Added by `python -m compare migrate`: each function stands for the Horovod call its docstring names."""

import torch
import torch.distributed as dist


def average_gradients_at_step(optimizer, op=dist.ReduceOp.SUM, average=True):
    """hvd.DistributedOptimizer where no DistributedDataParallel can be made that the caller trains through (the
    model is another module's, or a function's argument): before each step(), every gradient the optimizer
    updates is summed over the ranks and divided by their number, as Horovod's allreduce does (without DDP's
    overlap of communication with backward). As Horovod's synchronize(): every parameter that requires a
    gradient, in the optimizer's order on every rank, a zero where this rank's backward() gave it none, so that
    ranks that used other parameters still make the same collectives."""
    def average_gradients(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                if not parameter.requires_grad:
                    continue
                if parameter.grad is None:
                    parameter.grad = torch.zeros_like(parameter)
                dist.all_reduce(parameter.grad, op=op)
                if average:
                    parameter.grad.div_(dist.get_world_size())
    optimizer.register_step_pre_hook(average_gradients)
    return optimizer
