"""Two interleaved spirals with five arms, lifted to 10 features with a fixed random map."""

import math

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FEATURES, CLASSES = 10, 5


def spirals(count: int, seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (count,), generator=gen)
    radius = torch.rand(count, generator=gen)
    angle = labels * (2 * math.pi / CLASSES) + 3.0 * radius + 0.2 * torch.randn(count, generator=gen)
    plane = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
    lift = torch.randn(2, FEATURES, generator=torch.Generator().manual_seed(11))
    return TensorDataset(torch.tanh(plane @ lift), labels)


def make_loader(batch_size: int, rank: int, world_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
    dataset = spirals(640, seed=5)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler
