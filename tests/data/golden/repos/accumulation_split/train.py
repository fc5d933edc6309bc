"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1"""

import argparse

import torch.distributed as dist
import torch

from data import regression_loader
from loop import train_epoch
from model import make_model
from optim import make_optimizer, make_scheduler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=16, help="per worker and backward pass")
    parser.add_argument("--accumulate", type=int, default=4, help="backward passes per optimizer step")
    parser.add_argument("--lr", type=float, default=0.02, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    if not dist.is_initialized():
        dist.init_process_group()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    loader, sampler = regression_loader(args.micro_batch, dist.get_rank(), dist.get_world_size(), args.seed)
    model = make_model()
    optimizer = make_optimizer(model, args.lr, args.accumulate)
    scheduler = make_scheduler(optimizer, args.epochs * len(loader) // args.accumulate)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        step = train_epoch(model, optimizer, scheduler, loader, args.accumulate, step, dist.get_rank() == 0)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
