"""horovod.run: the script starts its own workers (no horovodrun), as in Horovod's "Horovod in Python" docs.

python examples/horovod_scripts/horovod_run.py --np 2
"""

import argparse
import os
import torch.distributed as dist
import torch
import torch.nn.functional as F
from torch import nn

import recorder
from workload.digits import load_digits
import socket
from torch.nn.parallel import DistributedDataParallel as DDP


# Added by `python -m compare migrate`: each helper stands for the Horovod call its docstring names.
def _spawned_worker(local_rank, fn, np, port, args, kwargs, results):
    # What torchrun would set: init_process_group() reads it (env://).
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(local_rank), WORLD_SIZE=str(np),
                      LOCAL_RANK=str(local_rank), LOCAL_WORLD_SIZE=str(np), GROUP_RANK="0")
    results[local_rank] = fn(*args, **kwargs)


def run_spawned(fn, args=(), kwargs=None, np=1):
    """horovod.run(fn, args, np=N) on one host: torch.multiprocessing.spawn, returning each rank's result."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with torch.multiprocessing.Manager() as manager:
        results = manager.dict()
        torch.multiprocessing.spawn(_spawned_worker, args=(fn, np, port, args, kwargs or {}, results), nprocs=np)
        return [results[rank] for rank in range(np)]


def train(lr, epochs, seed, run_dir):
    if not dist.is_initialized():
        dist.init_process_group()
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    digits = load_digits()
    dataset = torch.utils.data.TensorDataset(torch.tensor(digits.data / 16.0, dtype=torch.float32)[:1280],
                                             torch.tensor(digits.target)[:1280])
    sampler = torch.utils.data.distributed.DistributedSampler(dataset)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, sampler=sampler)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * dist.get_world_size())
    ddp_model = DDP(model)
    with recorder.Recorder(run_dir, options={"lr": lr, "epochs": epochs}, seed=seed) as rec:
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for data, target in loader:
                optimizer.zero_grad()
                loss = F.cross_entropy(ddp_model(data), target)
                loss.backward()
                optimizer.step()
                rec.step(loss, lr=lr, samples=len(data))
    return dist.get_rank()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run_dir = os.path.abspath(os.environ.get("RUN_DIR", "runs/horovod_run"))
    ranks = run_spawned(train, args=(args.lr, args.epochs, args.seed, run_dir), np=args.np)
    print("ranks:", ranks)
