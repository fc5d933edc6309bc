"""Evaluation over every worker's shard: totals are summed, the loss averaged, through the wrapper."""

import torch
from torch import nn
from torch.utils.data import DataLoader

from utils import distributed as dist_utils


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader) -> tuple[float, float]:
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    for inputs, labels in loader:
        logits = model(inputs)
        loss_sum += nn.functional.cross_entropy(logits, labels, reduction="sum").item()
        correct += int((logits.argmax(dim=1) == labels).sum())
        seen += len(labels)
    model.train()
    totals = dist_utils.all_reduce_sum(torch.tensor([correct, seen], dtype=torch.float64), name="eval.totals")
    mean_loss = dist_utils.all_reduce_mean(torch.tensor(loss_sum / seen), name="eval.loss")
    return mean_loss.item(), (totals[0] / totals[1]).item()
