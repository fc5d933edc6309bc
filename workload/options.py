"""The one option set both implementations take, its parser and its checks.

Both `python -m hvd_impl` and `python -m native_impl` parse exactly this, so a comparison can pass the
same arguments to either side and know that they mean the same thing.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workload.workloads import BUILTIN_WORKLOADS, PLUGIN_FORMS, describe_workloads, load_workload


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
    # features (docs/features.md): each maps to its idiomatic form on either side
    compression: str = "none"
    accum_steps: int = 1
    amp: bool = False
    clip_norm: float | None = None
    uneven_inputs: bool = False
    sync_bn: bool = False
    adasum: bool = False
    zero: bool = False
    powersgd_rank: int | None = None
    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None
    bucket_cap_mb: float | None = None
    gradient_as_bucket_view: bool = False
    checkpoint_every: int | None = None
    resume: Path | None = None
    auto_resume: bool = False
    elastic: bool = False
    collective_timeout: float | None = None
    profile: bool = False
    # Controlled changes for calibration and tests (docs/parity.md): a nudge of the initial weights, a
    # learning-rate change from a given step on (one side diverging late, through the real launchers).
    perturb_init_ulps: int = 0
    lr_change_at_step: int | None = None
    lr_change_factor: float = 1.0
    # Speed measurement (docs/benchmarks.md): which repeated launch of a comparison this is, a fixed delay
    # added to every step (tests: a known speed difference), the mlp's width (gradient-size sweeps).
    round: int = 1
    step_delay_ms: float | None = None
    hidden: int | None = None

    def resolved_lr(self) -> float:
        return self.lr if self.lr is not None else load_workload(self.workload).default_lr

    def as_record(self) -> dict:
        """The options as JSON-friendly values, for run.json."""
        record = dataclasses.asdict(self)
        record["out"] = str(self.out)
        record["text_dir"] = str(self.text_dir) if self.text_dir else None
        record["resume"] = str(self.resume) if self.resume else None
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


# Each framework's own tuning settings: accepted by both implementations, so that one command line serves
# both sides, and recorded as ignored (run.json "ignored_options") by the side they do not apply to.
FRAMEWORK_SETTINGS = {
    "horovod": ("fusion_threshold_mb", "cycle_time_ms"),
    "ddp": ("bucket_cap_mb", "gradient_as_bucket_view"),
}
# The single-process reference has no communication to tune or compress, and no framework features.
REFERENCE_IGNORES = ("compression", "adasum", "zero", "powersgd_rank", "elastic",
                     *FRAMEWORK_SETTINGS["horovod"], *FRAMEWORK_SETTINGS["ddp"])
# Appended to a help text that states its own default (or whose default, None or False, says nothing):
# ArgumentDefaultsHelpFormatter adds "(default: X)" only to help without "%(default)", and this formats to "".
_DEFAULT_SAID = "%(default).0s"


def ignored_options(options: dict, framework: str) -> list[str]:
    """The flags set in `options` (a run.json options dict) that `framework` accepts but does not use."""
    if framework == "reference":
        names: tuple[str, ...] = REFERENCE_IGNORES
    else:
        names = tuple(name for other, settings in FRAMEWORK_SETTINGS.items() if other != framework
                      for name in settings)
    defaults = Options()
    return ["--" + name.replace("_", "-") for name in names
            if name in options and options[name] != getattr(defaults, name)]


def add_arguments(parser: argparse.ArgumentParser, *, run_directory: bool = True, launch: bool = True) -> None:
    """The shared options, added to any parser (the implementations' and the comparison's, which has an
    --out and launch options of its own)."""
    earlier = {id(action) for action in parser._actions}
    _add_shared_arguments(parser, run_directory=run_directory, launch=launch)
    for action in parser._actions:
        says_nothing = action.default is None or action.default is False
        if id(action) not in earlier and action.help and (says_nothing or "(default" in action.help):
            action.help += _DEFAULT_SAID


def _add_shared_arguments(parser: argparse.ArgumentParser, *, run_directory: bool, launch: bool) -> None:
    work = parser.add_argument_group("workload")
    work.add_argument("--workload", default="mlp",
                      metavar="{" + ",".join(BUILTIN_WORKLOADS) + ",MODULE:FUNCTION,FILE.py:FUNCTION}",
                      help=f"what to train: {describe_workloads()}; or your own, as {PLUGIN_FORMS} naming a "
                           "function that returns a workload.workloads.Workload (docs/own-job.md)")
    work.add_argument("--epochs", type=int, default=1, help="passes over the training set")
    work.add_argument("--steps", type=int, default=None,
                      help="stop after this many optimizer steps (default: run all epochs)")
    work.add_argument("--batch-size", type=int, default=32, help="samples per worker per step")
    work.add_argument("--dataset-size", type=int, default=None,
                      help="training samples for the synthetic workloads (default: the workload's own)")
    work.add_argument("--hidden", type=int, default=None,
                      help="mlp workload: units in each hidden layer (default 256); sets the gradient size")
    work.add_argument("--text-dir", type=Path, default=None,
                      help="lm workload: read the text files directly in this directory, any name "
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
    _add_feature_arguments(parser)
    if launch:
        _add_spawn_arguments(parser)
    fault = parser.add_argument_group("fault injection (for tests and demonstrations; once per job)")
    fault.add_argument("--fail-at-step", type=int, default=None, help="inject a fault after this optimizer step")
    fault.add_argument("--fail-rank", type=int, default=0, help="the rank that fails")
    fault.add_argument("--fail-mode", choices=["exit", "kill", "hang"], default="exit",
                       help="exit: exit status 13; kill: SIGKILL itself; hang: SIGSTOP itself (stops answering)")
    speed = parser.add_argument_group("speed measurement")
    speed.add_argument("--round", type=int, default=1,
                       help="which repeated launch of a comparison this is (recorded in run.json)")
    speed.add_argument("--step-delay-ms", type=float, default=None, metavar="MS",
                       help="sleep this long in every step (tests: a known speed difference)")


def _add_feature_arguments(parser: argparse.ArgumentParser) -> None:
    both = parser.add_argument_group("features (each in its framework's idiomatic form; see docs/features.md)")
    both.add_argument("--compression", choices=["none", "fp16"], default="none",
                      help="gradient compression: hvd.Compression.fp16 / DDP fp16_compress_hook")
    both.add_argument("--accum-steps", type=int, default=1,
                      help="micro-batches per optimizer step: backward_passes_per_step / no_sync()")
    both.add_argument("--amp", action="store_true",
                      help="autocast (bfloat16 on CPU; float16 with a gradient scaler on CUDA)")
    both.add_argument("--clip-norm", type=float, default=None,
                      help="clip gradients to this global norm (Horovod: synchronize() first)")
    both.add_argument("--uneven-inputs", action="store_true",
                      help="rank r gets r batches fewer per epoch: hvd.join() / torch.distributed Join")
    both.add_argument("--sync-bn", action="store_true",
                      help="batch norm synchronised over ranks (resnet; CUDA only on both sides)")
    both.add_argument("--checkpoint-every", type=int, default=None,
                      help="rank 0 writes OUT/checkpoint.pt every N steps (atomically)")
    both.add_argument("--resume", type=Path, default=None,
                      help="resume from this checkpoint (written by either implementation)")
    both.add_argument("--auto-resume", action="store_true",
                      help="resume from OUT/checkpoint.pt when there is one (a restarted job), skip finished seeds")
    both.add_argument("--collective-timeout", type=float, default=None, metavar="SECONDS",
                      help="fail, naming the rank, when a collective waits this long for a stopped worker "
                           "(DDP: process-group timeout, default 300; Horovod: Gloo timeout and stall shutdown)")
    both.add_argument("--profile", action="store_true",
                      help="torch.profiler trace of steps 3-5, and Horovod's timeline, into OUT")
    control = parser.add_argument_group("controlled changes (calibration and tests of the parity verdict)")
    control.add_argument("--perturb-init-ulps", type=int, default=0, metavar="K",
                         help="move every initial weight K float32 ulps away from zero: a change known not to "
                              "change the job, whose growth measures float chaos (compare run's calibration)")
    control.add_argument("--lr-change-at-step", type=int, default=None, metavar="N",
                         help="multiply the learning rate by --lr-change-factor from step N on (a late divergence)")
    control.add_argument("--lr-change-factor", type=float, default=1.0, metavar="F",
                         help="see --lr-change-at-step")
    hvd = parser.add_argument_group("Horovod only")
    hvd.add_argument("--elastic", action="store_true",
                     help="elastic training: hvd.elastic.run with TorchState, committed every --checkpoint-every steps "
                          "(launch with horovodrun --min-np/--max-np --host-discovery-script, Gloo)")
    hvd.add_argument("--adasum", action="store_true", help="op=hvd.Adasum (needs Horovod's MPI operations)")
    hvd.add_argument("--fusion-threshold-mb", type=float, default=None,
                     help="HOROVOD_FUSION_THRESHOLD in MiB (Horovod's default 128; 0 turns fusion off)")
    hvd.add_argument("--cycle-time-ms", type=float, default=None, help="HOROVOD_CYCLE_TIME (default 1 ms)")
    ddp = parser.add_argument_group("DDP only")
    ddp.add_argument("--zero", action="store_true", help="ZeroRedundancyOptimizer (optimizer state sharded)")
    ddp.add_argument("--powersgd-rank", type=int, default=None, help="PowerSGD gradient compression of this rank")
    ddp.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP bucket size (default 25 MiB)")
    ddp.add_argument("--gradient-as-bucket-view", action="store_true",
                     help="gradients as views into DDP's buckets (saves a copy)")


def _add_spawn_arguments(parser: argparse.ArgumentParser) -> None:
    spawn = parser.add_argument_group("launch from Python (no launcher command)")
    spawn.add_argument("--spawn", type=int, default=None, metavar="N",
                       help="start N workers from this process: torch.multiprocessing.spawn (DDP) "
                            "or horovod.run (Horovod)")
    spawn.add_argument("--spawn-controller", choices=["gloo", "mpi"], default="gloo",
                       help="Horovod only: the controller horovod.run uses")


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
    values = {f.name: getattr(ns, f.name) for f in dataclasses.fields(Options) if hasattr(ns, f.name)}
    values["seeds"] = ns.seeds if ns.seeds is not None else (ns.seed,)
    return Options(**values)


def to_argv(options: Options, *, out: Path, seeds: tuple[int, ...]) -> list[str]:
    """The command-line arguments that make an implementation run exactly these options."""
    argv = ["--seeds", ",".join(map(str, seeds)), "--out", str(out)]
    for f in dataclasses.fields(Options):
        value = options.resolved_lr() if f.name == "lr" else getattr(options, f.name)
        if f.name in ("seeds", "out") or value is None or value is False:
            continue
        flag = "--" + f.name.replace("_", "-")
        argv += [flag] if value is True else [flag, repr(value) if isinstance(value, float) else str(value)]
    return argv


def validate(options: Options) -> None:
    """Checks that need no data and no world size. Raises UsageError with one line."""
    load_workload(options.workload)  # a plug-in that cannot be loaded is bad input: one line, exit 2
    positive = {
        "--batch-size": options.batch_size,
        "--epochs": options.epochs,
        "--threads": options.threads,
        "--log-every": options.log_every,
    }
    if options.steps is not None:
        positive["--steps"] = options.steps
    optional_positive = {"--fail-at-step": options.fail_at_step, "--checkpoint-every": options.checkpoint_every,
                         "--powersgd-rank": options.powersgd_rank, "--accum-steps": options.accum_steps}
    positive.update({flag: value for flag, value in optional_positive.items() if value is not None})
    if options.dataset_size is not None:
        positive["--dataset-size"] = options.dataset_size
    for flag, value in positive.items():
        if value <= 0:
            raise UsageError(f"{flag} must be a positive integer, got {value}")
    if options.lr is not None and not (options.lr > 0 and math.isfinite(options.lr)):
        raise UsageError(f"--lr must be a positive finite number, got {options.lr}")
    if not (options.lr_change_factor > 0 and math.isfinite(options.lr_change_factor)):
        raise UsageError(f"--lr-change-factor must be a positive finite number, got {options.lr_change_factor}")
    if options.lr_change_at_step is not None and options.lr_change_at_step <= 0:
        raise UsageError(f"--lr-change-at-step must be a positive step number, got {options.lr_change_at_step}")
    if options.perturb_init_ulps < 0:
        raise UsageError(f"--perturb-init-ulps must be zero or positive, got {options.perturb_init_ulps}")
    if options.collective_timeout is not None and options.collective_timeout <= 0:
        raise UsageError(f"--collective-timeout must be positive, got {options.collective_timeout}")
    if options.elastic and options.checkpoint_every is None:
        raise UsageError("--elastic needs --checkpoint-every N: the steps between two state.commit()")
    if options.resume is not None and len(options.seeds) > 1:
        raise UsageError("--resume takes one seed: a checkpoint belongs to one run (use --auto-resume for several)")
    nonnegative = {"--clip-norm": options.clip_norm, "--fusion-threshold-mb": options.fusion_threshold_mb,
                   "--cycle-time-ms": options.cycle_time_ms, "--bucket-cap-mb": options.bucket_cap_mb}
    for flag, value in nonnegative.items():
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be zero or positive, got {value}")
    if options.resume is not None and not options.resume.is_file():
        raise UsageError(f"--resume {options.resume}: no such checkpoint file")
    if options.sync_bn and options.device != "cuda":
        raise UsageError("--sync-bn needs --device cuda: "
                         "hvd.SyncBatchNorm and nn.SyncBatchNorm both refuse CPU tensors")
    if options.sync_bn and options.workload != "resnet":
        raise UsageError("--sync-bn applies to the resnet workload (the only one with batch norm)")
    if options.round < 1 or (options.step_delay_ms is not None and options.step_delay_ms < 0):
        raise UsageError("--round must be a positive integer and --step-delay-ms zero or positive")
    if options.hidden is not None and (options.hidden <= 0 or options.workload != "mlp"):
        raise UsageError(f"--hidden applies to the mlp workload and must be positive, got {options.hidden}")
    if any(seed < 0 for seed in options.seeds) or (options.data_seed is not None and options.data_seed < 0):
        raise UsageError(f"seeds must be zero or positive, got {', '.join(map(str, options.seeds))}")
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
