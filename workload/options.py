"""The one option set both implementations take, each option declared once: a field of `Options`.

A field holds the option's name, type, default, help, group, owner (both frameworks, or one) and check
(workload/optionspec.py). The parser, `validate`, the one-sided refusals (`ONE_SIDED`),
`FRAMEWORK_SETTINGS` and the reference's ignore list are derived from the fields: an option is added by
writing one field. Both `python -m hvd_impl` and `python -m native_impl` parse exactly this, so a
comparison can pass the same arguments to either side and know that they mean the same thing.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workload.builtin import PLUGIN_FORMS, WORKLOAD_METAVAR, describe_workloads
from workload.errors import UsageError
from workload.optionspec import (
    FRAMEWORK_NAMES,
    Parser,
    argument,
    directory,
    flag,
    nonnegative,
    option,
    positive,
    positive_finite,
    positive_int,
    spec_of,
)

# The sections of --help, in order. The Horovod-only and DDP-only groups hold the one-sided options.
WORKLOAD, OPTIMIZATION, RUN = "workload", "optimization", "run"
FEATURES = "features (each in its framework's idiomatic form; see docs/features.md)"
CONTROLLED = "controlled changes (calibration and tests of the parity verdict)"
SPAWN = "launch from Python (no launcher command)"
FAULTS = "fault injection (for tests and demonstrations; once per job)"
SPEED = "speed measurement"
GROUPS = (WORKLOAD, OPTIMIZATION, RUN, FEATURES, CONTROLLED, *(f"{name} only" for name in FRAMEWORK_NAMES.values()),
          SPAWN, FAULTS, SPEED)


# Checks of one option that look at others too, or at the machine.

def _loadable(_flag: str, spec: str, _options: Options) -> None:
    from workload.workloads import load_workload  # torch: only when options are checked, never for --help

    load_workload(spec)  # a plug-in that cannot be loaded is bad input: one line, exit 2 (raises UsageError)


def _mlp_width(flag: str, width: int, options: Options) -> str | None:
    if width > 0 and options.workload == "mlp":
        return None
    return f"{flag} applies to the mlp workload and must be positive, got {width}"


def _momentum(flag: str, momentum: float, _options: Options) -> str | None:
    return None if 0 <= momentum < 1 else f"{flag} must be in [0, 1), got {momentum}"


def _seeds(_flag: str, seeds: tuple[int, ...], _options: Options) -> str | None:
    if all(seed >= 0 for seed in seeds):
        return None
    return f"seeds must be zero or positive, got {', '.join(map(str, seeds))}"


def _device_present(flag: str, device: str, _options: Options) -> str | None:
    if device != "cuda":
        return None
    import torch  # only when CUDA is asked for: the parser stays quick to import

    return None if torch.cuda.is_available() else f"{flag} cuda was asked for, but torch sees no CUDA device here"


def _sync_bn_possible(flag: str, on: bool, options: Options) -> str | None:
    if on and options.device != "cuda":
        return f"{flag} needs --device cuda: hvd.SyncBatchNorm and nn.SyncBatchNorm both refuse CPU tensors"
    if on and options.workload != "resnet":
        return f"{flag} applies to the resnet workload (the only one with batch norm)"
    return None


def _resumable(flag: str, path: Path, options: Options) -> str | None:
    if len(options.seeds) > 1:
        return f"{flag} takes one seed: a checkpoint belongs to one run (use --auto-resume for several)"
    return None if path.is_file() else f"{flag} {path}: no such checkpoint file"


def _commit_interval(flag: str, on: bool, options: Options) -> str | None:
    if on and options.checkpoint_every is None:
        return f"{flag} needs --checkpoint-every N: the steps between two state.commit()"
    return None


def _positive_step(flag: str, step: int, _options: Options) -> str | None:
    return None if step > 0 else f"{flag} must be a positive step number, got {step}"


def _seed_list(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected distinct comma-separated integers, got {text!r}")
    return seeds


def _add_seed_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--seed", type=int, default=0, help="seed for model init, data and sampler")
    group.add_argument("--seeds", type=_seed_list, default=None,
                       help="train once per seed in this one launch (e.g. 0,1,2); each seed writes OUT/seed-S/")


def _read_seeds(ns: argparse.Namespace) -> tuple[int, ...]:
    return ns.seeds if ns.seeds is not None else (ns.seed,)


@dataclass(frozen=True)
class Options:
    # --- workload
    workload: str = option("mlp", f"what to train: {describe_workloads()}; or your own, as {PLUGIN_FORMS} naming "
                           "a function that returns a workload.workloads.Workload (docs/own-job.md)",
                           group=WORKLOAD, metavar=WORKLOAD_METAVAR, check=_loadable)
    epochs: int = option(1, "passes over the training set", group=WORKLOAD, check=positive_int)
    steps: int | None = option(None, "stop after this many optimizer steps (default: run all epochs)",
                               group=WORKLOAD, check=positive_int)
    batch_size: int = option(32, "samples per worker per step", group=WORKLOAD, check=positive_int)
    dataset_size: int | None = option(None, "training samples for the synthetic workloads (default: the "
                                      "workload's own)", group=WORKLOAD, check=positive_int)
    hidden: int | None = option(None, "mlp workload: units in each hidden layer (default 256); sets the gradient "
                                "size", group=WORKLOAD, check=_mlp_width)
    text_dir: Path | None = option(None, "lm workload: read the text files directly in this directory, any name "
                                   "(default: the Python standard library's own sources)",
                                   group=WORKLOAD, check=directory)
    # --- optimization
    optimizer: Literal["sgd", "adamw"] = option("sgd", "sgd is SGD with momentum", group=OPTIMIZATION)
    lr: float | None = option(None, "learning rate before scaling (default: the workload's own)",
                              group=OPTIMIZATION, check=positive_finite)
    lr_scaling: Literal["none", "linear"] = option("none", "linear multiplies the learning rate by the world "
                                                   "size, on both frameworks alike", group=OPTIMIZATION)
    warmup_steps: int = option(0, "ramp the learning rate linearly from lr/world_size over this many steps",
                               group=OPTIMIZATION, check=nonnegative)
    momentum: float = option(0.9, "SGD momentum", group=OPTIMIZATION, check=_momentum)
    weight_decay: float = option(0.0, "weight decay", group=OPTIMIZATION, check=nonnegative)
    # --- run
    seeds: tuple[int, ...] = option((0,), "--seed S, or --seeds S,T,...", group=RUN, check=_seeds,
                                    add=_add_seed_arguments, read=_read_seeds)
    data_seed: int | None = option(None, "seed of the sampler's shuffle (default: the run's seed)", group=RUN,
                                   check=nonnegative)
    device: Literal["cpu", "cuda"] = option("cpu", "cpu uses gloo (DDP) / MPI or Gloo (Horovod); cuda uses NCCL "
                                            "on both", group=RUN, check=_device_present)
    threads: int = option(1, "torch threads per worker, set the same for both frameworks", group=RUN,
                          check=positive_int)
    pin_cores: bool = option(False, "pin each rank to its own core (by local rank), every thread of it, the "
                             "same on both sides (workload/placement.py)", group=RUN)
    out: Path = option(Path("runs/latest"), "run directory to write", group=RUN, run_directory=True)
    log_every: int = option(10, "gather per-step metrics from all ranks every N steps (one collective per N "
                            "steps)", group=RUN, check=positive_int)
    # --- features (docs/features.md): each maps to its idiomatic form on either side
    compression: Literal["none", "fp16"] = option("none", "gradient compression: hvd.Compression.fp16 / DDP "
                                                  "fp16_compress_hook", group=FEATURES, reference_ignores=True)
    accum_steps: int = option(1, "micro-batches per optimizer step: backward_passes_per_step / no_sync()",
                              group=FEATURES, check=positive_int)
    amp: bool = option(False, "autocast (bfloat16 on CPU; float16 with a gradient scaler on CUDA)", group=FEATURES)
    clip_norm: float | None = option(None, "clip gradients to this global norm (Horovod: synchronize() first)",
                                     group=FEATURES, check=nonnegative)
    uneven_inputs: bool = option(False, "rank r gets r batches fewer per epoch: hvd.join() / torch.distributed "
                                 "Join", group=FEATURES)
    sync_bn: bool = option(False, "batch norm synchronised over ranks (resnet; CUDA only on both sides)",
                           group=FEATURES, check=_sync_bn_possible)
    checkpoint_every: int | None = option(None, "rank 0 writes OUT/checkpoint.pt every N steps (atomically)",
                                          group=FEATURES, check=positive_int)
    resume: Path | None = option(None, "resume from this checkpoint (written by either implementation)",
                                 group=FEATURES, check=_resumable)
    auto_resume: bool = option(False, "resume from OUT/checkpoint.pt when there is one (a restarted job), skip "
                               "finished seeds", group=FEATURES)
    collective_timeout: float | None = option(
        None, "fail, naming the rank, when a collective waits this long for a stopped worker (DDP: "
        "process-group timeout, default 300; Horovod: Gloo timeout and stall shutdown)",
        group=FEATURES, metavar="SECONDS", check=positive)
    profile: bool = option(False, "torch.profiler trace of steps 3-5, and Horovod's timeline, into OUT",
                           group=FEATURES)
    # --- controlled changes (docs/parity.md): a nudge of the initial weights, a learning-rate change from a
    # given step on (one side diverging late, through the real launchers)
    perturb_init_ulps: int = option(0, "move every initial weight K float32 ulps away from zero: a change known "
                                    "not to change the job, whose growth measures float chaos (compare run's "
                                    "calibration)", group=CONTROLLED, metavar="K", check=nonnegative)
    lr_change_at_step: int | None = option(None, "multiply the learning rate by --lr-change-factor from step N on "
                                           "(a late divergence)", group=CONTROLLED, metavar="N",
                                           check=_positive_step)
    lr_change_factor: float = option(1.0, "see --lr-change-at-step", group=CONTROLLED, metavar="F",
                                     check=positive_finite)
    # --- one framework's own: features the other refuses, settings the other ignores
    elastic: bool = option(False, "elastic training: hvd.elastic.run with TorchState, committed every "
                           "--checkpoint-every steps (launch with horovodrun --min-np/--max-np "
                           "--host-discovery-script, Gloo)", owner="horovod", check=_commit_interval,
                           refusal="--elastic is Horovod's; DDP's answer is torchrun --max-restarts K (--nnodes "
                                   "MIN:MAX across hosts) with --checkpoint-every N --auto-resume")
    adasum: bool = option(False, "op=hvd.Adasum (needs Horovod's MPI operations)", owner="horovod")
    fusion_threshold_mb: float | None = option(None, "HOROVOD_FUSION_THRESHOLD in MiB (Horovod's default 128; 0 "
                                               "turns fusion off)", owner="horovod", elsewhere="ignored",
                                               check=nonnegative)
    cycle_time_ms: float | None = option(None, "HOROVOD_CYCLE_TIME (default 1 ms)", owner="horovod",
                                         elsewhere="ignored", check=nonnegative)
    zero: bool = option(False, "ZeroRedundancyOptimizer (optimizer state sharded)", owner="ddp")
    powersgd_rank: int | None = option(None, "PowerSGD gradient compression of this rank", owner="ddp",
                                       check=positive_int)
    bucket_cap_mb: float | None = option(None, "DDP bucket size (default 25 MiB)", owner="ddp", elsewhere="ignored",
                                         check=nonnegative)
    gradient_as_bucket_view: bool = option(False, "gradients as views into DDP's buckets (saves a copy)",
                                           owner="ddp", elsewhere="ignored")
    # --- fault injection
    fail_at_step: int | None = option(None, "inject a fault after this optimizer step", group=FAULTS,
                                      check=positive_int)
    fail_rank: int = option(0, "the rank that fails", group=FAULTS, check=nonnegative)
    fail_mode: Literal["exit", "kill", "hang"] = option("exit", "exit: exit status 13; kill: SIGKILL itself; hang: "
                                                        "SIGSTOP itself (stops answering)", group=FAULTS)
    # --- speed measurement (docs/benchmarks.md): which repeated launch of a comparison this is, a fixed delay
    # added to every step (tests: a known speed difference)
    round: int = option(1, "which repeated launch of a comparison this is (recorded in run.json)", group=SPEED,
                        check=positive_int, internal=True)
    step_delay_ms: float | None = option(None, "wait this long in every step, holding the core (tests: a known "
                                         "speed difference)",
                                         group=SPEED, metavar="MS", check=nonnegative,
                                         internal=True)
    window_seconds: float | None = option(None, "the steady window this speed launch was planned to time "
                                          "(compare run --timed-seconds sets it, with --steps; recorded in "
                                          "run.json)", group=SPEED, metavar="SECONDS", check=nonnegative,
                                          internal=True)
    aa_twin: bool = option(False, "this launch is the A/A twin of its round's launch of the same framework "
                           "(compare run --aa; recorded in run.json)", group=SPEED, internal=True)

    def resolved_lr(self) -> float:
        from workload.workloads import load_workload

        return self.lr if self.lr is not None else load_workload(self.workload).lr

    def as_record(self) -> dict:
        """The options as JSON-friendly values, for run.json."""
        record = dataclasses.asdict(self)
        for name, value in record.items():
            if isinstance(value, Path):
                record[name] = str(value)
            elif isinstance(value, tuple):
                record[name] = list(value)
        record["lr"] = self.resolved_lr()
        return record


FIELDS = {f.name: f for f in dataclasses.fields(Options)}
SPECS = {name: spec_of(f) for name, f in FIELDS.items()}
# Features one framework has and the other has not, refused by the other (its backend, and `compare run`,
# which passes the same options to both sides): field name -> (flag, owner).
ONE_SIDED = {name: (flag(name), spec.owner) for name, spec in SPECS.items()
             if spec.owner != "both" and spec.elsewhere == "refused"}
# Each framework's own tuning settings: accepted by both implementations, so that one command line serves
# both sides, and recorded as ignored (run.json "ignored_options") by the side they do not apply to.
FRAMEWORK_SETTINGS = {framework: tuple(name for name, spec in SPECS.items()
                                       if spec.owner == framework and spec.elsewhere == "ignored")
                      for framework in FRAMEWORK_NAMES}
# The single-process reference has no communication to tune or compress, and no framework features.
REFERENCE_IGNORES = tuple(name for name, spec in SPECS.items() if spec.owner != "both" or spec.reference_ignores)
# Appended to a help text that states its own default (or whose default, None or False, says nothing):
# ArgumentDefaultsHelpFormatter adds "(default: X)" only to help without "%(default)", and this formats to "".
_DEFAULT_SAID = "%(default).0s"


def refuse_foreign(options: Options, framework: str) -> None:
    """Raise UsageError for a feature of the other framework that `framework` has no equivalent of."""
    for name, (option_flag, owner) in ONE_SIDED.items():
        if owner != framework and getattr(options, name) not in (None, False):
            raise UsageError(SPECS[name].refusal or f"{option_flag} has no {FRAMEWORK_NAMES[framework]} "
                             f"equivalent (it is a {FRAMEWORK_NAMES[owner]} feature)")


def ignored_options(options: dict, framework: str) -> list[str]:
    """The flags set in `options` (a run.json options dict) that `framework` accepts but does not use."""
    if framework == "reference":
        names: tuple[str, ...] = REFERENCE_IGNORES
    else:
        names = tuple(name for other, settings in FRAMEWORK_SETTINGS.items() if other != framework
                      for name in settings)
    return [flag(name) for name in names if name in options and options[name] != FIELDS[name].default]


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser, *, run_directory: bool = True, launch: bool = True) -> None:
    """The shared options, added to any parser (the implementations' and the comparison's, which has an
    --out and launch options of its own)."""
    earlier = {id(action) for action in parser._actions}
    hints = typing.get_type_hints(Options)
    for title in GROUPS:
        if title == SPAWN and not launch:
            continue
        group = parser.add_argument_group(title)
        if title == SPAWN:
            _add_spawn_arguments(group)
        for name, spec in SPECS.items():
            if spec.group != title or (spec.run_directory and not run_directory):
                continue
            if spec.add is not None:
                spec.add(group)
            else:
                group.add_argument(flag(name), **argument(FIELDS[name], hints[name]))
    for action in parser._actions:
        says_nothing = action.default is None or action.default is False
        shown = action.help and action.help != argparse.SUPPRESS
        if id(action) not in earlier and shown and (says_nothing or "(default" in action.help):
            action.help += _DEFAULT_SAID


def _add_spawn_arguments(spawn: argparse._ArgumentGroup) -> None:
    # How to start the workers, not what they train: no field of Options.
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
    values = {}
    for name, spec in SPECS.items():
        if spec.read is not None:
            values[name] = spec.read(ns)
        elif hasattr(ns, name):
            values[name] = getattr(ns, name)
    return Options(**values)


def to_argv(options: Options, *, out: Path, seeds: tuple[int, ...]) -> list[str]:
    """The command-line arguments that make an implementation run exactly these options."""
    argv = ["--seeds", ",".join(map(str, seeds)), "--out", str(out)]
    for name in FIELDS:
        value = options.resolved_lr() if name == "lr" else getattr(options, name)
        if name in ("seeds", "out") or value is None or value is False:
            continue
        argv += [flag(name)] if value is True else [flag(name), repr(value) if isinstance(value, float) else str(value)]
    return argv


def validate(options: Options) -> None:
    """Each option's own check, in the order of the fields, the workload's last (loading it imports torch, a
    second that a mistyped number should not wait for); those need no data and no world size. Raises
    UsageError with one line."""
    for name, spec in sorted(SPECS.items(), key=lambda item: item[1].check is _loadable):
        value = getattr(options, name)
        if spec.check is not None and value is not None and (problem := spec.check(flag(name), value, options)):
            raise UsageError(problem)


def check_writable(out: Path) -> None:
    """Fail before training, not after, when the run directory cannot be written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-probe-"):  # unique: ranks probe at once
            pass
    except OSError as exc:
        raise UsageError(f"--out {out} is not writable: {exc.strerror or exc}") from None
