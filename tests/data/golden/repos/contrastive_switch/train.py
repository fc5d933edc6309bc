"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1

Horovod is the default; `--distributed torch` (under torchrun) and `--distributed none` (one process) are the
other two ways."""

import argparse

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from comm import average, init_distributed

from data import FEATURES, make_loader
from model import Encoder, contrastive_loss


def get_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--distributed", choices=["horovod", "torch", "none"], default="horovod",
                        help="horovod: launch with horovodrun; torch: launch with torchrun; none: one process")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--save", help="write the trained encoder here (rank 0)")
    return parser.parse_args()


def main() -> None:
    args = get_args()
    rank, world_size = init_distributed(args)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    loader, sampler = make_loader(args.batch_size, rank, world_size, args.seed)
    model = Encoder(FEATURES)
    if args.distributed == "torch":
        model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * world_size, momentum=0.9)
    ddp_model = model
    if args.distributed == "horovod":
        ddp_model = DDP(model)

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for first, second in loader:
            optimizer.zero_grad()
            # both views in one forward: one pass through the model per step
            embeddings = ddp_model(torch.cat([first, second]))
            loss = contrastive_loss(embeddings[:len(first)], embeddings[len(first):], rank, args)
            loss.backward()
            optimizer.step()
            step += 1
            reported = average(loss.detach(), args)
            if rank == 0:
                print(f"step {step} loss {reported.item():.6f}", flush=True)
    if args.save and rank == 0:
        torch.save({"model": model.state_dict(), "step": step}, args.save)
    if args.distributed == "torch":
        torch.distributed.barrier()  # every rank done before the group goes (Gloo's abort at exit)
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
