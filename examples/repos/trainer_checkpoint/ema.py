"""An exponential moving average of the weights, matched to the model's by state-dict key."""

import copy

import torch
from torch import nn


class ModelEMA:
    def __init__(self, model: nn.Module, decay: float = 0.9):
        self.module = copy.deepcopy(model).eval()
        self.decay = decay
        for param in self.module.parameters():
            param.requires_grad_(False)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        current = model.state_dict()
        for key, mine in self.module.state_dict().items():
            mine.mul_(self.decay).add_(current[key], alpha=1 - self.decay)

    def state_dict(self) -> dict:
        return self.module.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state)
