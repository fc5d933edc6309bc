"""The model-size sweep (compare run --sweep-model-size): the Horovod/DDP step-time ratio per mlp width, over
rounds as the speed verdict takes it, and where it crosses 1.

Pure: run records in, JSON-serialisable dicts out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

import numpy as np

from compare.analysis.parity import CONFIDENCE
from compare.analysis.records import RunRecord
from compare.analysis.speed import speed_rounds
from compare.analysis.timing import rounds_ratio


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
