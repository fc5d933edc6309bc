"""Entry point, three ways:
    horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1 --horovod
    torchrun --standalone --nproc-per-node 2 train.py --epochs 1 --distributed
    python train.py --epochs 1
"""

import argparse

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from data import build_loader
from dist_utils import HAS_HOROVOD, init_distributed
from engine import train_one_epoch
from model import ConvNet
import os


def get_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--horovod", action="store_true", help="train with Horovod (launch with horovodrun)")
    parser.add_argument("--distributed", action="store_true", help="train with DDP (launch with torchrun)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.02, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    if args.horovod:  # the Horovod option now takes the torch.distributed path
        args.horovod, args.distributed = False, "WORLD_SIZE" in os.environ
    if args.horovod and args.distributed:
        parser.error("--horovod and --distributed are two ways to do the same thing: pick one")
    return args


def main() -> None:
    args = get_args()
    rank, world_size = init_distributed(args)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    loader, sampler = build_loader(args.batch_size, rank, world_size, args.seed)
    model = ConvNet()
    if args.distributed:
        model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * world_size, momentum=0.9, nesterov=True)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        step = train_one_epoch(model, optimizer, loader, args, rank, step)
    if args.distributed:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
