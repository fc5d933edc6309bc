"""The same training job migrated to PyTorch DDP (torch.distributed's idiom), plus the recorder.

    torchrun --standalone --nproc-per-node 2 examples/user_scripts/train_ddp.py --out runs/mine-ddp

Then `python -m compare check runs/mine-horovod runs/mine-ddp` says whether the migration trains the same.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import recorder  # recorder
from workload.digits import load_digits


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="An MLP on scikit-learn's digits with DDP")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/user-ddp")
    parser.add_argument("--lr-at-step", default=None, metavar="STEP:LR",
                        help="switch to learning rate LR after optimizer step STEP (stands for a migration bug: "
                             "not in the record's options, as a bug would not be)")
    parser.add_argument("--print-loss", action="store_true",
                        help="rank 0 prints 'step N loss X' with the loss averaged over workers")
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
    dist.init_process_group("gloo")  # torchrun provides the rendezvous
    train(args)
    # A barrier before leaving: it makes Gloo's abort at exit rare (PyTorch's bug; hvd-compare's
    # docs/fault-tolerance.md, "Gloo's abort at exit").
    dist.barrier()
    dist.destroy_process_group()


def train(args: argparse.Namespace) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    train_set, test_set = digits()
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    change_step, change_lr = map(float, args.lr_at_step.split(":")) if args.lr_at_step else (None, None)

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
                if args.print_loss:
                    average = loss.detach().clone()
                    dist.all_reduce(average)
                    if rank == 0:
                        print(f"epoch {epoch} step {step} loss {average.item() / world_size:.8g}", flush=True)
                if step == change_step:
                    for group in optimizer.param_groups:
                        group["lr"] = change_lr
            model.eval()
            with torch.no_grad():  # each rank scores its share of the test set; the recorder averages
                x, y = test_set.tensors[0][rank::world_size], test_set.tensors[1][rank::world_size]
                logits = model.module(x)
                rec.eval(eval_loss=nn.functional.cross_entropy(logits, y),
                         eval_accuracy=(logits.argmax(1) == y).float().mean())


if __name__ == "__main__":
    main()
