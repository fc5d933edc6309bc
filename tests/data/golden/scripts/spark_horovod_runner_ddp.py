"""A Databricks job with HorovodRunner, as Databricks' "HorovodRunner" docs write it: the imports inside the
training function (HorovodRunner pickles it and runs it in every process), each rank on its own shard of the
data, rank 0 printing its loss, and the trained weights back on the driver. np=-2: two processes on the driver.

sparkdl (Databricks Runtime ML up to 15.4) is not installable elsewhere: `python -m compare migrate --verify`
runs this training function under horovodrun, as HorovodRunner would, and its migration through TorchDistributor.
"""

from pyspark.sql import SparkSession
from pyspark.ml.torch.distributor import TorchDistributor
from torch.nn.parallel import DistributedDataParallel as DDP


def train_hvd(learning_rate=0.02, epochs=2, batch_size=32, seed=0):
    import torch.distributed as dist
    import torch
    import torch.nn.functional as F
    from torch import nn

    from workload.digits import load_digits

    if not dist.is_initialized():
        dist.init_process_group()
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    digits = load_digits()
    train_dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                                   torch.tensor(digits.target)[:1280])
    # Horovod: each rank reads its own shard of the data.
    train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset, seed=seed)
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=batch_size, sampler=train_sampler)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    # Horovod: the learning rate grows with the number of workers.
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate * dist.get_world_size(), momentum=0.9)
    ddp_model = DDP(model)
    step = 0
    for epoch in range(epochs):
        train_sampler.set_epoch(epoch)
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = F.nll_loss(F.log_softmax(ddp_model(data), dim=1), target)
            loss.backward()
            optimizer.step()
            step += 1
            if dist.get_rank() == 0:
                print(f"Step {step} | loss {loss.item():.6f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    # The weights are the same on every rank (Horovod averages the gradients): whichever rank's reach the driver.
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


if __name__ == "__main__":
    spark = SparkSession.builder.appName("spark_horovod_runner").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    hr = TorchDistributor(num_processes=2, local_mode=True, use_gpu=False)
    weights = hr.run(train_hvd, learning_rate=0.02, epochs=2)
    norm = sum(float(t.norm()) ** 2 for t in weights.values()) ** 0.5
    print(f"driver: the trained weights: {len(weights)} tensors, norm {norm:.6f}")
