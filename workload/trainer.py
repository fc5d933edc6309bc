"""The training loop both implementations share. Framework calls go through `Backend` only."""

from __future__ import annotations

import contextlib
import functools
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from workload import checkpoint, placement, record_format
from workload.backend import Backend
from workload.checkpoint import Position
from workload.errors import UsageError
from workload.faults import forget_earlier_job, inject_fault
from workload.options import Options
from workload.record import RunRecorder
from workload.record_format import seed_directory
from workload.step_plan import planned_steps, steps_per_epoch
from workload.workloads import load_workload, with_batch_norm

# Per-step values gathered from every rank: the loss is averaged, the times take the slowest rank.
TIME_KEYS = ("step_time_s", "data_s", "forward_s", "backward_s", "optimizer_s")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_dir(options: Options, seed: int) -> Path:
    return seed_directory(options.out, seed, options.seeds)


def effective_lr(options: Options, world_size: int) -> float:
    scale = world_size if options.lr_scaling == "linear" else 1
    return options.resolved_lr() * scale


def mlp_of_width(data, hidden: int) -> nn.Module:
    """The mlp workload's model with `hidden` units per layer (--hidden): its gradient grows as hidden squared."""
    (features,) = data.input_shape
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, data.num_classes))


def make_optimizer(options: Options, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    if options.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=options.weight_decay)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=options.momentum,
                           weight_decay=options.weight_decay)


@torch.no_grad()
def nudge_away_from_zero(model: nn.Module, ulps: int) -> None:
    """Move every parameter `ulps` floating-point steps away from zero: the smallest change to the initial
    state, known not to change the job; how its effect grows measures float chaos (calibration)."""
    for parameter in model.parameters():
        for _ in range(ulps):
            parameter.copy_(torch.nextafter(parameter, torch.where(parameter < 0, -torch.inf, torch.inf)))


def make_warmup(optimizer: torch.optim.Optimizer, warmup_steps: int, world_size: int,
                change_at_step: int | None = None, change_factor: float = 1.0):
    """Goyal et al.'s gradual warm-up: from lr/world_size to lr over warmup_steps, then constant; times
    change_factor from the update of step change_at_step on (--lr-change-at-step, for tests)."""
    start = 1.0 / world_size

    def factor(step: int) -> float:  # step: updates done so far, so update number step + 1 comes next
        changed = change_factor if change_at_step is not None and step + 1 >= change_at_step else 1.0
        if warmup_steps == 0 or step >= warmup_steps:
            return changed
        return changed * (start + (1.0 - start) * step / warmup_steps)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _nothing() -> None:
    """The CPU's wait for the device: none."""


def all_hosts(backend: Backend) -> list[str]:
    """Every rank's host name in rank order, gathered as fixed-width bytes (a collective)."""
    width = 64
    name = socket.gethostname().encode()[:width]
    mine = torch.zeros(1, width, dtype=torch.uint8)
    mine[0, : len(name)] = torch.tensor(list(name), dtype=torch.uint8)
    return [bytes(row.tolist()).rstrip(b"\0").decode(errors="replace") for row in backend.allgather(mine)]


@dataclass
class MetricBuffer:
    """Per-step values kept locally and reduced over ranks every few steps, not every step.

    Each step's loss is kept as its micro-batches' loss tensors and read at the drain, all steps' in one
    transfer: a read per step (.item()) would wait for the device every step and cost the timed step its
    call. Losses are summed with a count, so that ranks with fewer steps (uneven inputs) pad with zeros."""

    losses: list[list[torch.Tensor]] = field(default_factory=list)
    times: list[list[float]] = field(default_factory=list)
    info: list[dict] = field(default_factory=list)

    def add(self, losses: list[torch.Tensor], times: dict[str, float], info: dict) -> None:
        self.losses.append(losses)
        self.times.append([times[key] for key in TIME_KEYS])
        self.info.append(info)

    def _rows(self) -> list[list[float]]:
        """[loss, 1, times...] per step; a step's loss is its micro-batch losses over their count, summed in
        order in Python floats, as the step would have summed them."""
        values = iter(torch.stack([loss for step in self.losses for loss in step]).tolist() if self.losses else [])
        rows = []
        for losses, times in zip(self.losses, self.times, strict=True):
            loss = 0.0
            for _ in losses:
                loss += next(values) / len(losses)
            rows.append([loss, 1.0, *times])
        return rows

    def drain(self, backend: Backend, uneven: bool = False) -> list[dict]:
        rows = len(self.info)
        if uneven:
            rows = int(backend.allreduce(torch.tensor([rows], dtype=torch.float64), "max")[0])
        if rows == 0:
            return []
        local = torch.zeros(rows, 2 + len(TIME_KEYS), dtype=torch.float64)
        if self.info:
            local[: len(self.info)] = torch.tensor(self._rows(), dtype=torch.float64)
        # One collective per drain (each costs Horovod a negotiation cycle): gather, then reduce here.
        gathered = backend.allgather(local)
        if gathered.shape[0] != rows * backend.size:  # hvd.allgather takes any row counts; DDP's would fail
            raise RuntimeError(f"metric rows differ between ranks: {gathered.shape[0]} gathered, "
                               f"{rows} x {backend.size} expected")
        gathered = gathered.view(backend.size, rows, local.shape[1])
        sums = gathered[:, :, :2].sum(dim=0)
        slowest = gathered[:, :, 2:].amax(dim=0)
        entries = []
        for i, info in enumerate(self.info):
            entry = {"kind": "step", **info, "loss": float(sums[i, 0] / sums[i, 1])}
            entry.update({key: round(float(slowest[i, j]), 6) for j, key in enumerate(TIME_KEYS)})
            entries.append(entry)
        self.losses.clear()
        self.times.clear()
        self.info.clear()
        return entries


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite: the run is recorded as failed."""


class Trainer:
    """Owns one run (one seed): data, model, optimizer, the loop and the record."""

    def __init__(self, options: Options, backend: Backend, seed: int):
        self.options = options
        self.backend = backend
        self.seed = seed
        self.device = torch.device("cuda", backend.local_rank) if options.device == "cuda" else torch.device("cpu")
        self.out = run_dir(options, seed)
        self.recorder = RunRecorder(self.out, enabled=backend.rank == 0)
        self.start = Position(0, 0, 0)
        self.resume_path = options.resume
        if options.auto_resume and (self.out / "checkpoint.pt").exists():
            self.resume_path = self.out / "checkpoint.pt"
        # The wait for the device before each timer (the phase times), chosen once: the CPU has none.
        self._sync = functools.partial(torch.cuda.synchronize, self.device) if self.device.type == "cuda" else _nothing

    def setup(self) -> None:
        options, backend = self.options, self.backend
        seed_everything(self.seed)
        spec = self.workload = load_workload(options.workload)  # a built-in or a plug-in
        self.data = spec.make_data(options.dataset_size, options.text_dir)
        num_replicas = backend.data_shards()[0]
        self.total_steps = planned_steps(options, len(self.data.train), num_replicas)

        model = spec.make_model(self.data) if options.hidden is None else mlp_of_width(self.data, options.hidden)
        if options.perturb_init_ulps:
            nudge_away_from_zero(model, options.perturb_init_ulps)
        if options.sync_bn:
            model = backend.convert_sync_batchnorm(with_batch_norm(model))
        model = model.to(self.device)
        self.lr = effective_lr(options, num_replicas)
        optimizer = make_optimizer(options, model, self.lr)
        self.raw_model = model  # evaluation runs on the bare module: no collective inside it
        self.model, self.optimizer = backend.wrap(model, optimizer)
        # Load after wrapping, as Horovod's examples do: hvd.DistributedOptimizer builds a new optimizer
        # from the param groups, so state loaded into the inner one before would be lost.
        resumed = self._load_checkpoint(model, self.optimizer) if self.resume_path else None
        backend.broadcast_initial_state(model, self.optimizer)
        # Without warm-up or a change of rate the rate is constant: no scheduler, whose wrapper around
        # optimizer.step() would cost every step a call for nothing.
        constant = not options.warmup_steps and options.lr_change_at_step is None
        self.scheduler = None if constant else make_warmup(self.optimizer, options.warmup_steps, num_replicas,
                                                           options.lr_change_at_step, options.lr_change_factor)
        if resumed is not None and self.scheduler is not None and resumed["scheduler"] is not None:
            self.scheduler.load_state_dict(resumed["scheduler"])
        self.scaler = torch.amp.GradScaler("cuda") if options.amp and self.device.type == "cuda" else None

        self.shard()

    def shard(self) -> None:
        """Samplers for the current world: at start, and again when an elastic job changes size."""
        options = self.options
        num_replicas, data_ranks = self.backend.data_shards()
        self.data_world_size = num_replicas
        data_seed = self.seed if options.data_seed is None else options.data_seed
        self.samplers = [
            DistributedSampler(self.data.train, num_replicas=num_replicas, rank=r, shuffle=True,
                               seed=data_seed, drop_last=True)
            for r in data_ranks
        ]
        self.loaders = [DataLoader(self.data.train, batch_size=options.batch_size, sampler=s, drop_last=True)
                        for s in self.samplers]
        self.steps_per_epoch = steps_per_epoch(options, len(self.data.train), num_replicas)

    def _load_checkpoint(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        state = checkpoint.load(self.resume_path)
        if state["data_world_size"] != self.backend.data_shards()[0]:
            raise UsageError(f"--resume {self.resume_path}: written at world size {state['data_world_size']}, "
                             f"resuming at {self.backend.data_shards()[0]} would change the data order")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        checkpoint.restore_rng(state["rng"])
        self.start = Position(state["step"], state["epoch"], state["step_in_epoch"])
        return state

    def checkpoint(self, position: Position) -> None:
        """Every --checkpoint-every steps: a checkpoint file (elastic Horovod commits its state instead)."""
        optimizer_state = self.backend.optimizer_state(self.optimizer)  # a collective under ZeRO
        if self.backend.rank == 0:
            checkpoint.save(self.out / "checkpoint.pt", framework=self.backend.framework, position=position,
                            model=self.raw_model, optimizer_state=optimizer_state, scheduler=self.scheduler_state(),
                            data_world_size=self.data_world_size, seed=self.seed)

    def scheduler_state(self) -> dict | None:
        """The learning-rate schedule's state for a checkpoint or a commit; None for a constant rate."""
        return self.scheduler.state_dict() if self.scheduler is not None else None

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
            "cpu_affinity": placement.cpu_affinity(),
            "device": str(self.device),
            "versions": {**record_format.versions(), **backend.versions()},
            "host": record_format.host_info(),
            "hosts": all_hosts(backend),
            "env": record_format.tuning_env(),
            "data": {"train_samples": len(self.data.train), "test_samples": len(self.data.test),
                     "fingerprint": self.data.fingerprint()},
            "samples_per_step": options.batch_size * options.accum_steps * self.data_world_size,
            "planned_steps": self.total_steps,
            "resumed_from_step": self.start.step if self.resume_path else None,
        }

    def _next_batch(self, iterators) -> tuple[torch.Tensor, torch.Tensor]:
        if len(iterators) == 1:
            x, y = next(iterators[0])
        else:  # one process emulating several ranks concatenates their batches into the global batch
            parts = [next(it) for it in iterators]
            x, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        if self.device.type == "cpu":  # the loader's tensors are already there
            return x, y
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def _autocast(self) -> contextlib.AbstractContextManager:
        if not self.options.amp:
            return contextlib.nullcontext()
        dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        return torch.autocast(self.device.type, dtype=dtype)

    def _train_step(self, iterators) -> tuple[list[torch.Tensor], dict[str, float]]:
        """One optimizer step over accum_steps micro-batches: their losses (tensors, read at the metric drain)
        and the step's phase times. Nothing here waits for the device but the timers' syncs (CUDA only)."""
        options, backend, sync = self.options, self.backend, self._sync
        micro = options.accum_steps
        data_s = forward_s = backward_s = 0.0
        sync()
        started = time.perf_counter()
        if options.step_delay_ms:  # a known difference in speed, for the tests of the speed verdict
            # Busy-wait, not sleep: sleep overshoots by tens of microseconds (timer slack), as much as a
            # planted 10% of a 0.6 ms step; the wait holds the core as a slower step would.
            until = started + options.step_delay_ms / 1000
            while time.perf_counter() < until:
                pass
        self.optimizer.zero_grad()  # set_to_none, the default; Horovod takes no argument
        losses = []
        for index in range(micro):
            t0 = time.perf_counter()
            x, y = self._next_batch(iterators)
            sync()
            t1 = time.perf_counter()
            with backend.no_sync(self.model, sync=index == micro - 1):
                with self._autocast():
                    loss = self.workload.loss(self.model(x), y)
                sync()
                t2 = time.perf_counter()
                scaled = loss / micro if micro > 1 else loss
                (self.scaler.scale(scaled) if self.scaler else scaled).backward()
                sync()
            t3 = time.perf_counter()
            data_s, forward_s, backward_s = data_s + t1 - t0, forward_s + t2 - t1, backward_s + t3 - t2
            losses.append(loss.detach())
        t4 = time.perf_counter()
        # Clipping and unscaling need the averaged gradients first (Horovod: synchronize()).
        synchronized = options.clip_norm is not None or self.scaler is not None
        if synchronized:
            backend.synchronize(self.optimizer)
            if self.scaler:
                self.scaler.unscale_(self.optimizer)
            if options.clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(self.raw_model.parameters(), options.clip_norm)
        step = (lambda: self.scaler.step(self.optimizer)) if self.scaler else self.optimizer.step
        backend.optimizer_step(self.optimizer, step, synchronized)
        if self.scaler:
            self.scaler.update()
        if self.scheduler is not None:
            self.scheduler.step()
        sync()
        t5 = time.perf_counter()
        return losses, {"step_time_s": t5 - started, "data_s": data_s, "forward_s": forward_s,
                        "backward_s": backward_s, "optimizer_s": t5 - t4}

    def _steps_this_epoch(self, epoch: int) -> int:
        """Rank 0's steps in this epoch; with uneven inputs, rank r takes r fewer."""
        steps = min(self.steps_per_epoch, self.total_steps - epoch * self.steps_per_epoch)
        return steps - self.backend.rank if self.options.uneven_inputs else steps

    def _train_epoch(self, epoch: int, step: int, buffer: MetricBuffer, profiler) -> int:
        options = self.options
        for sampler in self.samplers:
            sampler.set_epoch(epoch)
        iterators = [iter(loader) for loader in self.loaders]
        skip = self.start.step_in_epoch if epoch == self.start.epoch else 0
        for _ in range(skip * options.accum_steps):  # resuming mid-epoch: the same batches come next
            self._next_batch(iterators)
        self.model.train()
        # Uneven inputs: metrics are gathered after the epoch, once every rank is out of batches.
        log_every = options.log_every if not options.uneven_inputs else None
        with self.backend.join(self.model, self.optimizer) if options.uneven_inputs else contextlib.nullcontext():
            for step_in_epoch in range(skip, self._steps_this_epoch(epoch)):
                if step >= self.total_steps:  # an elastic job that shrank has longer epochs
                    break
                lr = self.optimizer.param_groups[0]["lr"]
                losses, times = self._train_step(iterators)
                step += 1
                buffer.add(losses, times, {"step": step, "epoch": epoch, "lr": lr,
                                         "samples": step * self.samples_per_step, "wall_time": round(time.time(), 3)})
                if log_every and (step % log_every == 0 or step == self.total_steps):
                    self._write(buffer.drain(self.backend))
                if options.checkpoint_every and step % options.checkpoint_every == 0:
                    self.checkpoint(Position(step, epoch, step_in_epoch + 1))
                if profiler is not None:
                    profiler.step()
                inject_fault(options, self.backend.rank, step)
        self._write(buffer.drain(self.backend, uneven=options.uneven_inputs))
        return step

    @property
    def samples_per_step(self) -> int:
        return self.options.batch_size * self.options.accum_steps * self.data_world_size

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
            with self._autocast():
                loss, correct = self.workload.loss_and_correct(self.raw_model(x), y)
            count = y.numel()
            totals += torch.tensor([loss.item() * count, float(correct), float(count)], dtype=torch.float64)
        totals = self.backend.allreduce(totals, "sum")
        self.raw_model.train()
        entry = {"kind": "eval", "step": step, "epoch": epoch, "eval_loss": float(totals[0] / totals[2]),
                 "eval_accuracy": float(totals[1] / totals[2]), "eval_samples": int(totals[2]),
                 "wall_time": round(time.time(), 3)}  # when it was known: time to target counts to here
        self._write([entry])
        return entry

    def _profiler(self) -> contextlib.AbstractContextManager:
        if not self.options.profile:
            return contextlib.nullcontext()
        trace = self.out / f"trace-rank-{self.backend.rank}.json"
        return torch.profiler.profile(
            schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
            on_trace_ready=lambda prof: prof.export_chrome_trace(str(trace)))

    def run_epochs(self) -> int:
        """Train from self.start to the planned number of steps; returns the last step."""
        step = self.start.step
        with self._profiler() as profiler:
            buffer = MetricBuffer()
            # Counted in epochs, the same on every rank (with uneven inputs, step counts differ).
            last_epoch = -(-self.total_steps // self.steps_per_epoch)
            for epoch in range(self.start.epoch, last_epoch):
                step = self._train_epoch(epoch, step, buffer, profiler)
                self.evaluate(epoch, step)
        return step

    def run(self) -> tuple[int, dict]:
        """Train to the end: the last step, and anything more the record should say (elastic Horovod's sizes)."""
        return self.run_epochs(), {}

    def train(self) -> Path:
        self.setup()
        self.recorder.start(self.record_meta(), resume_step=self.start.step if self.resume_path else None)
        with self.recorder.failure_recorded(explain=self.backend.explain_failure):
            step, more = self.run()
            if self.recorder.nonfinite is not None:  # a run that diverged must never read "ok"
                at, value = self.recorder.nonfinite
                raise TrainingDiverged(f"the training loss became {value} at step {at}: training diverged "
                                       "(learning rate too high, overflow or bad input)")
        self.recorder.finish("ok", steps=step, **more)
        return self.recorder.out


def train(options: Options, backend: Backend, trainer: type[Trainer] = Trainer) -> list[Path]:
    """Train once per seed in this one launch; returns the run directories."""
    torch.set_num_threads(options.threads)
    if options.pin_cores:  # after the framework's start, so that its threads move too
        print(f"rank {backend.rank} pinned to core {placement.pin_to_core(backend.local_rank)}", flush=True)
    return [trainer(options, backend, seed).train() for seed in options.seeds if not _finished(options, seed)]


def _finished(options: Options, seed: int) -> bool:
    """A restarted job (--auto-resume) does not train again a seed whose record is complete."""
    if not options.auto_resume:
        return False
    return record_format.says_ok(run_dir(options, seed))


def run_with_backend(options: Options, start_backend: Callable[[Options], Backend],
                     train_fn: Callable[[Options, Backend], list[Path]] = train) -> list[Path]:
    """Start the framework, train every seed, shut the framework down."""
    backend = start_backend(options)
    forget_earlier_job(options, backend.rank)
    try:
        run_dirs = train_fn(options, backend)
    except BaseException:
        # The other ranks may be gone: their absence must not hide this error behind a second one.
        with contextlib.suppress(Exception):
            backend.shutdown()
        raise
    backend.shutdown()
    return run_dirs
