"""A Horovod job with two ways in, as many are written: started by horovodrun, or, given --num-proc, starting its
own workers through horovod.run. Every rank prints its training loss in the MNIST examples' format (`Train Epoch:
E [N/M (P%)]  Loss: X`, a sample counter that restarts each epoch); rank 0 prints the test metrics averaged over
the ranks. The data are 28x28 digits from mnist_standin.py beside this file (nothing is downloaded here).

    horovodrun -np 2 python examples/horovod_styles/dual_launch.py --epochs 2
    python examples/horovod_styles/dual_launch.py --epochs 2 --num-proc 2
"""

import argparse

import horovod
import horovod.torch as hvd
import torch
import torch.nn.functional as F
from mnist_standin import datasets, transforms
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

PIXEL_MEAN, PIXEL_STD = 0.13, 0.31


def options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="digits, under horovodrun or through horovod.run")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="images per batch on each rank")
    parser.add_argument("--eval-batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.02, help="the learning rate of one rank")
    parser.add_argument("--momentum", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--print-every", type=int, default=2, help="batches between two printed losses")
    parser.add_argument("--fp16-allreduce", action="store_true", help="send the gradients as fp16")
    parser.add_argument("--data-dir", default="./data")
    parser.add_argument("--num-proc", type=int, help="start this many workers with horovod.run (no horovodrun)")
    parser.add_argument("--use-gloo", action="store_true", help="horovod.run over Gloo rather than MPI")
    return parser


def digit_classifier() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2),     # 26x26 -> 13x13
                         nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2),    # 11x11 -> 5x5
                         nn.Flatten(), nn.Linear(16 * 5 * 5, 64), nn.ReLU(),
                         nn.Dropout(0.25),  # each rank's own masks, from the seed every rank is given
                         nn.Linear(64, 10), nn.LogSoftmax(dim=1))


def sharded(dataset, batch_size: int, shuffle: bool):
    """A loader over this rank's share of the dataset, and the sampler that picks the share."""
    sampler = DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=shuffle)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), sampler


def averaged(value: float, name: str) -> float:
    return hvd.allreduce(torch.tensor(value), name=name).item()


def evaluate(model, loader, sampler) -> None:
    model.eval()
    summed_loss, right = 0.0, 0.0
    with torch.no_grad():
        for images, labels in loader:
            log_probs = model(images)
            summed_loss += F.nll_loss(log_probs, labels, reduction="sum").item()
            right += (log_probs.argmax(dim=1) == labels).sum().item()
    mean_loss = averaged(summed_loss / len(sampler), "eval_loss")
    accuracy = averaged(right / len(sampler), "eval_accuracy")
    if hvd.rank() == 0:
        print(f"\nTest set: Average loss: {mean_loss:.4f}, Accuracy: {100 * accuracy:.2f}%\n")


def train(opts) -> None:
    hvd.init()
    torch.manual_seed(opts.seed)
    torch.set_num_threads(1)
    prepare = transforms.Compose([transforms.ToTensor(), transforms.Normalize((PIXEL_MEAN,), (PIXEL_STD,))])
    train_set = datasets.MNIST(opts.data_dir, train=True, transform=prepare)
    test_set = datasets.MNIST(opts.data_dir, train=False, transform=prepare)
    train_loader, train_sampler = sharded(train_set, opts.batch_size, shuffle=True)
    test_loader, test_sampler = sharded(test_set, opts.eval_batch_size, shuffle=False)

    model = digit_classifier()
    # the gradients are averaged over hvd.size() times the images: the step grows with the ranks
    optimizer = torch.optim.SGD(model.parameters(), lr=opts.lr * hvd.size(), momentum=opts.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if opts.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)

    for epoch in range(1, opts.epochs + 1):
        model.train()
        train_sampler.set_epoch(epoch)
        for batch, (images, labels) in enumerate(train_loader):
            optimizer.zero_grad()
            loss = F.nll_loss(model(images), labels)
            loss.backward()
            optimizer.step()
            if batch % opts.print_every == 0:  # every rank prints its own
                seen = batch * len(images)
                print(f"Train Epoch: {epoch} [{seen}/{len(train_sampler)} "
                      f"({100.0 * batch / len(train_loader):.0f}%)]\tLoss: {loss.item():.6f}")
        evaluate(model, test_loader, test_sampler)


if __name__ == "__main__":
    opts = options().parse_args()
    if opts.num_proc:
        horovod.run(train, args=(opts,), np=opts.num_proc, use_gloo=opts.use_gloo)
    else:
        train(opts)
