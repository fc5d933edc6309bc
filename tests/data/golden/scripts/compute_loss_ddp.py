"""A model that computes its own loss, as many research scripts have it: the training loop calls
`model.compute_loss(batch)` rather than `model(x)`, with Horovod averaging the gradients in its optimizer.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/compute_loss.py
"""

import argparse
import os

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits


# Added by `python -m compare migrate`: each helper stands for the Horovod call its docstring names.
def average_gradients_at_step(optimizer, op=dist.ReduceOp.SUM, average=True, compression=None):
    """hvd.DistributedOptimizer where no DistributedDataParallel can be made that the caller trains through (the
    model is another module's, or a function's argument): before each step(), every gradient the optimizer
    updates is summed over the ranks and divided by their number, as Horovod's allreduce does (without DDP's
    overlap of communication with backward). As Horovod's synchronize(): every parameter that requires a
    gradient, in the optimizer's order on every rank, a zero where this rank's backward() gave it none, so that
    ranks that used other parameters still make the same collectives. compression: None, or DDP's
    fp16_compress_hook where Horovod had Compression.fp16: as Horovod's, each gradient travels as float16, is
    summed and divided there, and is cast back."""
    if compression is not None and getattr(compression, "__name__", None) != "fp16_compress_hook":
        raise TypeError(f"average_gradients_at_step: compression is fp16_compress_hook or None, not {compression!r}")

    def average_gradients(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                if not parameter.requires_grad:
                    continue
                if parameter.grad is None:
                    parameter.grad = torch.zeros_like(parameter)
                wire = parameter.grad if compression is None else parameter.grad.to(torch.float16)
                dist.all_reduce(wire, op=op)
                if average:
                    wire.div_(dist.get_world_size())
                if wire is not parameter.grad:
                    parameter.grad.copy_(wire)
    optimizer.register_step_pre_hook(average_gradients)
    return optimizer


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.body(x))

    def compute_loss(self, batch):
        data, target = batch
        return F.cross_entropy(self(data), target)


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

digits = load_digits()
dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                         torch.tensor(digits.target)[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(dataset)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = Classifier()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.5)
for tensor in (model.state_dict()).values():
    dist.broadcast(tensor, src=0)
optimizer = average_gradients_at_step(optimizer)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/compute_loss"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    sampler.set_epoch(epoch)
    for batch in loader:
        optimizer.zero_grad()
        loss = model.compute_loss(batch)
        loss.backward()
        optimizer.step()
        rec.step(loss, samples=len(batch[0]))
rec.close()
dist.barrier()
dist.destroy_process_group()
