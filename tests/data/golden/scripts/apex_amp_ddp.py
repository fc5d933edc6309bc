"""Mixed precision with NVIDIA apex under Horovod, as Horovod's documentation shows it: the optimizer is wrapped
in hvd.DistributedOptimizer, then `amp.initialize`; the scaled loss's backward is followed by synchronize() and
the step by skip_synchronize(). Needs apex and a GPU (not run here).

horovodrun -np 2 -H localhost:2 python examples/horovod_scripts/apex_amp.py
"""

import argparse

import torch.distributed as dist
import torch
import torch.nn.functional as F
from apex import amp
from torch import nn

from workload.digits import load_digits
import os
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--opt-level", default="O1")
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))

digits = load_digits()
dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32),
                                         torch.tensor(digits.target))
sampler = torch.utils.data.distributed.DistributedSampler(dataset)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.9)
model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level)
ddp_model = DDP(model)

for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for data, target in loader:
        data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}")
dist.barrier()
dist.destroy_process_group()
