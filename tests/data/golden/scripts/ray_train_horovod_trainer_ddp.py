"""A Horovod job on Ray Train's HorovodTrainer (Train V1; deprecated, and raising on Train V2), as its users
write it: a training function that takes its config, a per-worker shard of scikit-learn's digits
(DistributedSampler), `step N loss X` printed by rank 0, and the last loss reported to the driver.

    RAY_TRAIN_V2_ENABLED=0 python examples/platform_scripts/ray_train_horovod_trainer.py
    python -m compare migrate examples/platform_scripts/ray_train_horovod_trainer.py --verify   # -> TorchTrainer
"""

import argparse

import ray
import ray.train
import torch
import torch.nn.functional as F
from ray.train import ScalingConfig
from torch import nn

from workload.digits import load_digits
import ray.train.torch
from ray.train.torch import TorchConfig, TorchTrainer


def train_func(config):
    torch.manual_seed(config["seed"])
    torch.set_num_threads(1)
    digits = load_digits()
    dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                             torch.tensor(digits.target)[:1280])
    sampler = torch.utils.data.distributed.DistributedSampler(dataset)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, sampler=sampler)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"] * ray.train.get_context().get_world_size())
    ddp_model = ray.train.torch.prepare_model(model)
    for epoch in range(config["epochs"]):
        sampler.set_epoch(epoch)
        for batch, (data, target) in enumerate(loader):
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp_model(data), target)
            loss.backward()
            optimizer.step()
            if ray.train.get_context().get_world_rank() == 0:
                print(f"step {epoch * len(loader) + batch + 1} loss {loss.item():.6f}", flush=True)
        ray.train.report({"epoch": epoch, "loss": loss.item()})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    ray.init(num_cpus=args.num_workers + 1)  # a local Ray: a CPU for each worker, and one for the trainer
    trainer = TorchTrainer(train_func, train_loop_config={"lr": args.lr, "epochs": args.epochs, "seed": 0},
                           scaling_config=ScalingConfig(num_workers=args.num_workers, use_gpu=False),
                           torch_config=TorchConfig())
    result = trainer.fit()
    print("last report:", result.metrics)
    ray.shutdown()
