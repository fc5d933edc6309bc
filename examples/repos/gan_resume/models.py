"""A small GAN for 2-D points, and an exponential moving average of the generator (matched by state-dict key),
which is what the run evaluates and keeps."""

import copy

import torch
from torch import nn

NOISE = 6


class Generator(nn.Module):
    def __init__(self, hidden: int = 24):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(NOISE, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, 2))

    def forward(self, noise):
        return self.net(noise)


class Discriminator(nn.Module):
    def __init__(self, hidden: int = 24):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, 1))

    def forward(self, points):
        return self.net(points)


class GeneratorEMA:
    def __init__(self, generator: nn.Module, decay: float = 0.8):
        self.module = copy.deepcopy(generator).eval()
        self.decay = decay

    @torch.no_grad()
    def update(self, generator: nn.Module) -> None:
        current = generator.state_dict()
        for key, mine in self.module.state_dict().items():
            mine.mul_(self.decay).add_(current[key], alpha=1 - self.decay)
