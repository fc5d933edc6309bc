"""One object owns the loop: the model, its optimizer, the steps."""

import torch
from torch import nn

from trainkit import dist

try:
    import horovod.torch as hvd
except ImportError:
    hvd = None


class Trainer:
    def __init__(self, model: nn.Module, lr: float) -> None:
        dist.init()  # the script has initialised already: a second init must be harmless
        self.model = model
        optimizer = torch.optim.SGD(model.parameters(), lr=lr * dist.size(), momentum=0.9)
        if hvd is not None:
            hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
            if dist.rank() == 0:
                print(f"workers on this node: {hvd.local_size()}", flush=True)
        self.optimizer = optimizer
        self.step = 0

    def train_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(inputs), labels)
        loss.backward()
        self.optimizer.step()
        self.step += 1
        return dist.average(loss.detach()).item()
