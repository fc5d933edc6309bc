"""Gaussian clusters, one per class, in 24 dimensions; a training and a held-out split of the same task."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def clusters(count: int, seed: int) -> TensorDataset:
    centres = 1.2 * torch.randn(6, 24, generator=torch.Generator().manual_seed(3))
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 6, (count,), generator=gen)
    return TensorDataset(centres[labels] + torch.randn(count, 24, generator=gen), labels)


def loaders(batch_size: int, rank: int, world_size: int, seed: int):
    train, held_out = clusters(640, seed=8), clusters(256, seed=9)
    sampler = DistributedSampler(train, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    held_out_sampler = DistributedSampler(held_out, num_replicas=world_size, rank=rank, shuffle=False)
    return (DataLoader(train, batch_size=batch_size, sampler=sampler),
            DataLoader(held_out, batch_size=128, sampler=held_out_sampler), sampler)
