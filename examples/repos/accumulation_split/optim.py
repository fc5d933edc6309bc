"""The optimizer and its schedule, as the config asks: gradients of --accumulate micro-batches per step."""

import horovod.torch as hvd
import torch


def make_optimizer(model: torch.nn.Module, lr: float, accumulate: int) -> torch.optim.Optimizer:
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * hvd.size(), momentum=0.9, weight_decay=5e-4)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    # Horovod keeps the gradients local for accumulate - 1 backward passes and averages them on the last
    return hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                    backward_passes_per_step=accumulate)


def make_scheduler(optimizer: torch.optim.Optimizer, steps: int):
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(steps, 1))
