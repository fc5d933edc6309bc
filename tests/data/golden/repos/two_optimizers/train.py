"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1"""

import argparse

import torch.distributed as dist
import torch

from data import NoiseSource, ring_loader
from gan import train_step
from models import Discriminator, Generator
from torch.nn.parallel import DistributedDataParallel as DDP
from ddp_helpers import average_gradients_at_step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per worker")
    parser.add_argument("--lr", type=float, default=1e-3, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    if not dist.is_initialized():
        dist.init_process_group()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    loader, sampler = ring_loader(args.batch_size, dist.get_rank(), dist.get_world_size(), args.seed)
    noise = NoiseSource(args.seed, dist.get_rank())

    generator, discriminator = Generator(), Discriminator()
    lr = args.lr * dist.get_world_size()
    opt_g = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
    for tensor in (discriminator.state_dict()).values():
        dist.broadcast(tensor, src=0)
    ddp_generator = DDP(generator)
    opt_d = average_gradients_at_step(opt_d)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for (real,) in loader:
            g_loss, d_loss = train_step(ddp_generator, discriminator, opt_g, opt_d, real, noise.sample(len(real)))
            step += 1
            if dist.get_rank() == 0:
                print(f"step {step} loss {g_loss.item():.6f} d_loss {d_loss.item():.6f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
