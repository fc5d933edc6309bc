"""scikit-learn's handwritten digits (bundled with it: no download), scaled to [0, 1]."""

import torch
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def digits_loaders(batch_size: int, rank: int, world_size: int, seed: int):
    digits = load_digits()
    images = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    labels = torch.tensor(digits.target)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    train_idx, test_idx = order[:1280], order[1280:1600]
    train = TensorDataset(images[train_idx], labels[train_idx])
    test = TensorDataset(images[test_idx], labels[test_idx])
    sampler = DistributedSampler(train, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                 drop_last=True)
    test_sampler = DistributedSampler(test, num_replicas=world_size, rank=rank, shuffle=False)
    return (DataLoader(train, batch_size=batch_size, sampler=sampler),
            DataLoader(test, batch_size=100, sampler=test_sampler), sampler)
