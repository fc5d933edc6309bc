"""Uneven inputs with Horovod: rank r has r * 3 batches fewer; hvd.join() after each epoch's loop lets the
ranks that finish first answer the others' allreduces until every rank is done.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/uneven_join.py
"""

import argparse
import os

import horovod.torch as hvd
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn

import recorder

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
# Each rank takes its own contiguous slice, shorter on higher ranks.
per_rank = 640 - hvd.rank() * 3 * args.batch_size
start = hvd.rank() * 640
dataset = torch.utils.data.TensorDataset(features[start:start + per_rank], labels[start:start + per_rank])
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size)
common_steps = (640 - (hvd.size() - 1) * 3 * args.batch_size) // args.batch_size

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/uneven_join"), options=vars(args), seed=args.seed)
for _epoch in range(args.epochs):
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx < common_steps:  # the recorder gathers over all ranks: only on steps every rank takes
            rec.step(loss, lr=args.lr, samples=len(data))
    # Horovod: wait here until every rank is out of batches.
    hvd.join()
rec.close()
