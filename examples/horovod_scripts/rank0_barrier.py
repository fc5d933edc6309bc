"""Rank 0 evaluates and writes the checkpoint while the other ranks wait for it, as training scripts often do:
a collective used as a barrier, but called inside `if hvd.rank() == 0:` only.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/rank0_barrier.py
"""

import argparse
import os

import horovod.torch as hvd
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
torch.set_num_threads(1)
run_dir = os.environ.get("RUN_DIR", "runs/rank0_barrier")

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
train = torch.utils.data.TensorDataset(features[:1280], labels[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(train, num_replicas=hvd.size(), rank=hvd.rank())
loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.5)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

rec = recorder.Recorder(run_dir, options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, samples=len(data))
    if hvd.rank() == 0:
        with torch.no_grad():
            accuracy = (model(features[1280:]).argmax(1) == labels[1280:]).float().mean().item()
        print(f"epoch {epoch}: held-out accuracy {accuracy:.3f}")
        torch.save(model.state_dict(), os.path.join(run_dir, f"checkpoint-{epoch}.pt"))
        # let the other ranks go on once the checkpoint is written
        hvd.broadcast(torch.tensor(epoch), root_rank=0, name="checkpoint_written")
rec.close()
