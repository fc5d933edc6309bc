"""Evaluation over the whole test set by gathering per-sample results with hvd.allgather, as in evaluation
code that needs every prediction at once (AUC, confusion matrices, retrieval): each rank scores its own
strided shard of a test set that the ranks do not divide evenly, so the shards differ in length.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/uneven_allgather.py
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
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--test-size", type=int, default=301)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
train_dataset = torch.utils.data.TensorDataset(features[:1280], labels[:1280])
train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)
# No DistributedSampler for the test set: it would pad the shards with repeated samples and skew the metric.
test_indices = torch.arange(1280, 1280 + args.test_size)[dist.get_rank()::dist.get_world_size()]
test_features, test_labels = features[test_indices], labels[test_indices]

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.5)
ddp_model = DDP(model)


def evaluate():
    model.eval()
    with torch.no_grad():
        output = model(test_features)
        losses = F.cross_entropy(output, test_labels, reduction="none")
        predictions = output.argmax(1)
    # Every rank's per-sample results, in rank order: the metrics are over the whole test set.
    all_losses = all_gather_cat(losses)
    all_correct = all_gather_cat((predictions == test_labels).float())
    return all_losses.mean().item(), all_correct.mean().item(), len(all_losses)


rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/uneven_allgather"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr * dist.get_world_size(), samples=len(data))
    eval_loss, eval_accuracy, count = evaluate()
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: test loss {eval_loss:.4f}, accuracy {eval_accuracy:.4f} over {count} samples")
    rec.eval(eval_loss=eval_loss, eval_accuracy=eval_accuracy)
rec.close()
dist.barrier()
dist.destroy_process_group()
