"""Gaussian clusters, one per class, in 16 dimensions: a training split and a held-out split of the same task."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FEATURES, CLASSES = 16, 4


def clusters(count: int, seed: int) -> TensorDataset:
    centres = 1.5 * torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(21))
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (count,), generator=gen)
    return TensorDataset(centres[labels] + torch.randn(count, FEATURES, generator=gen), labels)


def make_loaders(batch_size: int, rank: int, world_size: int, seed: int):
    train, held_out = clusters(640, seed=4), clusters(256, seed=5)
    sampler = DistributedSampler(train, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    held_out_sampler = DistributedSampler(held_out, num_replicas=world_size, rank=rank, shuffle=False)
    return (DataLoader(train, batch_size=batch_size, sampler=sampler),
            DataLoader(held_out, batch_size=128, sampler=held_out_sampler), sampler)
