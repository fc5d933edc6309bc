"""A contrastive (SimCLR-style) loss whose negatives come from every rank: each rank embeds two noisy views of
its batch, gathers the embeddings of all ranks with hvd.allgather (which passes gradients back to the rank
that made them) and scores each view against the whole global batch.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/contrastive_allgather.py
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
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--temperature", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

features = torch.tensor(load_digits().data[:1024] / 16.0, dtype=torch.float32)
dataset = torch.utils.data.TensorDataset(features)
sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

encoder = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
optimizer = torch.optim.SGD(encoder.parameters(), lr=args.lr)
hvd.broadcast_parameters(encoder.state_dict(), root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=encoder.named_parameters())


def nt_xent(z1, z2, temperature):
    """Each view's positive is the other view of the same sample; every other embedding of the global
    batch is a negative."""
    z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    all_z1, all_z2 = hvd.allgather(z1), hvd.allgather(z2)
    offset = hvd.rank() * len(z1)  # 512 samples a rank: every batch is full, the same size on every rank
    targets = torch.arange(offset, offset + len(z1))
    logits_12 = z1 @ all_z2.t() / temperature
    logits_21 = z2 @ all_z1.t() / temperature
    return (F.cross_entropy(logits_12, targets) + F.cross_entropy(logits_21, targets)) / 2


noise = torch.Generator().manual_seed(args.seed + hvd.rank())
rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/contrastive_allgather"), options=vars(args),
                        seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for (batch,) in loader:
        view1 = batch + 0.1 * torch.randn(batch.shape, generator=noise)
        view2 = batch + 0.1 * torch.randn(batch.shape, generator=noise)
        optimizer.zero_grad()
        loss = nt_xent(encoder(view1), encoder(view2), args.temperature)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr, samples=len(batch))
rec.close()
