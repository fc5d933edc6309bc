"""The Trainer: resumes from a checkpoint on rank 0, shares it with the others, trains the inner network's
logits, keeps an EMA, evaluates the EMA each epoch and saves a checkpoint at the end."""

import horovod.torch as hvd
import torch
import torch.nn.functional as F

from checkpoint import load_checkpoint, save_checkpoint
from ema import ModelEMA


class Trainer:
    def __init__(self, model, lr: float, resume: str | None = None):
        self.model = model
        optimizer = torch.optim.SGD(model.parameters(), lr=lr * hvd.size(), momentum=0.9)
        # Horovod's order: wrap first (DistributedOptimizer builds a new optimizer, without the wrapped one's
        # state), then load on rank 0 and share
        self.optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=self.model.named_parameters())
        self.ema = ModelEMA(model)
        self.step = 0
        if resume and hvd.rank() == 0:
            self.step = load_checkpoint(resume, self.model, self.optimizer, self.ema)
        self.step = hvd.broadcast_object(self.step, root_rank=0)
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(self.optimizer, root_rank=0)
        self.ema.load_state_dict(hvd.broadcast_object(self.ema.state_dict(), root_rank=0))

    def training_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad()
        logits = self.model.model(inputs)
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
        sums = hvd.allreduce(torch.tensor([total, count], dtype=torch.float64), op=hvd.Sum, name="eval")
        return (sums[0] / sums[1]).item()

    def fit(self, loader, sampler, held_out, epochs: int) -> None:
        for epoch in range(1, epochs + 1):
            self.model.train()
            sampler.set_epoch(epoch)
            for inputs, labels in loader:
                loss = self.training_step(inputs, labels)
                if hvd.rank() == 0:
                    print(f"step {self.step} loss {loss.item():.6f}", flush=True)
            eval_loss = self.evaluate(held_out)
            if hvd.rank() == 0:
                print(f"epoch {epoch} eval_loss {eval_loss:.6f}", flush=True)

    def save(self, path: str) -> None:
        if hvd.rank() == 0:
            save_checkpoint(path, self.model, self.optimizer, self.ema, self.step)
