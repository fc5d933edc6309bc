"""A script written for GPUs that also runs on CPU: the model and batches go to the local rank's GPU when
there is one, while the evaluation's counts are kept in CPU tensors (built from Python numbers) and summed
with hvd.allreduce(op=hvd.Sum), which Horovod accepts on either device. The same job under a process group
that serves CUDA tensors alone (NCCL) must move them.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/cpu_metrics_nccl.py
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
def all_reduce(tensor, op=dist.ReduceOp.SUM):
    """hvd.allreduce(op=Sum/Min/Max/Product), or average=False (a sum): a reduced copy (torch.distributed
    reduces in place). A CPU tensor is reduced on this rank's GPU where the process group serves CUDA
    tensors alone (NCCL; on GPUs also a group made with no backend named); Horovod took either. Gradients
    flow back through it as through Horovod's (HorovodAllreduce.backward): reduced over the ranks alike."""
    device = "cuda" if tensor.device.type == "cpu" and "cpu:" not in dist.get_backend_config() else tensor.device
    result = tensor.detach().to(device, copy=True)
    dist.all_reduce(result, op=op)
    result = result.to(tensor.device)
    if tensor.requires_grad and torch.is_grad_enabled():  # Horovod's backward: the gradient reduced alike
        result = tensor + (result - tensor).detach()
        result.register_hook(lambda grad: all_reduce(grad, op))
    return result


parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

if not dist.is_initialized():
    dist.init_process_group()
torch.manual_seed(args.seed)
torch.set_num_threads(1)
if torch.cuda.is_available():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    device = torch.device("cuda")
else:
    device = torch.device("cpu")

digits = load_digits()
features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
labels = torch.tensor(digits.target)
train_dataset = torch.utils.data.TensorDataset(features[:1280], labels[:1280])
test_dataset = torch.utils.data.TensorDataset(features[1280:1792], labels[1280:1792])
train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)
test_sampler = torch.utils.data.distributed.DistributedSampler(test_dataset, shuffle=False)
test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=64, sampler=test_sampler)

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.5)
ddp_model = DDP(model)


def evaluate():
    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data.to(device))
            loss_sum += F.cross_entropy(output, target.to(device), reduction="sum").item()
            correct += (output.argmax(1).cpu() == target).sum().item()
    # [correct, loss sum, samples] of this rank, summed over all: the means are over the whole test set.
    totals = all_reduce(torch.tensor([correct, loss_sum, len(test_sampler)], dtype=torch.float64), dist.ReduceOp.SUM)
    return (totals[1] / totals[2]).item(), (totals[0] / totals[2]).item()


rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/cpu_metrics_nccl"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data.to(device)), target.to(device))
        loss.backward()
        optimizer.step()
        rec.step(loss.item(), lr=args.lr * dist.get_world_size(), samples=len(data))
    eval_loss, eval_accuracy = evaluate()
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: test loss {eval_loss:.4f}, accuracy {eval_accuracy:.4f}")
    rec.eval(eval_loss=eval_loss, eval_accuracy=eval_accuracy)
rec.close()
dist.barrier()
dist.destroy_process_group()
