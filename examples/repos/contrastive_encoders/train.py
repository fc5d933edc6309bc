"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1

Two encoders trained by one optimizer: one DistributedOptimizer averages the gradients of both."""

import argparse

import horovod.torch as hvd
import torch

from data import FIRST, SECOND, make_loader
from encoders import Encoder, info_nce


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.005, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    loader, sampler = make_loader(args.batch_size, hvd.rank(), hvd.size(), args.seed)
    first_encoder, second_encoder = Encoder(FIRST), Encoder(SECOND)
    params = list(first_encoder.parameters()) + list(second_encoder.parameters())
    optimizer = torch.optim.Adam(params, lr=args.lr * hvd.size())
    hvd.broadcast_parameters(first_encoder.state_dict(), root_rank=0)
    hvd.broadcast_parameters(second_encoder.state_dict(), root_rank=0)
    named = [*first_encoder.named_parameters(prefix="first"), *second_encoder.named_parameters(prefix="second")]
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=named)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for first, second in loader:
            optimizer.zero_grad()
            loss = info_nce(first_encoder(first), second_encoder(second))
            loss.backward()
            optimizer.step()
            step += 1
            if hvd.rank() == 0:
                print(f"step {step} loss {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    main()
