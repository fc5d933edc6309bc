"""Time to target: which side reaches a stated quality sooner, in steps and in wall-clock seconds from the
launch (start-up included), with intervals over seeds and a two-sided verdict.

MLPerf Training's method, made two-sided (docs/benchmarks.md, "Time to target"): each run yields the first
evaluation at which the target is met; a run that never meets it within its steps has failed to converge
and is never given a time. A migration needs both directions judged: a side that converges slower is a
regression as much as one that converges suspiciously faster.

Pure: takes run records (and the contention records beside them), returns typed values; no English
(compare/render/time_to_target.py says it in words).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

import numpy as np
from scipy import stats

from compare import defaults
from compare.analysis.contention import judge_contention, launch_contention
from compare.analysis.parity import CONFIDENCE
from compare.analysis.records import FINAL_LOSS_STEPS, RunRecord, jsonable
from compare.names import FRAMEWORKS


@dataclass(frozen=True)
class Metric:
    higher_is_better: bool
    per_step: bool  # the training loss is judged at every step; the others at every evaluation


METRICS = {
    "eval_accuracy": Metric(higher_is_better=True, per_step=False),
    "eval_loss": Metric(higher_is_better=False, per_step=False),
    # The training loss as the report's final_loss reads it: the mean of the last FINAL_LOSS_STEPS steps,
    # so that one lucky batch does not count as reaching the target.
    "final_loss": Metric(higher_is_better=False, per_step=True),
}


@dataclass(frozen=True)
class Target:
    metric: str  # a key of METRICS
    value: float

    def met(self, value: float | None) -> bool:
        if value is None or not math.isfinite(value):
            return False
        return value >= self.value if METRICS[self.metric].higher_is_better else value <= self.value


# `--target` without a value: the workload's own (compare/defaults.py says which and why).
DEFAULT_TARGETS = {workload: Target(metric, value) for workload, (metric, value) in defaults.DEFAULT_TARGETS.items()}


class Origin(str, Enum):
    """Where a run's seconds are counted from."""

    LAUNCH = "launch"  # the launch's start (contention.json): start-up and rendezvous included
    FIRST_STEP = "first_step"  # no launch start (an imported log): from the end of its first logged step
    NONE = "none"  # the record has no wall times: steps only


class Outcome(str, Enum):
    SOONER = "sooner"  # the interval of the ratio excludes 1
    NO_CLEAR_DIFFERENCE = "no clear difference"
    NOT_REACHED = "not reached"  # one side failed to converge in some seed, the other reached in every seed
    NEITHER_REACHED = "neither reached"
    UNDECIDED = "undecided"  # see Why
    ONE_SIDE = "one side"  # only one framework ran at this world size


class Why(str, Enum):
    """Why a verdict is undecided, or on what basis it was reached."""

    ONE_SEED = "one seed"  # a single paired seed gives no interval
    BOTH_MISSED = "both missed"  # each side missed the target in some seed
    CONTENDED = "contended"  # other processes used the cores during a launch: its seconds are not the job's


class Basis(str, Enum):
    SECONDS = "seconds"
    STEPS = "steps"  # a side has no wall times, or the two sides count them from different origins


@dataclass(frozen=True)
class SeedResult:
    seed: int
    reached: bool
    step: int | None  # the step of the first evaluation at the target
    seconds: float | None  # from the origin to that evaluation
    value: float | None  # the metric there; when not reached, the best the run got
    last_step: int | None  # how far the run trained
    origin: Origin
    contended: bool  # its launch met contention (compare/analysis/contention.py)


@dataclass(frozen=True)
class Interval:
    """The geometric mean over seeds with a t interval on the logarithms (positive quantities, compared as
    ratios); low and high are None below two values."""

    mean: float
    low: float | None
    high: float | None
    n: int


@dataclass(frozen=True)
class SideResult:
    framework: str
    world_size: int
    seeds: list[SeedResult]
    steps: Interval | None  # over the seeds that reached the target
    seconds: Interval | None
    origin: Origin  # NONE when its seeds disagree or lack wall times

    @property
    def reached(self) -> int:
        return sum(s.reached for s in self.seeds)

    @property
    def converged(self) -> bool:
        return bool(self.seeds) and self.reached == len(self.seeds)


@dataclass(frozen=True)
class TargetVerdict:
    target: Target
    world_size: int
    sides: dict[str, SideResult]  # framework -> its result
    outcome: Outcome
    sooner: str | None  # the framework that reached it sooner, when one did
    basis: Basis | None
    ratio: float | None  # the later side's time over the sooner side's (Horovod / DDP when no side is sooner)
    low: float | None
    high: float | None
    paired_seeds: list[int]
    why: Why | None = None
    confidence: float = CONFIDENCE

    def to_dict(self) -> dict:
        found = asdict(self, dict_factory=_plain)
        for name, side in self.sides.items():
            found["sides"][name].update(reached=side.reached, converged=side.converged)
        return jsonable(found)


def _plain(items: list[tuple[str, object]]) -> dict:
    return {key: value.value if isinstance(value, Enum) else value for key, value in items}


# ---- one run --------------------------------------------------------------------------------------------

def _trailing_means(run: RunRecord) -> list[tuple[int, float, dict]]:
    """(step, mean of the last FINAL_LOSS_STEPS losses, the step line) from the first full window on."""
    out = []
    losses = [s["loss"] for s in run.steps]
    for index in range(FINAL_LOSS_STEPS - 1, len(losses)):
        window = losses[index - FINAL_LOSS_STEPS + 1:index + 1]
        value = math.nan if any(v is None for v in window) else float(np.mean(window))
        out.append((int(run.steps[index]["step"]), value, run.steps[index]))
    return out


def _evaluations(run: RunRecord, metric: str) -> list[tuple[int, float | None, float | None]]:
    """(step, value, wall time) of every evaluation of `metric`, in order. An evaluation without its own
    wall time (older records, imported logs) takes the wall time of the step it follows."""
    if METRICS[metric].per_step:
        return [(step, value, line.get("wall_time")) for step, value, line in _trailing_means(run)]
    walls = {int(s["step"]): s.get("wall_time") for s in run.steps}
    found = []
    for entry in run.evals:
        if metric in entry:
            step = int(entry["step"])
            found.append((step, entry[metric], entry.get("wall_time", walls.get(step))))
    return found


def _first_wall(run: RunRecord) -> float | None:
    return next((float(s["wall_time"]) for s in run.steps if s.get("wall_time") is not None), None)


def _launch_key(run: RunRecord) -> Path:
    """Every seed of a launch runs in one process tree, one after the other, under OUT/seed-S/."""
    return run.path.parent if run.path.name.startswith("seed-") else run.path


def seed_result(run: RunRecord, target: Target, launch_first_wall: float | None = None) -> SeedResult:
    """One run against the target. `launch_first_wall`: the first step's wall time of the launch's first
    seed; a later seed is counted as the launch's start-up plus its own time from its first step."""
    record = launch_contention(run)
    started = (record or {}).get("started_unix")
    first = _first_wall(run)
    origin = Origin.LAUNCH if started and first is not None else Origin.FIRST_STEP if first is not None \
        else Origin.NONE
    hit = next(((step, value, wall) for step, value, wall in _evaluations(run, target.metric) if target.met(value)),
               None)
    seconds = None
    if hit is not None and hit[2] is not None and first is not None:
        seconds = float(hit[2]) - first
        if origin is Origin.LAUNCH:
            seconds += (launch_first_wall if launch_first_wall is not None else first) - float(started)
    best = None
    if hit is None:
        values = [v for _, v, _ in _evaluations(run, target.metric) if v is not None and math.isfinite(v)]
        best = (max if METRICS[target.metric].higher_is_better else min)(values) if values else None
    return SeedResult(seed=run.seed, reached=hit is not None, step=hit[0] if hit else None, seconds=seconds,
                      value=hit[1] if hit else best, last_step=run.last_step, origin=origin,
                      contended=bool(judge_contention(record)["contended"]))


# ---- over seeds and sides -------------------------------------------------------------------------------

def log_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval | None:
    logs = np.log(np.asarray([v for v in values if v is not None and v > 0], dtype=np.float64))
    if logs.size == 0:
        return None
    mean = float(np.mean(logs))
    if logs.size < 2:
        return Interval(float(np.exp(mean)), None, None, 1)
    half = float(stats.t.ppf(0.5 + confidence / 2, logs.size - 1) * np.std(logs, ddof=1) / np.sqrt(logs.size))
    return Interval(float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half)), int(logs.size))


def first_round_sides(runs: Iterable[RunRecord]) -> dict[tuple[str, int], list[RunRecord]]:
    """(framework, world size) -> the runs of round 1 that ended well, one per seed (later rounds time the
    first seed again; calibration runs are not the compared job)."""
    found: dict[tuple[str, int], dict[int, RunRecord]] = {}
    for run in sorted(runs, key=lambda r: str(r.path)):
        if run.ok and run.framework in FRAMEWORKS and run.round == 1 and not run.is_calibration:
            found.setdefault((run.framework, run.world_size), {}).setdefault(run.seed, run)
    return {key: [by_seed[s] for s in sorted(by_seed)] for key, by_seed in found.items()}


def side_result(framework: str, world_size: int, runs: list[RunRecord], target: Target,
                confidence: float = CONFIDENCE) -> SideResult:
    firsts: dict[Path, float] = {}
    for run in runs:
        if (wall := _first_wall(run)) is not None:
            firsts[_launch_key(run)] = min(wall, firsts.get(_launch_key(run), wall))
    seeds = [seed_result(run, target, firsts.get(_launch_key(run))) for run in runs]
    reached = [s for s in seeds if s.reached]
    origins = {s.origin for s in seeds}
    timed = all(s.seconds is not None for s in reached)
    return SideResult(framework, world_size, seeds,
                      steps=log_interval([float(s.step) for s in reached if s.step], confidence),
                      seconds=log_interval([s.seconds for s in reached], confidence) if timed else None,
                      origin=origins.pop() if len(origins) == 1 else Origin.NONE)


def compare_sides(target: Target, world_size: int, sides: dict[str, SideResult],
                  confidence: float = CONFIDENCE) -> TargetVerdict:
    """The two-sided verdict: a side that failed to converge in some seed loses to one that converged in
    every seed; when both converged, the paired ratio over seeds (same seed, same data order and initial
    weights on both sides) names the sooner side when its interval excludes 1."""
    verdict = dict(target=target, world_size=world_size, sides=sides, sooner=None, basis=None, ratio=None,
                   low=None, high=None, paired_seeds=[], confidence=confidence)
    if set(sides) != set(FRAMEWORKS):
        return TargetVerdict(outcome=Outcome.ONE_SIDE, **verdict)
    a, b = sides["horovod"], sides["ddp"]
    if not a.reached and not b.reached:
        return TargetVerdict(outcome=Outcome.NEITHER_REACHED, **verdict)
    if a.converged != b.converged:
        return TargetVerdict(outcome=Outcome.NOT_REACHED, **{**verdict, "sooner": (a if a.converged else b).framework})
    if not a.converged:
        return TargetVerdict(outcome=Outcome.UNDECIDED, why=Why.BOTH_MISSED, **verdict)
    pairs = [(x, y) for x in a.seeds for y in b.seeds if x.seed == y.seed]
    timed = all(x.seconds is not None and y.seconds is not None and x.origin is y.origin for x, y in pairs)
    basis = Basis.SECONDS if timed else Basis.STEPS
    ratios = [x.seconds / y.seconds if timed else x.step / y.step for x, y in pairs]  # type: ignore[operator]
    summary = log_interval(ratios, confidence)
    verdict.update(basis=basis, paired_seeds=[x.seed for x, _ in pairs])
    if summary is None:
        return TargetVerdict(outcome=Outcome.UNDECIDED, why=Why.ONE_SEED, **verdict)
    verdict.update(ratio=summary.mean, low=summary.low, high=summary.high)
    if summary.low is None or summary.high is None:
        return TargetVerdict(outcome=Outcome.UNDECIDED, why=Why.ONE_SEED, **verdict)
    if basis is Basis.SECONDS and any(s.contended for side in (a, b) for s in side.seeds):
        return TargetVerdict(outcome=Outcome.UNDECIDED, why=Why.CONTENDED, **verdict)
    if summary.low > 1 or summary.high < 1:
        # The ratio is Horovod's over DDP's; the verdict states it as the later side's over the sooner's.
        if summary.high < 1:
            verdict.update(sooner="horovod", ratio=1 / summary.mean, low=1 / summary.high, high=1 / summary.low)
        else:
            verdict.update(sooner="ddp")
        return TargetVerdict(outcome=Outcome.SOONER, **verdict)
    return TargetVerdict(outcome=Outcome.NO_CLEAR_DIFFERENCE, **verdict)


def time_to_target(runs: list[RunRecord], targets: Iterable[Target],
                   confidence: float = CONFIDENCE) -> list[TargetVerdict]:
    """One verdict per target and world size, in the order given."""
    sides = first_round_sides(runs)
    world_sizes = sorted({ws for _, ws in sides})
    return [compare_sides(target, ws, {f: side_result(f, ws, sides[(f, ws)], target, confidence)
                                       for f in FRAMEWORKS if (f, ws) in sides}, confidence)
            for target in targets for ws in world_sizes]


def evaluated_metrics(runs: Iterable[RunRecord]) -> set[str]:
    """The target metrics these records can answer: final_loss wherever steps were recorded, an eval metric
    where some evaluation holds it."""
    found: set[str] = set()
    for run in runs:
        if run.framework not in FRAMEWORKS:
            continue
        if len(run.steps) >= FINAL_LOSS_STEPS:
            found.add("final_loss")
        found.update(m for e in run.evals for m in METRICS if m in e and not METRICS[m].per_step)
    return found
