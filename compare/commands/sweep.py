"""compare run --sweep-model-size: which side is faster, and by how much, as the gradient grows.

The mlp's hidden width sets the gradient size (KB to hundreds of MB); at each width both frameworks train
a few steps at the largest --np, in rounds whose order reverses every other round (widths up, then down;
Horovod first, then DDP first) so that drift cancels. Where Horovod's fusion buffer and cycle and DDP's
buckets part ways shows as the ratio crossing 1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from compare.analysis.model_sweep import crossover, sweep_points
from compare.analysis.records import find_runs, jsonable
from compare.launch.lines import Launch, build_launch, private_network_available
from compare.launch.logs import steps_done
from compare.launch.process import run_launch
from compare.launch.tuning import load_tuning
from compare.names import FRAMEWORKS, Exit
from compare.render.blocks import DASH, Heading, Para, Table, ms, render_markdown, text_table
from compare.render.plots import plot_size_sweep
from compare.render.progress import ProgressReporter
from compare.render.speed_up import faster_by, one_direction
from workload.errors import UsageError
from workload.files import write_atomic, write_json_atomic
from workload.options import check_writable, options_from_namespace, validate

SWEEP_STEPS = 25
SWEEP_ROUNDS = 2
SWEEP_PLOT = "model_size_sweep.png"


@dataclass(frozen=True)
class SweepPlan:
    """The sweep's launches, in the order they run, and what running and reporting them needs."""

    launches: tuple[Launch, ...]
    world_size: int  # the largest --np: every launch's
    out: Path
    timeout: float
    warmup: int


def sweep_plan(ns: argparse.Namespace) -> SweepPlan:
    if set(ns.frameworks) != set(FRAMEWORKS):
        raise UsageError("--sweep-model-size compares the two frameworks: leave --frameworks at both")
    options = options_from_namespace(ns)
    if options.workload != "mlp":
        raise UsageError("--sweep-model-size sweeps the mlp workload's width: leave --workload at mlp")
    world_size = max(ns.np)
    if world_size < 2:
        raise UsageError("--sweep-model-size compares communication: give --np with a size of at least 2")
    if any(width <= 0 for width in ns.sweep_widths):
        raise UsageError(f"--sweep-widths must be positive, got {','.join(map(str, ns.sweep_widths))}")
    base = replace(options, seeds=(ns.seed if ns.seeds is None else ns.seeds[0],), steps=options.steps or SWEEP_STEPS)
    validate(base)
    tuning = load_tuning(ns.tuned)
    private = ns.network != "host" and private_network_available()
    rounds = ns.repeats or SWEEP_ROUNDS
    launches = []
    for number in range(1, rounds + 1):
        forward = number % 2 == 1
        widths = sorted(set(ns.sweep_widths), reverse=not forward)
        order = ns.frameworks if forward else tuple(reversed(ns.frameworks))
        for width in widths:
            for framework in order:
                opts = tuning.options_for(framework, replace(base, hidden=width, round=number))
                launches.append(build_launch(framework, world_size, opts,
                                             ns.out / "sweep" / f"{framework}-w{width}-round{number}",
                                             horovod_controller=ns.horovod_controller, launcher=ns.launcher,
                                             extra_env=tuning.env.get(framework), private_network=private))
    return SweepPlan(tuple(launches), world_size, ns.out, ns.timeout, ns.warmup)


def run_sweep(plan: SweepPlan) -> int:
    launches, out = plan.launches, plan.out
    check_writable(out)
    shutil.rmtree(out / "sweep", ignore_errors=True)  # this tool's own output: no stale records
    steps = int(_option(launches[0], "--steps"))
    reporter = ProgressReporter(steps * len(launches))
    started = time.monotonic()
    failed = 0
    try:
        for index, launch in enumerate(launches, 1):
            reporter.begin(launch.label + f" width {_option(launch, '--hidden')}", index, len(launches))
            outcome = run_launch(launch, plan.timeout,
                                 on_poll=lambda launch=launch: reporter.update(steps_done(launch.run_root,
                                                                                          launch.seeds)))
            reporter.end(outcome.describe(), steps_done(launch.run_root, launch.seeds), outcome.ok)
            failed += not outcome.ok
            if not outcome.ok:
                print(f"--- last lines of {launch.log_path} ---\n{outcome.log_tail}\n---", file=sys.stderr, flush=True)
    finally:
        reporter.close()
    runs = find_runs(out / "sweep") if (out / "sweep").is_dir() else []
    points = sweep_points(runs, plan.warmup)
    if not points:
        print("python -m compare: no sweep launch finished: nothing to plot", file=sys.stderr)
        return Exit.RUN_FAILED
    cross = crossover(points)
    result = {"world_size": plan.world_size, "steps": steps, "warmup": plan.warmup, "points": points,
              "crossover_bytes": cross, "wall_s": round(time.monotonic() - started, 1),
              "commands": [launch.shell_line() for launch in launches]}
    write_json_atomic(out / "sweep.json", jsonable(result))
    plot = plot_size_sweep(points, cross, out / SWEEP_PLOT)
    table = sweep_table(points)
    where = (f"the faster side changes near {size_text(cross)} of gradient" if cross else
             "the same side is faster at every size")
    blocks = [Heading(1, f"Horovod vs DDP as the gradient grows (np {plan.world_size})"),
              Para(f"{where}. Per width: the median step time of each launch after {plan.warmup} warm-up steps; "
                   "the faster side and its speed-up from the geometric mean of the rounds' step-time ratios, "
                   "with a t interval of that speed-up (which needs at least 2 rounds), and each round's alike."),
              table]
    if plot:
        blocks.append(Para(f"![The faster side and its speed-up against gradient size]({plot.name})"))
    write_atomic(out / "sweep.md", render_markdown(blocks))
    print(text_table(table.headers, table.rows))
    print(f"\n{where}")
    print(f"sweep: {out / 'sweep.md'}  (also sweep.json{', ' + SWEEP_PLOT if plot else ''})")
    return Exit.RUN_FAILED if failed else Exit.OK


def sweep_table(points: list[dict]) -> Table:
    """Per width: both sides' median step times and the faster side with its speed-up, its interval and each
    round's, as every speed figure is said (compare/render/speed_up.py)."""
    return Table(["mlp width", "gradient", "Horovod median ms", "DDP median ms", "faster, by", "95% interval",
                  "rounds"],
                 [[str(p["hidden"]), size_text(p["gradient_bytes"]), ms(p["horovod_median_s"]),
                   ms(p["ddp_median_s"]), faster_by(p["ratio"]), interval_text(p),
                   ", ".join(map(faster_by, p["round_ratios"]))] for p in points])


def interval_text(point: dict) -> str:
    """A sweep point's interval of the faster side's speed-up, e.g. "1.10-1.52"; a dash below 2 rounds."""
    if point["ratio"] is None or point["ci_low"] is None or point["ci_high"] is None:
        return DASH
    _, _, low, high = one_direction(point["ratio"], point["ci_low"], point["ci_high"])
    return f"{low:.2f}-{high:.2f}"


def size_text(size: float | None) -> str:
    if size is None:
        return "—"
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.0f} B"


def _option(launch: Launch, flag: str) -> str:
    return launch.command[launch.command.index(flag) + 1]

