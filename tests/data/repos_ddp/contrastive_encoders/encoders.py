"""One encoder per view, each to a unit vector in a shared embedding space; the InfoNCE loss pairs them."""

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, inputs: int, embedding: int = 16, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, embedding))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.net(inputs), dim=1)


def info_nce(first: torch.Tensor, second: torch.Tensor, temperature: float = 0.2) -> torch.Tensor:
    logits = first @ second.T / temperature
    targets = torch.arange(len(first))
    return (nn.functional.cross_entropy(logits, targets) + nn.functional.cross_entropy(logits.T, targets)) / 2
