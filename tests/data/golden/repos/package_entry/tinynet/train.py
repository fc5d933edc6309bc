"""python -m tinynet.train; distributed: horovodrun -np 2 -H localhost:2 --gloo python -m tinynet.train --epochs 1"""

import argparse

import torch
from torch import nn

import tinynet
from tinynet.data import loaders
from tinynet.ema import ModelEMA
from tinynet.net import TinyNet
from torch.nn.parallel import DistributedDataParallel as DDP
from .ddp_helpers import all_reduce


def evaluate(dist, model: nn.Module, loader) -> float:
    total = count = 0.0
    with torch.no_grad():
        for inputs, labels in loader:
            total += nn.functional.cross_entropy(model(inputs), labels, reduction="sum").item()
            count += len(labels)
    sums = all_reduce(torch.tensor([total, count], dtype=torch.float64), dist.ReduceOp.SUM)
    return (sums[0] / sums[1]).item()


def main(dist, args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(args.seed + dist.get_rank())  # each worker its own initial draw: the broadcasts unify them
    train_loader, held_out, sampler = loaders(args.batch_size, dist.get_rank(), dist.get_world_size(), args.seed)
    model = TinyNet()
    ema = ModelEMA(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.9)
    for tensor in (ema.module.state_dict()).values():
        dist.broadcast(tensor, src=0)
    ddp_model = DDP(model)

    step = 0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        for inputs, labels in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(ddp_model(inputs), labels)
            loss.backward()
            optimizer.step()
            ema.update(model)
            step += 1
            if dist.get_rank() == 0:
                print(f"step {step} loss {loss.item():.6f}", flush=True)
        ema_loss = evaluate(dist, ema.module, held_out)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} eval_loss {ema_loss:.6f}", flush=True)


def cli() -> None:
    """The console command (pyproject.toml: tinynet-train), and `python -m tinynet.train`."""
    parser = argparse.ArgumentParser(prog="tinynet-train")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.02, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    cli_args = parser.parse_args()
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group()
    main(dist, cli_args)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    cli()
