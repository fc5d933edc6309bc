"""The A/A check of the speed design (compare run --aa): a framework's twin launches against its first ones,
judged by the same rounds, contention rules, interval and outcome as Horovod against DDP (speed.judge_rounds).

Pure: run records in, a JSON-serialisable dict out; the words are compare/render/speed.py's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from compare.analysis.contention import judge_contention, launch_contention
from compare.analysis.parity import CONFIDENCE
from compare.analysis.records import RunRecord
from compare.analysis.speed import STATUS, SpeedOutcome, judge_rounds, sequential_design
from compare.analysis.timing import launch_median
from compare.names import FRAMEWORKS


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
    judged = judge_rounds(rounds, confidence, design, world_size)
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

