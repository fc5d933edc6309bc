"""Every option of `python -m compare`'s commands, each declared once: its flags, type, default, help, section
of --help and the commands that take it. The parsers are derived from this table (compare/commands/cli.py), as
the training options' are from workload/options.py, whose fields `run` and `k8s` take as they are.

Each flag is one entry with one default, whatever the command (tests/test_cli_options.py holds it): an option
several commands take means the same in each, and where a command needs another default it is another option
with its own name (`compare migrate --verify-np`, not `--np`). Defaults that the analysis, the launchers or the
readers use too are theirs and the table's alike, declared once in compare/defaults.py. The table imports no
command, no analysis and no torch: `--help` is built from it alone, and the command's own module is imported
only to run it.

To declare an option: one `opt(...)` below, with the flags, help, the commands that take it (`commands=`), the
--help section (`group=`) and argparse's keywords (type, default, choices, action, metavar...); a default other
code reads goes in compare/defaults.py and is imported here. Its value arrives as `ns.<flag's name>`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compare.commands.arguments import frameworks, int_list, margin, precision, target, word_list
from compare.commands.bench_settings import PARTS, QUICK, Settings
from compare.defaults import (
    DDP_FORMS,
    DEFAULT_BUDGET_S,
    DEFAULT_MARGINS,
    DEFAULT_PRECISION,
    DEFAULT_PRECISION_MANY,
    DEFAULT_ROUNDS,
    DEFAULT_SEEDS,
    DEFAULT_TARGETS,
    DEFAULT_TIMED_S,
    DEFAULT_TIMEOUT,
    DEFAULT_WARMUP,
    FAULT_STEP,
    HOROVOD_FORMS,
    IMPORT_FORMATS,
    MIN_ROUNDS,
    ON_RESTART,
    SCENARIOS,
    SLURM_NODES,
    STEP_FROM,
    STEP_K,
    STEP_RTOL,
    SWEEP_WIDTHS,
)
from compare.names import FRAMEWORKS, LaunchedBy
from workload.builtin import WORKLOAD_METAVAR

# The analysis's defaults as --help shows them: "final_loss=2%, ..." and "digits eval_accuracy=0.9, ...".
MARGINS_SHOWN = ", ".join(f"{name}={value * 100:g}%" if kind == "relative" else f"{name}={value:g}"
                          for name, (kind, value) in DEFAULT_MARGINS.items())
TARGETS_SHOWN = ", ".join(f"{workload} {metric}={value:g}"
                          for workload, (metric, value) in DEFAULT_TARGETS.items())

ANALYSIS = "analysis (docs/parity.md)"
TARGET = "time to target (docs/benchmarks.md)"
SPEED = "speed (docs/benchmarks.md)"
SCHEDULER = "scheduler (docs/slurm.md)"
FIELDS = "where the values are (column, key or tag names)"
TEXT = "text logs and printed lines (docs/own-job.md: prefixes, ranks, how steps are numbered)"
CLUSTER = "cluster"


MIGRATE_EPILOG = """examples:
  python -m compare migrate path/to/repo -o repo_ddp    # the whole tree, with repo_ddp/MIGRATION.md
  python -m compare migrate path/to/repo --diff         # a unified diff that `git apply` takes; writes nothing
  python -m compare migrate path/to/repo --in-place     # a clean git work tree only (`git checkout .` undoes it)
  python -m compare migrate path/to/repo -o repo_ddp --verify --entry train.py -- --epochs 2
  python -m compare migrate train.py                    # writes train_ddp.py and train_ddp.migration.md
  python -m compare migrate train.py --verify --speed-rounds 3 -- --epochs 2   # and a speed verdict
  python -m compare migrate path/to/repo -o repo_ddp --verify --entry train.py --device cuda -- --epochs 2
  python -m compare migrate path/to/repo -o repo_ddp --verify --entry train.py --scheduler slurm --partition gpu \
      --device cuda --sbatch-arg=--gres=gpu:2 -- --epochs 2   # both sides as Slurm jobs (docs/slurm.md)
  python -m compare migrate --launch "horovodrun -np 8 -H a:4,b:4 python train.py"

After --: arguments for both runs of --verify ({run_dir} is replaced by each side's run directory; --ddp-args
gives the migrated side its own).

Exit status: 0 migrated (and, with --verify, parity holds; or the script prints no loss, so parity is not
checked, and both sides were timed); 2 bad input; 6 written, but some Horovod uses need a person (see the
report; --allow-partial exits 0); with --verify, `compare check`'s status (1 parity fails, 3 a run failed,
4 undecided, 5 not the same job), 3 also when a --speed-rounds launch failed, and 4 when the script prints no
loss and cannot be timed either. The speed verdict never changes the status."""
VERIFY = "--verify: run both and compare"


@dataclass(frozen=True)
class Command:
    """A command: its line in `python -m compare --help`, its own --help, and where its entry point lives."""

    help: str
    description: str
    module: str  # compare/commands/MODULE.py, whose ENTRY(ns) -> int runs it
    epilog: str = ""
    workload_options: bool = False  # takes the training options of workload/options.py, passed to each launch
    passthrough: str | None = None  # the namespace attribute that gets everything after `--`
    # What this command does with a training option, added to that option's help (flag -> words).
    workload_notes: dict[str, str] = field(default_factory=dict)
    entry: str = "main"
    writes: str = ""  # what goes where --out says (its help), for a command that takes --out
    out_beside_input: bool = False  # --out's default is beside the input (migrate's), not results/COMMAND


COMMAND_SPECS: dict[str, Command] = {
    "run": Command("launch both frameworks and report parity and speed",
                   "Launch each framework at each world size with its real launcher (horovodrun, torchrun), every "
                   "seed in one launch, then judge parity and speed and write the report.", "run",
                   workload_options=True,
                   workload_notes={"--seeds": f"compare run: {','.join(map(str, DEFAULT_SEEDS))}, or the one "
                                              "--seed given"},
                   writes="the run records, the report and its figures"),
    "check": Command("parity of two existing run records",
                     "Decide whether two sets of run records train the same job the same way.", "check"),
    "report": Command("rebuild the report from run records",
                      "Rebuild report.md and report.json from the run records under DIR (a comparison's "
                      "OUT, or any tree of runs), with new analysis options if given.", "report"),
    "matrix": Command("every feature on both sides at np 2",
                      "Run each training feature in its idiomatic form on both frameworks (np 2, mlp unless "
                      "--workload) and write matrix.json and matrix.md.", "matrix",
                      writes="the run records, matrix.json and matrix.md"),
    "faults": Command("the same faults on both frameworks' recovery paths",
                      "Kill, exit or stop a worker of each framework at np 2 and report recovery (torchrun "
                      "--max-restarts with checkpoints; elastic Horovod).", "faults",
                      writes="the run records, faults.json and faults.md"),
    "bench": Command("measure each framework against its limits, tune both, and the harness's own cost",
                     "Measure each framework against its limits on this machine (allreduce bandwidth, the bare "
                     "loops, the project's overhead) and tune both (docs/benchmarks.md).", "bench",
                     entry="run_bench", writes="the launches' records, bench.json, bench.md and tuned.json"),
    "k8s": Command("write Kubeflow manifests for both sides (MPIJob, PyTorchJob, TrainJob)",
                   "Write an MPIJob (Horovod through mpirun), a PyTorchJob and a TrainJob (DDP through torchrun) "
                   "that train the same job with the same options, a results volume claim and a pod to read it. "
                   "Nothing is applied: `kubectl apply -f DIR/...` does that (docs/kubernetes.md).", "k8s",
                   workload_options=True, writes="the manifests"),
    "import": Command("a run record from an existing log (TensorBoard, CSV, JSON lines, text, MLflow)",
                      "Turn the log of a run made elsewhere into a run record that `compare check` and `compare "
                      "report` read. What the log cannot tell (step times, the global batch, the machine) is left "
                      "empty and listed in run.json's \"imported\" entry.", "import_records",
                      writes="the run directory to write"),
    "migrate": Command("rewrite Horovod code for DDP + torchrun, with a report (and --verify)",
                       "Rewrite a Horovod PyTorch repository or script for DDP and torchrun, report every change, flag "
                       "what has no equivalent, and (--verify) prove the result trains the same (docs/migration.md).",
                       "migrate", passthrough="script_args", epilog=MIGRATE_EPILOG,
                       writes="the migrated tree (default: PATH_ddp beside it) or script (default: SCRIPT_ddp.py)",
                       out_beside_input=True),
}


@dataclass(frozen=True)
class Opt:
    """One option: argparse's keywords, and which commands take it in which section of their --help."""

    flags: tuple[str, ...]  # ("--timeout",), ("-o", "--output-dir"), or a positional's name ("dir_a",)
    help: str
    commands: tuple[str, ...]
    group: str | None = None  # None: the command's own options
    hidden: bool = False  # set by tests and by compare itself, not by a user: accepted, left out of --help
    kwargs: dict[str, Any] = field(default_factory=dict)  # default, type, choices, action, nargs, metavar...


def opt(*flags: str, help: str, commands: tuple[str, ...] | str, group: str | None = None, hidden: bool = False,
        **kwargs: Any) -> Opt:
    return Opt(flags, help, (commands,) if isinstance(commands, str) else commands, group, hidden, kwargs)


LAUNCHING = ("run", "faults", "matrix", "bench")
WRITING = (*LAUNCHING, "import", "k8s", "migrate")  # the commands that take --out
SLURM_COMMANDS = ("run", "migrate")  # migrate: its --verify launches
JUDGING = ("run", "check", "report", "matrix")

OPTIONS: tuple[Opt, ...] = (
    # --- shared by the commands that launch
    # help: the command's `writes`; default: results/COMMAND, or the command's own beside its input (cli.py)
    opt("-o", "--out", help="where this command writes", commands=WRITING, type=Path, metavar="PATH"),
    opt("--timeout", help="seconds allowed for each launch (migrate: for each side's run under --verify)",
        commands=(*LAUNCHING, "migrate"), type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS"),
    opt("--np", help="world sizes, e.g. 1,2,4", commands="run", type=int_list, default=(1, 2), metavar="N[,N...]"),
    opt("--horovod-controller", help="horovodrun --mpi or --gloo", commands="run", choices=("mpi", "gloo"),
        default="mpi"),
    # --- run: the comparison
    opt("--frameworks", help="which sides to launch: horovod, ddp, or both as horovod,ddp", commands="run",
        type=frameworks, default=FRAMEWORKS, metavar="NAMES"),
    opt("--launcher", help="cli: horovodrun and torchrun; spawn: horovod.run and torch.multiprocessing.spawn",
        commands="run", choices=("cli", "spawn"), default="cli"),
    opt("--reference", help="also train one process on the same global batches (auto: on for mlp and digits)",
        commands="run", choices=("auto", "on", "off"), default="auto"),
    opt("--network", help="private: each launch in a network namespace of its own with only loopback, so nothing "
                          "it listens on is reachable from outside (needs root); auto: private when possible",
        commands="run", choices=("auto", "private", "host"), default="auto"),
    opt("--tuned", help="compare tuned against tuned: each framework's settings from FILE (the tuned.json that "
                        "`compare bench` writes); without it, defaults against defaults",
        commands="run", type=Path, metavar="FILE"),
    # --- run: speed
    opt("--repeats", help="a fixed number of speed rounds instead of rounds until --precision (2 for a sweep): "
                          "after round 1 (every seed, for parity), each framework once more per round, the first "
                          "seed only, timing --timed-seconds, in alternating order (A B, B A ...); 0: parity only. "
                          f"With --precision or --time-budget: the first look (default {DEFAULT_ROUNDS})",
        commands="run", group=SPEED, type=int, metavar="N"),
    opt("--precision", help="launch rounds (in pairs, A B then B A) until the sequential 95% interval of the "
                            "Horovod/DDP ratio is within +-P% at each world size (one for all, or per size: "
                            f"1:10%,2:15%), or --time-budget is spent (default: {DEFAULT_PRECISION[1]:.0%} at np 1, "
                            f"{DEFAULT_PRECISION_MANY:.0%} above; docs/benchmarks.md: planned looks, or a confidence "
                            "sequence past 15 minutes, valid however the rounds stop)", commands="run", group=SPEED,
        type=precision, metavar="P%"),
    opt("--time-budget", help=f"the most seconds of launches, round 1 included, for the rounds (default "
                              f"{DEFAULT_BUDGET_S:g}, after at least {DEFAULT_ROUNDS} speed rounds); a size that "
                              "reaches its --precision stops sooner", commands="run", group=SPEED, type=float,
        metavar="SECONDS"),
    opt("--timed-seconds", help="each speed round's launches time about this many seconds of steady state (one "
                                "seed, the steps from round 1's step times, the same for both sides); 0: the "
                                "job's own steps, round 1 counting as a speed round (default: a window chosen "
                                "from round 1's launch overhead and step-time spread, at least "
                                f"{DEFAULT_TIMED_S:g} s)",
        commands="run", group=SPEED, type=float, default=None, metavar="SECONDS"),
    opt("--aa", help="A/A check: launch FRAMEWORK twice in every speed round and judge the twin against the first "
                     "as Horovod against DDP; its interval should hold 1 (with --frameworks FRAMEWORK: the A/A "
                     "check alone)", commands="run", group=SPEED, choices=FRAMEWORKS, metavar="FRAMEWORK"),
    opt("--step-delay-for", help="apply --step-delay-ms to this framework only, or to the --aa twin (tests)",
        commands="run", group=SPEED, hidden=True, choices=(*FRAMEWORKS, "twin")),
    opt("--sweep-model-size", help="instead of a comparison: which side is faster, and by how much, as the mlp's "
                                   "gradient grows (--sweep-widths), at the largest --np, with a plot of the crossover",
        commands="run", group=SPEED, action="store_true"),
    opt("--sweep-widths", help="mlp hidden widths for --sweep-model-size (256 is the default mlp)",
        commands="run", group=SPEED, type=int_list, default=SWEEP_WIDTHS, metavar="W[,W...]"),
    # --- run, migrate --verify: where the launches run (compare/commands/scheduler.py reads them)
    opt("--scheduler", help="local: start the launchers here; slurm: every launch a Slurm job (sbatch), its batch "
                            "script kept in the run directory", commands=SLURM_COMMANDS, group=SCHEDULER,
        choices=("local", "slurm"), default="local"),
    opt("--partition", help="slurm: the partition (default: the cluster's)", commands=SLURM_COMMANDS,
        group=SCHEDULER),
    opt("--nodes", help="slurm: nodes per job (at most one per rank; the ranks spread evenly)",
        commands=SLURM_COMMANDS, group=SCHEDULER, type=int, default=SLURM_NODES),
    opt("--time", help="slurm: each job's time limit (default: --timeout, rounded up to minutes)",
        commands=SLURM_COMMANDS, group=SCHEDULER, type=int, metavar="MINUTES"),
    opt("--sbatch-arg", help="slurm: passed to sbatch as it is (repeat it: --sbatch-arg=--account=ml)",
        commands=SLURM_COMMANDS, group=SCHEDULER, action="append", default=[], metavar="ARG"),
    opt("--slurm-horovod", help="slurm: Horovod's ranks started by srun --mpi=pmix, or by mpirun inside the "
                                "allocation", commands=SLURM_COMMANDS, group=SCHEDULER, choices=HOROVOD_FORMS,
        default=HOROVOD_FORMS[0]),
    opt("--slurm-ddp", help="slurm: DDP through srun torchrun (one per node), or one srun task per rank",
        commands=SLURM_COMMANDS, group=SCHEDULER, choices=DDP_FORMS, default=DDP_FORMS[0]),
    # --- the analysis
    opt("--warmup", help="optimizer steps of each launch left out of its timing", commands=(*JUDGING, "migrate"),
        group=ANALYSIS, type=int, default=DEFAULT_WARMUP),
    opt("--rtol", help="the step-wise tolerance floor on the relative loss difference", commands=JUDGING,
        group=ANALYSIS, type=float, default=STEP_RTOL),
    opt("--k", help="the first steps judged at the floor alone", commands=JUDGING, group=ANALYSIS, type=int,
        default=STEP_K),
    opt("--margin", help=f"an end point's equivalence margin, absolute or relative with % (repeatable; defaults: "
                         f"{MARGINS_SHOWN})", commands=JUDGING, group=ANALYSIS, type=margin, action="append",
        default=[], metavar="NAME=VALUE[%]"),
    opt("--allow", help="option differences that are intended (e.g. optimizer,lr): listed, not 'different jobs'",
        commands=JUDGING, group=ANALYSIS, type=word_list, action="append", default=[], metavar="NAMES"),
    opt("--target", help="time to target: per framework and world size, steps and seconds from the launch to the "
                         "first evaluation at eval_accuracy, eval_loss or final_loss VALUE, over seeds, and which "
                         f"side reaches it sooner (repeatable; alone: the workload's, {TARGETS_SHOWN})",
        commands=("run", "report"), group=TARGET, type=target, nargs="?", const="default", action="append",
        default=[], metavar="NAME=VALUE"),
    # --- check, report
    opt("dir_a", help="a run directory (or a directory of seed-S run directories)", commands="check", type=Path),
    opt("dir_b", help="the other side's, the same way", commands="check", type=Path),
    opt("--calibration", help="a control pair of this job that differs only in a way known not to change it "
                              "(e.g. `--perturb-init-ulps 1`): its divergence sets the band; without it, the "
                              "default band", commands="check", type=Path, nargs=2, metavar=("RUN_A", "RUN_B")),
    opt("dir", help="a comparison directory (holding runs/) or any tree of runs", commands="report", type=Path),
    # --- matrix, faults, bench
    opt("--workload", help="what to train: a built-in, or your own model as in docs/own-job.md (matrix: the "
                           "SyncBatchNorm row always trains resnet)", commands=("matrix", "bench"), default="mlp",
        metavar=WORKLOAD_METAVAR),
    opt("--steps", help=f"optimizer steps per run (faults: the fault is at step {FAULT_STEP}, so more than "
                        f"{FAULT_STEP + 1})", commands=("matrix", "faults"), type=int, default=30),
    opt("--seed", help="matrix: the seed of every run; import: the run's seed (check pairs runs by seed)",
        commands=("matrix", "import"), type=int, default=0),
    opt("--only", help="run only the features whose names contain one of these words, e.g. resume,ZeRO",
        commands="matrix", type=word_list, metavar="WORDS"),
    opt("--scenarios", help=f"which faults, from {', '.join(SCENARIOS)}", commands="faults", type=word_list,
        default=list(SCENARIOS), metavar="NAMES"),
    opt("--interval", help="steps between checkpoints / commits", commands="faults", type=int, default=8),
    opt("--collective-timeout", help="seconds before a stopped worker fails", commands="faults", type=float,
        default=20.0),
    opt("--hang-wait", help="seconds to wait on a scenario known not to recover (elastic Horovod and a stopped "
                            "worker) before ending it", commands="faults", type=float, default=120.0),
    opt("--quick", help="np 2 only, defaults and probes only, small sizes, one round, no tuned runs and no "
                        "end-to-end run (a smoke test: about a minute)", commands="bench", action="store_true"),
    opt("--batch-size", help="samples per worker per step", commands="bench", type=int, default=Settings.batch_size),
    opt("--threads", help="torch threads per worker", commands="bench", type=int, default=Settings.threads),
    # No default for these: --quick has its own, shown in brackets.
    opt("--overhead-steps", help=f"optimizer steps per overhead launch [{Settings.steps}; --quick {QUICK.steps}]",
        commands="bench", type=int, default=argparse.SUPPRESS),
    opt("--rounds", help=f"interleaved rounds of overhead launches [{Settings.rounds}; --quick {QUICK.rounds}]",
        commands="bench", type=int, default=argparse.SUPPRESS),
    opt("--sweep-rounds", help=f"blocks per sweep configuration [{Settings.sweep_rounds}; --quick "
                               f"{QUICK.sweep_rounds}]", commands="bench", type=int, default=argparse.SUPPRESS),
    opt("--skip", help=f"parts to leave out, from: {', '.join(PARTS)}", commands="bench", type=word_list,
        default=[], metavar="PARTS"),
    # --- k8s
    opt("--image", help="the project's image (Dockerfile), pushed where the cluster pulls from", commands="k8s",
        group=CLUSTER, required=True),
    opt("--workers", help="pods per job", commands="k8s", group=CLUSTER, type=int, required=True),
    opt("--gpus-per-worker", help="GPUs each pod asks for (with --device cuda)", commands="k8s", group=CLUSTER,
        type=int, default=0),
    opt("--procs-per-worker", help="training processes per pod (default: --gpus-per-worker, or 1 without GPUs)",
        commands="k8s", group=CLUSTER, type=int),
    opt("--name", help="prefix of the jobs' names", commands="k8s", group=CLUSTER, default="hvd-compare"),
    opt("--results-claim", help="the PersistentVolumeClaim (ReadWriteMany) every training pod mounts at /results",
        commands="k8s", group=CLUSTER, default="hvd-compare-results"),
    opt("--results-size", help="its requested size", commands="k8s", group=CLUSTER, default="1Gi"),
    opt("--storage-class", help="its storage class (default: the cluster's)", commands="k8s", group=CLUSTER),
    opt("--trainjob-runtime", help="the ClusterTrainingRuntime the TrainJob runs on", commands="k8s", group=CLUSTER,
        default="torch-distributed"),
    # --- import
    opt("format", help="the log's format", commands="import", choices=IMPORT_FORMATS),
    opt("source", help="the log file (TensorBoard: an event file or its directory; MLflow: the run directory "
                       "mlruns/<experiment>/<run> or its metrics directory)", commands="import", type=Path),
    opt("--framework", help="which framework made the run", commands="import",
        choices=(*FRAMEWORKS, "unknown"), default="unknown"),
    opt("--world-size", help="workers of the run (unknown: recorded as 1)", commands="import", type=int),
    opt("--global-batch", help="samples per optimizer step over all workers, when known", commands="import",
        type=int),
    opt("--option", help="an option of the run, recorded in run.json (repeatable), e.g. lr=0.05", commands="import",
        action="append", default=[], metavar="KEY=VALUE"),
    opt("--step-field", help="CSV column, JSON key or text log key of the step (a text log's default: its step key "
                             "or counter, by rule)", commands="import", group=FIELDS, default="step"),
    opt("--loss-field", help="column, key (a text log's too) or scalar tag of the training loss (default: one named "
                             "loss, train_loss, train/loss...)", commands="import", group=FIELDS),
    opt("--lr-field", help="column, key or tag of the learning rate", commands="import", group=FIELDS),
    opt("--eval-loss-field", help="column, key or tag of an evaluation loss", commands="import", group=FIELDS),
    opt("--eval-accuracy-field", help="column, key or tag of an evaluation accuracy", commands="import",
        group=FIELDS),
    opt("--regex", help="a regular expression with named groups step and loss (and lr; epoch for a counter that "
                        "restarts every epoch), searched in rank 0's lines (default: lines like 'step 10 ... loss "
                        "0.52' or 'Train Epoch: 1 [640/60000 (1%)]  Loss: 0.31')", commands="import", group=TEXT),
    opt("--eval-regex", help="evaluation lines: named groups eval_loss, eval_accuracy (a fraction) or "
                             "eval_accuracy_percent (default: 'Test set: Average loss: L, Accuracy: A%')",
        commands=("import", "migrate"), group=TEXT),
    opt("--step-from", help="log: the step (and epoch) the line prints; order: the rank's matching lines numbered "
                            "1, 2, 3...", commands=("import", "migrate"), group=TEXT, choices=STEP_FROM,
        default=STEP_FROM[0]),
    opt("--rank", help="whose lines count, in a log whose lines carry launcher prefixes ([1,0]<stdout>:, 0: , "
                       "[default0]:)", commands="import", group=TEXT, type=int, default=0),
    opt("--on-restart", help="a text log without rank prefixes (or an MLflow run) whose steps go back is a run "
                             "resumed from a checkpoint: its steps logged again keep the resumed run's values "
                             "(keep-last) or the first run's", commands="import", group=TEXT, choices=ON_RESTART,
        default=ON_RESTART[0]),
)


MIGRATE_OPTIONS: tuple[Opt, ...] = (
    opt("script", help="the Horovod PyTorch repository (a directory) or script", commands="migrate", type=Path,
        nargs="?", metavar="PATH"),
    opt("--in-place", help="rewrite the files themselves; refused unless PATH is in a clean git work tree",
        commands="migrate", action="store_true"),
    opt("--diff", help="print the change as a unified diff; write nothing", commands="migrate", action="store_true"),
    opt("--report", help="a script's Markdown report (default: beside the output, OUT.migration.md)",
        commands="migrate", type=Path),
    opt("--force", help="overwrite an existing output and report", commands="migrate", action="store_true"),
    opt("--allow-partial", help="exit 0 even when Horovod uses that need a person remain (they stay, flagged)",
        commands="migrate", action="store_true"),
    opt("--launch", help='a horovodrun command line to translate, e.g. "horovodrun -np 8 -H a:4,b:4 python '
                         'train.py"', commands="migrate", metavar="HOROVODRUN_LINE"),
    opt("--verify", help="run the original under horovodrun and the result under torchrun (here or, with "
                         "--scheduler slurm, as Slurm jobs; on --device), then `compare check` the two run records",
        commands="migrate", group=VERIFY, action="store_true"),
    opt("--entry", help="a repository's entry point, relative to its root (the script horovodrun ran)",
        commands="migrate", group=VERIFY, metavar="PATH_IN_REPO"),
    opt("--ddp-args", help='the migrated side\'s own arguments, in place of those after -- (e.g. "--distributed '
                           '--epochs 1" where the migration refuses --horovod)', commands="migrate", group=VERIFY,
        metavar="ARGS"),
    opt("--verify-out", help="where the two run directories go (default: results/migrate/SCRIPT-STEM)",
        commands="migrate", group=VERIFY, type=Path),
    # One world size and Gloo (MPI for Adasum): the verify launches' own, not compare run's --np and
    # --horovod-controller (several world sizes; MPI, Horovod's own default).
    opt("--verify-np", help="processes on each side", commands="migrate", group=VERIFY, type=int, default=2,
        metavar="N"),
    opt("--verify-controller", help="the original's horovodrun --gloo or --mpi (Adasum needs mpi; under Slurm "
                                    "see --slurm-horovod)", commands="migrate", group=VERIFY,
        choices=("gloo", "mpi"), default="gloo"),
    opt("--device", help="cpu: both sides see no GPU (CUDA_VISIBLE_DEVICES empty), Gloo; cuda: both see the GPUs "
                         "and each script takes its own, Horovod's NCCL operations against torch's NCCL (refused "
                         "where torch sees no CUDA device, or a local --verify-np above the GPUs)", commands="migrate",
        group=VERIFY, choices=("cpu", "cuda"), default="cpu"),
    opt("--launch-mode", help="cli: horovodrun and torchrun start the workers; api: the script starts them "
                              "(horovod.run, torch.multiprocessing.spawn); auto: decided from the script and its "
                              "arguments (a horovod.run under `if args.num_proc:` is api only with --num-proc)",
        commands="migrate", group=VERIFY, choices=("auto", *(mode.value for mode in LaunchedBy)), default="auto"),
    opt("--loss-regex", help="a regular expression with named groups step and loss (and lr; epoch for a counter "
                             "that restarts every epoch), searched in rank 0's lines (default: the reader's named "
                             "formats, docs/own-job.md: 'step 10 ... loss 0.52', 'Train Epoch: 1 [640/60000 (1%)]  "
                             "Loss: 0.31', JSON lines, key-value and progress-bar lines...)", commands="migrate",
        group=TEXT),
    opt("--speed-rounds", help="launch each side up to N more times, interleaved with the order alternating, for a "
                               f"speed verdict as compare run reaches it (it needs {MIN_ROUNDS} rounds, the verify "
                               "launches being the first), under compare run's group-sequential design: the rounds "
                               "stop at the look where the interval is within compare run's target at this np, and "
                               "the first look says how many rounds the target needs", commands="migrate",
        group=VERIFY, type=int, default=0, metavar="N"),
    opt("--throughput-regex", help="for a script whose optimizer bypasses torch's step hooks: a regular expression "
                                   "with a named group throughput (a rate, higher is faster), searched in rank 0's "
                                   "lines (default: 'X img/sec', 'X samples/s', 'X it/s')", commands="migrate",
        group=TEXT),
)
OPTIONS = (*OPTIONS, *MIGRATE_OPTIONS)


def options_of(command: str) -> list[Opt]:
    return [o for o in OPTIONS if command in o.commands]
