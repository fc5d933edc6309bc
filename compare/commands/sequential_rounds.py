"""compare run's sequential design, its default: speed rounds until each world size's interval is within its
target or the time budget is spent (docs/benchmarks.md, "Intervals that decide"); the targets (--precision),
the design record beside the runs and the loop that launches and looks.

The interval is compare/analysis/group_sequential.py's repeated confidence interval for budgets up to
SHORT_BUDGET_S (the default's): planned looks, after --repeats rounds then after every pair up to the planned
last round, the look after which the budget has no room for another pair spending what is left; for longer
budgets, compare/analysis/sequential.py's confidence sequence. Both hold however the rounds stop;
tests/test_speed_simulation.py checks this loop against its simulated rule."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from compare.analysis import group_sequential
from compare.analysis.parity import CONFIDENCE
from compare.analysis.records import find_runs
from compare.analysis.sequential import METHOD, MIXTURE_C, SHORT_BUDGET_S
from compare.analysis.sequential import rounds_for as sequence_rounds_for
from compare.analysis.speed import SEQUENTIAL_RECORD, compare_speed
from compare.commands.arguments import AnalysisSettings
from compare.commands.runner import Runner
from compare.defaults import DEFAULT_BUDGET_S, DEFAULT_PRECISION, DEFAULT_PRECISION_MANY
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


PLANNED_ROUNDS = 12  # the group-sequential design's last look at the default budget: about what 240 s holds here


def planned_rounds(budget_s: float, first_look: int) -> int:
    """The last planned look of the group-sequential design, fixed before any launch: PLANNED_ROUNDS at the
    default budget, in proportion above it, an even number of rounds after the first look."""
    rounds = max(PLANNED_ROUNDS * budget_s / DEFAULT_BUDGET_S, PLANNED_ROUNDS)
    return first_look + 2 * max(1, math.ceil((rounds - first_look) / 2))


def start_design(plan: RoundsPlan) -> dict:
    """The sequential design, written beside the runs before the first launch: the group-sequential one for a
    budget up to SHORT_BUDGET_S, the confidence sequence (c = 4) beyond."""
    runs = plan.out / "runs"
    precision = {str(ws): p for ws, p in plan.precision.items()} if plan.precision else None
    minimum = 0 if plan.budget_given else plan.repeats  # the default budget never gives fewer rounds than before
    budget = plan.time_budget or 0.0
    design = {"sequential": True, "precision": precision, "time_budget_s": plan.time_budget,
              "budget_given": plan.budget_given, "first_look": plan.repeats, "minimum_rounds": minimum,
              "confidence": CONFIDENCE, "stopped": None, "rounds": None, "world_sizes": {}}
    if budget <= SHORT_BUDGET_S:
        planned = planned_rounds(budget, plan.repeats)
        design.update(method=group_sequential.METHOD, planned_rounds=planned,
                      looks=f"after {plan.repeats} rounds, then after every pair up to {planned}; the look after "
                            "which the budget holds no further pair spends what is left; each world size stops "
                            "at its own target")
    else:
        design.update(method=METHOD, mixture_c=MIXTURE_C,
                      looks="after --repeats rounds, then after every second round; each world size stops at its "
                            "own target")
    runs.mkdir(parents=True, exist_ok=True)
    write_json_atomic(runs / SEQUENTIAL_RECORD, design)
    return design


def clear_design(out: Path) -> None:
    """A fixed number of rounds: an earlier sequential run's design must not apply to these runs."""
    (out / "runs" / SEQUENTIAL_RECORD).unlink(missing_ok=True)


def launches_per_round(plan: RoundsPlan, world_sizes: tuple[int, ...]) -> int:
    return (len(plan.frameworks) + bool(plan.aa)) * len(world_sizes)


def rounds_needed(design: dict, target: float, log_sd: float) -> int | None:
    """About how many speed rounds the design needs to reach +-target when rounds spread by log_sd; None if
    not by the design's last look (the group-sequential design) or within 10,000 (the sequence)."""
    if design.get("method") == group_sequential.METHOD:
        return group_sequential.rounds_for(target, log_sd, int(design["first_look"]), int(design["planned_rounds"]))
    return sequence_rounds_for(target, log_sd, c=float(design.get("mixture_c") or MIXTURE_C))


def forecast(design: dict, speed: dict, done: int, left_s: float, round_s: float) -> dict:
    """What a world size's first rounds say of its target, before the budget is spent: the rounds' spread,
    about how many rounds the target needs, how many the rest of the budget holds at `round_s` a round, and
    the budget that would hold them (from the first launch)."""
    state = speed["sequential"]
    sd, target = speed.get("log_sd"), state.get("target")
    needed = rounds_needed(design, target, sd) if sd and target else None
    holds = done + max(0, int(left_s // round_s)) if round_s > 0 else done
    elapsed = (design.get("time_budget_s") or 0.0) - left_s
    wanted = elapsed + (needed - done) * round_s if needed and needed > holds else None
    return {"world_size": speed["world_size"], "rounds": done, "log_sd": sd, "target": target, "needed": needed,
            "budget_holds": holds, "budget_for_needed_s": wanted}


def forecast_line(forecasts: list[dict], last_look: int | None) -> str:
    """The forecasts in one line, e.g. "rounds: np 2 spreads 0.180 over its first 4 rounds: ±15% needs about
    12, the budget holds about 8 (`--time-budget 330` for 12)"."""
    parts = []
    for f in forecasts:
        head = f"np {f['world_size']} spreads {f['log_sd']:.3f} over its first {f['rounds']} rounds: "
        if f["needed"] is None:
            beyond = f"the design's last look ({last_look} rounds)" if last_look else "10,000 rounds"
            parts.append(head + f"±{f['target']:.0%} needs more than {beyond}; expect no verdict at that precision")
        elif f["budget_for_needed_s"] is None:
            parts.append(head + f"±{f['target']:.0%} needs about {f['needed']}, within the budget")
        else:
            parts.append(head + f"±{f['target']:.0%} needs about {f['needed']}, the budget holds about "
                         f"{f['budget_holds']} (`--time-budget {math.ceil(f['budget_for_needed_s'])}` for "
                         f"{f['needed']})")
    return "rounds: " + "; ".join(parts)


def more_rounds(plan: RoundsPlan, design: dict, runner: Runner, steps_of: Callable[[list[Launch]], list[int]],
                started: float, per_round: float, ok: bool,
                launch: Callable[[range, tuple[int, ...]], list[Launch]]) -> None:
    """Rounds one by one up to --repeats, then in whole pairs (A B, B A), only at the world sizes still short
    of their targets; after each look a world size whose interval is within its target stops launching; the
    rest go on until every size has stopped, the next round(s) would overrun --time-budget (the default's
    first --repeats rounds run regardless), a size reached the design's last planned look, or a launch
    failed. A look is made from round --repeats on, after every pair, and at the stop (the final look,
    which spends what is left: whether it is final is known from the clock before the data are read).
    Records each size's looks (round numbers) and why it stopped, after how many speed rounds. `launch`
    makes the launches of these rounds at these world sizes (run.later_rounds)."""
    number = 1  # the last round launched; with timed windows round 1 is the parity launch, not a speed round
    offset = 1 if plan.timed_seconds else 0
    open_sizes = list(plan.world_sizes)
    per_launch = per_round / launches_per_round(plan, plan.world_sizes)
    sizes = design.setdefault("world_sizes", {})
    group = design.get("method") == group_sequential.METHOD
    last_look = int(design.get("planned_rounds") or 0)
    while True:
        done = number - offset  # speed rounds so far
        size = 1 if done < plan.repeats or done % 2 else 2  # looks after whole pairs: drift and order cancel
        forced = done < design.get("minimum_rounds", 0)
        next_s = size * per_launch * launches_per_round(plan, tuple(open_sizes))
        stopped = ("failed" if not ok else
                   "budget" if not forced and time.monotonic() - started + next_s > plan.time_budget else None)
        planned_end = group and done >= last_look
        look = stopped is not None or planned_end or done >= plan.repeats
        if look and design["precision"] is not None:
            runs = find_runs(plan.out / "runs")
            forecasts = []
            for ws in list(open_sizes):
                own = sizes.setdefault(str(ws), {"looks": []})
                if done >= 1:
                    own["looks"].append(number)
                own["final"] = stopped is not None or planned_end
                speed = compare_speed(ws, runs, plan.analysis.warmup, design=design)
                # one count of rounds: the verdict's (every round that timed both sides, contended ones too)
                own["rounds"] = speed["n_rounds"] if speed and done else done
                if speed and speed["sequential"]["reached"]:
                    open_sizes.remove(ws)
                    own["stopped"] = "precision"
                elif speed and done == plan.repeats and stopped != "failed" and speed.get("log_sd"):
                    left = plan.time_budget - (time.monotonic() - started)
                    own["forecast"] = forecast(design, speed, done, left, per_launch * launches_per_round(
                        plan, tuple(open_sizes)))
                    forecasts.append(own["forecast"])
            if forecasts:
                print(forecast_line(forecasts, last_look or None), flush=True)
            write_json_atomic(plan.out / "runs" / SEQUENTIAL_RECORD, design)
        if not open_sizes:
            stopped = "precision"
        elif planned_end and stopped is None:
            stopped = "last look"
        if stopped is None:
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
            own = sizes.setdefault(str(ws), {"looks": [], "rounds": done})
            own["stopped"] = stopped
        counted = [own["rounds"] for own in sizes.values()]
        design.update(stopped=stopped, rounds=max(counted, default=done),
                      elapsed_s=round(time.monotonic() - started, 1),
                      next_round_s=round(next_s, 1))  # what would not fit in the budget (the stop line says it)
        write_json_atomic(plan.out / "runs" / SEQUENTIAL_RECORD, design)
        return
