"""The defaults and choices of `python -m compare` that its option table shows and the code that acts on them
uses, each declared here once: the parity judge's tolerances and margins, the time-to-target targets, the speed
design, the Slurm forms, the log readers' choices, where results go.

Light on purpose (the standard library only): compare/commands/options.py builds `--help` from it without
importing the analysis, the launchers, the readers or torch, which all import their defaults from here
(tests/test_cli_options.py checks what `--help` imports).
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path("results")  # `--out`'s default: results/COMMAND


def out_default(command: str) -> Path:
    return RESULTS / command


# --- compare run: the launches
DEFAULT_SEEDS = (0, 1, 2)  # compare run's seeds, unless --seed or --seeds says otherwise
DEFAULT_TIMEOUT = 600.0  # seconds for one launch: a slow launch of the default job takes a fraction of it
DEFAULT_WARMUP = 5  # steps of each launch left out of its timing
SWEEP_WIDTHS = (32, 256, 1024, 2048, 4096)  # --sweep-model-size: gradients of 14 KB, 0.34 MB, 4.5 MB, 17 MB, 68 MB

# --- compare run: the speed rounds
DEFAULT_ROUNDS = 4  # the fixed design's speed rounds, and the sequential default's first look (docs/benchmarks.md)
DEFAULT_TIMED_S = 2.0  # seconds of steady state a speed launch times (docs/benchmarks.md: the window study)
# The default comparison's speed rounds: until each world size's interval is this precise (world size -> +-fraction;
# larger sizes are noisier, two ranks sharing two cores), or this budget is spent (issue 43: about 4 minutes here,
# the parity launch included; docs/benchmarks.md, "Intervals that decide").
DEFAULT_PRECISION = {1: 0.10}
DEFAULT_PRECISION_MANY = 0.15
DEFAULT_BUDGET_S = 240.0
MIN_ROUNDS = 3  # fewer rounds give a t interval too wide to say anything (t(0.975, 1 df) = 12.7)

# --- the parity judge (compare/analysis/parity.py)
STEP_RTOL = 1e-5
"""The tolerance floor on the relative loss difference at any step (float32 epsilon is 1.19e-7; PyTorch's own
DDP tests compare parameters after every step with rtol 1.3e-6)."""

STEP_K = 20
"""The default band's first steps, judged at the floor alone. A calibrated band applies from step 1: where the
job's own calibration pairs already part within these steps (one seed of the digits reference jumps from 1e-7
to 2e-5 at step 9, and its one-ulp pair does the same), the floor alone would call that noise a divergence."""

DEFAULT_MARGINS = {"final_loss": ("relative", 0.02), "eval_loss": ("relative", 0.02),
                   "eval_accuracy": ("absolute", 0.01)}
"""Equivalence margins when the user states none: 2% of a loss, 1 point of accuracy."""

# --- time to target (compare/analysis/time_to_target.py): `--target` without a value, workload -> (metric, value):
# what the workload's default job reaches within a few epochs on one worker (digits: 0.89 after 3 epochs, 0.96
# after 4; mlp: 0.64 after 1, 0.70 after 2). resnet, lm and plug-ins have none: their users name one.
DEFAULT_TARGETS = {"digits": ("eval_accuracy", 0.9), "mlp": ("eval_accuracy", 0.6)}

# --- compare faults (compare/analysis/faults.py)
SCENARIOS = ("kill", "exit", "hang")  # what happens to the worker
FAULT_STEP, FAULT_RANK = 13, 1

# --- Slurm (compare/launch/slurm.py): nodes per job; what starts each side's ranks in it, the first the default
SLURM_NODES = 1
HOROVOD_FORMS = ("srun", "mpirun")  # srun --mpi=pmix, or mpirun inside the allocation
DDP_FORMS = ("torchrun", "srun")  # srun torchrun (one per node), or one srun task per rank

# --- the log readers (compare/importers.py, compare/loss_lines/)
IMPORT_FORMATS = ("tensorboard", "csv", "jsonl", "text", "mlflow")
STEP_FROM = ("log", "order")  # the step a line prints, or the matching lines numbered 1, 2, 3...
ON_RESTART = ("keep-last", "keep-first")  # a resumed run's steps logged again: which values stay
