"""Metrics reduced through the script's own wrappers around hvd.allreduce, as training code often does: one
wrapper keeps Horovod's old `average` flag, another passes an `op` through. The counts are summed
(average=False, op=hvd.Sum), the losses averaged.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/sum_through_wrapper.py
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
def all_reduce_average_or_op(tensor, average=None, op=None, in_place=False):
    """hvd.allreduce(tensor, average=..., op=...) (in_place: hvd.allreduce_) where the reduction is known
    only at run time, resolved as Horovod resolves it: op if given (with average too: ValueError, as
    Horovod), else a sum for average=False, else the mean. Horovod's Average is dist.ReduceOp.AVG here,
    its Sum/Min/Max/Product dist.ReduceOp's. A CPU tensor is reduced on this rank's GPU where the process
    group serves CUDA tensors alone (NCCL). Not in place, gradients flow back as through Horovod's: the
    gradient reduced the same way."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if op is None:
        op = dist.ReduceOp.AVG if average is None or average else dist.ReduceOp.SUM
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.to(device) if in_place else tensor.detach().to(device, copy=True)
    dist.all_reduce(result, op=dist.ReduceOp.SUM if op == dist.ReduceOp.AVG else op)
    if op == dist.ReduceOp.AVG:
        result = result.div_(dist.get_world_size()) if in_place else result / dist.get_world_size()
    if in_place:
        return tensor.copy_(result) if result is not tensor else result
    result = result.to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(lambda grad: all_reduce_average_or_op(grad, average, op))
    return result


parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()


def allreduce(value, average=True):
    """A Python number reduced over the workers (averaged unless average=False)."""
    return all_reduce_average_or_op(torch.tensor(value, dtype=torch.float64), average=average).item()


def reduce_tensor(tensor, op=dist.ReduceOp.AVG):
    return all_reduce_average_or_op(tensor.detach(), op=op)


if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
train_dataset = torch.utils.data.TensorDataset(features[:1280], labels[:1280])
test_dataset = torch.utils.data.TensorDataset(features[1280:1792], labels[1280:1792])
train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)
test_sampler = torch.utils.data.distributed.DistributedSampler(test_dataset, shuffle=False)
test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=64, sampler=test_sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.5)
ddp_model = DDP(model)


def test():
    model.eval()
    correct, loss_sum = 0.0, 0.0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            loss_sum += F.cross_entropy(output, target, reduction="sum").item()
            correct += (output.argmax(1) == target).sum().item()
    # Counts are summed over the workers, then divided by the whole test set's size.
    accuracy = allreduce(correct, average=False) / len(test_dataset)
    mean_loss = allreduce(loss_sum / len(test_sampler))
    return mean_loss, accuracy


rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/sum_through_wrapper"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    seen = torch.zeros(())
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        seen += len(data)
        rec.step(reduce_tensor(loss), lr=args.lr * dist.get_world_size(), samples=len(data))
    samples = reduce_tensor(seen, op=dist.ReduceOp.SUM).item()
    eval_loss, eval_accuracy = test()
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: {samples:.0f} samples, test loss {eval_loss:.4f}, accuracy {eval_accuracy:.4f}")
    rec.eval(eval_loss=eval_loss, eval_accuracy=eval_accuracy, samples_seen=samples)
rec.close()
dist.barrier()
dist.destroy_process_group()
