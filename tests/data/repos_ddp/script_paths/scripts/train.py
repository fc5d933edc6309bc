"""Entry point, from the repository's root:
    horovodrun -np 2 -H localhost:2 --gloo python scripts/train.py --epochs 1
    python scripts/train.py --epochs 1
"""

import argparse
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from trainkit import dist  # after the path change: the package lives one level up
from trainkit.trainer import Trainer


def batches(seed: int, rank: int, size: int, count: int, batch_size: int):
    """Generated data: the same stream on every run, each worker its own share of it."""
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(count * batch_size * size, 8, generator=generator)
    labels = (inputs[:, :4].sum(dim=1) > 0).long()
    for index in range(count):
        start = (index * size + rank) * batch_size
        yield inputs[start:start + batch_size], labels[start:start + batch_size]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05, help="per worker: scaled by the number of workers")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    dist.init()
    torch.manual_seed(args.seed)
    trainer = Trainer(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)), args.lr)
    for epoch in range(args.epochs):
        for inputs, labels in batches(args.seed + epoch, dist.rank(), dist.size(), 8, args.batch_size):
            loss = trainer.train_step(inputs, labels)
            if dist.rank() == 0:
                print(f"step {trainer.step} loss {loss:.6f}", flush=True)


if __name__ == "__main__":
    main()
