"""Uneven inputs with Horovod: rank r has r * 3 batches fewer; hvd.join() after each epoch's loop lets the
ranks that finish first answer the others' allreduces until every rank is done.

No recorder here: rank 0 prints its loss at every step, which `compare migrate --verify` reads (--loss-regex).
After an uneven loop, Horovod's unnamed collectives no longer match across ranks (their automatic names count
every operation, and the ranks did different numbers): give every collective after hvd.join() a name.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/uneven_join.py
"""

import argparse

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

from workload.digits import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.join import Join

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
# Each rank takes its own contiguous slice, shorter on higher ranks.
per_rank = 640 - dist.get_rank() * 3 * args.batch_size
start = dist.get_rank() * 640
dataset = torch.utils.data.TensorDataset(features[start:start + per_rank], labels[start:start + per_rank])
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
ddp_model = DDP(model)

step = 0
for epoch in range(args.epochs):
    with Join([ddp_model]):
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp_model(data), target)
            loss.backward()
            optimizer.step()
            step += 1
            if dist.get_rank() == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.6f}", flush=True)
dist.barrier()
dist.destroy_process_group()
