"""A contrastive (SimCLR-style) loss whose negatives come from every rank: each rank embeds two noisy views of
its batch, gathers the embeddings of all ranks with hvd.allgather (which passes gradients back to the rank
that made them) and scores each view against the whole global batch.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/contrastive_allgather.py
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
class _AllGatherCat(torch.autograd.Function):
    """hvd.allgather's autograd function. Forward: every rank's tensor concatenated along dimension 0,
    whose length may differ per rank (the lengths are gathered first, each tensor padded to the longest,
    gathered, and trimmed back). Backward, as Horovod's: the incoming gradient averaged over the ranks
    (torch.distributed.nn's all_gather sums it instead), then this rank's rows."""

    @staticmethod
    def forward(ctx, tensor):
        device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
        local = tensor.to(device).contiguous()
        length = torch.tensor([local.shape[0]], device=device)
        lengths = [torch.zeros_like(length) for _ in range(dist.get_world_size())]
        dist.all_gather(lengths, length)
        lengths = [int(n.item()) for n in lengths]
        padded = local.new_zeros((max(lengths), *local.shape[1:]))
        padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in lengths]
        dist.all_gather(parts, padded)
        ctx.rows = sum(lengths[: dist.get_rank()]), local.shape[0]
        return torch.cat([part[:n] for part, n in zip(parts, lengths)]).to(tensor.device)

    @staticmethod
    def backward(ctx, grad):
        device = "cuda" if grad.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else grad.device
        summed = grad.to(device, copy=True).contiguous()
        dist.all_reduce(summed)
        start, rows = ctx.rows
        return (summed.narrow(0, start, rows) / dist.get_world_size()).to(grad.device)


def all_gather_cat(tensor):
    """hvd.allgather: every rank's tensor concatenated along dimension 0 (each rank's length may differ),
    with gradients passed back to each rank's rows, averaged over the ranks, as Horovod does. Where no
    gradient is wanted (torch.no_grad(), a tensor that does not require one) autograd records nothing."""
    return _AllGatherCat.apply(tensor)


parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--temperature", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

features = torch.tensor(load_digits().data[:1024] / 16.0, dtype=torch.float32)
dataset = torch.utils.data.TensorDataset(features)
sampler = torch.utils.data.distributed.DistributedSampler(dataset)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

encoder = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
optimizer = torch.optim.SGD(encoder.parameters(), lr=args.lr)
ddp_encoder = DDP(encoder)


def nt_xent(z1, z2, temperature):
    """Each view's positive is the other view of the same sample; every other embedding of the global
    batch is a negative."""
    z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    all_z1, all_z2 = all_gather_cat(z1), all_gather_cat(z2)
    offset = dist.get_rank() * len(z1)  # 512 samples a rank: every batch is full, the same size on every rank
    targets = torch.arange(offset, offset + len(z1))
    logits_12 = z1 @ all_z2.t() / temperature
    logits_21 = z2 @ all_z1.t() / temperature
    return (F.cross_entropy(logits_12, targets) + F.cross_entropy(logits_21, targets)) / 2


noise = torch.Generator().manual_seed(args.seed + dist.get_rank())
rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/contrastive_allgather"), options=vars(args),
                        seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for (batch,) in loader:
        view1 = batch + 0.1 * torch.randn(batch.shape, generator=noise)
        view2 = batch + 0.1 * torch.randn(batch.shape, generator=noise)
        optimizer.zero_grad()
        loss = nt_xent(ddp_encoder(view1), ddp_encoder(view2), args.temperature)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr, samples=len(batch))
rec.close()
dist.barrier()
dist.destroy_process_group()
