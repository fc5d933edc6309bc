"""A Horovod script whose optimizer decays hard (tests/test_migrate_zero_step.py): Horovod's
broadcast_optimizer_state runs a zero-gradient step() on the fresh optimizer, and with this weight decay and
learning rate what that step leaves shows in the first losses. The test writes variants of it: the optimizer
line (OPTIMIZER) and where DistributedOptimizer is built (WRAP_BEFORE / WRAP_AFTER, one of them emptied).

    horovodrun -np 2 --gloo python decaying.py
"""

import argparse

import horovod.torch as hvd
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=42)
args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
data = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
sampler = DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
loader = DataLoader(data, batch_size=16, sampler=sampler)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))

optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.5)  # OPTIMIZER
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())  # WRAP_BEFORE
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())  # WRAP_AFTER

for step, (x, y) in enumerate(loader, 1):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if hvd.rank() == 0:
        print(f"step {step} loss {loss.item():.8f}")
