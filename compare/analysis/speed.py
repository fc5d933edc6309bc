"""Which framework is faster, by how much: the speed verdict over repeated interleaved launches (the rounds,
their contention, the interval and the outcome). Its neighbours: the A/A check (aa.py), the figures the
report shows beside it (speed_figures.py), the trade-offs table (tradeoffs.py), the model-size sweep
(model_sweep.py).

Pure: takes run records (and the contention records beside them), returns JSON-serialisable dicts; the
words are compare/render/speed.py's.

How a speed verdict is reached (docs/benchmarks.md, "Speed verdicts"): `compare run` launches each side
several times in rounds, in an order that cancels drift (A B, B A, A B ...). A round's ratio is the
Horovod/DDP ratio of the two launches' median step times; the verdict takes the geometric mean over rounds
with a t interval (a paired test over rounds). It names a winner only when the interval excludes 1, every
round points the same way, at least MIN_ROUNDS rounds ran on a machine that was free, and no launch was
oversubscribed; rounds during which other processes competed for the cores are left out and named.

With `compare run --precision` or `--time-budget` the number of rounds depends on the data, so the interval
is an anytime-valid confidence sequence instead (compare/analysis/sequential.py), and a winner is named when
it excludes 1 (no every-round-agrees rule: over tens of rounds single rounds disagree even when the
difference is real). The design is recorded beside the runs (runs/sequential.json) for `compare report`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from compare.analysis import group_sequential
from compare.analysis.contention import judge_contention, launch_contention
from compare.analysis.parity import CONFIDENCE
from compare.analysis.records import RunRecord
from compare.analysis.sequential import MIXTURE_C, confidence_sequence
from compare.analysis.timing import launch_median, rounds_ratio
from compare.defaults import MIN_ROUNDS  # the rounds a speed verdict needs
from compare.names import FRAMEWORKS

SEQUENTIAL_RECORD = "sequential.json"  # OUT/runs/: the --precision / --time-budget design and why it stopped


def timed(run: RunRecord) -> bool:
    """A Horovod or DDP run of the comparison that ended well and was timed here (an imported log's times,
    if it has any, come from another machine)."""
    return (run.ok and run.framework in FRAMEWORKS and not run.is_calibration and run.imported is None
            and not run.is_twin)


def speed_launches(runs: Iterable[RunRecord], world_size: int) -> list[RunRecord]:
    """The timed runs at this world size that are speed rounds: with `compare run --timed-seconds` the
    speed launches of their own (long windows, one seed), not the parity launch; else every round."""
    chosen = [run for run in runs if timed(run) and run.world_size == world_size]
    if any(run.timed_seconds for run in chosen):
        chosen = [run for run in chosen if run.timed_seconds]
    return chosen


# ---- rounds --------------------------------------------------------------------------------------------

def launches(runs: Iterable[RunRecord], world_size: int) -> dict[int, dict[str, list[RunRecord]]]:
    """round -> framework -> the runs of that launch (Horovod and DDP runs that ended well, this world size)."""
    found: dict[int, dict[str, list[RunRecord]]] = defaultdict(lambda: defaultdict(list))
    for run in speed_launches(runs, world_size):
        found[run.round][run.framework].append(run)
    return {r: dict(by_framework) for r, by_framework in sorted(found.items())}


def speed_rounds(runs: Iterable[RunRecord], world_size: int, warmup: int) -> list[dict]:
    """Each round with both sides: the two launches' median step times over the seeds every round ran,
    their ratio, the order they ran in and the contention each met."""
    complete = {r: sides for r, sides in launches(runs, world_size).items() if set(FRAMEWORKS) <= set(sides)}
    seed_sets = [{run.seed for run in group} for sides in complete.values() for group in sides.values()]
    common = set.intersection(*seed_sets) if seed_sets else set()
    rows = []
    for number, sides in complete.items():
        row: dict = {"round": number, "seeds": sorted(common), "contention": {}, "started": {}}
        for framework in FRAMEWORKS:
            chosen = [run for run in sides[framework] if run.seed in common]
            row[f"{framework}_median_s"] = launch_median(chosen, warmup)
            record = launch_contention(sides[framework][0])
            row["contention"][framework] = {**judge_contention(record), "record": record}
            row["started"][framework] = (record or {}).get("started_unix") or sides[framework][0].meta.get(
                "start_time")
        a, b = row["horovod_median_s"], row["ddp_median_s"]
        row["ratio"] = a / b if a and b else None
        starts = row["started"]
        row["order"] = sorted(FRAMEWORKS, key=lambda f: str(starts[f])) if all(starts.values()) else None
        rows.append(row)
    return [row for row in rows if row["ratio"] is not None]


def sequential_design(runs: Iterable[RunRecord]) -> dict | None:
    """The sequential design a comparison ran under (compare run --precision / --time-budget), read from
    runs/sequential.json above a run's directory; None for a fixed number of rounds."""
    for run in runs:
        for directory in (Path(run.path).parent, Path(run.path).parent.parent):
            try:
                record = json.loads((directory / SEQUENTIAL_RECORD).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and record.get("sequential"):
                return record
        return None  # every run of one comparison sits under the same runs/
    return None


class SpeedOutcome(str, Enum):
    """How a speed verdict at one world size came out; compare/render/speed.py words each."""

    OVERSUBSCRIBED = "oversubscribed"  # ranks x threads beyond the cores in a launch: withheld
    CONTENDED = "contended"  # fewer than MIN_ROUNDS rounds on a free machine: withheld, the busiest launch named
    TOO_FEW_ROUNDS = "too few rounds"  # fewer than MIN_ROUNDS rounds ran at all
    NO_INTERVAL_YET = "no interval yet"  # a confidence sequence still spans every ratio
    INTERVAL_HOLDS_ONE = "interval holds 1"
    ROUNDS_DISAGREE = "rounds disagree"  # the interval excludes 1, but rounds point both ways (fixed rounds)
    DDP_FASTER = "ddp faster"
    HOROVOD_FASTER = "horovod faster"


STATUS = {SpeedOutcome.OVERSUBSCRIBED: "withheld", SpeedOutcome.CONTENDED: "withheld",
          SpeedOutcome.TOO_FEW_ROUNDS: "too few rounds", SpeedOutcome.NO_INTERVAL_YET: "no clear difference",
          SpeedOutcome.INTERVAL_HOLDS_ONE: "no clear difference", SpeedOutcome.ROUNDS_DISAGREE: "no clear difference",
          SpeedOutcome.DDP_FASTER: "faster", SpeedOutcome.HOROVOD_FASTER: "faster"}
WINNER = {SpeedOutcome.DDP_FASTER: "ddp", SpeedOutcome.HOROVOD_FASTER: "horovod"}
Trouble = tuple[int, str, dict]  # (round, framework, the contention judged) of a launch that met some


def launch_troubles(rounds: list[dict]) -> list[Trouble]:
    """The launches that were contended or oversubscribed, in round order."""
    return [(row["round"], framework, judged) for row in rounds for framework, judged in row["contention"].items()
            if judged["contended"] or judged["oversubscribed"]]


def speed_outcome(troubles: list[Trouble], kept: dict, clean_rounds: int,
                  anytime: bool) -> tuple[SpeedOutcome, dict | None]:
    """The outcome, and for a withheld one the launch to name ({"round", "framework"}). `kept`: the interval
    over the clean rounds."""
    oversubscribed = [t for t in troubles if t[2]["oversubscribed"]]
    if oversubscribed:
        number, framework, _ = oversubscribed[0]
        return SpeedOutcome.OVERSUBSCRIBED, {"round": number, "framework": framework}
    if clean_rounds < MIN_ROUNDS and troubles:
        # The busiest contended launch is the one to name.
        number, framework, _ = max(troubles, key=lambda t: t[2].get("others_cores") or 0)
        return SpeedOutcome.CONTENDED, {"round": number, "framework": framework}
    if clean_rounds < MIN_ROUNDS:
        return SpeedOutcome.TOO_FEW_ROUNDS, None
    low, high = kept["ci_low"], kept["ci_high"]
    if low is None:  # a confidence sequence is the whole line until enough rounds have run
        return SpeedOutcome.NO_INTERVAL_YET, None
    if low <= 1 <= high:
        return SpeedOutcome.INTERVAL_HOLDS_ONE, None
    if not kept["consistent"] and not anytime:
        return SpeedOutcome.ROUNDS_DISAGREE, None
    return (SpeedOutcome.DDP_FASTER if kept["ratio"] >= 1 else SpeedOutcome.HOROVOD_FASTER), None


def target_for(design: dict, world_size: int) -> float | None:
    """The precision a sequential design aims at, at this world size: one for every size (a number), or per
    size ({"1": 0.10, "2": 0.15}, the default's)."""
    target = design.get("precision")
    if isinstance(target, dict):
        return target.get(str(world_size))
    return target


def sequential_state(design: dict | None, half_width: float | None, world_size: int) -> dict | None:
    """The sequential design with this world size's target, the precision reached and why its rounds stopped
    ("stopped", "rounds" of the size where the design records them); None for a fixed number of rounds."""
    if not design:
        return None
    target = target_for(design, world_size)
    own = (design.get("world_sizes") or {}).get(str(world_size)) or {}
    return {**design, "target": target, "half_width": half_width, "world_size": world_size,
            "reached": bool(target and half_width is not None and half_width <= target),
            "stopped": own.get("stopped", design.get("stopped")), "rounds": own.get("rounds", design.get("rounds"))}


def interval_over(design: dict | None, world_size: int) -> Callable[[list[dict], float], dict]:
    """The interval a verdict takes over its rounds (rows with "round" and "ratio"): the t interval for a fixed
    number of rounds; under a sequential design the group-sequential repeated interval at this size's last
    look (its looks and whether the last spent all that was left, from the design), or the confidence
    sequence (with the design's c) for a long budget's design."""
    if not design:
        return lambda rows, confidence: rounds_ratio([row["ratio"] for row in rows], confidence)
    if design.get("method") != group_sequential.METHOD:
        c = float(design.get("mixture_c") or MIXTURE_C)
        return lambda rows, confidence: confidence_sequence([row["ratio"] for row in rows], confidence, c)
    own = (design.get("world_sizes") or {}).get(str(world_size)) or {}
    looks, planned = list(own.get("looks") or []), int(design["planned_rounds"])

    def repeated(rows: list[dict], confidence: float) -> dict:
        last = max((row["round"] for row in rows), default=0)
        made = [look for look in looks if look <= last]
        # a look is the rounds it counts; with none recorded (the rounds ended before the first), the rows
        # read once, as a final look: a fixed-n interval, valid since that stop was not the data's
        counted = [sum(row["round"] <= look for row in rows) for look in made] or [len(rows)]
        final = not looks or (bool(own.get("final")) and made == looks)
        return {**group_sequential.repeated_interval([row["ratio"] for row in rows], counted, planned, final,
                                                     confidence), "planned_rounds": planned}
    return repeated


@dataclass(frozen=True)
class JudgedRounds:
    """Rounds judged by the speed rules: which were contended, the interval over the clean ones, the outcome."""

    troubles: list[Trouble]
    contended: list[int]
    clean: list[dict]
    kept: dict  # the interval over the clean rounds
    outcome: SpeedOutcome
    withheld_by: dict | None


def judge_rounds(rounds: list[dict], confidence: float, design: dict | None, world_size: int) -> JudgedRounds:
    """The rules both the Horovod/DDP verdict and the A/A check apply to their rounds (rows with "round",
    "ratio" and each launch's "contention"): contended rounds left out, the t interval over the rest (the
    confidence sequence under a sequential design), and speed_outcome on it."""
    troubles = launch_troubles(rounds)
    contended = sorted({number for number, _, judged in troubles if judged["contended"]})
    clean = [row for row in rounds if row["round"] not in contended]
    kept = interval_over(design, world_size)(clean, confidence)
    outcome, withheld_by = speed_outcome(troubles, kept, len(clean), anytime=bool(design))
    return JudgedRounds(troubles, contended, clean, kept, outcome, withheld_by)


def compare_speed(world_size: int, runs: Iterable[RunRecord], warmup: int, confidence: float = CONFIDENCE,
                  design: dict | None = None) -> dict | None:
    """The Horovod/DDP step-time ratio at one world size from the rounds, its interval and the verdict:
    "outcome" (a SpeedOutcome), and from it status "faster" (winner named), "no clear difference",
    "withheld" (contention, oversubscription) or "too few rounds". `design`: the sequential design (else
    read from beside the runs, if any)."""
    runs = list(runs)
    design = design or sequential_design(runs)
    rounds = speed_rounds(runs, world_size, warmup)
    if not rounds:
        return None
    judged = judge_rounds(rounds, confidence, design, world_size)
    troubles, contended, clean, kept = judged.troubles, judged.contended, judged.clean, judged.kept
    outcome, withheld_by = judged.outcome, judged.withheld_by
    every = interval_over(design, world_size)(rounds, confidence)
    return {
        "a": "horovod", "b": "ddp", "world_size": world_size, "confidence": confidence,
        "rounds": rounds, "n_rounds": len(rounds), "rounds_used": [row["round"] for row in clean],
        "contended_rounds": contended,
        "step_time_ratio": kept["ratio"] if clean else every["ratio"],
        "ci_low": kept["ci_low"], "ci_high": kept["ci_high"], "half_width": kept["half_width"],
        "log_sd": kept.get("log_sd"), "consistent": kept["consistent"], "method": kept["method"], "all_rounds": every,
        "left_out": [{"round": number, "framework": f} for number, f, judged in troubles if judged["contended"]],
        "outcome": outcome.value, "status": STATUS[outcome], "winner": WINNER.get(outcome),
        "withheld_by": withheld_by,  # the launch a withheld verdict names
        "sequential": sequential_state(design, kept["half_width"] if clean else None, world_size),
    }

