"""fp16 gradient compression and gradient clipping with Horovod (synchronize, clip, skip_synchronize).

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/fp16_clip.py --fp16-allreduce
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
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--clip-norm", type=float, default=0.5)
parser.add_argument("--fp16-allreduce", action="store_true", default=True, help="send the gradients as fp16")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                         torch.tensor(digits.target)[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

hvd.broadcast_parameters(model.state_dict(), root_rank=0)

# Horovod: (optional) compression algorithm.
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

# Horovod: wrap optimizer with DistributedOptimizer.
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), compression=compression)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/fp16_clip"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        # Horovod: wait for the averaged gradients before clipping them.
        optimizer.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
        with optimizer.skip_synchronize():
            optimizer.step()
        rec.step(loss, lr=args.lr, samples=len(data))
rec.close()
