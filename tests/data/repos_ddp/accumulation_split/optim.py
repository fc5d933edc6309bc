"""The optimizer and its schedule, as the config asks: gradients of --accumulate micro-batches per step
(the loop skips DDP's gradient averaging on all but the last micro-batch of a step: model.no_sync())."""

import torch
import torch.distributed as dist


def make_optimizer(model: torch.nn.Module, lr: float, accumulate: int) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=lr * dist.get_world_size(), momentum=0.9, weight_decay=5e-4)


def make_scheduler(optimizer: torch.optim.Optimizer, steps: int):
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(steps, 1))
