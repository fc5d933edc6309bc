"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1"""

import argparse

import torch.distributed as dist
import torch

from datasets import CLASSES, FEATURES, make_loader
from models import MODELS, build_model
from trainer import Trainer


def run(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    loader, sampler = make_loader(args.batch_size, dist.get_rank(), dist.get_world_size(), args.seed)
    model = build_model(args.arch, FEATURES, CLASSES)
    trainer = Trainer(model, lr=args.lr)
    trainer.fit(loader, sampler, args.epochs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="mlp", choices=sorted(MODELS))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.005, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    if not dist.is_initialized():
        dist.init_process_group()
    run(parser.parse_args())
