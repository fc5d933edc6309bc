"""Was the machine free while a launch ran? A judgement over the figures compare/launch/contention.py
recorded beside the launch (contention.json), so that a speed verdict is about the frameworks and not
about whatever else ran.

Pure apart from reading that small record next to a run (as records.py reads run.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from compare.analysis.records import RunRecord
from workload.record_format import CONTENTION_RECORD

# Other processes' CPU use below this (in cores) is background noise on any machine.
OTHERS_MIN_CORES = 0.10
# The job plus the others must leave this much of a core idle, or they competed for the cores.
IDLE_MARGIN_CORES = 0.5
# The hypervisor took more than this share of the CPU time (steal): the machine itself was shared.
STEAL_LIMIT = 0.05


def launch_contention(run: RunRecord) -> dict | None:
    """The contention record of the launch a run belongs to: in the run directory (one seed) or its
    parent (several seeds, OUT/seed-S). None for runs made elsewhere (a cluster, an import)."""
    for directory in (Path(run.path), Path(run.path).parent):
        path = directory / CONTENTION_RECORD
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("wall_s"):
            return record
    return None


def judge_contention(record: dict | None) -> dict:
    """contended / oversubscribed / lacks a free core, with the figures that say why (no prose)."""
    if not record:
        return {"measured": False, "contended": False, "oversubscribed": False, "lacks_free_core": None,
                "cause": None}
    wall = max(float(record["wall_s"]), 1e-9)
    cores = int(record.get("available_cores") or 1)
    demand = int(record.get("ranks") or 1) * int(record.get("threads_per_rank") or 1)
    others = float(record.get("others_cores") or 0.0)
    own = max(float(record.get("own_cpu_s") or 0.0) / wall, 0.0)
    steal = record.get("steal_fraction")
    idle = cores - own - others
    cause = None
    if demand > cores:
        cause = "oversubscribed"
    elif steal is not None and steal > STEAL_LIMIT:
        cause = "steal"
    elif others >= OTHERS_MIN_CORES and idle < IDLE_MARGIN_CORES:
        cause = "others"
    return {
        "measured": True,
        "contended": cause in ("others", "steal"),
        "oversubscribed": cause == "oversubscribed",
        "lacks_free_core": demand > cores or (others >= OTHERS_MIN_CORES and demand + others > cores),
        "cause": cause,
        "others_cores": others,
        "own_cores": own,
        "idle_cores": idle,
        "steal_fraction": steal,
        "demand": demand,
        "cores": cores,
        "top_others": record.get("top_others") or [],
    }

