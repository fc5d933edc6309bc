"""Which framework is faster, by how much: timing per (framework, world size), scaling, the speed verdict
over repeated interleaved launches, what was compared, the trade-offs table and the model-size sweep.

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

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np

from compare.analysis.contention import judge_contention, launch_contention
from compare.analysis.parity import CONFIDENCE
from compare.analysis.records import RunRecord
from compare.analysis.sequential import confidence_sequence
from compare.analysis.timing import (
    breakdown,
    launch_median,
    pooled_times,
    rounds_ratio,
    scaling_efficiency,
    step_stats,
    throughput,
)
from compare.names import FRAMEWORKS

Group = dict[int, RunRecord]  # seed -> run
MIN_ROUNDS = 3  # fewer rounds give a t interval too wide to say anything (t(0.975, 1 df) = 12.7)
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


def timing_entry(framework: str, world_size: int, group: Group, warmup: int) -> dict:
    records = [group[s] for s in sorted(group)]
    stats = step_stats(pooled_times(records, warmup), 0)
    batches = sorted({r.global_batch for r in records if r.global_batch})
    return {
        "framework": framework,
        "world_size": world_size,
        "seeds": sorted(group),
        "global_batch": batches[0] if len(batches) == 1 else None,
        "step": stats,
        "throughput": throughput(batches[0], stats["median"]) if len(batches) == 1 else None,
        "scaling_efficiency": None,
        "breakdown": breakdown(records, warmup),
    }


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


def sequential_state(design: dict | None, half_width: float | None) -> dict | None:
    """The sequential design with the precision reached; None for a fixed number of rounds."""
    if not design:
        return None
    target = design.get("precision")
    return {**design, "half_width": half_width, "reached": bool(target and half_width is not None
                                                                and half_width <= target)}


@dataclass(frozen=True)
class JudgedRounds:
    """Rounds judged by the speed rules: which were contended, the interval over the clean ones, the outcome."""

    troubles: list[Trouble]
    contended: list[int]
    clean: list[dict]
    kept: dict  # the interval over the clean rounds
    outcome: SpeedOutcome
    withheld_by: dict | None


def judge_rounds(rounds: list[dict], confidence: float, design: dict | None) -> JudgedRounds:
    """The rules both the Horovod/DDP verdict and the A/A check apply to their rounds (rows with "round",
    "ratio" and each launch's "contention"): contended rounds left out, the t interval over the rest (the
    confidence sequence under a sequential design), and speed_outcome on it."""
    troubles = launch_troubles(rounds)
    contended = sorted({number for number, _, judged in troubles if judged["contended"]})
    clean = [row for row in rounds if row["round"] not in contended]
    interval = confidence_sequence if design else rounds_ratio
    kept = interval([row["ratio"] for row in clean], confidence)
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
    judged = judge_rounds(rounds, confidence, design)
    troubles, contended, clean, kept = judged.troubles, judged.contended, judged.clean, judged.kept
    outcome, withheld_by = judged.outcome, judged.withheld_by
    every = (confidence_sequence if design else rounds_ratio)([row["ratio"] for row in rounds], confidence)
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
        "sequential": sequential_state(design, kept["half_width"] if clean else None),
    }


# ---- A/A: the same framework against itself ------------------------------------------------------------

def aa_rounds(runs: Iterable[RunRecord], world_size: int, warmup: int) -> list[dict]:
    """Each round holding a launch of a framework and its A/A twin (compare run --aa): the two launches'
    median step times, twin / first, and the contention each met."""
    found: dict[tuple[int, str], dict[str, RunRecord]] = defaultdict(dict)
    for run in runs:
        if (run.ok and run.framework in FRAMEWORKS and not run.is_calibration and run.imported is None
                and run.world_size == world_size and run.timed_seconds):
            found[(run.round, run.framework)]["twin" if run.is_twin else "first"] = run
    rows = []
    for (number, framework), slots in sorted(found.items()):
        if set(slots) != {"first", "twin"}:
            continue
        row: dict = {"round": number, "framework": framework, "contention": {}}
        for slot, run in slots.items():
            row[f"{slot}_median_s"] = launch_median([run], warmup)
            record = launch_contention(run)
            row["contention"][slot] = {**judge_contention(record), "record": record}
        first, twin = row["first_median_s"], row["twin_median_s"]
        row["ratio"] = twin / first if first and twin else None
        if row["ratio"] is not None:
            rows.append(row)
    return rows


def compare_aa(world_size: int, runs: Iterable[RunRecord], warmup: int, confidence: float = CONFIDENCE,
               design: dict | None = None) -> dict | None:
    """The A/A check of the speed design at one world size: a framework's twin launches against its first
    ones, judged by the same interval and the same rules as Horovod against DDP. Its interval should hold
    1; "slower" names the slot the interval puts slower (a planted --step-delay-for twin should be named)."""
    runs = list(runs)
    design = design or sequential_design(runs)
    rounds = aa_rounds(runs, world_size, warmup)
    if not rounds:
        return None
    judged = judge_rounds(rounds, confidence, design)
    kept, outcome = judged.kept, judged.outcome
    slower = {SpeedOutcome.DDP_FASTER: "twin", SpeedOutcome.HOROVOD_FASTER: "first"}.get(outcome)  # ratio a/b
    return {
        "framework": rounds[0]["framework"], "world_size": world_size, "confidence": confidence,
        "rounds": rounds, "n_rounds": len(rounds), "rounds_used": [row["round"] for row in judged.clean],
        "contended_rounds": judged.contended, "ratio": kept["ratio"], "ci_low": kept["ci_low"],
        "ci_high": kept["ci_high"], "half_width": kept["half_width"], "log_sd": kept.get("log_sd"),
        "method": kept["method"], "outcome": outcome.value, "status": STATUS[outcome], "slower": slower,
        "withheld_by": judged.withheld_by,
        "holds_one": bool(kept["ci_low"] is not None and kept["ci_low"] <= 1 <= kept["ci_high"]),
    }


# ---- what was compared ---------------------------------------------------------------------------------

def compared(world_size: int, runs: Iterable[RunRecord], speed: dict | None) -> dict:
    """The configurations behind a level's numbers: communication backends, launchers, threads, cores; and
    whether Horovod ran on MPI with ranks that lacked a free core (Open MPI's busy-polling then bites)."""
    first: dict[str, RunRecord] = {}
    for run in sorted(runs, key=lambda r: (r.round, r.seed)):
        if timed(run) and run.world_size == world_size:
            first.setdefault(run.framework, run)
    sides = {f: {"backend": first[f].meta.get("backend"), "launcher": first[f].meta.get("launcher"),
                 "threads": first[f].meta.get("threads")} for f in FRAMEWORKS if f in first}
    judged = [j for row in (speed or {}).get("rounds", []) for j in row["contention"].values() if j["measured"]]
    cores = judged[0]["cores"] if judged else next(
        (r.meta.get("host", {}).get("cpu_count") for r in first.values()), None)
    threads = sorted({s["threads"] for s in sides.values() if s["threads"]})
    hvd_judged = [row["contention"]["horovod"] for row in (speed or {}).get("rounds", [])
                  if row["contention"]["horovod"]["measured"]]
    busy_poll = bool(sides.get("horovod", {}).get("backend") == "mpi" and world_size > 1 and (
        any(j["lacks_free_core"] for j in hvd_judged)
        or (not hvd_judged and cores and world_size * (threads[-1] if threads else 1) > cores)))
    return {"sides": sides, "cores": cores, "threads": threads, "busy_poll": busy_poll}


def add_scaling(levels: list[dict]) -> None:
    """Scaling efficiency of each framework against its own world size 1."""
    single = {
        f: t["throughput"] for level in levels if level["world_size"] == 1 for f, t in level["timing"].items()
    }
    for level in levels:
        for framework, entry in level["timing"].items():
            if framework != "reference":
                entry["scaling_efficiency"] = scaling_efficiency(
                    entry["throughput"], single.get(framework), level["world_size"]
                )


def first_round_groups(runs: Iterable[RunRecord]) -> dict[tuple[str, int], Group]:
    """(framework, world size) -> seed -> run, round 1 only (a reference run stands for the size it emulates)."""
    groups: dict[tuple[str, int], Group] = defaultdict(dict)
    for run in sorted(runs, key=lambda r: str(r.path)):
        if run.ok and run.round == 1 and not run.is_calibration:
            size = run.data_world_size if run.framework == "reference" else run.world_size
            groups[(run.framework, size)].setdefault(run.seed, run)
    return dict(groups)


def add_speed(levels: list[dict], runs: list[RunRecord], warmup: int) -> None:
    """Timing, the speed verdict and what was compared, for every level of the analysis. Timing tables
    use the round-1 runs (every seed); the verdict uses every round."""
    groups = first_round_groups(runs)
    for level in levels:
        world_size = level["world_size"]
        present = {f: g for (f, ws), g in groups.items() if ws == world_size}
        level["timing"] = {f: timing_entry(f, world_size, present[f], warmup)
                           for f in (*FRAMEWORKS, "reference") if f in present}
        level["speed"] = compare_speed(world_size, runs, warmup)
        level["aa"] = compare_aa(world_size, runs, warmup)
        level["compared"] = compared(world_size, runs, level["speed"])
    add_scaling(levels)


# ---- the trade-offs table -------------------------------------------------------------------------------

def startup_s(runs: Iterable[RunRecord]) -> float | None:
    """Launch to the end of the first step (start-up and rendezvous included), median over the launches:
    from the launch's start (contention.json) to step 1's wall_time in the first seed's metrics."""
    by_launch: dict[tuple[int, str], RunRecord] = {}
    for run in runs:
        key = (run.round, str(run.path.parent if run.path.name.startswith("seed-") else run.path))
        if key not in by_launch or run.seed < by_launch[key].seed:
            by_launch[key] = run
    values = []
    for run in by_launch.values():
        record = launch_contention(run)
        first = next((s for s in run.steps if s.get("wall_time") is not None), None)
        if record and first and record.get("started_unix"):
            values.append(float(first["wall_time"]) - float(record["started_unix"]))
    return float(np.median(values)) if values else None


def exposed_communication_s(level_timing: dict, single_timing: dict | None) -> float | None:
    """Time per step that communication adds where it cannot hide: backward + optimizer (the phases that
    hold DDP's bucket allreduces and Horovod's wait for its allreduces; the slowest rank's) at this world
    size, less the same at np 1 (same per-worker batch, no communication worth the name)."""
    if not single_timing:
        return None
    here, alone = level_timing["breakdown"], single_timing["breakdown"]
    keys = ("backward_s", "optimizer_s")
    if not all(k in here and k in alone for k in keys):
        return None
    return sum(here[k] for k in keys) - sum(alone[k] for k in keys)


def code_lines(text: str) -> int:
    """Lines of code in a Python source: not blank, not a comment, not in a docstring."""
    count, in_doc, quote = 0, False, ""
    for raw in text.splitlines():
        line = raw.strip()
        if in_doc:
            if quote in line:
                in_doc = False
            continue
        if not line or line.startswith("#"):
            continue
        if line[:3] in ('"""', "'''"):
            quote = line[:3]
            if line.count(quote) == 1 or line == quote:
                in_doc = True
            continue
        count += 1
    return count


def recovery(faults: dict | None) -> dict[str, dict]:
    """Per framework, from `compare faults` results: scenarios recovered, seconds from the fault to the
    next completed step and steps lost (medians over the scenarios that recovered)."""
    if not faults or not isinstance(faults.get("results"), list):
        return {}
    found: dict[str, dict] = {}
    for framework in FRAMEWORKS:
        mine = [r for r in faults["results"] if isinstance(r, dict) and r.get("framework") == framework]
        if not mine:
            continue
        ok = [r for r in mine if r.get("recovered")]
        seconds = [r["seconds_to_next_step"] for r in ok if r.get("seconds_to_next_step") is not None]
        lost = [r["steps_lost"] for r in ok if r.get("steps_lost") is not None]
        found[framework] = {"recovered": len(ok), "scenarios": len(mine),
                            "seconds_to_next_step": float(np.median(seconds)) if seconds else None,
                            "steps_lost": float(np.median(lost)) if lost else None}
    return found


@dataclass(frozen=True)
class TradeoffInputs:
    """What the trade-offs table takes from outside the run records; `compare report` reads it."""

    faults: dict | None = None  # `compare faults` results (faults.json)
    faults_source: str | None = None  # where they were read
    code_lines: dict[str, int] = field(default_factory=dict)  # "horovod", "ddp", "shared" -> its backend.py's


def tradeoffs(levels: list[dict], runs: list[RunRecord], inputs: TradeoffInputs) -> dict:
    """What distribution buys and costs, measured per framework and world size: speed-up and scaling
    efficiency against one worker, start-up, exposed communication per step, recovery, code. "rows", with
    where the recovery figures came from and the lines both backends share."""
    single = next((level["timing"] for level in levels if level["world_size"] == 1), {})
    recovered = recovery(inputs.faults)
    rows = []
    for level in levels:
        world_size = level["world_size"]
        for framework in FRAMEWORKS:
            entry = level["timing"].get(framework)
            if entry is None:
                continue
            one = single.get(framework)
            speedup = (entry["throughput"] / one["throughput"]
                       if one and one["throughput"] and entry["throughput"] else None)
            mine = [r for r in runs if timed(r) and r.framework == framework and r.world_size == world_size]
            rows.append({
                "framework": framework, "world_size": world_size, "speedup": speedup,
                "scaling_efficiency": entry["scaling_efficiency"], "startup_s": startup_s(mine),
                "exposed_comm_s": exposed_communication_s(entry, one) if world_size > 1 else None,
                "recovery": recovered.get(framework), "code_lines": inputs.code_lines.get(framework),
            })
    return {"rows": rows, "faults_source": inputs.faults_source, "shared_lines": inputs.code_lines.get("shared")}


# ---- the model-size sweep -------------------------------------------------------------------------------

def mlp_gradient_bytes(hidden: int, features: int = 64, classes: int = 10) -> int:
    """float32 bytes of the mlp's gradient at this width (two hidden layers of `hidden` units)."""
    params = features * hidden + hidden + hidden * hidden + hidden + hidden * classes + classes
    return 4 * params


def sweep_points(runs: list[RunRecord], warmup: int, confidence: float = CONFIDENCE) -> list[dict]:
    """Per mlp width: the Horovod/DDP step-time ratio of each round and over rounds (as the verdict does)."""
    widths = sorted({int((r.meta.get("options") or {}).get("hidden") or 256) for r in runs if r.ok})
    points = []
    for width in widths:
        mine = [r for r in runs if int((r.meta.get("options") or {}).get("hidden") or 256) == width]
        world_size = max((r.world_size for r in mine), default=1)
        rounds = speed_rounds(mine, world_size, warmup)
        ratios = [row["ratio"] for row in rounds]
        summary = rounds_ratio(ratios, confidence)
        points.append({"hidden": width, "gradient_bytes": mlp_gradient_bytes(width), "world_size": world_size,
                       "round_ratios": ratios, **summary,
                       "horovod_median_s": _median(row["horovod_median_s"] for row in rounds),
                       "ddp_median_s": _median(row["ddp_median_s"] for row in rounds),
                       "contended_rounds": [row["round"] for row in rounds
                                            if any(j["contended"] for j in row["contention"].values())]})
    return points


def crossover(points: list[dict]) -> float | None:
    """The gradient size (bytes) where the ratio crosses 1, interpolated on log size; None if it never does."""
    pairs = [(p["gradient_bytes"], p["ratio"]) for p in points if p["ratio"]]
    for (x0, r0), (x1, r1) in itertools.pairwise(pairs):
        if (r0 - 1) * (r1 - 1) < 0:
            l0, l1 = math.log(r0), math.log(r1)
            t = l0 / (l0 - l1)
            return float(math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0))))
    return None


def _median(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.median(kept)) if kept else None
