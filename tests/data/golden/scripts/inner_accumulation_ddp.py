"""Several backward passes per optimizer step, in an inner loop over micro-batches: the loader hands out
--micro-batches micro-batches at once, each gets its own forward and backward(), and the optimizer steps
once after the loop. Horovod all-reduces only then (backward_passes_per_step). The last loader batch of an
epoch is short: one micro-batch.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/inner_accumulation.py --micro-batches 2
"""

import argparse
import math
import os

import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits
import contextlib
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser(description="digits, gradients accumulated over micro-batches (Horovod)")
parser.add_argument("--micro-batch", type=int, default=16, help="samples per forward and backward pass")
parser.add_argument("--micro-batches", type=int, default=2,
                    help="backward passes per optimizer step: the step's samples are --micro-batch times this")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01, help="for one process and one micro-batch per step")
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--seed", type=int, default=42)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
pixels = torch.tensor(digits.data / 16.0, dtype=torch.float32)
classes = torch.tensor(digits.target)
# 650 samples per rank at np 2: 20 loader batches of 32 and a last one of 10 (a single micro-batch).
train_set = torch.utils.data.TensorDataset(pixels[:1300], classes[:1300])
shards = torch.utils.data.distributed.DistributedSampler(train_set, seed=args.seed)
loader = torch.utils.data.DataLoader(train_set, batch_size=args.micro_batch * args.micro_batches, sampler=shards)

model = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))
# Each step sees micro-batches x processes times the samples of one micro-batch on one process.
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * args.micro_batches * dist.get_world_size(),
                            momentum=args.momentum)
ddp_model = DDP(model)

rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/inner_accumulation"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    shards.set_epoch(epoch)
    for step_in_epoch, (inputs, labels) in enumerate(loader):
        optimizer.zero_grad()
        backward_passes = math.ceil(len(inputs) / args.micro_batch)  # fewer in the short last batch
        step_loss = 0.0
        passes = range(0, len(inputs), args.micro_batch)
        for start in passes:
            stop = start + args.micro_batch
            micro_loss = F.cross_entropy(ddp_model(inputs[start:stop]), labels[start:stop]) / backward_passes
            with contextlib.nullcontext() if start == passes[-1] else ddp_model.no_sync():
                micro_loss.backward()  # adds to .grad: averaged over the processes once, after the last pass
            step_loss += micro_loss.item()
        optimizer.step()  # one update for all the passes
        rec.step(step_loss, lr=optimizer.param_groups[0]["lr"], samples=len(inputs))
        if dist.get_rank() == 0 and step_in_epoch % 10 == 0:
            print(f"epoch {epoch} step {step_in_epoch}: loss {step_loss:.6f}")
rec.close()
dist.barrier()
dist.destroy_process_group()
