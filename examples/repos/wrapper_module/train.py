"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1"""

import argparse

import torch
from torch import nn

import data
import metrics
from model import build_model
from utils import distributed as dist_utils


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05, help="per worker: scaled by the number of workers")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    dist_utils.init()
    torch.manual_seed(args.seed)
    train_loader, test_loader, sampler = data.loaders(args.batch_size, args.seed)
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist_utils.size(), momentum=0.9)
    dist_utils.broadcast_state(model, optimizer)
    optimizer = dist_utils.distributed_optimizer(optimizer, model)

    step = 0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        for inputs, labels in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            step += 1
            reported = dist_utils.all_reduce_mean(loss.detach(), name="train.loss")
            if dist_utils.is_main():
                print(f"step {step} loss {reported.item():.6f}", flush=True)
        eval_loss, accuracy = metrics.evaluate(model, test_loader)
        if dist_utils.is_main():
            print(f"epoch {epoch} eval_loss {eval_loss:.6f} eval_accuracy {accuracy:.6f}", flush=True)
    dist_utils.barrier()


if __name__ == "__main__":
    main()
