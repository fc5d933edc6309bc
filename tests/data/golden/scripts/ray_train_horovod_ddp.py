"""A Horovod job that Ray starts, written as Horovod-on-Ray users write it: horovod.ray's RayExecutor runs one
training function on each worker of a local Ray; each worker trains on its shard of scikit-learn's digits
(DistributedSampler), rank 0 prints `step N loss X`, and every worker returns its metrics to the driver.

    python examples/platform_scripts/ray_train_horovod.py --num-workers 2
    python -m compare migrate examples/platform_scripts/ray_train_horovod.py --verify   # -> Ray Train's TorchTrainer
"""

import argparse

import ray
import torch
import torch.nn.functional as F
from torch import nn

from workload.digits import load_digits
import ray.train
import ray.train.torch
import tempfile
from ray.train import ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer


# Added by `python -m compare migrate`: each helper stands for the Horovod call its docstring names.
def train_loop_calling(fn):
    """RayExecutor.run(fn, args, kwargs): TorchTrainer's loop takes one config dict, so this loop calls fn with
    config["args"] and config["kwargs"] on every worker and reports what it returns (rank 0's report is the
    Result's metrics, under "return")."""
    def train_loop_per_worker(config):
        value = fn(*config["args"], **config["kwargs"])
        # The Result's metrics are those reported with a checkpoint: rank 0 reports an empty one.
        with tempfile.TemporaryDirectory() as empty:
            rank_0 = ray.train.get_context().get_world_rank() == 0
            ray.train.report({"return": value}, checkpoint=ray.train.Checkpoint.from_directory(empty) if rank_0
                             else None)
    return train_loop_per_worker


def train_fn(lr, steps, seed, batch_size=32):
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    digits = load_digits()
    dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                             torch.tensor(digits.target)[:1280])
    # Horovod: each worker trains on its own shard.
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, seed=seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    # Horovod: scale the learning rate by the number of workers.
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * ray.train.get_context().get_world_size(), momentum=0.9)
    ddp_model = ray.train.torch.prepare_model(model)
    step, epoch = 0, 0
    while step < steps:
        sampler.set_epoch(epoch)
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp_model(data), target)
            loss.backward()
            optimizer.step()
            step += 1
            if ray.train.get_context().get_world_rank() == 0:
                print(f"step {step} loss {loss.item():.6f}", flush=True)
            if step == steps:
                break
        epoch += 1
    return {"rank": ray.train.get_context().get_world_rank(), "steps": step, "last_loss": loss.item()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ray.init(num_cpus=args.num_workers + 1)  # a local Ray: a CPU for each worker, and one to spare
    results = TorchTrainer(train_loop_calling(train_fn),
                           train_loop_config={"args": [args.lr, args.steps, args.seed], "kwargs": {}},
                           scaling_config=ScalingConfig(num_workers=args.num_workers,
                                                        use_gpu=False,
                                                        resources_per_worker={"CPU": 1}),
                           torch_config=TorchConfig(backend="gloo")).fit()
    print("rank 0 returned:", results.metrics["return"])
    ray.shutdown()
