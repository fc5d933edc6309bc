"""horovod.run: the script starts its own workers (no horovodrun), as in Horovod's "Horovod in Python" docs.

python examples/horovod_scripts/horovod_run.py --np 2
"""

import argparse
import os

import horovod
import horovod.torch as hvd
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits


def train(lr, epochs, seed, run_dir):
    hvd.init()
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    digits = load_digits()
    dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                             torch.tensor(digits.target)[:1280])
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, sampler=sampler)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * hvd.size())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    with recorder.Recorder(run_dir, options={"lr": lr, "epochs": epochs}, seed=seed) as rec:
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for data, target in loader:
                optimizer.zero_grad()
                loss = F.cross_entropy(model(data), target)
                loss.backward()
                optimizer.step()
                rec.step(loss, lr=lr, samples=len(data))
    return hvd.rank()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run_dir = os.path.abspath(os.environ.get("RUN_DIR", "runs/horovod_run"))
    ranks = horovod.run(train, args=(args.lr, args.epochs, args.seed, run_dir), np=args.np, use_gloo=True)
    print("ranks:", ranks)
