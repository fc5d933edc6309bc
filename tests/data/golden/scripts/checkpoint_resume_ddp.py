"""Checkpoint and resume with Horovod, as in Horovod's pytorch_imagenet_resnet50.py: rank 0 saves every
epoch; a resumed run loads on rank 0 after wrapping the optimizer, then broadcasts the model and the
optimizer state to every rank.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/checkpoint_resume.py --epochs 1
horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/checkpoint_resume.py --epochs 2 \
    --resume runs/checkpoint_resume/checkpoint-1.pt
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
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--resume", default=None, help="a checkpoint to resume from")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
run_dir = os.environ.get("RUN_DIR", "runs/checkpoint_resume")

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                         torch.tensor(digits.target)[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(dataset)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

# Horovod: rank 0 finds out where to resume and tells the others.
resume_from_epoch = 0
if args.resume and dist.get_rank() == 0:
    resume_from_epoch = torch.load(args.resume, weights_only=True)["epoch"]
resume_from_epoch = broadcast_copy(torch.tensor(resume_from_epoch), 0).item()

# Restore from a previous checkpoint, if any. Only rank 0 reads it; the broadcasts below share it.
if args.resume and dist.get_rank() == 0:
    checkpoint = torch.load(args.resume, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])

# Horovod: broadcast parameters & optimizer state.
ddp_model = DDP(model)
optimizer_state = [optimizer.state_dict()]
dist.broadcast_object_list(optimizer_state, src=0)
optimizer.load_state_dict(optimizer_state[0])


def save_checkpoint(epoch):
    if dist.get_rank() == 0:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
        torch.save(state, os.path.join(run_dir, f"checkpoint-{epoch}.pt"))


rec = recorder.Recorder(run_dir, options=vars(args), seed=args.seed)
for epoch in range(resume_from_epoch, args.epochs):
    sampler.set_epoch(epoch)
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr, samples=len(data))
    save_checkpoint(epoch + 1)
rec.close()
dist.barrier()
dist.destroy_process_group()
