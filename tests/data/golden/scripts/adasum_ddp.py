"""Adasum with Horovod (MPI operations): op=hvd.Adasum, and no learning-rate scaling with Adasum, as in
Horovod's pytorch_mnist.py. DDP has no Adasum: the migration flags it.

horovodrun -np 2 -H localhost:2 --mpi python examples/horovod_scripts/adasum.py --use-adasum
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
parser.add_argument("--use-adasum", action="store_true", default=False)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 2))
# Horovod: scale learning rate by lr_scaler (1 with Adasum).
lr_scaler = dist.get_world_size() if not args.use_adasum else 1
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * lr_scaler)
ddp_model = DDP(model)
generator = torch.Generator().manual_seed(dist.get_rank())
with recorder.Recorder(os.environ.get("RUN_DIR", "runs/adasum"), options=vars(args)) as rec:
    for _ in range(20):
        data, target = torch.randn(16, 16, generator=generator), torch.randint(0, 2, (16,), generator=generator)
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr * lr_scaler, samples=16)
dist.barrier()
dist.destroy_process_group()
