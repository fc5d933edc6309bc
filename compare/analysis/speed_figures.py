"""The figures each level of the report shows beside its speed verdict, and add_speed, which fills a level's
figures, timing tables, speed verdict, A/A check and setups.

One set of figures: a level's "figures" (the summary table's step times, throughput and scaling, and the
terminal's) are read from the rounds the speed verdict counts, so the table and the verdict cannot point
different ways. The parity launch (round 1: every seed, short) keeps its own tables in "timing", the details.

Pure: run records in, JSON-serialisable dicts out; the words are compare/render/speed.py's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from compare.analysis.aa import compare_aa
from compare.analysis.records import RunRecord
from compare.analysis.speed import compare_speed, speed_launches, timed
from compare.analysis.timing import breakdown, pooled_times, scaling_efficiency, step_stats, throughput
from compare.names import FRAMEWORKS

Group = dict[int, RunRecord]  # seed -> run
SPEED_ROUNDS = "speed rounds"  # a figure's source: the rounds the speed verdict reads
PARITY_LAUNCH = "parity launch"  # round 1, where no speed verdict reads rounds (--repeats 0, one framework)


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


def verdict_rounds(speed: dict) -> list[dict]:
    """The rounds the speed verdict's ratio reads: those it counts, or all of them where contention left none."""
    used = set(speed["rounds_used"])
    return [row for row in speed["rounds"] if row["round"] in used] or speed["rounds"]


def verdict_step_s(speed: dict, framework: str) -> float:
    """A side's step time as the speed verdict reads it: the geometric mean of its launches' median steps over
    the verdict's rounds, so that Horovod's over DDP's is the verdict's ratio exactly."""
    logs = [math.log(row[f"{framework}_median_s"]) for row in verdict_rounds(speed)]
    return math.exp(sum(logs) / len(logs))


def level_figures(world_size: int, timing: dict, speed: dict | None, runs: list[RunRecord]) -> dict[str, dict]:
    """Framework -> the figures the summary shows at this world size: Horovod's and DDP's from the speed
    verdict's rounds where there is a verdict, else (and the reference's always) the parity launch's."""
    figures = {}
    for framework in (*FRAMEWORKS, "reference"):
        if speed and framework in FRAMEWORKS:
            step_s, rounds = verdict_step_s(speed, framework), verdict_rounds(speed)
            batches = sorted({r.global_batch for r in speed_launches(runs, world_size)
                              if r.framework == framework and r.global_batch})
            batch = batches[0] if len(batches) == 1 else None
            # one count of rounds, the verdict's and the design's: every round that timed both sides, those
            # left out (contended) named beside it; the figures read the rounds the interval counts
            figures[framework] = {"step_s": step_s, "global_batch": batch, "throughput": throughput(batch, step_s),
                                  "source": SPEED_ROUNDS, "rounds": speed["n_rounds"],
                                  "rounds_left_out": len(speed["contended_rounds"]), "seeds": rounds[0]["seeds"],
                                  "scaling_efficiency": None,
                                  # round 1 counts as a speed round only without timed windows (or with none)
                                  "parity_launch_counted": any(row["round"] == 1 for row in rounds)}
        elif framework in timing:
            entry = timing[framework]
            figures[framework] = {"step_s": entry["step"]["median"], "global_batch": entry["global_batch"],
                                  "throughput": entry["throughput"], "source": PARITY_LAUNCH, "rounds": None,
                                  "rounds_left_out": 0,
                                  "seeds": entry["seeds"], "scaling_efficiency": None,
                                  "parity_launch_counted": False}
    return figures


def add_scaling(levels: list[dict], key: str) -> None:
    """Scaling efficiency of each framework against its own world size 1, in each level's `key` ("timing",
    "figures")."""
    single = {
        f: t["throughput"] for level in levels if level["world_size"] == 1 for f, t in level[key].items()
    }
    for level in levels:
        for framework, entry in level[key].items():
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
    """The figures, timing, the speed verdict and what was compared, for every level of the analysis. The
    timing tables read the parity launch (round 1, every seed); the verdict and the figures its rounds."""
    groups = first_round_groups(runs)
    for level in levels:
        world_size = level["world_size"]
        present = {f: g for (f, ws), g in groups.items() if ws == world_size}
        level["timing"] = {f: timing_entry(f, world_size, present[f], warmup)
                           for f in (*FRAMEWORKS, "reference") if f in present}
        level["speed"] = compare_speed(world_size, runs, warmup)
        level["aa"] = compare_aa(world_size, runs, warmup)
        level["compared"] = compared(world_size, runs, level["speed"])
        level["figures"] = level_figures(world_size, level["timing"], level["speed"], runs)
    add_scaling(levels, "timing")
    add_scaling(levels, "figures")

