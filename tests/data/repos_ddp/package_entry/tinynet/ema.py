"""An exponential moving average of the weights, evaluated instead of the trained model."""

import copy

import torch
from torch import nn


class ModelEMA:
    def __init__(self, model: nn.Module, decay: float = 0.95):
        self.module = copy.deepcopy(model).eval()
        self.decay = decay
        for param in self.module.parameters():
            param.requires_grad_(False)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        for mine, theirs in zip(self.module.state_dict().values(), model.state_dict().values(), strict=True):
            mine.mul_(self.decay).add_(theirs, alpha=1 - self.decay)
