"""A user's Horovod training script, written the usual way (Horovod's own examples' idiom), plus the recorder.

    horovodrun -np 2 python examples/user_scripts/train_horovod.py --out runs/mine-horovod

The three lines marked "recorder" are all it takes for `python -m compare check` to judge this script
against its DDP migration (train_ddp.py).
"""

import argparse

import horovod.torch as hvd
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
from torch.utils.tensorboard import SummaryWriter

import recorder  # recorder
from workload.digits import load_digits


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="An MLP on scikit-learn's digits with Horovod")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/user-horovod")
    parser.add_argument("--lr-at-step", default=None, metavar="STEP:LR",
                        help="switch to learning rate LR after optimizer step STEP (stands for a migration bug: "
                             "not in the record's options, as a bug would not be)")
    parser.add_argument("--tensorboard", default=None, metavar="DIR",
                        help="rank 0 also logs the loss averaged over workers to TensorBoard in DIR")
    return parser.parse_args()


def digits() -> tuple[TensorDataset, TensorDataset]:
    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(1234))
    test, train = order[:360], order[360:]
    return TensorDataset(x[train], y[train]), TensorDataset(x[test], y[test])


def main() -> None:
    args = parse_args()
    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    train_set, test_set = digits()
    sampler = DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True,
                                 seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    change_step, change_lr = map(float, args.lr_at_step.split(":")) if args.lr_at_step else (None, None)
    writer = SummaryWriter(args.tensorboard) if args.tensorboard and hvd.rank() == 0 else None

    options = {"lr": args.lr, "batch_size": args.batch_size, "epochs": args.epochs}
    with recorder.Recorder(args.out, options=options, seed=args.seed) as rec:  # recorder
        step = 0
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                step += 1
                rec.step(loss, lr=optimizer.param_groups[0]["lr"], samples=len(x))  # recorder
                if args.tensorboard:
                    average = hvd.allreduce(loss.detach(), name="loss")  # every rank takes part
                    if writer is not None:
                        writer.add_scalar("train/loss", average.item(), step)
                if step == change_step:
                    for group in optimizer.param_groups:
                        group["lr"] = change_lr
            model.eval()
            with torch.no_grad():  # each rank scores its share of the test set; the recorder averages
                x, y = test_set.tensors[0][hvd.rank()::hvd.size()], test_set.tensors[1][hvd.rank()::hvd.size()]
                logits = model(x)
                rec.eval(eval_loss=nn.functional.cross_entropy(logits, y),
                         eval_accuracy=(logits.argmax(1) == y).float().mean())
    if writer is not None:
        writer.close()


if __name__ == "__main__":
    main()
