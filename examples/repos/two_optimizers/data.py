"""Real points: a ring of eight Gaussians. Noise: a generator per worker, so workers draw different noise."""

import math

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from models import NOISE


def ring_loader(batch_size: int, rank: int, world_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
    gen = torch.Generator().manual_seed(77)
    centre = torch.randint(0, 8, (1024,), generator=gen) * (2 * math.pi / 8)
    points = torch.stack([torch.cos(centre), torch.sin(centre)], 1) * 2 + 0.05 * torch.randn(1024, 2, generator=gen)
    dataset = TensorDataset(points)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler


class NoiseSource:
    def __init__(self, seed: int, rank: int):
        self.gen = torch.Generator().manual_seed(seed * 1000 + rank)

    def sample(self, count: int) -> torch.Tensor:
        return torch.randn(count, NOISE, generator=self.gen)
