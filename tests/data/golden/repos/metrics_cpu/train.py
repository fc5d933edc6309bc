"""Entry point: horovodrun -np 2 -H localhost:2 --gloo python train.py --epochs 1"""

import argparse

import torch
from torch import nn

from data import digits_loaders
from evaluate import evaluate
from utils import dist
from utils.meters import AverageMeter
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05, help="per worker: scaled by the world size")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    dist.setup()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    train_loader, test_loader, sampler = digits_loaders(args.batch_size, dist.get_rank(), dist.get_world_size(),
                                                        args.seed)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.9)
    ddp_model = DDP(model)

    step = 0
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        train_meter = AverageMeter("train_loss")
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(ddp_model(images), labels)
            loss.backward()
            optimizer.step()
            step += 1
            train_meter.update(loss.item(), len(labels))
            mean_loss = dist.reduce_tensor(loss.detach(), average=True, name="train.loss")
            if dist.get_rank() == 0:
                print(f"step {step} loss {mean_loss.item():.6f}", flush=True)
        epoch_loss = train_meter.global_average()
        eval_loss, accuracy = evaluate(model, test_loader)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} avg_loss {epoch_loss:.6f} eval_loss {eval_loss:.6f} eval_accuracy {accuracy:.6f}",
                  flush=True)


if __name__ == "__main__":
    main()
