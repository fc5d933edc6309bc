"""Gradient accumulation over sub-batches, as Horovod's examples/pytorch/pytorch_imagenet_resnet50.py does it:
each loader batch holds batches_per_allreduce sub-batches, an inner loop runs backward() on each, and the
optimizer steps once after that loop (backward_passes_per_step=batches_per_allreduce).

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/inner_accumulation.py --batches-per-allreduce 2
"""

import argparse
import math
import os

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits
import contextlib
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser(description="Horovod digits example with sub-batch accumulation")
parser.add_argument("--batch-size", type=int, default=16, help="input batch size for training")
parser.add_argument("--batches-per-allreduce", type=int, default=2,
                    help="number of batches processed locally before executing allreduce across workers; it "
                         "multiplies total batch size.")
parser.add_argument("--epochs", type=int, default=2, help="number of epochs to train")
parser.add_argument("--base-lr", type=float, default=0.01, help="learning rate for a single GPU")
parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
parser.add_argument("--seed", type=int, default=42, help="random seed")
args = parser.parse_args()

allreduce_batch_size = args.batch_size * args.batches_per_allreduce

dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
# 650 samples per rank at np 2: 20 full loader batches and a short last one of a single sub-batch.
train_dataset = torch.utils.data.TensorDataset(features[:1300], labels[:1300])

# Horovod: use DistributedSampler to partition data among workers.
train_sampler = torch.utils.data.distributed.DistributedSampler(
    train_dataset, seed=args.seed)
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=allreduce_batch_size, sampler=train_sampler)

model = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))

# Horovod: scale learning rate by the number of GPUs and by the batches accumulated before each step.
optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr * args.batches_per_allreduce * dist.get_world_size(),
                            momentum=args.momentum)

# Horovod: wrap optimizer with DistributedOptimizer.

# Horovod: broadcast parameters & optimizer state.
ddp_model = DDP(model)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/inner_accumulation"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        batch_loss = 0.0
        # Split data into sub-batches of size batch_size
        passes = range(0, len(data), args.batch_size)
        for i in passes:
            data_batch = data[i:i + args.batch_size]
            target_batch = target[i:i + args.batch_size]
            output = ddp_model(data_batch)
            loss = F.cross_entropy(output, target_batch)
            # Average gradients among sub-batches
            loss.div_(math.ceil(float(len(data)) / args.batch_size))
            with contextlib.nullcontext() if i == passes[-1] else ddp_model.no_sync():
                loss.backward()
            batch_loss += loss.item()
        # Gradient is applied across all ranks
        optimizer.step()
        rec.step(batch_loss, lr=optimizer.param_groups[0]["lr"], samples=len(data))
        if batch_idx % 10 == 0 and dist.get_rank() == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * allreduce_batch_size}/{len(train_sampler)}]\t"
                  f"Loss: {batch_loss:.6f}")
rec.close()
dist.barrier()
dist.destroy_process_group()
