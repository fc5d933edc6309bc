"""The headroom of each parity default (docs/parity.md, "The numbers behind each default"): what a default allows
divided by the gap seen, the smallest over every seed and judged step. Below 1 the default is exceeded, and a
verdict that relies on it would fail a job that is the same.

Read from a `compare run` report (the campaign test, tests/test_parity_headroom.py, and the long digits run of
tests/test_parity_launchers.py) and from the per-seed series scripts/parity_headroom.py records for the docs'
tables. Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from compare.analysis.parity import SATURATION, STEP_K, Band, default_margins

CALIBRATED = ("CHAOS_SAFETY", "margins")
"""What a calibrated verdict uses: every compared pair of the same job must keep its gaps inside these."""
UNCALIBRATED = ("STEP_RTOL", "DEFAULT_DECADE_STEPS")
"""What `compare check` uses without a calibration."""
DEFAULT_BAND = Band("default")
DEFAULT_BAND_HOLDS = {"mlp": (1, 2, 4), "lm": (1, 2, 4)}
"""Where docs/parity.md says the uncalibrated default band covers a job's one-ulp pairs (workload: world sizes).
Elsewhere the docs say to calibrate (resnet, digits: their pairs part early; the tables there show where)."""


class Room:
    """The smallest allowed / gap seen, and where (step, seed, what), with the gap and what was allowed there;
    value None where the default never applied."""

    def __init__(self) -> None:
        self.value: float | None = None
        self.step: int | None = None
        self.seed: int | None = None
        self.what: str | None = None
        self.gap = self.allowed = 0.0

    def see(self, allowed: float, gap: float, step: int | None = None, seed: int | None = None,
            what: str | None = None) -> None:
        ratio = math.inf if gap <= 0 else allowed / gap
        if self.value is None or ratio < self.value:
            self.value, self.step, self.seed, self.what, self.gap, self.allowed = ratio, step, seed, what, gap, allowed

    def merge(self, other: Room) -> None:
        if other.value is not None and (self.value is None or other.value < self.value):
            self.value, self.step, self.seed, self.what = other.value, other.step, other.seed, other.what
            self.gap, self.allowed = other.gap, other.allowed


def against_the_default(rooms: dict[str, Room], step: int, gap: float, seed: int | None = None) -> None:
    """The uncalibrated band at one step: `STEP_RTOL` alone to `STEP_K`, then its growth, until it saturates."""
    allowed = DEFAULT_BAND.tolerance(step)
    if allowed < SATURATION:
        rooms["STEP_RTOL" if step <= STEP_K else "DEFAULT_DECADE_STEPS"].see(allowed, gap, step, seed)


def series_rooms(steps: Sequence[int], gaps: Sequence[float | None], tolerances: Sequence[float] | None = None,
                 seed: int | None = None) -> dict[str, Room]:
    """One seed's relative gaps against the uncalibrated default band, and against `tolerances` (the calibrated
    band a verdict used, while it has power) as CHAOS_SAFETY. A gap of None is not finite (a run blew up)."""
    rooms = {name: Room() for name in ("CHAOS_SAFETY", *UNCALIBRATED)}
    for at, (step, gap) in enumerate(zip(steps, gaps, strict=True)):
        seen = math.inf if gap is None else gap
        if tolerances is not None and tolerances[at] < SATURATION:
            rooms["CHAOS_SAFETY"].see(tolerances[at], seen, step, seed)
        against_the_default(rooms, step, seen, seed)
    return rooms


def margin_room(room: Room, name: str, a: float, b: float, seed: int | None = None) -> None:
    """An end point's difference against its default margin (2% of a loss, 1 point of accuracy)."""
    room.see(default_margins()[name].resolve((a + b) / 2), abs(a - b), seed=seed, what=name)


def pair_headroom(comparison: dict) -> dict[str, float | None]:
    """One compared pair of a report over its seeds: against the band the verdict used (calibrated: CHAOS_SAFETY
    times the one-ulp pairs), against the uncalibrated default band, and its end points against the margins."""
    rooms = {name: Room() for name in (*CALIBRATED, *UNCALIBRATED)}
    for seed in comparison["seeds"]:
        losses = seed["losses"]
        for name, room in series_rooms(losses["steps"], losses["rel_diffs"], losses["tolerances"]).items():
            rooms[name].merge(room)
    for name, result in comparison.get("end_points", {}).items():
        if result.get("mean_diff") is not None and result.get("mean_a") is not None:
            level = (result["mean_a"] + result["mean_b"]) / 2
            rooms["margins"].see(default_margins()[name].resolve(level), abs(result["mean_diff"]))
    return {name: room.value for name, room in rooms.items()}


def ulp_pair_headroom(band: dict) -> dict[str, float | None]:
    """The uncalibrated default band against a calibrated band's one-ulp pairs (the widest at every step): the
    float chaos of a job against itself, which the default has to cover when no calibration is at hand."""
    rooms = {name: Room() for name in UNCALIBRATED}
    for step, chaos in band["envelope"].items():
        against_the_default(rooms, int(step), chaos)
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
