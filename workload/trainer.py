"""The training loop both implementations share. Framework calls go through `Backend` only."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from workload import environment
from workload.backend import Backend
from workload.options import Options, UsageError
from workload.record import RunRecorder
from workload.workloads import WORKLOADS, loss_and_correct

# Per-step values gathered from every rank: the loss is averaged, the times take the slowest rank.
TIME_KEYS = ("step_time_s", "data_s", "forward_s", "backward_s", "optimizer_s")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_dir(options: Options, seed: int) -> Path:
    return options.out / f"seed-{seed}" if len(options.seeds) > 1 else options.out


def effective_lr(options: Options, world_size: int) -> float:
    scale = world_size if options.lr_scaling == "linear" else 1
    return options.resolved_lr() * scale


def make_optimizer(options: Options, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    if options.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=options.weight_decay)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=options.momentum,
                           weight_decay=options.weight_decay)


def make_warmup(optimizer: torch.optim.Optimizer, warmup_steps: int, world_size: int):
    """Goyal et al.'s gradual warm-up: from lr/world_size to lr over warmup_steps, then constant."""
    start = 1.0 / world_size

    def factor(step: int) -> float:
        if warmup_steps == 0 or step >= warmup_steps:
            return 1.0
        return start + (1.0 - start) * step / warmup_steps

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def inject_fault(options: Options, rank: int, step: int) -> None:
    """Fail as asked, once per job: a marker in --out keeps a restarted job from failing again."""
    if options.fail_at_step != step or options.fail_rank != rank:
        return
    marker = options.out / f".fault-injected-rank-{rank}"
    if marker.exists():
        return
    marker.write_text(f"{options.fail_mode} at step {step}\n")
    print(f"injecting fault: {options.fail_mode} on rank {rank} after step {step}", file=sys.stderr, flush=True)
    if options.fail_mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif options.fail_mode == "hang":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        os._exit(13)  # no clean-up, no goodbye to the other ranks: as a crash would


def steps_per_epoch(options: Options, train_samples: int, num_replicas: int) -> int:
    """As DistributedSampler(drop_last=True) and DataLoader(drop_last=True) count them."""
    return train_samples // num_replicas // options.batch_size


def planned_steps(options: Options, train_samples: int, num_replicas: int) -> int:
    per_epoch = steps_per_epoch(options, train_samples, num_replicas)
    if per_epoch == 0:
        raise UsageError(
            f"workload {options.workload!r} has {train_samples} training samples: {num_replicas} workers "
            f"x batch {options.batch_size} leaves no full batch per worker")
    total = options.epochs * per_epoch
    return min(total, options.steps) if options.steps is not None else total


@dataclass
class MetricBuffer:
    """Per-step values kept locally and reduced over ranks every few steps, not every step."""

    rows: list[list[float]] = field(default_factory=list)
    info: list[dict] = field(default_factory=list)

    def add(self, loss: float, times: dict[str, float], info: dict) -> None:
        self.rows.append([loss, *(times[key] for key in TIME_KEYS)])
        self.info.append(info)

    def drain(self, backend: Backend) -> list[dict]:
        if not self.rows:
            return []
        local = torch.tensor(self.rows, dtype=torch.float64)
        mean_loss = backend.allreduce(local[:, 0].contiguous(), "mean")
        slowest = backend.allreduce(local[:, 1:].contiguous(), "max")
        entries = []
        for i, info in enumerate(self.info):
            entry = {"kind": "step", **info, "loss": float(mean_loss[i])}
            entry.update({key: round(float(slowest[i, j]), 6) for j, key in enumerate(TIME_KEYS)})
            entries.append(entry)
        self.rows.clear()
        self.info.clear()
        return entries


class Trainer:
    """Owns one run (one seed): data, model, optimizer, the loop and the record."""

    def __init__(self, options: Options, backend: Backend, seed: int):
        self.options = options
        self.backend = backend
        self.seed = seed
        self.device = torch.device("cuda", backend.local_rank) if options.device == "cuda" else torch.device("cpu")
        self.recorder = RunRecorder(run_dir(options, seed), enabled=backend.rank == 0)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def setup(self) -> None:
        options, backend = self.options, self.backend
        seed_everything(self.seed)
        spec = WORKLOADS[options.workload]
        self.data = spec.make_data(options.dataset_size, options.text_dir)
        num_replicas, data_ranks = backend.data_shards()
        self.total_steps = planned_steps(options, len(self.data.train), num_replicas)
        self.data_world_size = num_replicas

        model = spec.make_model(self.data).to(self.device)
        self.lr = effective_lr(options, num_replicas)
        optimizer = make_optimizer(options, model, self.lr)
        backend.broadcast_initial_state(model, optimizer)
        self.raw_model = model  # evaluation runs on the bare module: no collective inside it
        self.model, self.optimizer = backend.wrap(model, optimizer)
        self.scheduler = make_warmup(self.optimizer, options.warmup_steps, num_replicas)

        data_seed = self.seed if options.data_seed is None else options.data_seed
        self.samplers = [
            DistributedSampler(self.data.train, num_replicas=num_replicas, rank=r, shuffle=True,
                               seed=data_seed, drop_last=True)
            for r in data_ranks
        ]
        self.loaders = [DataLoader(self.data.train, batch_size=options.batch_size, sampler=s, drop_last=True)
                        for s in self.samplers]
        self.steps_per_epoch = len(self.loaders[0])

    def record_meta(self) -> dict:
        options, backend = self.options, self.backend
        return {
            "framework": backend.framework,
            "launcher": backend.launcher,
            "backend": backend.comm_backend,
            "world_size": backend.size,
            "data_world_size": self.data_world_size,
            "seed": self.seed,
            "options": options.as_record(),
            "effective_lr": self.lr,
            "threads": torch.get_num_threads(),
            "device": str(self.device),
            "versions": {**environment.versions(), **backend.versions()},
            "host": environment.host_info(),
            "env": environment.tuning_env(),
            "data": {"train_samples": len(self.data.train), "test_samples": len(self.data.test),
                     "fingerprint": self.data.fingerprint()},
            "samples_per_step": options.batch_size * self.data_world_size,
            "planned_steps": self.total_steps,
        }

    def _next_batch(self, iterators) -> tuple[torch.Tensor, torch.Tensor]:
        # One process emulating several ranks concatenates their batches into the global batch.
        parts = [next(it) for it in iterators]
        x = torch.cat([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
        y = torch.cat([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def _train_step(self, iterators) -> tuple[float, dict[str, float]]:
        self._sync()
        t0 = time.perf_counter()
        x, y = self._next_batch(iterators)
        self._sync()
        t1 = time.perf_counter()
        self.optimizer.zero_grad()  # set_to_none, the default; Horovod takes no argument
        loss, _ = loss_and_correct(self.model(x), y)
        self._sync()
        t2 = time.perf_counter()
        loss.backward()
        self._sync()
        t3 = time.perf_counter()
        self.optimizer.step()
        self.scheduler.step()
        self._sync()
        t4 = time.perf_counter()
        times = {"step_time_s": t4 - t0, "data_s": t1 - t0, "forward_s": t2 - t1,
                 "backward_s": t3 - t2, "optimizer_s": t4 - t3}
        return loss.item(), times

    def _train_epoch(self, epoch: int, step: int, buffer: MetricBuffer) -> int:
        for sampler in self.samplers:
            sampler.set_epoch(epoch)
        iterators = [iter(loader) for loader in self.loaders]
        self.model.train()
        for _ in range(self.steps_per_epoch):
            if step >= self.total_steps:
                break
            lr = self.optimizer.param_groups[0]["lr"]
            loss, times = self._train_step(iterators)
            step += 1
            buffer.add(loss, times, {"step": step, "epoch": epoch, "lr": lr,
                                     "samples": step * self.options.batch_size * self.data_world_size})
            if step % self.options.log_every == 0 or step == self.total_steps:
                self._write(buffer.drain(self.backend))
            inject_fault(self.options, self.backend.rank, step)
        self._write(buffer.drain(self.backend))
        return step

    def _write(self, entries: list[dict]) -> None:
        for entry in entries:
            self.recorder.log(entry)
        self.recorder.flush()

    @torch.no_grad()
    def evaluate(self, epoch: int, step: int) -> dict:
        """Each rank evaluates every size-th test sample; sums are reduced, so the result is global."""
        self.raw_model.eval()
        test = self.data.test
        shard = TensorDataset(*(t[self.backend.rank::self.backend.size] for t in test.tensors))
        totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, count
        for x, y in DataLoader(shard, batch_size=256):
            x, y = x.to(self.device), y.to(self.device)
            loss, correct = loss_and_correct(self.raw_model(x), y)
            count = y.numel()
            totals += torch.tensor([loss.item() * count, float(correct), float(count)], dtype=torch.float64)
        totals = self.backend.allreduce(totals, "sum")
        self.raw_model.train()
        entry = {"kind": "eval", "step": step, "epoch": epoch, "eval_loss": float(totals[0] / totals[2]),
                 "eval_accuracy": float(totals[1] / totals[2]), "eval_samples": int(totals[2])}
        self._write([entry])
        return entry

    def train(self) -> Path:
        self.setup()
        self.recorder.start(self.record_meta())
        try:
            step, epoch, buffer = 0, 0, MetricBuffer()
            while step < self.total_steps:
                step = self._train_epoch(epoch, step, buffer)
                self.evaluate(epoch, step)
                epoch += 1
        except BaseException as exc:
            self.recorder.finish("failed", error=f"{type(exc).__name__}: {exc}".splitlines()[0], steps=step)
            raise
        self.recorder.finish("ok", steps=step)
        return self.recorder.out


def train(options: Options, backend: Backend) -> list[Path]:
    """Train once per seed in this one launch; returns the run directories."""
    torch.set_num_threads(options.threads)
    return [Trainer(options, backend, seed).train() for seed in options.seeds]


def run_with_backend(options: Options, start_backend: Callable[[Options], Backend]) -> list[Path]:
    """Start the framework, train every seed, shut the framework down."""
    backend = start_backend(options)
    try:
        run_dirs = train(options, backend)
    except BaseException:
        # The other ranks may be gone: their absence must not hide this error behind a second one.
        with contextlib.suppress(Exception):
            backend.shutdown()
        raise
    backend.shutdown()
    return run_dirs
