"""Real points: a ring of six Gaussians. Noise: a generator per worker, so workers draw different noise."""

import math

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from models import NOISE


def ring_loader(batch_size: int, rank: int, world_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
    gen = torch.Generator().manual_seed(55)
    centre = torch.randint(0, 6, (512,), generator=gen) * (2 * math.pi / 6)
    points = torch.stack([torch.cos(centre), torch.sin(centre)], 1) * 2 + 0.05 * torch.randn(512, 2, generator=gen)
    sampler = DistributedSampler(TensorDataset(points), num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(TensorDataset(points), batch_size=batch_size, sampler=sampler), sampler


def noise(count: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(count, NOISE, generator=generator)
