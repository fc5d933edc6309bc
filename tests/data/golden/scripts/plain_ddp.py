"""Plain data-parallel training with Horovod, in the style of Horovod's examples/pytorch/pytorch_mnist.py.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/plain.py
"""

import argparse
import os

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser(description="Horovod digits example")
parser.add_argument("--batch-size", type=int, default=32, help="samples in one step on each rank")
parser.add_argument("--epochs", type=int, default=2, help="passes over the training set")
parser.add_argument("--lr", type=float, default=0.01, help="learning rate (scaled by the number of workers)")
parser.add_argument("--momentum", type=float, default=0.5, help="momentum of the SGD optimizer")
parser.add_argument("--seed", type=int, default=42, help="random seed")
args = parser.parse_args()

# Horovod: initialize library.
if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)

if torch.cuda.is_available():
    # Horovod: pin GPU to local rank.
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))

# Horovod: limit # of CPU threads to be used per worker.
torch.set_num_threads(1)

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
train_dataset = torch.utils.data.TensorDataset(features[:1400], labels[:1400])

# Horovod: use DistributedSampler to partition the training data.
train_sampler = torch.utils.data.distributed.DistributedSampler(
    train_dataset, seed=args.seed)
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

# Horovod: scale learning rate by the number of GPUs.
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=args.momentum)

# Horovod: broadcast parameters & optimizer state.

# Horovod: wrap optimizer with DistributedOptimizer.
ddp_model = DDP(model)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/plain"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    # Horovod: set epoch to sampler for shuffling.
    train_sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = ddp_model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=optimizer.param_groups[0]["lr"], samples=len(data))
        if batch_idx % 10 == 0 and dist.get_rank() == 0:
            # Horovod: print output only on first rank.
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_sampler)}]\tLoss: {loss.item():.6f}")
rec.close()
dist.barrier()
dist.destroy_process_group()
