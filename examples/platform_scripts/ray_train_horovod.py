"""A Horovod job that Ray starts, written as Horovod-on-Ray users write it: horovod.ray's RayExecutor runs one
training function on each worker of a local Ray; each worker trains on its shard of scikit-learn's digits
(DistributedSampler), rank 0 prints `step N loss X`, and every worker returns its metrics to the driver.

    python examples/platform_scripts/ray_train_horovod.py --num-workers 2
    python -m compare migrate examples/platform_scripts/ray_train_horovod.py --verify   # -> Ray Train's TorchTrainer
"""

import argparse

import horovod.torch as hvd
import ray
import torch
import torch.nn.functional as F
from horovod.ray import RayExecutor
from torch import nn

from workload.digits import load_digits


def train_fn(lr, steps, seed, batch_size=32):
    hvd.init()
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    digits = load_digits()
    dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                             torch.tensor(digits.target)[:1280])
    # Horovod: each worker trains on its own shard.
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(),
                                                              seed=seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    # Horovod: scale the learning rate by the number of workers.
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    step, epoch = 0, 0
    while step < steps:
        sampler.set_epoch(epoch)
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            step += 1
            if hvd.rank() == 0:
                print(f"step {step} loss {loss.item():.6f}", flush=True)
            if step == steps:
                break
        epoch += 1
    return {"rank": hvd.rank(), "steps": step, "last_loss": loss.item()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ray.init(num_cpus=args.num_workers + 1)  # a local Ray: a CPU for each worker, and one to spare
    settings = RayExecutor.create_settings(timeout_s=60)
    executor = RayExecutor(settings, num_workers=args.num_workers, cpus_per_worker=1, use_gpu=False)
    executor.start()
    results = executor.run(train_fn, args=[args.lr, args.steps, args.seed])
    executor.shutdown()
    print("rank 0 returned:", results[0])
    ray.shutdown()
