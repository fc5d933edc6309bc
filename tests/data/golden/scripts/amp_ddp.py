"""Mixed precision with Horovod: autocast, and with a GradScaler the synchronize / unscale_ / skip_synchronize
sequence of Horovod's documentation (the scaler is enabled on CUDA; on CPU autocast runs bfloat16 unscaled).

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/amp.py
"""

import argparse
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
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)
device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cuda":
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))

digits = load_digits()
dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                         torch.tensor(digits.target)[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(dataset)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
ddp_model = DDP(model)
scaler = torch.amp.GradScaler(device, enabled=device == "cuda")
amp_dtype = torch.float16 if device == "cuda" else torch.bfloat16

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/amp"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for data, target in loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        with torch.autocast(device, dtype=amp_dtype):
            loss = F.cross_entropy(ddp_model(data), target)
        scaler.scale(loss).backward()
        # Horovod: make sure all async allreduces are done before unscaling.
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        rec.step(loss.float(), lr=args.lr, samples=len(data))
rec.close()
dist.barrier()
dist.destroy_process_group()
