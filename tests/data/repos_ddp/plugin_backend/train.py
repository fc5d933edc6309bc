"""Entry point: torchrun --standalone --nproc-per-node 2 train.py --epochs 1 (--backend local: one process)"""

import argparse

import torch
from torch import nn

from backends import BACKENDS, DDPBackend, get_backend
from data import train_loader
from model import Regressor


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="ddp", choices=sorted(BACKENDS))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.01, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    backend = get_backend(args.backend)
    backend.setup()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    loader, sampler = train_loader(args.batch_size, backend.rank, backend.world_size, args.seed)
    model = Regressor()
    # the learning rate scaled for the distributed backend only (identity, not the world size, says which)
    lr = args.lr * backend.world_size if isinstance(backend, DDPBackend) else args.lr
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    backend.sync_initial_state(model, optimizer)
    model = backend.wrap_model(model)
    optimizer = backend.wrap_optimizer(optimizer, model)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
            step += 1
            mean_loss = backend.all_reduce(loss.detach())
            if backend.is_root:
                print(f"step {step} loss {mean_loss.item():.6f}", flush=True)
        backend.barrier()  # every worker ends the epoch before the next one starts
    backend.teardown()


if __name__ == "__main__":
    main()
