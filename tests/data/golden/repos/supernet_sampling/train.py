"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1

One sub-network per step, drawn from a generator seeded alike on every rank, so every rank trains the same
sub-network. Plain SGD: a parameter no rank used gets a zero gradient from Horovod, and none from DDP; without
momentum or weight decay both leave it where it is."""

import argparse

import torch.distributed as dist
import torch
from torch import nn

from data import CLASSES, FEATURES, make_loader
from supernet import SuperNet
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    if not dist.is_initialized():
        dist.init_process_group()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    loader, sampler = make_loader(args.batch_size, dist.get_rank(), dist.get_world_size(), args.seed)
    model = SuperNet(FEATURES, CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size())
    ddp_model = DDP(model, find_unused_parameters=True)
    architectures = torch.Generator().manual_seed(args.seed)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for inputs, labels in loader:
            model.sample_subnet(architectures)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(ddp_model(inputs), labels)
            loss.backward()
            optimizer.step()
            step += 1
            if dist.get_rank() == 0:
                print(f"step {step} loss {loss.item():.6f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
