"""Added by `python -m compare migrate`: each function stands for the Horovod call its docstring names."""

import torch


def horovod_zero_gradient_step(optimizer, keep_state):
    """hvd.broadcast_optimizer_state on a fresh optimizer: Horovod gave every parameter a zero gradient and ran
    step() once (to create the state it broadcast), which applies weight decay to the parameters. keep_state=False:
    hvd.DistributedOptimizer, built after the broadcast, was a new optimizer without that step's state."""
    if optimizer.state_dict()["state"]:
        return  # Horovod steps only an optimizer without state
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            if parameter.requires_grad:
                parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    if not keep_state:
        optimizer.state.clear()
