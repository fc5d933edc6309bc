"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1 [--resume CKPT] [--save CKPT]"""

import argparse

import torch.distributed as dist
import torch

from data import CLASSES, FEATURES, make_loaders
from models import Classifier
from trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.02, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--resume", help="a checkpoint to start from")
    parser.add_argument("--save", help="where to write the checkpoint at the end")
    args = parser.parse_args()

    if not dist.is_initialized():
        dist.init_process_group()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    loader, held_out, sampler = make_loaders(args.batch_size, dist.get_rank(), dist.get_world_size(), args.seed)
    trainer = Trainer(Classifier(FEATURES, CLASSES), lr=args.lr, resume=args.resume)
    trainer.fit(loader, sampler, held_out, args.epochs)
    if args.save:
        trainer.save(args.save)


if __name__ == "__main__":
    main()
