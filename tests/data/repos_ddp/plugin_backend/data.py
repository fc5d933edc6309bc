"""Generated regression data: a fixed noisy teacher, the same on every worker; each worker reads its shard."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

INPUTS = 16


def train_loader(batch_size: int, rank: int, world_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
    gen = torch.Generator().manual_seed(2024)
    inputs = torch.randn(768, INPUTS, generator=gen)
    targets = torch.sin(inputs[:, :4].sum(dim=1, keepdim=True)) + 0.1 * torch.randn(768, 1, generator=gen)
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler
