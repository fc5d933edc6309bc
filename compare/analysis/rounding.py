"""Printed rounding: how finely a side's values were written down, so that the parity judge can allow for it.

A loss read from a log is what the script printed (`f"{loss:.3f}"`, `%.4g`), not what it computed: two
identical runs printed at 6 and 3 decimals differ by up to half a unit in the 3rd decimal at every step. The
judge allows half a unit in the last printed place of each side (compare/analysis/parity.py, `stepwise`).

The unit is read from the values themselves (their shortest decimal spelling, which is what a log's text
gives): a value printed with fixed decimals has its unit at 10^-decimals, one printed with significant digits
at its own magnitude. The largest count of decimals and of significant digits over a side's values bound
both (a trailing zero that the number lost only lowers a count), and the larger unit of the two models at each
value is the true one (docs/parity.md, "Printed rounding"). Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal

MAX_PRINTED_DIGITS = 9
"""More significant digits than this is a full-precision value (float32 carries 7-9), not printed rounding."""

MIN_VALUES = 5
"""Fewer distinct non-zero values than this cannot tell printed rounding from chance short values."""


def _digits(value: float) -> tuple[int, int]:
    """(decimals, significant digits) of the shortest spelling of `value` (repr's: it round-trips)."""
    _, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite values only
    return max(0, -exponent), len(digits)


def printed_units(values: Mapping[int, float]) -> dict[int, float] | None:
    """Each step's unit in the last printed place, or None when the values look unrounded (full precision)."""
    finite = {step: v for step, v in values.items() if math.isfinite(v) and v != 0.0}
    if len({*finite.values()}) < MIN_VALUES:
        return None
    counts = [_digits(v) for v in finite.values()]
    decimals = max(d for d, _ in counts)
    significant = max(s for _, s in counts)
    if significant > MAX_PRINTED_DIGITS:
        return None
    fixed = 10.0 ** -decimals
    units = {}
    for step, v in values.items():
        if not math.isfinite(v):
            continue
        magnitude = math.floor(math.log10(abs(v))) if v else -decimals
        units[step] = max(fixed, 10.0 ** (magnitude - significant + 1))
    return units


def coarsest(units: Mapping[int, float] | None) -> float | None:
    return max(units.values(), default=None) if units else None


def slack(a_units: Mapping[int, float] | None, b_units: Mapping[int, float] | None,
          steps: Iterable[int]) -> dict[int, float]:
    """Half a unit of each side at each step: the most that printing alone can move the two values apart."""
    found = {}
    for step in steps:
        half = 0.5 * ((a_units or {}).get(step, 0.0) + (b_units or {}).get(step, 0.0))
        if half:
            found[step] = half
    return found
