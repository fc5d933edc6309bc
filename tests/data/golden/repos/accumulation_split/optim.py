"""The optimizer and its schedule, as the config asks: gradients of --accumulate micro-batches per step."""

import torch.distributed as dist
import torch
from ddp_helpers import average_gradients_at_step, horovod_zero_gradient_step


def make_optimizer(model: torch.nn.Module, lr: float, accumulate: int) -> torch.optim.Optimizer:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * dist.get_world_size(), momentum=0.9, weight_decay=5e-4)
    for tensor in (model.state_dict()).values():
        dist.broadcast(tensor, src=0)
    horovod_zero_gradient_step(optimizer, keep_state=False)
    # Horovod keeps the gradients local for accumulate - 1 backward passes and averages them on the last
    return average_gradients_at_step(optimizer)


def make_scheduler(optimizer: torch.optim.Optimizer, steps: int):
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(steps, 1))
