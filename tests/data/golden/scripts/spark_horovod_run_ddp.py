"""A Horovod job that Spark runs, as its users write it (Horovod's "Horovod in Spark" docs): a SparkSession, a
training function that horovod.spark.run starts in Spark tasks, each rank on its own shard of the data, rank 0
printing its loss, and the trained weights returned to the driver.

python examples/platform_scripts/spark_horovod_run.py --num-proc 2      # Spark on local[2], CPU
"""

import argparse

from pyspark.ml.torch.distributor import TorchDistributor
import torch.distributed as dist
import torch
import torch.nn.functional as F
from pyspark.sql import SparkSession
from torch import nn

from workload.digits import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP


def train(lr, epochs, batch_size, seed):
    if not dist.is_initialized():
        dist.init_process_group()
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    digits = load_digits()
    dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                             torch.tensor(digits.target)[:1280])
    # Horovod: each rank reads its own shard of the data.
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, seed=seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    # Horovod: scale the learning rate by the number of workers.
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * dist.get_world_size(), momentum=0.9)
    ddp_model = DDP(model)
    step = 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp_model(data), target)
            loss.backward()
            optimizer.step()
            step += 1
            if dist.get_rank() == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.6f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Horovod on Spark: a small classifier of scikit-learn's digits")
    parser.add_argument("--master", default="local[2]", help="the Spark master")
    parser.add_argument("--num-proc", type=int, default=2, help="Horovod processes (Spark tasks)")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    spark = (SparkSession.builder.master(args.master).appName("spark_horovod_run")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # Horovod: run the training function on num_proc Spark tasks; it returns each rank's result, rank 0's first.
    results = TorchDistributor(num_processes=args.num_proc, local_mode=False, use_gpu=False).run(
        train, args.lr, args.epochs, args.batch_size, args.seed)
    weights = results
    print(f"driver: rank 0's trained weights: {len(weights)} tensors, "
          f"{sum(t.numel() for t in weights.values())} numbers")
    spark.stop()
