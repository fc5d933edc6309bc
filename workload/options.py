"""The one option set both implementations take, its parser and its checks.

Both `python -m hvd_impl` and `python -m native_impl` parse exactly this, so a comparison can pass the
same arguments to either side and know that they mean the same thing.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workload.workloads import WORKLOADS


class UsageError(Exception):
    """Bad input: reported as one line and exit status 2, never as a traceback."""


@dataclass(frozen=True)
class Options:
    workload: str = "mlp"
    epochs: int = 1
    steps: int | None = None
    batch_size: int = 32
    lr: float | None = None
    lr_scaling: str = "none"
    warmup_steps: int = 0
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 0.0
    seeds: tuple[int, ...] = (0,)
    data_seed: int | None = None
    device: str = "cpu"
    threads: int = 1
    out: Path = Path("runs/latest")
    log_every: int = 10
    dataset_size: int | None = None
    text_dir: Path | None = None
    fail_at_step: int | None = None
    fail_rank: int = 0
    fail_mode: str = "exit"

    def resolved_lr(self) -> float:
        return self.lr if self.lr is not None else WORKLOADS[self.workload].default_lr

    def as_record(self) -> dict:
        """The options as JSON-friendly values, for run.json."""
        record = dataclasses.asdict(self)
        record["out"] = str(self.out)
        record["text_dir"] = str(self.text_dir) if self.text_dir else None
        record["seeds"] = list(self.seeds)
        record["lr"] = self.resolved_lr()
        return record


def _seed_list(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected distinct comma-separated integers, got {text!r}")
    return seeds


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing usage and exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser, *, run_directory: bool = True, launch: bool = True) -> None:
    """The shared options, added to any parser (the implementations' and the comparison's, which has an
    --out and launch options of its own)."""
    work = parser.add_argument_group("workload")
    work.add_argument("--workload", default="mlp", help=f"what to train: {describe_workloads()}")
    work.add_argument("--epochs", type=int, default=1, help="passes over the training set")
    work.add_argument("--steps", type=int, default=None,
                      help="stop after this many optimizer steps (default: run all epochs)")
    work.add_argument("--batch-size", type=int, default=32, help="samples per worker per step")
    work.add_argument("--dataset-size", type=int, default=None,
                      help="training samples for the synthetic workloads (default: the workload's own)")
    work.add_argument("--text-dir", type=Path, default=None,
                      help="lm workload: read *.py/*.txt text from this directory "
                           "(default: the Python standard library's own sources)")
    opt = parser.add_argument_group("optimization")
    opt.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd",
                     help="sgd is SGD with momentum")
    opt.add_argument("--lr", type=float, default=None,
                     help="learning rate before scaling (default: the workload's own)")
    opt.add_argument("--lr-scaling", choices=["none", "linear"], default="none",
                     help="linear multiplies the learning rate by the world size, on both frameworks alike")
    opt.add_argument("--warmup-steps", type=int, default=0,
                     help="ramp the learning rate linearly from lr/world_size over this many steps")
    opt.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    opt.add_argument("--weight-decay", type=float, default=0.0, help="weight decay")
    run = parser.add_argument_group("run")
    run.add_argument("--seed", type=int, default=0, help="seed for model init, data and sampler")
    run.add_argument("--seeds", type=_seed_list, default=None,
                     help="train once per seed in this one launch (e.g. 0,1,2); each seed writes OUT/seed-S/")
    run.add_argument("--data-seed", type=int, default=None,
                     help="seed of the sampler's shuffle (default: the run's seed)")
    run.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                     help="cpu uses gloo (DDP) / MPI or Gloo (Horovod); cuda uses NCCL on both")
    run.add_argument("--threads", type=int, default=1,
                     help="torch threads per worker, set the same for both frameworks")
    if run_directory:
        run.add_argument("--out", type=Path, default=Path("runs/latest"), help="run directory to write")
    run.add_argument("--log-every", type=int, default=10,
                     help="gather per-step metrics from all ranks every N steps (one collective per N steps)")
    if launch:
        _add_spawn_arguments(parser)
    fault = parser.add_argument_group("fault injection (for tests and demonstrations; once per job)")
    fault.add_argument("--fail-at-step", type=int, default=None, help="inject a fault after this optimizer step")
    fault.add_argument("--fail-rank", type=int, default=0, help="the rank that fails")
    fault.add_argument("--fail-mode", choices=["exit", "kill", "hang"], default="exit",
                       help="exit: exit status 13; kill: SIGKILL itself; hang: SIGSTOP itself (stops answering)")


def _add_spawn_arguments(parser: argparse.ArgumentParser) -> None:
    spawn = parser.add_argument_group("launch from Python (no launcher command)")
    spawn.add_argument("--spawn", type=int, default=None, metavar="N",
                       help="start N workers from this process: torch.multiprocessing.spawn (DDP) "
                            "or horovod.run (Horovod)")
    spawn.add_argument("--spawn-controller", choices=["gloo", "mpi"], default="gloo",
                       help="Horovod only: the controller horovod.run uses")


def describe_workloads() -> str:
    return "; ".join(f"{name} ({spec.summary})" for name, spec in WORKLOADS.items())


def parse_options(argv: list[str] | None, prog: str, description: str,
                  parser: argparse.ArgumentParser | None = None) -> tuple[Options, argparse.Namespace]:
    parser = parser or build_parser(prog, description)
    ns = parser.parse_args(argv)
    options = options_from_namespace(ns)
    validate(options)
    if getattr(ns, "spawn", None) is not None and ns.spawn <= 0:
        raise UsageError(f"--spawn must be a positive integer, got {ns.spawn}")
    return options, ns


def options_from_namespace(ns: argparse.Namespace) -> Options:
    return Options(
        workload=ns.workload,
        epochs=ns.epochs,
        steps=ns.steps,
        batch_size=ns.batch_size,
        lr=ns.lr,
        lr_scaling=ns.lr_scaling,
        warmup_steps=ns.warmup_steps,
        optimizer=ns.optimizer,
        momentum=ns.momentum,
        weight_decay=ns.weight_decay,
        seeds=ns.seeds if ns.seeds is not None else (ns.seed,),
        data_seed=ns.data_seed,
        device=ns.device,
        threads=ns.threads,
        out=getattr(ns, "out", Path("runs/latest")),
        log_every=ns.log_every,
        dataset_size=ns.dataset_size,
        text_dir=ns.text_dir,
        fail_at_step=ns.fail_at_step,
        fail_rank=ns.fail_rank,
        fail_mode=ns.fail_mode,
    )


def to_argv(options: Options, *, out: Path, seeds: tuple[int, ...]) -> list[str]:
    """The command-line arguments that make an implementation run exactly these options."""
    argv = ["--workload", options.workload, "--epochs", str(options.epochs), "--batch-size", str(options.batch_size),
            "--lr", repr(options.resolved_lr()), "--lr-scaling", options.lr_scaling,
            "--warmup-steps", str(options.warmup_steps), "--optimizer", options.optimizer,
            "--momentum", repr(options.momentum), "--weight-decay", repr(options.weight_decay),
            "--seeds", ",".join(map(str, seeds)), "--device", options.device, "--threads", str(options.threads),
            "--log-every", str(options.log_every), "--out", str(out)]
    if options.fail_at_step is not None:
        argv += ["--fail-rank", str(options.fail_rank), "--fail-mode", options.fail_mode]
    optional = {"--steps": options.steps, "--data-seed": options.data_seed,
                "--dataset-size": options.dataset_size, "--text-dir": options.text_dir,
                "--fail-at-step": options.fail_at_step}
    for flag, value in optional.items():
        if value is not None:
            argv += [flag, str(value)]
    return argv


def validate(options: Options) -> None:
    """Checks that need no data and no world size. Raises UsageError with one line."""
    if options.workload not in WORKLOADS:
        raise UsageError(f"unknown workload {options.workload!r}; choose one of: {', '.join(WORKLOADS)}")
    positive = {
        "--batch-size": options.batch_size,
        "--epochs": options.epochs,
        "--threads": options.threads,
        "--log-every": options.log_every,
    }
    if options.steps is not None:
        positive["--steps"] = options.steps
    if options.fail_at_step is not None:
        positive["--fail-at-step"] = options.fail_at_step
    if options.dataset_size is not None:
        positive["--dataset-size"] = options.dataset_size
    for flag, value in positive.items():
        if value <= 0:
            raise UsageError(f"{flag} must be a positive integer, got {value}")
    if options.lr is not None and not options.lr > 0:
        raise UsageError(f"--lr must be positive, got {options.lr}")
    if options.fail_rank < 0:
        raise UsageError(f"--fail-rank must be zero or positive, got {options.fail_rank}")
    if options.warmup_steps < 0:
        raise UsageError(f"--warmup-steps must be zero or positive, got {options.warmup_steps}")
    if not 0 <= options.momentum < 1:
        raise UsageError(f"--momentum must be in [0, 1), got {options.momentum}")
    if options.weight_decay < 0:
        raise UsageError(f"--weight-decay must be zero or positive, got {options.weight_decay}")
    if options.text_dir is not None and not options.text_dir.is_dir():
        raise UsageError(f"--text-dir {options.text_dir} is not a directory")
    if options.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda was asked for, but torch sees no CUDA device here")


def check_writable(out: Path) -> None:
    """Fail before training, not after, when the run directory cannot be written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-probe-"):  # unique: ranks probe at once
            pass
    except OSError as exc:
        raise UsageError(f"--out {out} is not writable: {exc.strerror or exc}") from None
