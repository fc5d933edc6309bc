"""Two noisy views of each of 512 generated points: the contrastive task is to tell a point's views apart from
every other point's."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FEATURES = 16


def make_loader(batch_size: int, rank: int, world_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
    gen = torch.Generator().manual_seed(11)
    points = torch.randn(512, FEATURES, generator=gen)
    first = points + 0.3 * torch.randn(512, FEATURES, generator=gen)
    second = points + 0.3 * torch.randn(512, FEATURES, generator=gen)
    dataset = TensorDataset(first, second)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler
