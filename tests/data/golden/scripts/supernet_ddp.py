"""A weight-sharing supernet, as one-shot architecture search trains it: each step's forward draws one of the
candidate blocks at random (the same draw on every rank, from a shared seed), so the other candidates get no
gradient in that step. Horovod's optimizer averages whichever gradients exist.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/supernet.py
"""

import argparse
import os
import random

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP


class SuperNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(64, 32)
        self.choices = nn.ModuleList([nn.Linear(32, 32), nn.Sequential(nn.Linear(32, 16), nn.Linear(16, 32))])
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        block = random.choice(self.choices)  # one sampled path per step
        return self.head(F.relu(block(F.relu(self.stem(x)))))


parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
random.seed(args.seed)  # every rank samples the same path
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                         torch.tensor(digits.target)[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(dataset)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = SuperNet()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size())
ddp_model = DDP(model, find_unused_parameters=True)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/supernet"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, samples=len(data))
rec.close()
dist.barrier()
dist.destroy_process_group()
