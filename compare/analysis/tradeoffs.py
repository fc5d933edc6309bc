"""The trade-offs table: what distributing the job buys and costs per framework and world size (speed-up and
scaling against one worker, start-up, exposed communication, recovery from `compare faults`, code).

Pure: run records and the level figures in, a JSON-serialisable dict out; the words are
compare/render/speed.py's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from compare.analysis.contention import launch_contention
from compare.analysis.records import RunRecord
from compare.analysis.speed import timed
from compare.names import FRAMEWORKS


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
    where the recovery figures came from and the lines both backends share. Speed-up and scaling read the
    levels' figures (the speed verdict's rounds, as the summary); the phases behind exposed communication
    are timed in the parity launch only."""
    single = next((level["figures"] for level in levels if level["world_size"] == 1), {})
    single_timing = next((level["timing"] for level in levels if level["world_size"] == 1), {})
    recovered = recovery(inputs.faults)
    rows = []
    for level in levels:
        world_size = level["world_size"]
        for framework in FRAMEWORKS:
            entry, phases = level["figures"].get(framework), level["timing"].get(framework)
            if entry is None:
                continue
            one = single.get(framework)
            speedup = (entry["throughput"] / one["throughput"]
                       if one and one["throughput"] and entry["throughput"] else None)
            mine = [r for r in runs if timed(r) and r.framework == framework and r.world_size == world_size]
            rows.append({
                "framework": framework, "world_size": world_size, "speedup": speedup,
                "scaling_efficiency": entry["scaling_efficiency"], "startup_s": startup_s(mine),
                "exposed_comm_s": (exposed_communication_s(phases, single_timing.get(framework))
                                   if world_size > 1 and phases else None),
                "recovery": recovered.get(framework), "code_lines": inputs.code_lines.get(framework),
            })
    return {"rows": rows, "faults_source": inputs.faults_source, "shared_lines": inputs.code_lines.get("shared")}

