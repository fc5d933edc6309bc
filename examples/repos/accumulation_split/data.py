"""Generated multi-output regression: three targets from a fixed random two-layer teacher."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

INPUTS, OUTPUTS = 12, 3


def regression_loader(micro_batch: int, rank: int, world_size: int, seed: int):
    gen = torch.Generator().manual_seed(31)
    inputs = torch.randn(1024, INPUTS, generator=gen)
    hidden = torch.relu(inputs @ torch.randn(INPUTS, 24, generator=gen))
    targets = hidden @ torch.randn(24, OUTPUTS, generator=gen) / 4 + 0.1 * torch.randn(1024, OUTPUTS, generator=gen)
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(dataset, batch_size=micro_batch, sampler=sampler), sampler
