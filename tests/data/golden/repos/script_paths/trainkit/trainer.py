"""One object owns the loop: the model, its optimizer, the steps."""

import torch
from torch import nn

from trainkit import dist
import os
import torch.distributed as torch_dist
from .ddp_helpers import average_gradients_at_step

if torch_dist.is_available() and "WORLD_SIZE" in os.environ:
    hvd = torch_dist
else:
    hvd = None


class Trainer:
    def __init__(self, model: nn.Module, lr: float) -> None:
        dist.init()  # the script has initialised already: a second init must be harmless
        self.model = model
        optimizer = torch.optim.SGD(model.parameters(), lr=lr * dist.size(), momentum=0.9)
        if hvd is not None:
            for tensor in (model.state_dict()).values():
                torch_dist.broadcast(tensor, src=0)
            optimizer = average_gradients_at_step(optimizer)
            if dist.rank() == 0:
                print(f"workers on this node: {int(os.environ['LOCAL_WORLD_SIZE'])}", flush=True)
        self.optimizer = optimizer
        self.step = 0

    def train_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(inputs), labels)
        loss.backward()
        self.optimizer.step()
        self.step += 1
        return dist.average(loss.detach()).item()
