"""Training with an exponential moving average of the weights, evaluated instead of the model (as timm's
ModelEma and many detection codebases do), under Horovod: both the model and its EMA copy are broadcast from
rank 0, since each rank seeds its augmentation by rank and so starts from its own weights.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/ema.py
"""

import argparse
import copy
import os

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--ema-decay", type=float, default=0.99)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed + dist.get_rank())  # each rank its own noise
torch.set_num_threads(1)

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
train = torch.utils.data.TensorDataset(features[:1280], labels[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(train, seed=args.seed)
loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
model_ema = copy.deepcopy(model)
model_ema.requires_grad_(False)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.5)
for tensor in (model_ema.state_dict()).values():
    dist.broadcast(tensor, src=0)
ddp_model = DDP(model)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/ema"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for data, target in loader:
        data = data + 0.01 * torch.randn_like(data)
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for ema_p, p in zip(model_ema.parameters(), model.parameters(), strict=True):
                ema_p.mul_(args.ema_decay).add_(p, alpha=1 - args.ema_decay)
        rec.step(loss, samples=len(data))
    with torch.no_grad():
        eval_loss = F.cross_entropy(model_ema(features[1280:]), labels[1280:]).item()
    rec.eval(eval_loss=eval_loss)
rec.close()
dist.barrier()
dist.destroy_process_group()
