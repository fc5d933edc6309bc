"""A weight-sharing supernet: each block holds candidate operations, and `sample_subnet` picks the one each
block runs until the next sample. The operations not picked take no part in that step."""

import torch
from torch import nn


class SuperNet(nn.Module):
    def __init__(self, features: int, classes: int, width: int = 24, blocks: int = 3):
        super().__init__()
        self.stem = nn.Linear(features, width)
        self.choices = nn.ModuleList(
            nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU()),
                           nn.Sequential(nn.Linear(width, width), nn.Tanh())])
            for _ in range(blocks))
        self.head = nn.Linear(width, classes)
        self.active = [0] * blocks

    def sample_subnet(self, generator: torch.Generator) -> list[int]:
        self.active = [int(torch.randint(len(ops), (1,), generator=generator)) for ops in self.choices]
        return self.active

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.stem(inputs))
        for ops, index in zip(self.choices, self.active, strict=True):
            hidden = hidden + ops[index](hidden)
        return self.head(hidden)
