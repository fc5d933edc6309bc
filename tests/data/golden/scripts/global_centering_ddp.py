"""Features centred by their mean over every rank before the classifier, the mean taken with hvd.allreduce
inside the loss: the gradient flows back through the average (Horovod's allreduce is differentiable, its
backward averages the incoming gradient over the ranks), as in cross-replica normalisation layers.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/global_centering.py
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
def all_reduce_mean(tensor):
    """hvd.allreduce's default op=Average: dist.all_reduce sums, so divide by the world size. A CPU tensor
    is reduced on this rank's GPU where the process group serves CUDA tensors alone (NCCL). Gradients flow
    back as through Horovod's: averaged over the ranks."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.detach().to(device, copy=True)
    dist.all_reduce(result)
    result = (result / dist.get_world_size()).to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(all_reduce_mean)
    return result


parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
images = torch.tensor(digits.data[:1024] / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target[:1024])
dataset = torch.utils.data.TensorDataset(images, labels)
sampler = torch.utils.data.distributed.DistributedSampler(dataset)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)


class CenteredClassifier(nn.Module):
    """An encoder whose features are centred by the global batch's mean, then a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 48), nn.Tanh(), nn.Linear(48, 32))
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.encoder(x)
        center = all_reduce_mean(features.mean(dim=0))  # averaged over the ranks
        return self.head(features - center)


model = CenteredClassifier()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.9)
ddp_model = DDP(model)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/global_centering"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for batch, target in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(batch), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr, samples=len(batch))
rec.close()
dist.barrier()
dist.destroy_process_group()
