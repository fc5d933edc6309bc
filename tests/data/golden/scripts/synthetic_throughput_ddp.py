"""A Horovod speed benchmark on synthetic data, in the way its users measure throughput: one fixed random batch,
so that only the model's step and the gradient allreduce are timed; timeit over a few batches per iteration;
rank 0 prints `Iter #N: X img/sec per CPU` for each iteration and the mean at the end, and no loss.

    horovodrun -np 2 python examples/horovod_scripts/synthetic_throughput.py --iters 5

Its models are small (torchvision is not needed): `convnet` (the default) and `mlp`. `compare migrate --verify`
can only time it: "parity: not checked (the script prints no loss)" (tests/test_migrate_speed.py).
"""

import argparse
import statistics
import timeit

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn
import os
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

CLASSES = 1000  # as ImageNet's, so that the last layer weighs in the allreduce as a classifier's does


def convnet() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 24, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(24, 48, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(48 * 8 * 8, CLASSES))


def mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 512), nn.ReLU(), nn.Linear(512, CLASSES))


# name -> (the model, the side of its square input images)
MODELS = {"convnet": (convnet, 32), "mlp": (mlp, 16)}


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Horovod throughput on synthetic images",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="convnet")
    parser.add_argument("--batch-size", type=int, default=32, help="images per batch on each rank")
    parser.add_argument("--warmup-batches", type=int, default=10, help="batches run before anything is timed")
    parser.add_argument("--batches-per-iter", type=int, default=10, help="batches timed together")
    parser.add_argument("--iters", type=int, default=10, help="timed iterations")
    parser.add_argument("--fp16-allreduce", action="store_true", help="send the gradients as fp16")
    parser.add_argument("--cuda", action="store_true", help="one GPU per rank (local rank N on GPU N)")
    return parser.parse_args()


def main() -> None:
    opts = parse_options()
    if not dist.is_initialized():
        dist.init_process_group()
    torch.manual_seed(0)
    device = torch.device("cpu")
    if opts.cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        device = torch.device("cuda")
    build, side = MODELS[opts.model]
    model = build().to(device)
    # averaged gradients of size-times more images per step: the rate grows with the ranks
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * dist.get_world_size())
    compression = default_hooks.fp16_compress_hook if opts.fp16_allreduce else None
    ddp_model = DDP(model)
    if compression is not None:
        ddp_model.register_comm_hook(None, compression)

    images = torch.randn(opts.batch_size, 3, side, side, device=device)
    labels = torch.randint(0, CLASSES, (opts.batch_size,), device=device)

    def one_batch() -> None:
        optimizer.zero_grad()
        F.cross_entropy(ddp_model(images), labels).backward()
        optimizer.step()

    printing = dist.get_rank() == 0
    unit = "GPU" if opts.cuda else "CPU"
    if printing:
        print(f"{opts.model}, {opts.batch_size} images a batch on each of {dist.get_world_size()} {unit}(s)")
    timeit.timeit(one_batch, number=opts.warmup_batches)
    rates = []
    for index in range(opts.iters):
        seconds = timeit.timeit(one_batch, number=opts.batches_per_iter)
        rates.append(opts.batch_size * opts.batches_per_iter / seconds)
        if printing:
            print(f"Iter #{index}: {rates[-1]:.1f} img/sec per {unit}", flush=True)
    if printing:  # the unit before the number: these are not read as one more iteration's value
        mean, spread = statistics.fmean(rates), 1.96 * statistics.pstdev(rates)
        print(f"mean img/sec per {unit}: {mean:.1f} (+-{spread:.1f}); all ranks: {dist.get_world_size() * mean:.1f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
