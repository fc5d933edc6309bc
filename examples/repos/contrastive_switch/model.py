"""An encoder to unit vectors, and a contrastive loss against the views of every rank's batch."""

import torch
from torch import nn

from comm import gather_features


class Encoder(nn.Module):
    def __init__(self, inputs: int, embedding: int = 8, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, embedding))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.net(inputs), dim=1)


def contrastive_loss(first: torch.Tensor, second: torch.Tensor, rank: int, args,
                     temperature: float = 0.2) -> torch.Tensor:
    """InfoNCE: each first view against the second views of the whole global batch (gathered from every rank,
    with their gradient), its own second view the positive."""
    keys = gather_features(second, args)
    logits = first @ keys.T / temperature
    targets = torch.arange(len(first)) + rank * len(first)
    return nn.functional.cross_entropy(logits, targets)
