"""Pairs of views of one latent point: a 12-dimensional and an 8-dimensional reading of the same 4 numbers."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FIRST, SECOND = 12, 8


def make_loader(batch_size: int, rank: int, world_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
    gen = torch.Generator().manual_seed(7)
    latent = torch.randn(512, 4, generator=gen)
    first = torch.tanh(latent @ torch.randn(4, FIRST, generator=gen)) + 0.1 * torch.randn(512, FIRST, generator=gen)
    second = latent @ torch.randn(4, SECOND, generator=gen) + 0.1 * torch.randn(512, SECOND, generator=gen)
    dataset = TensorDataset(first, second)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler
