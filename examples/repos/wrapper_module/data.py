"""A generated classification task: the same on every worker, split into shards by DistributedSampler."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from utils import distributed as dist_utils

FEATURES, CLASSES = 20, 4


def make_dataset(count: int, seed: int) -> TensorDataset:
    teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(7))  # one task for both splits
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randn(count, FEATURES, generator=gen)
    labels = (inputs @ teacher + 0.5 * torch.randn(count, CLASSES, generator=gen)).argmax(dim=1)
    return TensorDataset(inputs, labels)


def loaders(batch_size: int, seed: int) -> tuple[DataLoader, DataLoader, DistributedSampler]:
    train, test = make_dataset(640, seed=1234), make_dataset(256, seed=4321)
    sampler = DistributedSampler(train, num_replicas=dist_utils.size(), rank=dist_utils.rank(), shuffle=True,
                                 seed=seed, drop_last=True)
    test_sampler = DistributedSampler(test, num_replicas=dist_utils.size(), rank=dist_utils.rank(),
                                      shuffle=False)
    return (DataLoader(train, batch_size=batch_size, sampler=sampler),
            DataLoader(test, batch_size=64, sampler=test_sampler), sampler)
