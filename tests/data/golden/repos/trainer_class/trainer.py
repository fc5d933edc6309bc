"""The Trainer: owns the optimizer and the loop; the model comes from the caller."""

import torch.distributed as dist
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from ddp_helpers import horovod_zero_gradient_step


class Trainer:
    def __init__(self, model: nn.Module, lr: float, weight_decay: float = 1e-4):
        self.model = model
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr * dist.get_world_size(), weight_decay=weight_decay)
        horovod_zero_gradient_step(optimizer, keep_state=False)
        self.optimizer = optimizer
        self.model_ddp = DDP(self.model)
        self.criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
        self.step = 0

    def training_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad()
        logits = self.model_ddp(inputs)
        assert logits.shape[1] == self.model.num_classes
        loss = self.criterion(logits, labels)
        loss.backward()
        self.optimizer.step()
        self.step += 1
        return loss.detach()

    def fit(self, loader, sampler, epochs: int) -> None:
        self.model.train()
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for inputs, labels in loader:
                loss = self.training_step(inputs, labels)
                if dist.get_rank() == 0:
                    print(f"step {self.step} loss {loss.item():.6f}", flush=True)
