"""Gaussian clusters, one per class, in 12 dimensions."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FEATURES, CLASSES = 12, 3


def make_loader(batch_size: int, rank: int, world_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
    centres = 1.5 * torch.randn(CLASSES, FEATURES, generator=torch.Generator().manual_seed(31))
    gen = torch.Generator().manual_seed(6)
    labels = torch.randint(0, CLASSES, (512,), generator=gen)
    dataset = TensorDataset(centres[labels] + torch.randn(512, FEATURES, generator=gen), labels)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler
