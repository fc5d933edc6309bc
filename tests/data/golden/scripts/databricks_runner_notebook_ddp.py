# Databricks notebook source
# MAGIC %md
# MAGIC # A tumour classifier trained with HorovodRunner
# MAGIC
# MAGIC A notebook exported as source (cells split by `COMMAND` lines), run as a job whose `--num-proc` parameter
# MAGIC says how many processes train. HorovodRunner reads the sign of `np`: below zero, that many processes on the
# MAGIC driver, as here with `np=-args.num_proc`; above zero, that many Spark tasks on the workers.
# MAGIC
# MAGIC `python -m compare migrate --verify` runs the training function under horovodrun where sparkdl is missing
# MAGIC (it ships with Databricks Runtime ML only), and its migration through TorchDistributor on a local Spark.

# COMMAND ----------

import argparse

from pyspark.sql import SparkSession
from pyspark.ml.torch.distributor import TorchDistributor
from torch.nn.parallel import DistributedDataParallel as DDP

# COMMAND ----------

# MAGIC %md
# MAGIC The training function is pickled and sent to every process, so it imports what it uses itself.


# COMMAND ----------

def fit_classifier(epochs=2, batch_size=16, base_lr=0.05, seed=3):
    import torch.distributed as dist
    import torch
    from sklearn.datasets import load_breast_cancer
    from torch import nn

    if not dist.is_initialized():
        dist.init_process_group()
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    features, labels = load_breast_cancer(return_X_y=True)
    x = torch.tensor(features, dtype=torch.float32)
    x = (x - x.mean(dim=0)) / x.std(dim=0)
    y = torch.tensor(labels, dtype=torch.float32).unsqueeze(1)
    table = torch.utils.data.TensorDataset(x[:512], y[:512])
    # every process trains on its own part of the table
    part = torch.utils.data.distributed.DistributedSampler(table, seed=seed)
    batches = torch.utils.data.DataLoader(table, batch_size=batch_size, sampler=part)
    net = nn.Sequential(nn.Linear(30, 16), nn.Tanh(), nn.Linear(16, 1))
    criterion = nn.BCEWithLogitsLoss()
    # more processes, larger global batch: the step size grows with them
    opt = torch.optim.Adam(net.parameters(), lr=base_lr * dist.get_world_size())
    ddp_net = DDP(net)
    done = 0
    for epoch in range(epochs):
        part.set_epoch(epoch)
        for inputs, targets in batches:
            opt.zero_grad()
            loss = criterion(ddp_net(inputs), targets)
            loss.backward()
            opt.step()
            done += 1
            if dist.get_rank() == 0:
                print(f"step {done}/{epochs * len(batches)} - loss: {loss.item():.6f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    # identical on every process once the gradients are averaged: whichever process's copy reaches the driver
    return {key: value.detach().clone() for key, value in net.state_dict().items()}


# COMMAND ----------

job = argparse.ArgumentParser(description="the job's parameters")
job.add_argument("--num-proc", type=int, default=2, help="processes on the driver")
job.add_argument("--epochs", type=int, default=2)
args, _ = job.parse_known_args()

spark = SparkSession.builder.appName("runner_notebook").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
runner_np = -args.num_proc
hr = TorchDistributor(num_processes=abs(runner_np), local_mode=runner_np < 0, use_gpu=False)
trained = hr.run(fit_classifier, epochs=args.epochs)

# COMMAND ----------

size = sum(value.numel() for value in trained.values())
norm = sum(float(value.norm()) ** 2 for value in trained.values()) ** 0.5
print(f"driver: {len(trained)} trained tensors, {size} numbers, norm {norm:.6f}")
