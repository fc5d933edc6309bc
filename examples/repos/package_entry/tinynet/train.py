"""python -m tinynet.train; distributed: horovodrun -np 2 -H localhost:2 --gloo python -m tinynet.train --epochs 1"""

import argparse

import torch
from torch import nn

import tinynet
from tinynet.data import loaders
from tinynet.ema import ModelEMA
from tinynet.net import TinyNet


def evaluate(hvd, model: nn.Module, loader) -> float:
    total = count = 0.0
    with torch.no_grad():
        for inputs, labels in loader:
            total += nn.functional.cross_entropy(model(inputs), labels, reduction="sum").item()
            count += len(labels)
    sums = hvd.allreduce(torch.tensor([total, count], dtype=torch.float64), op=hvd.Sum, name="eval")
    return (sums[0] / sums[1]).item()


def main(hvd, args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(args.seed + hvd.rank())  # each worker its own initial draw: the broadcasts unify them
    train_loader, held_out, sampler = loaders(args.batch_size, hvd.rank(), hvd.size(), args.seed)
    model = TinyNet()
    ema = ModelEMA(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_parameters(ema.module.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    step = 0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        for inputs, labels in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            ema.update(model)
            step += 1
            if hvd.rank() == 0:
                print(f"step {step} loss {loss.item():.6f}", flush=True)
        ema_loss = evaluate(hvd, ema.module, held_out)
        if hvd.rank() == 0:
            print(f"epoch {epoch} eval_loss {ema_loss:.6f}", flush=True)


def cli() -> None:
    """The console command (pyproject.toml: tinynet-train), and `python -m tinynet.train`."""
    parser = argparse.ArgumentParser(prog="tinynet-train")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.02, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    cli_args = parser.parse_args()
    hvd = tinynet.distributed()
    hvd.init()
    main(hvd, cli_args)


if __name__ == "__main__":
    cli()
