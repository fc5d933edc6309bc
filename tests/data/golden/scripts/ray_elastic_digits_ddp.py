"""An elastic Horovod job on Ray: horovod.ray's ElasticRayExecutor keeps between --min-workers and --max-workers
workers alive, and the training loop is an `hvd.elastic.run` function over a `hvd.elastic.TorchState` that holds
the epoch and the batch, committed after every batch, so that a worker lost mid-epoch costs one batch and the
others carry on from the last commit at the new world size. scikit-learn's digits, a small MLP, CPU.

    python examples/horovod_scripts/ray_elastic_digits.py --min-workers 1 --max-workers 2 --nics lo

`compare migrate` rewrites the worker function for Ray Train's TorchTrainer and flags what has no counterpart
there (the elastic state and executor, Adasum, HOROVOD_RANK): tests/test_migrate_ray.py.
"""

import argparse
import os

import horovod.torch as hvd
import ray
import torch
import torch.nn.functional as F
from horovod.ray import ElasticRayExecutor
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from workload.digits import load_digits
import ray.train
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks


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


def average_gradients_at_step(optimizer, op=dist.ReduceOp.SUM, average=True, compression=None):
    """hvd.DistributedOptimizer where no DistributedDataParallel can be made that the caller trains through (the
    model is another module's, or a function's argument): before each step(), every gradient the optimizer
    updates is summed over the ranks and divided by their number, as Horovod's allreduce does (without DDP's
    overlap of communication with backward). As Horovod's synchronize(): every parameter that requires a
    gradient, in the optimizer's order on every rank, a zero where this rank's backward() gave it none, so that
    ranks that used other parameters still make the same collectives. compression: None, or DDP's
    fp16_compress_hook where Horovod had Compression.fp16: as Horovod's, each gradient travels as float16, is
    summed and divided there, and is cast back."""
    if compression is not None and getattr(compression, "__name__", None) != "fp16_compress_hook":
        raise TypeError(f"average_gradients_at_step: compression is fp16_compress_hook or None, not {compression!r}")

    def average_gradients(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                if not parameter.requires_grad:
                    continue
                if parameter.grad is None:
                    parameter.grad = torch.zeros_like(parameter)
                wire = parameter.grad if compression is None else parameter.grad.to(torch.float16)
                dist.all_reduce(wire, op=op)
                if average:
                    wire.div_(dist.get_world_size())
                if wire is not parameter.grad:
                    parameter.grad.copy_(wire)
    optimizer.register_step_pre_hook(average_gradients)
    return optimizer


def options():
    parser = argparse.ArgumentParser(description="elastic Horovod on Ray: an MLP on scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--adasum", action="store_true", help="combine gradients with Adasum instead of averaging")
    parser.add_argument("--fp16", action="store_true", help="send gradients as fp16")
    parser.add_argument("--min-workers", type=int, default=1)
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: start one here)")
    parser.add_argument("--nics", default=None,
                        help="network interfaces the workers talk over, comma-separated; on one host give lo (the "
                             "elastic driver otherwise waits for a second host to find the common ones)")
    return parser.parse_args()


def split_digits():
    digits = load_digits()
    pixels = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    classes = torch.tensor(digits.target)
    return TensorDataset(pixels[:1400], classes[:1400]), TensorDataset(pixels[1400:], classes[1400:])


def mean_over_workers(value, label):
    return all_reduce_mean(torch.tensor(value)).item()


def worker_job(opts):
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    tag = f"worker {os.environ.get('HOROVOD_RANK', '?')}"  # Ray interleaves every worker's lines
    train_set, held_out = split_digits()
    net = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10))

    def step_size():  # averaged gradients: the rate grows with the workers; Adasum scales its own
        return opts.lr if opts.adasum else opts.lr * ray.train.get_context().get_world_size()

    optimizer = torch.optim.SGD(net.parameters(), lr=step_size(), momentum=0.8)
    compression = default_hooks.fp16_compress_hook if opts.fp16 else None
    optimizer = average_gradients_at_step(optimizer, compression=compression)

    def on_reset():  # workers joined or left: the world size changed
        for group in optimizer.param_groups:
            group["lr"] = step_size()

    state = hvd.elastic.TorchState(net, optimizer, epoch=0, batch=0)
    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.epoch < opts.epochs:
            # made again after a reset: the shards follow the world size of the moment
            sampler = DistributedSampler(train_set)
            sampler.set_epoch(state.epoch)
            state.model.train()
            for index, (pixels, classes) in enumerate(DataLoader(train_set, batch_size=opts.batch_size,
                                                                 sampler=sampler)):
                if index < state.batch:
                    continue  # done before the last reset
                state.optimizer.zero_grad()
                loss = F.cross_entropy(state.model(pixels), classes)
                loss.backward()
                state.optimizer.step()
                state.batch = index + 1
                state.commit()
            print(f"{tag}: epoch {state.epoch} done, last loss {loss.item():.4f}", flush=True)
            state.epoch, state.batch = state.epoch + 1, 0

    train(state)
    net.eval()
    shard = DistributedSampler(held_out, shuffle=False)
    pixels, classes = held_out[list(shard)]
    with torch.no_grad():
        logits = net(pixels)
    accuracy = mean_over_workers((logits.argmax(1) == classes).float().mean().item(), "accuracy")
    held_out_loss = mean_over_workers(F.cross_entropy(logits, classes).item(), "loss")
    if ray.train.get_context().get_world_rank() == 0:
        print(f"held out: loss {held_out_loss:.4f}, accuracy {accuracy:.3f}", flush=True)
    return accuracy


if __name__ == "__main__":
    opts = options()
    ray.init(address=opts.ray_address)
    settings = ElasticRayExecutor.create_settings(min_num_proc=opts.min_workers, max_num_proc=opts.max_workers,
                                                  reset_limit=3, nics=set(opts.nics.split(",")) if opts.nics else None)
    executor = ElasticRayExecutor(settings, use_gpu=False, cpus_per_slot=1)
    executor.start()
    accuracies = executor.run(lambda: worker_job(opts))
    print(f"accuracy on the held-out digits: {accuracies[0]:.3f}")
