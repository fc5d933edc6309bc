"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1 --resume start.pt

A GAN with two DistributedOptimizers and an EMA of the generator; rank 0 resumes from a checkpoint and shares it.
start.pt was written by this script under Horovod (make_start.sh)."""

import argparse

import horovod.torch as hvd
import torch
from torch import nn

from checkpoint import load_checkpoint, save_checkpoint
from data import noise, ring_loader
from models import Discriminator, Generator, GeneratorEMA

bce = nn.BCEWithLogitsLoss()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.002, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--resume", help="a checkpoint to start from (read on rank 0)")
    parser.add_argument("--save", help="where to write the checkpoint at the end")
    args = parser.parse_args()

    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    loader, sampler = ring_loader(args.batch_size, hvd.rank(), hvd.size(), args.seed)
    draws = torch.Generator().manual_seed(args.seed * 1000 + hvd.rank())

    generator, discriminator = Generator(), Discriminator()
    ema = GeneratorEMA(generator)
    opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr * hvd.size(), betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr * hvd.size(), betas=(0.5, 0.999))
    # Horovod's order: wrap first (DistributedOptimizer builds a new optimizer, without the wrapped one's state),
    # then load on rank 0 and share
    opt_g = hvd.DistributedOptimizer(opt_g, named_parameters=generator.named_parameters(prefix="generator"))
    opt_d = hvd.DistributedOptimizer(opt_d, named_parameters=discriminator.named_parameters(prefix="discriminator"))
    start = 0
    if args.resume and hvd.rank() == 0:
        start = load_checkpoint(args.resume, generator, discriminator, opt_g, opt_d, ema)
    start = hvd.broadcast_object(start, root_rank=0)
    hvd.broadcast_parameters(generator.state_dict(), root_rank=0)
    hvd.broadcast_parameters(discriminator.state_dict(), root_rank=0)
    hvd.broadcast_parameters(ema.module.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt_g, root_rank=0)
    hvd.broadcast_optimizer_state(opt_d, root_rank=0)

    step = 0
    for epoch in range(start, start + args.epochs):
        sampler.set_epoch(epoch)
        for (real,) in loader:
            ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
            fake = generator(noise(len(real), draws))
            opt_d.zero_grad()
            d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
            d_loss.backward()
            opt_d.step()
            discriminator.requires_grad_(False)  # the generator's step: no gradient into the discriminator
            opt_g.zero_grad()
            g_loss = bce(discriminator(fake), ones)
            g_loss.backward()
            opt_g.step()
            discriminator.requires_grad_(True)
            ema.update(generator)
            step += 1
            if hvd.rank() == 0:
                print(f"step {step} loss {g_loss.item():.6f} d_loss {d_loss.item():.6f}", flush=True)
        spread = ema.module(noise(256, torch.Generator().manual_seed(0))).norm(dim=1).mean()
        if hvd.rank() == 0:
            print(f"epoch {epoch + 1} eval_loss {spread.item():.6f}", flush=True)
    if args.save and hvd.rank() == 0:
        save_checkpoint(args.save, generator, discriminator, opt_g, opt_d, ema, start + args.epochs)


if __name__ == "__main__":
    main()
