"""The headroom of each parity default (docs/parity.md, "The numbers behind each default") in a `compare run`
report: what a default allows divided by the gap seen, the smallest over every seed and judged step. Below 1
the default is exceeded, and a verdict that relies on it would fail a job that is the same.

Shared by the campaign over the built-in workloads (test_parity_headroom.py) and the long digits run of the
default suite (test_parity_launchers.py), which launches that job anyway.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path

from compare.analysis.parity import SATURATION, STEP_K, Band, default_margins

CALIBRATED = ("CHAOS_SAFETY", "margins")
"""What a calibrated verdict uses: every compared pair of the same job must keep its gaps inside these."""
UNCALIBRATED = ("STEP_RTOL", "DEFAULT_DECADE_STEPS")
"""What `compare check` uses without a calibration."""
DEFAULT_BAND = Band("default")
DEFAULT_BAND_HOLDS = {"mlp": (1, 2, 4), "lm": (1, 2, 4)}
"""Where docs/parity.md says the uncalibrated default band covers a job's one-ulp pairs (workload: world sizes).
Elsewhere the docs say to calibrate: resnet parts by step 3-5; digits at np 4 tenfolds every 4-5 steps from
step 35-40, at np 1 (220 steps of 5 epochs) parts from step 65-70, and at np 2 holds for seeds 0-2 but not
for seed 3, whose reference pair jumps to 2e-5 at step 9."""


class Room:
    """The smallest allowed / gap seen; None where the default never applied (no step in its range)."""

    def __init__(self) -> None:
        self.value: float | None = None

    def see(self, allowed: float, gap: float) -> None:
        ratio = math.inf if gap <= 0 else allowed / gap
        self.value = ratio if self.value is None else min(self.value, ratio)


def _against_the_default(rooms: dict[str, Room], step: int, gap: float) -> None:
    """The uncalibrated band at one step: `STEP_RTOL` alone to `STEP_K`, then its growth, until it saturates."""
    allowed = DEFAULT_BAND.tolerance(step)
    if allowed < SATURATION:
        rooms["STEP_RTOL" if step <= STEP_K else "DEFAULT_DECADE_STEPS"].see(allowed, gap)


def pair_headroom(comparison: dict) -> dict[str, float | None]:
    """One compared pair over its seeds: against the band the verdict used (calibrated: CHAOS_SAFETY times the
    one-ulp pairs), against the uncalibrated default band, and its end points against the default margins."""
    rooms = {name: Room() for name in (*CALIBRATED, *UNCALIBRATED)}
    for seed in comparison["seeds"]:
        losses = seed["losses"]
        for step, gap, tolerance in zip(losses["steps"], losses["rel_diffs"], losses["tolerances"], strict=True):
            if tolerance < SATURATION:
                rooms["CHAOS_SAFETY"].see(tolerance, gap)
            _against_the_default(rooms, step, gap)
    margins = default_margins()
    for name, result in comparison.get("end_points", {}).items():
        if result.get("mean_diff") is not None and result.get("mean_a") is not None:
            level = (result["mean_a"] + result["mean_b"]) / 2
            rooms["margins"].see(margins[name].resolve(level), abs(result["mean_diff"]))
    return {name: room.value for name, room in rooms.items()}


def ulp_pair_headroom(band: dict) -> dict[str, float | None]:
    """The uncalibrated default band against a calibrated band's one-ulp pairs (the widest at every step): the
    float chaos of a job against itself, which the default has to cover when no calibration is at hand."""
    rooms = {name: Room() for name in UNCALIBRATED}
    for step, chaos in band["envelope"].items():
        _against_the_default(rooms, int(step), chaos)
    return {name: room.value for name, room in rooms.items()}


def level_headroom(level: dict) -> dict[str, dict[str, float | None]]:
    """Every compared pair's headroom at one world size of a report's analysis, and the one-ulp pair's."""
    rooms = {name: pair_headroom(comparison) for name, comparison in level["comparisons"].items()}
    if level["band"]["source"] == "calibrated":
        rooms["one_ulp_pair"] = ulp_pair_headroom(level["band"])
    return rooms


def report_headroom(analysis: dict) -> dict[int, dict[str, dict[str, float | None]]]:
    return {level["world_size"]: level_headroom(level) for level in analysis["levels"]}


def shortfalls(found: dict[int, dict[str, dict[str, float | None]]],
               default_band_holds: Iterable[int] = ()) -> list[str]:
    """Each default below 1 where it must hold: the calibrated ones for every compared pair, and the
    uncalibrated band for the one-ulp pair at the world sizes given (where the docs say it holds)."""
    holds = set(default_band_holds)
    short = []
    for world_size, rooms in found.items():
        for pair, room in rooms.items():
            must = {"one_ulp_pair": UNCALIBRATED if world_size in holds else ()}.get(pair, CALIBRATED)
            short += [f"np {world_size} {pair} {name} {room[name]:.3g}x" for name in must
                      if room[name] is not None and room[name] < 1]
    return short


def keep(workload: str, found: dict, default: Path) -> None:
    """Write the figures to $PARITY_HEADROOM_OUT (or default) as headroom-<workload>.json, for the docs' tables."""
    target = Path(os.environ.get("PARITY_HEADROOM_OUT", default))
    target.mkdir(parents=True, exist_ok=True)
    (target / f"headroom-{workload}.json").write_text(json.dumps(found, indent=1, default=str))
