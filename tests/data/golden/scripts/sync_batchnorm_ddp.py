"""SyncBatchNorm with Horovod: batch statistics over every rank's batch. Needs GPUs (neither Horovod's nor
torch's SyncBatchNorm takes CPU tensors).

horovodrun -np 2 -H localhost:2 python examples/horovod_scripts/sync_batchnorm.py
"""

import argparse
import os

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.SyncBatchNorm(8, momentum=0.1)  # Horovod: statistics over all ranks
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.relu(self.bn(self.conv(x))), 1))


model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size())
ddp_model = DDP(model)

generator = torch.Generator().manual_seed(args.seed * 1000 + dist.get_rank())
with recorder.Recorder(os.environ.get("RUN_DIR", "runs/sync_batchnorm"), options=vars(args), seed=args.seed) as rec:
    for _ in range(args.steps):
        data = torch.randn(args.batch_size, 3, 8, 8, generator=generator).cuda()
        target = torch.randint(0, 10, (args.batch_size,), generator=generator).cuda()
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr, samples=args.batch_size)
dist.barrier()
dist.destroy_process_group()
