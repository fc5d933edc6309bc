"""A horovodrun script in the style many teams write: no rank guard on logging, so every rank prints its
own loss with a batch counter that restarts each epoch, plus the averaged validation metrics.

    horovodrun -np 2 python examples/horovod_styles/every_rank_prints.py --epochs 2

Its lines ("epoch 2 | batch 10/20 | loss 0.412345") match no default pattern: verify and import it with
--loss-regex 'epoch (?P<epoch>\\d+) \\| batch (?P<step>\\d+)/\\d+ \\| loss (?P<loss>\\S+)'.
"""

import argparse

import horovod.torch as hvd
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from workload.digits import load_digits


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=7)
    return parser.parse_args()


def datasets():
    digits = load_digits()
    features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    labels = torch.tensor(digits.target)
    return TensorDataset(features[:1280], labels[:1280]), TensorDataset(features[1280:], labels[1280:])


def evaluate(model, loader):
    model.eval()
    totals = torch.zeros(3)
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            totals += torch.tensor([F.cross_entropy(output, target, reduction="sum").item(),
                                    (output.argmax(1) == target).sum().item(), len(target)])
    totals = hvd.allreduce(totals, op=hvd.Sum)
    model.train()
    return totals[0].item() / totals[2].item(), totals[1].item() / totals[2].item()


def main():
    args = parse_args()
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    train_set, val_set = datasets()
    train_sampler = DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    val_loader = DataLoader(val_set, batch_size=128,
                            sampler=DistributedSampler(val_set, num_replicas=hvd.size(), rank=hvd.rank()))
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(1, args.epochs + 1):
        train_sampler.set_epoch(epoch)
        for batch, (data, target) in enumerate(train_loader):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} | batch {batch}/{len(train_loader)} | loss {loss.item():.6f}")
        val_loss, val_acc = evaluate(model, val_loader)
        print(f"epoch {epoch} | val_loss {val_loss:.6f} | val_acc {val_acc:.4f}")


if __name__ == "__main__":
    main()
