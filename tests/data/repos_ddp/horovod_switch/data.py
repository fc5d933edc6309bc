"""Generated images: three classes of blurred bars (horizontal, vertical, diagonal) with noise."""

import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_images(count: int, seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (count,), generator=gen)
    images = 0.8 * torch.randn(count, 1, 12, 12, generator=gen)
    offsets = torch.randint(2, 10, (count,), generator=gen)
    for i in range(count):
        row = int(offsets[i])
        if labels[i] == 0:
            images[i, 0, row, :] += 1.5
        elif labels[i] == 1:
            images[i, 0, :, row] += 1.5
        else:
            images[i, 0].diagonal().add_(1.5)
    return TensorDataset(images, labels)


def build_loader(batch_size: int, rank: int, world_size: int, seed: int) -> tuple[DataLoader, DistributedSampler]:
    dataset = make_images(512, seed=99)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler
