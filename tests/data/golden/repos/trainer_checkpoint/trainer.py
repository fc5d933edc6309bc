"""The Trainer: resumes from a checkpoint on rank 0, shares it with the others, trains the inner network's
logits, keeps an EMA, evaluates the EMA each epoch and saves a checkpoint at the end."""

import torch.distributed as dist
import torch
import torch.nn.functional as F

from checkpoint import load_checkpoint, save_checkpoint
from ema import ModelEMA
from torch.nn.parallel import DistributedDataParallel as DDP
from ddp_helpers import all_reduce, broadcast_object


class Trainer:
    def __init__(self, model, lr: float, resume: str | None = None):
        self.model = model
        optimizer = torch.optim.SGD(model.parameters(), lr=lr * dist.get_world_size(), momentum=0.9)
        # Horovod's order: wrap first (DistributedOptimizer builds a new optimizer, without the wrapped one's
        # state), then load on rank 0 and share
        self.optimizer = optimizer
        self.ema = ModelEMA(model)
        self.step = 0
        if resume and dist.get_rank() == 0:
            self.step = load_checkpoint(resume, self.model, self.optimizer, self.ema)
        self.step = broadcast_object(self.step, 0)
        self.model_ddp = DDP(self.model.model)
        optimizer_state = [self.optimizer.state_dict()]
        dist.broadcast_object_list(optimizer_state, src=0)
        self.optimizer.load_state_dict(optimizer_state[0])
        self.ema.load_state_dict(broadcast_object(self.ema.state_dict(), 0))

    def training_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad()
        logits = self.model_ddp(inputs)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        self.optimizer.step()
        self.ema.update(self.model)
        self.step += 1
        return loss.detach()

    @torch.no_grad()
    def evaluate(self, loader) -> float:
        total, count = 0.0, 0
        for inputs, labels in loader:
            probabilities = self.ema.module(inputs)
            total += F.nll_loss(torch.log(probabilities), labels, reduction="sum").item()
            count += len(labels)
        sums = all_reduce(torch.tensor([total, count], dtype=torch.float64), dist.ReduceOp.SUM)
        return (sums[0] / sums[1]).item()

    def fit(self, loader, sampler, held_out, epochs: int) -> None:
        for epoch in range(1, epochs + 1):
            self.model.train()
            sampler.set_epoch(epoch)
            for inputs, labels in loader:
                loss = self.training_step(inputs, labels)
                if dist.get_rank() == 0:
                    print(f"step {self.step} loss {loss.item():.6f}", flush=True)
            eval_loss = self.evaluate(held_out)
            if dist.get_rank() == 0:
                print(f"epoch {epoch} eval_loss {eval_loss:.6f}", flush=True)

    def save(self, path: str) -> None:
        if dist.get_rank() == 0:
            save_checkpoint(path, self.model, self.optimizer, self.ema, self.step)
