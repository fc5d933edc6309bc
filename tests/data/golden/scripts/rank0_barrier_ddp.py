"""Rank 0 evaluates and writes the checkpoint while the other ranks wait for it, as training scripts often do:
a collective used as a barrier, but called inside `if hvd.rank() == 0:` only.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/rank0_barrier.py
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


# Added by `python -m compare migrate`: each helper stands for the Horovod call its docstring names.
def broadcast_copy(tensor, src):
    """hvd.broadcast: a copy of rank src's tensor (dist.broadcast overwrites its argument in place). A CPU
    tensor travels through this rank's GPU where the process group serves CUDA tensors alone (NCCL)."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.to(device, copy=True)
    dist.broadcast(result, src=src)
    return result.to(tensor.device)


parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)
run_dir = os.environ.get("RUN_DIR", "runs/rank0_barrier")

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
train = torch.utils.data.TensorDataset(features[:1280], labels[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(train)
loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.5)
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
    if dist.get_rank() == 0:
        with torch.no_grad():
            accuracy = (model(features[1280:]).argmax(1) == labels[1280:]).float().mean().item()
        print(f"epoch {epoch}: held-out accuracy {accuracy:.3f}")
        torch.save(model.state_dict(), os.path.join(run_dir, f"checkpoint-{epoch}.pt"))
        # let the other ranks go on once the checkpoint is written
        broadcast_copy(torch.tensor(epoch), 0)
rec.close()
dist.barrier()
dist.destroy_process_group()
