"""compare run's sequential design, its default: speed rounds until each world size's anytime-valid interval
is within its target or the time budget is spent (docs/benchmarks.md, "Intervals that decide"); the targets
(--precision), the design record beside the runs and the loop that launches and looks.

The interval is compare/analysis/sequential.py's confidence sequence, valid however the rounds stop;
tests/test_speed_simulation.py checks this loop against its simulated rule."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from compare.analysis.parity import CONFIDENCE
from compare.analysis.records import find_runs
from compare.analysis.sequential import METHOD, mixture_for
from compare.analysis.speed import SEQUENTIAL_RECORD, compare_speed
from compare.commands.arguments import AnalysisSettings
from compare.commands.runner import Runner
from compare.defaults import DEFAULT_PRECISION, DEFAULT_PRECISION_MANY
from compare.launch.lines import Launch
from compare.names import FRAMEWORKS
from workload.errors import UsageError
from workload.files import write_json_atomic


class RoundsPlan(Protocol):
    """What the loop reads of a comparison's plan (run.ComparisonPlan)."""

    analysis: AnalysisSettings
    out: Path
    frameworks: tuple[str, ...]
    world_sizes: tuple[int, ...]
    repeats: int
    timed_seconds: float
    aa: str | None
    precision: dict[int, float] | None
    time_budget: float | None
    budget_given: bool


def sequential_design_wanted(ns: argparse.Namespace) -> bool:
    """Rounds until the intervals are precise enough (or the budget is spent): the default for Horovod
    against DDP; `--repeats N` alone asks for the fixed design, and one framework has no ratio to narrow."""
    if ns.precision is not None or ns.time_budget is not None:
        return True
    return ns.repeats is None and set(ns.frameworks) == set(FRAMEWORKS)


def targets_for(precision: dict[int | None, float] | None, world_sizes: tuple[int, ...]) -> dict[int, float]:
    """World size -> the precision to reach: --precision's (one for all, or per size), else the default's."""
    if precision is None:
        return {ws: DEFAULT_PRECISION.get(ws, DEFAULT_PRECISION_MANY) for ws in world_sizes}
    every = precision.get(None)
    found = {ws: precision.get(ws, every) for ws in world_sizes}
    missing = [str(ws) for ws, target in found.items() if target is None]
    if missing:
        raise UsageError(f"--precision names no target for np {','.join(missing)}: give one for every --np "
                         "(e.g. 1:10%,2:15%) or one for all (e.g. 10%)")
    return {ws: float(target) for ws, target in found.items() if target is not None}


def start_design(plan: RoundsPlan) -> dict:
    """The sequential design, written beside the runs before the first launch."""
    runs = plan.out / "runs"
    precision = {str(ws): p for ws, p in plan.precision.items()} if plan.precision else None
    minimum = 0 if plan.budget_given else plan.repeats  # the default budget never gives fewer rounds than before
    design = {"sequential": True, "precision": precision, "time_budget_s": plan.time_budget,
              "budget_given": plan.budget_given, "first_look": plan.repeats, "minimum_rounds": minimum,
              "looks": "after --repeats rounds, then after every second round; each world size stops at its own "
                       "target", "confidence": CONFIDENCE, "method": METHOD,
              "mixture_c": mixture_for(plan.time_budget or 0.0), "stopped": None, "rounds": None,
              "world_sizes": {}}
    runs.mkdir(parents=True, exist_ok=True)
    write_json_atomic(runs / SEQUENTIAL_RECORD, design)
    return design


def clear_design(out: Path) -> None:
    """A fixed number of rounds: an earlier sequential run's design must not apply to these runs."""
    (out / "runs" / SEQUENTIAL_RECORD).unlink(missing_ok=True)


def launches_per_round(plan: RoundsPlan, world_sizes: tuple[int, ...]) -> int:
    return (len(plan.frameworks) + bool(plan.aa)) * len(world_sizes)


def more_rounds(plan: RoundsPlan, design: dict, runner: Runner, steps_of: Callable[[list[Launch]], list[int]],
                started: float, per_round: float, ok: bool,
                launch: Callable[[range, tuple[int, ...]], list[Launch]]) -> None:
    """Rounds one by one up to --repeats, then in whole pairs (A B, B A); after each look a world size whose
    anytime-valid interval is within its target stops launching; the rest go on until every size has
    stopped, the next round(s) would overrun --time-budget (the default's first --repeats rounds run
    regardless), or a launch failed. Records why each size stopped, and after how many rounds. The interval
    is looked at from round --repeats on, after every pair. `launch` makes the launches of these rounds at
    these world sizes (run.later_rounds)."""
    number = 1  # the last round launched; with timed windows round 1 is the parity launch, not a speed round
    offset = 1 if plan.timed_seconds else 0
    open_sizes = list(plan.world_sizes)
    per_launch = per_round / launches_per_round(plan, plan.world_sizes)
    sizes = design.setdefault("world_sizes", {})
    while True:
        done = number - offset  # speed rounds so far
        if done >= plan.repeats and design["precision"] is not None:
            runs = find_runs(plan.out / "runs")
            for ws in list(open_sizes):
                speed = compare_speed(ws, runs, plan.analysis.warmup, design=design)
                if speed and speed["sequential"]["reached"]:
                    open_sizes.remove(ws)
                    sizes[str(ws)] = {"stopped": "precision", "rounds": done}
        # looks after whole pairs, so that drift and order effects cancel
        size = 1 if done < plan.repeats or done % 2 else 2
        forced = done < design.get("minimum_rounds", 0)
        next_s = size * per_launch * launches_per_round(plan, tuple(open_sizes))
        if not open_sizes:
            stopped = "precision"
        elif not ok:
            stopped = "failed"
        elif not forced and time.monotonic() - started + next_s > plan.time_budget:
            stopped = "budget"
        else:
            batch = launch(range(number + 1, number + size + 1), tuple(open_sizes))
            planned = steps_of(batch)
            runner.count += len(batch)
            runner.reporter.total += sum(planned)
            before = time.monotonic()
            ok = runner.run(batch, planned)
            per_launch = (time.monotonic() - before) / len(batch)
            number += size
            continue
        for ws in open_sizes:
            sizes[str(ws)] = {"stopped": stopped, "rounds": number - offset}
        design.update(stopped=stopped, rounds=number - offset, elapsed_s=round(time.monotonic() - started, 1),
                      next_round_s=round(next_s, 1))  # what would not fit in the budget (the stop line says it)
        write_json_atomic(plan.out / "runs" / SEQUENTIAL_RECORD, design)
        return
