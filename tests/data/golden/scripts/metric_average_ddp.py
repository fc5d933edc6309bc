"""Metric averaging with Horovod, as in Horovod's pytorch_mnist.py: each rank evaluates its shard of the test
set and hvd.allreduce averages the metrics; the learning rate is scaled by hvd.size(); rank 0 prints.

horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_scripts/metric_average.py
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
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

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
# Horovod: scale learning rate by the number of workers.
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * dist.get_world_size(), momentum=0.5)
ddp_model = DDP(model)


def metric_average(val, name):
    tensor = torch.tensor(val)
    avg_tensor = all_reduce_mean(tensor)
    return avg_tensor.item()


def test():
    model.eval()
    test_loss = 0.0
    test_accuracy = 0.0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.cross_entropy(output, target, reduction="sum").item()
            test_accuracy += (output.argmax(1) == target).float().sum().item()
    test_loss /= len(test_sampler)
    test_accuracy /= len(test_sampler)
    # Horovod: average metric values across workers.
    test_loss = metric_average(test_loss, "avg_loss")
    test_accuracy = metric_average(test_accuracy, "avg_accuracy")
    if dist.get_rank() == 0:
        print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {100.0 * test_accuracy:.2f}%")
    return test_loss, test_accuracy


rec = recorder.Recorder(os.environ.get("RUN_DIR", "runs/metric_average"), options=vars(args), seed=args.seed)
for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        rec.step(loss, lr=args.lr * dist.get_world_size(), samples=len(data))
    eval_loss, eval_accuracy = test()
    rec.eval(eval_loss=eval_loss, eval_accuracy=eval_accuracy)
rec.close()
dist.barrier()
dist.destroy_process_group()
