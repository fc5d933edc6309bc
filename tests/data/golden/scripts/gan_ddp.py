"""A small GAN with Horovod, in the shape of DCGAN training scripts: a generator and a discriminator, each with
its own optimizer, each optimizer wrapped in hvd.DistributedOptimizer, and both models broadcast from rank 0.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/gan.py
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


parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.0002)
parser.add_argument("--nz", type=int, default=16, help="size of the latent vector")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
real_images = torch.tensor(digits.data / 8.0 - 1.0, dtype=torch.float32)
dataset = torch.utils.data.TensorDataset(real_images[:1280])
sampler = torch.utils.data.distributed.DistributedSampler(dataset)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

netG = nn.Sequential(nn.Linear(args.nz, 32), nn.ReLU(), nn.Linear(32, 64), nn.Tanh())
netD = nn.Sequential(nn.Linear(64, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr * dist.get_world_size(), betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr * dist.get_world_size(), betas=(0.5, 0.999))

# Horovod: broadcast both models from rank 0, and average the gradients of each.
for tensor in (netG.state_dict()).values():
    dist.broadcast(tensor, src=0)
ddp_netD = DDP(netD)
optimizerG = average_gradients_at_step(optimizerG)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/gan"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for i, (real,) in enumerate(loader):
        ones = torch.ones(len(real), 1)
        zeros = torch.zeros(len(real), 1)
        # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
        optimizerD.zero_grad()
        noise = torch.randn(len(real), args.nz)
        fake = netG(noise)
        errD = (F.binary_cross_entropy_with_logits(ddp_netD(real), ones)
                + F.binary_cross_entropy_with_logits(ddp_netD(fake.detach()), zeros))
        errD.backward()
        optimizerD.step()
        # (2) update G: maximize log(D(G(z)))
        optimizerG.zero_grad()
        errG = F.binary_cross_entropy_with_logits(ddp_netD(fake), ones)
        errG.backward()
        optimizerG.step()
        rec.step(errG, loss_d=errD.item(), samples=len(real))
        if i % 10 == 0 and dist.get_rank() == 0:
            print(f"[{epoch}][{i}/{len(loader)}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f}")
rec.close()
dist.barrier()
dist.destroy_process_group()
