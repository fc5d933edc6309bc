"""Accuracy and loss over the whole test set: each worker counts its shard, the counts are summed."""

import torch
from torch import nn

from utils.dist import sum_counts
from utils.meters import AverageMeter


@torch.no_grad()
def evaluate(model: nn.Module, loader) -> tuple[float, float]:
    model.eval()
    loss_meter = AverageMeter("eval_loss")
    correct = seen = 0
    for images, labels in loader:
        logits = model(images)
        loss_meter.update(nn.functional.cross_entropy(logits, labels).item(), len(labels))
        correct += int((logits.argmax(1) == labels).sum())
        seen += len(labels)
    model.train()
    correct_all, seen_all = sum_counts([correct, seen], name="eval.accuracy")
    return loss_meter.global_average(), correct_all / seen_all
