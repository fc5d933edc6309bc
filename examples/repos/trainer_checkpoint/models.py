"""A classifier whose forward answers probabilities (for inference); training reads the logits of its inner
network directly (`classifier.model(x)`), as many research trainers do."""

import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, features: int, classes: int, hidden: int = 32):
        super().__init__()
        self.num_classes = classes
        self.model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.model(inputs), dim=1)
