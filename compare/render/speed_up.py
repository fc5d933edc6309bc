"""The speed figure in its one direction, wherever people read it: the side that takes less time and by how much
("DDP 1.81x"), with that factor's interval. The records keep the Horovod/DDP ratio of times (step times, seconds
to a target); this is how every sentence and table says it, so that no page shows 0.55 where another shows 1.81x.
"""

from __future__ import annotations

from compare.names import display
from compare.render.blocks import DASH


def one_direction(ratio: float, low: float | None = None, high: float | None = None,
                  ) -> tuple[str, float, float | None, float | None]:
    """A Horovod/DDP ratio of times (above 1: DDP takes less) as (the side that takes less by the point
    estimate, its factor, the interval of that factor): 0.68 (0.63-0.74) is ("horovod", 1.47, 1.35, 1.59). The
    interval may reach below 1 where the two are not clearly apart."""
    if ratio >= 1:
        return "ddp", ratio, low, high
    return "horovod", 1 / ratio, (1 / high if high else None), (1 / low if low else None)


def speed_up(speed: dict) -> tuple[str, float, float | None, float | None]:
    """A speed verdict's figures (compare_speed's "step_time_ratio", "ci_low", "ci_high") in the one direction."""
    return one_direction(speed["step_time_ratio"], speed.get("ci_low"), speed.get("ci_high"))


def other(framework: str) -> str:
    return "ddp" if framework == "horovod" else "horovod"


def even(factor: float) -> bool:
    """A factor that prints as 1.00: naming a faster side would be a coin's toss."""
    return f"{factor:.2f}" == "1.00"


def speed_up_words(ratio: float) -> str:
    """The words for a step-time ratio that is not a verdict: 'DDP's speed-up over Horovod 1.21x'."""
    faster, factor, _, _ = one_direction(ratio)
    if even(factor):
        return "speed-up 1.00x either way"
    return f"{display(faster)}'s speed-up over {display(other(faster))} {factor:.2f}x"


def faster_by(ratio: float | None) -> str:
    """A table's "faster, by" cell for a step-time ratio: "DDP 1.81x", "Horovod 1.47x"; a dash for none."""
    if ratio is None or ratio != ratio or ratio <= 0:  # not measured, or NaN (a run too short to time)
        return DASH
    faster, factor, _, _ = one_direction(ratio)
    return "1.00x either way" if even(factor) else f"{display(faster)} {factor:.2f}x"
