"""What the bare loops share: the project's data and model, the step they time, and how they report.

The bare loops do not use workload/trainer.py on purpose: they are the least a framework's own tutorial
writes, so that the project's loop can be timed against them. They take the same workload, batch size,
threads and seed as the project, and run one or more configurations ("blocks" of steps, interleaved in
rounds) in one process, so that a configuration is compared with its neighbours on the same machine state.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, DistributedSampler

from workload.backend import Backend
from workload.files import write_json_atomic
from workload.options import Options, parse_options
from workload.trainer import Trainer, seed_everything
from workload.workloads import WORKLOADS

# A configuration is a dict: "name", "threads", framework knobs (DDP: bucket_cap_mb, gradient_as_bucket_view;
# Horovod: fusion_threshold_mb, cycle_time_ms), and "mode", what one timed step is:
#   train      the training step with the framework's gradient averaging (the default)
#   nocomm     the same step on an unwrapped model with a plain optimizer: compute alone
#   synced     nocomm followed by an allreduce of one number: compute plus what waiting for the other
#              ranks costs (their skew, the wake-up, Horovod's cycle), with no bytes to move
#   allreduce  one allreduce of "elements" float32 numbers (default: the gradients' count), nothing else
#   phases     the training step with its phases timed (phase_steps): data, compute, exposed communication
#              (the wait for the averaged gradients), optimizer
#   project    the project's own step, Trainer._train_step of workload/trainer.py, on the implementation's
#              backend (hvd_impl / native_impl), in the same process as the bare step
DEFAULT_CONFIGS = '[{"name": "default"}]'


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workload", default="mlp", help="a built-in workload or a plug-in (MODULE:FUNCTION)")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per worker per step")
    parser.add_argument("--dataset-size", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker (a config may override)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=200, help="timed steps per block")
    parser.add_argument("--block-warmup", type=int, default=2, help="untimed steps at the start of each block")
    parser.add_argument("--rounds", type=int, default=1, help="blocks per configuration, interleaved")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="JSON list of configurations")
    parser.add_argument("--out", type=Path, required=True, help="JSON result file (written by rank 0)")
    args = parser.parse_args()
    args.configs = json.loads(args.configs)
    return args


def make_model(args: argparse.Namespace) -> tuple[nn.Module, DataLoader, float]:
    """The project's model and training set for this workload, seeded as the project seeds them."""
    seed_everything(args.seed)
    spec = WORKLOADS[args.workload]
    data = spec.make_data(args.dataset_size, None)
    return spec.make_model(data), data.train, spec.lr


def batch_stream(train, batch_size: int, world_size: int, rank: int, seed: int) -> Iterator:
    """Endless batches of this rank's shard, epoch after epoch, as DistributedSampler deals them."""
    sampler = DistributedSampler(train, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True)
    loader = DataLoader(train, batch_size=batch_size, sampler=sampler, drop_last=True)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterator, steps: int) -> list[float]:
    """The bare step, timed as the project times its step_time_s: from taking the batch to after step()."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        x, y = next(batches)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, -2), y.flatten())
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return times


def collective_steps(collective: Callable[[], object], steps: int) -> list[float]:
    """One blocking collective per "step": the communication floor for the gradient's size."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        collective()
        times.append(time.perf_counter() - start)
    return times


def synced_steps(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterator, steps: int,
                 collective: Callable[[], object]) -> list[float]:
    """The step without gradient communication, then one tiny collective: the ranks meet once per step."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        train_steps(model, optimizer, batches, 1)
        collective()
        times.append(time.perf_counter() - start)
    return times


PHASES = ("data_s", "compute_s", "exposed_s", "optimizer_s")


def phase_steps(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterator, steps: int,
                phases: list[list[float]], handed_over: Callable[[], float | None], wait: Callable[[], object],
                step: Callable[[], object]) -> list[float]:
    """The training step, timed phase by phase: data; compute (zero_grad, forward and backward up to the
    moment the last gradients are handed to communication: `handed_over()`, or the end of backward);
    exposed communication (from then until the averaged gradients are there: the rest of backward under
    DDP, `wait()` under Horovod); optimizer (`step()`)."""
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        x, y = next(batches)
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, -2), y.flatten())
        loss.backward()
        t2 = time.perf_counter()
        wait()
        t3 = time.perf_counter()
        step()
        t4 = time.perf_counter()
        handed = handed_over()
        handed = handed if handed is not None and t1 <= handed <= t2 else t2
        phases.append([t1 - t0, handed - t1, t3 - handed, t4 - t3])
        times.append(t4 - t0)
    return times


def project_options(args: argparse.Namespace, out: Path) -> Options:
    argv = ["--workload", args.workload, "--batch-size", str(args.batch_size), "--threads", str(args.threads),
            "--seed", str(args.seed), "--out", str(out)]
    if args.dataset_size:
        argv += ["--dataset-size", str(args.dataset_size)]
    return parse_options(argv, "benchmarks", "")[0]


def project_steps(backend: Backend, args: argparse.Namespace, batches: Iterator) -> Callable[[int], list[float]]:
    """The project's step on the same batches, timed around the call as train_steps times the bare step.
    The Trainer is set up at the first call, so that its set-up stays out of the bare loop's start-up."""
    trainers: list[Trainer] = []

    def run(steps: int) -> list[float]:
        if not trainers:
            trainers.append(Trainer(project_options(args, args.out.parent / "project"), backend, args.seed))
            trainers[0].setup()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            trainers[0]._train_step([batches])
            times.append(time.perf_counter() - start)
        return times

    return run


def gradient_numel(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def fresh_copy(model: nn.Module) -> nn.Module:
    """Every configuration trains its own copy of the same initial model: a framework's gradient hooks
    stay attached to the parameters they were registered on."""
    return copy.deepcopy(model)


def round_order(count: int, rounds: int) -> list[int]:
    """A B C, C B A, A B C, ...: each configuration runs early and late alike, so drift cancels out."""
    order = []
    for r in range(rounds):
        indices = list(range(count))
        order += indices if r % 2 == 0 else indices[::-1]
    return order


def write_result(out: Path, meta: dict, configs: list[dict], order: list[int], block_times: list[list[float]],
                 block_phases: list[list[list[float]]], reduce: Callable[[torch.Tensor, str], torch.Tensor],
                 rank: int, world_size: int) -> None:
    """Per configuration, its blocks' step times, each the slowest rank's (as the project records them),
    and for the "phases" probe the phases of the slowest rank in that step (the one whose time is the
    step's). Every rank calls this (the reductions are collectives); rank 0 writes."""
    times = reduce(torch.tensor(block_times, dtype=torch.float64), "max").tolist()
    mine = torch.tensor(block_phases, dtype=torch.float64)  # blocks x steps x phases
    every = torch.zeros(world_size, *mine.shape, dtype=torch.float64)
    every[rank] = mine
    every = reduce(every, "sum")
    if rank != 0:
        return
    # A step's time is the slowest rank's, so the step decomposed is that rank's: its phases add up to it.
    slowest = every.sum(dim=-1).argmax(dim=0)  # blocks x steps
    phases = every.gather(0, slowest[None, ..., None].expand(1, *mine.shape))[0].tolist()
    result = {**meta, "phase_names": list(PHASES), "configs": [{**config, "blocks": []} for config in configs]}
    for index, block, block_phase in zip(order, times, phases, strict=True):
        result["configs"][index]["blocks"].append([round(t, 7) for t in block])
        if configs[index].get("mode") == "phases":
            rounded = [[round(t, 7) for t in step] for step in block_phase]
            result["configs"][index].setdefault("phase_blocks", []).append(rounded)
    write_json_atomic(out, result)


def run_blocks(args: argparse.Namespace, runners: list[Callable[[int], list[float]]], phases: list[list[list[float]]],
               ) -> tuple[list[int], list[list[float]], list[list[list[float]]], float, float]:
    """Every configuration's blocks in interleaved order. `phases[i]` is where runner i records its steps'
    phases (it stays empty for all but the "phases" probe)."""
    order = round_order(len(args.configs), args.rounds)
    block_times, block_phases = [], []
    first_step_unix = time.time()
    started = time.perf_counter()
    for index in order:
        torch.set_num_threads(args.configs[index].get("threads", args.threads))
        runners[index](args.block_warmup)
        phases[index].clear()
        block_times.append(runners[index](args.steps))
        block_phases.append(list(phases[index]) or [[0.0] * len(PHASES)] * args.steps)
    return order, block_times, block_phases, first_step_unix, time.perf_counter() - started
