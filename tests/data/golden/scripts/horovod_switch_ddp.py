"""A script that trains in one process, or data-parallel with Horovod when given --horovod: the pattern of
research code that added Horovod beside its single-GPU path. The final weights are saved from the model.

python examples/horovod_scripts/horovod_switch.py                    # one process
horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/horovod_switch.py --horovod
"""

import argparse
import os

import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--horovod", action="store_true", help="data-parallel training with Horovod")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

rank, world_size = 0, 1
if args.horovod:
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group()
    rank, world_size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(args.seed)
torch.set_num_threads(1)
run_dir = os.environ.get("RUN_DIR", "runs/horovod_switch")

digits = load_digits()
dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                         torch.tensor(digits.target)[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=world_size, rank=rank)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * world_size, momentum=0.5)
ddp_model = model
if args.horovod:
    ddp_model = DDP(model)

rec = recorder.Recorder(run_dir, options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, samples=len(data))
if rank == 0:
    torch.save(model.state_dict(), os.path.join(run_dir, "model.pt"))
rec.close()
