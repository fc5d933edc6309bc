"""Gradient accumulation with Horovod: backward_passes_per_step, the optimizer steps every k batches.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/accumulation.py --accum-steps 2
"""

import argparse
import os

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits
import contextlib
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--accum-steps", type=int, default=2, help="backward passes per optimizer step")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if not dist.is_initialized():
        dist.init_process_group()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    digits = load_digits()
    dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                             torch.tensor(digits.target)[:1280])
    sampler = torch.utils.data.distributed.DistributedSampler(dataset)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = nn.Sequential(nn.Linear(64, 48), nn.Tanh(), nn.Linear(48, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    # Horovod: allreduce only on every k-th backward pass.
    ddp_model = DDP(model)

    with recorder.Recorder(os.environ.get("RUN_DIR", "runs/accumulation"), options=vars(args), seed=args.seed) as rec:
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            micro_losses = []
            for batch_idx, (data, target) in enumerate(loader):
                loss = F.cross_entropy(ddp_model(data), target) / args.accum_steps
                with contextlib.nullcontext() if (batch_idx + 1) % args.accum_steps == 0 else ddp_model.no_sync():
                    loss.backward()
                micro_losses.append(loss.item())
                if (batch_idx + 1) % args.accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                    rec.step(sum(micro_losses), lr=args.lr, samples=args.batch_size * args.accum_steps)
                    micro_losses = []
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
