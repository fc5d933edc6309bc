"""Which framework is faster, by how much: timing per (framework, world size), scaling, the speed verdict.

Pure: takes run records, returns JSON-serialisable dicts.
"""

from __future__ import annotations

from compare.analysis.parity import CONFIDENCE
from compare.analysis.records import RunRecord
from compare.analysis.timing import breakdown, pooled_times, scaling_efficiency, speed_ratio, step_stats, throughput

Group = dict[int, RunRecord]  # seed -> run


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


def speed_sentence(world_size: int, ratio: dict) -> str:
    """How DDP's speed compares with Horovod's, from the Horovod/DDP step-time ratio and its CI."""
    r, low, high = ratio["step_time_ratio"], ratio["ci_low"], ratio["ci_high"]
    if r is None:
        return f"no speed comparison at np {world_size} ({ratio.get('reason')})"
    conf = f"{ratio['confidence']:.0%} CI"
    if low is None:
        ci = inverse_ci = ""
    else:
        ci = f" ({conf} {low:.2f}-{high:.2f})"
        inverse_ci = f" ({conf} {1 / high:.2f}-{1 / low:.2f})"
    if low is not None and low <= 1 <= high:
        return (
            f"Horovod and DDP are equally fast within noise at np {world_size} "
            f"(Horovod/DDP step-time ratio {r:.2f}, {conf} {low:.2f}-{high:.2f})"
        )
    if r >= 1:
        return f"DDP is {r:.2f}x faster than Horovod at np {world_size}{ci}"
    return f"Horovod is {1 / r:.2f}x faster than DDP at np {world_size}{inverse_ci}"


def compare_speed(world_size: int, present: dict[str, Group], warmup: int) -> dict | None:
    """The Horovod/DDP step-time ratio at one world size, with its interval and a sentence."""
    if "horovod" not in present or "ddp" not in present:
        return None
    speed = speed_ratio(pooled_times(present["horovod"].values(), warmup),
                        pooled_times(present["ddp"].values(), warmup), confidence=CONFIDENCE)
    speed.update(a="horovod", b="ddp", sentence=speed_sentence(world_size, speed))
    return speed


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
