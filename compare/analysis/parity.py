"""Do two runs train the same model? The step-wise and the statistical tests, and their tolerances.

- Step-wise: with the same seed, data and hyperparameters both sides see the same global batches, so their
  losses agree step by step, paired by the `step` number, up to floating-point noise. That noise starts
  near float32 resolution and grows through training (float chaos), so the tolerance at a step comes from a
  band: a tight floor (`rtol`), widened by how fast a change known not to change the job grows on this
  workload (a calibration pair), or by a documented default growth. Once the band reaches SATURATION the
  step-wise level has no power left against slow drifts; the statistical level takes over. At every step, late
  ones too, the onset bound also holds: float chaos grows a difference out of the one before it at a bounded
  rate, so a step beyond what it can grow from the running maximum before it is a divergence there.
- Statistical: over seeds, paired by seed, each end point (final training loss, eval loss, eval accuracy)
  is tested for equivalence (two one-sided tests) against a margin fixed before the data are seen: given by
  the user, or the documented default. Outcomes: equivalent, differs, undecided.

Pure: numbers in, dataclasses out; no prose beyond short reasons, no files.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from scipy import stats

from compare.analysis.records import jsonable
from compare.analysis.rounding import coarsest, printed_units, slack
from compare.defaults import DEFAULT_MARGINS, STEP_K, STEP_RTOL  # the floor, its first steps, the margins

ATOL = 1e-7
"""Absolute floor: two losses closer than this (float32 resolution at a loss of 1) never diverge, however
small they are (losses near zero, or 0 against 1e-12)."""

NEAR_ZERO = 0.1
"""Losses smaller than this are compared as if they were this large (the relative difference's denominator, and
a relative end-point margin's level, never go below it). A loss near zero is computed from terms of order 1 (a
cross-entropy is the difference of two log-sum-exp terms of the logits' size), so float32 leaves it rounding
of about 1e-7 absolute, not relative to its own size: 2e-7 against 0 is noise, not a relative difference of
1. At the band's floor this allows 1e-6 absolute; identical runs that reach a loss of 0 stay equivalent."""

CHAOS_SAFETY = 100.0
"""How far above a calibration pair's divergence the compared pair may be. The calibration pair differs
once, by one ulp of the initial weights; two frameworks differ by a rounding in every step's reduction, so
their gap may grow from a larger start, and another seed may enter its fast-growing phase a few steps
earlier. How much room it leaves on every built-in workload and world size: docs/parity.md, the table under
this name (made by scripts/parity_headroom.py)."""

DEFAULT_DECADE_STEPS = 60
"""The default band without a calibration pair: the floor for the first STEP_K steps, then growing tenfold
every DEFAULT_DECADE_STEPS steps. Where it covers the one-ulp pairs measured here (mlp and lm) and where it
does not (resnet, digits at np 1 and 4, a digits seed at np 2): docs/parity.md, the table under this name."""

UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
"""Half the distance between 1 and the next number: bfloat16 keeps 8 significant bits, float16 11."""

PRECISION_FACTOR = 0.5
"""The default band's floor in reduced precision (autocast, fp16 gradient compression) without a calibration:
this times the format's unit roundoff (bf16: 2.0e-3, fp16: 2.4e-4). Under bf16 autocast a one-ulp pair of
one process parts by about 1e-3 within 20-40 steps, against 1e-7 in float32; how close it comes to this floor,
and when a 5% learning-rate change exceeds it: docs/parity.md, "The precision floors"."""


def precision_floor(formats: set[str]) -> tuple[float, str] | None:
    """The default band's floor for records trained in these reduced-precision formats, with its reason."""
    if not formats:
        return None
    widest = max(formats, key=UNIT_ROUNDOFF.__getitem__)
    floor = UNIT_ROUNDOFF[widest] * PRECISION_FACTOR
    return floor, (f"reduced precision ({widest}): floor {floor:.2g} = its unit roundoff "
                   f"{UNIT_ROUNDOFF[widest]:.2g} x {PRECISION_FACTOR:g} (docs/parity.md)")


ONSET_BURST = 100.0
"""How far above the running maximum of the steps before it one step's relative difference may stand and still be
float chaos, on top of the growth below: a step's gap scatters around its chaos envelope (a normal draw's 4 sigma
against a running maximum near 1 sigma), and chaos jumps: the digits reference's one-ulp pair went from 7e-7 at
step 7 to 2e-5 at step 9 (28x in 2 steps), the fastest single-step rise measured here apart from the first
steps (resnet: 1e-7 at step 2, 4e-5 at 3), which the floor covers (docs/parity.md, "Onset")."""

ONSET_DECADE_STEPS = 3.0
"""The fastest sustained growth of float chaos the onset bound allows without a calibration: tenfold every 3 steps.
Measured fastest here: tenfold every 4-5 steps (digits at np 4, its one-ulp pairs from step 35-40)."""

ONSET_START = 1e-7
"""The difference the onset bound grows from where the steps before were equal (or closer than this): float32
resolution, since losses equal as recorded may come from weights an ulp or so apart."""

ONSET_WINDOW = 2
"""Steps either side of an interval over which a calibration pair's own growth is read: the compared pair may
enter a growth phase a step or two before the calibration pair does (measured: Horovod's fusion timing)."""

SATURATION = 0.05
"""A band this wide (5% relative) no longer tells a bug from chaos: the step-wise level stops there."""

BAND_CEILING = 1.0
"""The band never grows past this (a relative difference is at most 2): past SATURATION its width is only
shown, and the cap keeps its tenfold growth finite at any step (10 ** (200000 / 60) overflows)."""

CONFIDENCE = 0.95
"""Each one-sided test of the equivalence test runs at 1 - CONFIDENCE (the usual 5% error rate of TOST)."""

MIN_OVERLAP = 5
"""Fewer common steps than this cannot be judged: the command refuses."""

GAPS_UNDECIDED = 0.5
"""Where one side's gaps (compare `missing_ranges`) hold more than this fraction of the other side's steps
inside the common range, the seed is undecided: too little of the run was seen on both sides to hold."""


@dataclass(frozen=True)
class Band:
    """The step-wise tolerance at each step, and where it came from."""

    source: str  # "calibrated" (a control pair of this job) | "default" | "user" (rtol only)
    rtol: float = STEP_RTOL
    k: int = STEP_K
    envelope: dict[int, float] = field(default_factory=dict)  # calibrated: step -> running max of the pair
    safety: float = CHAOS_SAFETY
    decade_steps: float = DEFAULT_DECADE_STEPS
    detail: str = ""  # what calibrated it

    @functools.cached_property
    def _envelope_steps(self) -> list[int]:
        return sorted(self.envelope)

    def tolerance(self, step: int) -> float:
        """O(log n) in the calibration's length: a comparison of 200,000 steps takes seconds."""
        if self.source == "calibrated":
            steps = self._envelope_steps
            at = bisect.bisect_right(steps, step)
            chaos = self.envelope[steps[at - 1]] if at else 0.0
            if steps and step > steps[-1]:  # past the calibration's end: keep growing at the default pace
                chaos = _grown(max(chaos, self.rtol), step - steps[-1], self.decade_steps)
            return min(BAND_CEILING, max(self.rtol, self.safety * chaos))
        if step <= self.k:
            return self.rtol
        return _grown(self.rtol, step - self.k, self.decade_steps)

    def growth(self, prev: int, step: int) -> float:
        """log10 of how far float chaos may grow a relative difference from step `prev` to `step`: the assumed
        bound (ONSET_BURST, then tenfold every ONSET_DECADE_STEPS), or the calibration pair's own growth over
        the interval widened by ONSET_WINDOW where that is faster (a pair that jumps there lets the compared
        pair jump with it)."""
        assumed = math.log10(ONSET_BURST) + (step - prev) / ONSET_DECADE_STEPS
        steps = self._envelope_steps
        if self.source != "calibrated" or not steps or prev - ONSET_WINDOW > steps[-1]:
            return assumed
        low = self._running(prev - ONSET_WINDOW)
        high = self._running(step + ONSET_WINDOW)
        if high <= 0.0:
            return assumed
        return math.inf if low <= 0.0 else max(assumed, math.log10(ONSET_BURST * high / low))

    def _running(self, step: int) -> float:
        """The calibration pair's running maximum at `step` (0 before its first step)."""
        steps = self._envelope_steps
        at = bisect.bisect_right(steps, step)
        return self.envelope[steps[at - 1]] if at else 0.0

    def onset_limit(self, worst: float, prev: int, step: int) -> float:
        """The widest relative difference float chaos can reach at `step` from `worst`, the running maximum of
        the difference up to step `prev` (the last common step before): never below the floor."""
        exponent = math.log10(max(worst, ONSET_START)) + self.growth(prev, step)
        return BAND_CEILING if exponent >= math.log10(BAND_CEILING) else max(self.rtol, 10.0 ** exponent)

    def to_dict(self) -> dict:
        return jsonable(dataclasses.asdict(self))


def onset_limits(steps: Sequence[int], rel: Sequence[float], band: Band) -> list[float]:
    """At each common step, the onset bound: how wide float chaos could have grown the difference from the
    running maximum of those before it (the first step has none before it: only the band applies there)."""
    limits, worst = [BAND_CEILING] if steps else [], 0.0
    for i in range(1, len(steps)):
        if math.isfinite(rel[i - 1]):
            worst = max(worst, rel[i - 1])
        limits.append(band.onset_limit(worst, steps[i - 1], steps[i]))
    return limits


def _grown(start: float, steps: float, decade_steps: float) -> float:
    """`start` grown tenfold every `decade_steps` steps, capped at BAND_CEILING (computed in logs: no overflow)."""
    exponent = math.log10(start) + steps / decade_steps if start > 0 else -math.inf
    return BAND_CEILING if exponent >= math.log10(BAND_CEILING) else 10.0 ** exponent


def calibrated_band(control_a: Mapping[int, float], control_b: Mapping[int, float], *, rtol: float = STEP_RTOL,
                    k: int = STEP_K, detail: str = "") -> Band:
    """A band from a control pair that differs only in a way known not to change the job: the running
    maximum of its relative loss difference, step by step."""
    envelope, worst = {}, 0.0
    for step in sorted(set(control_a) & set(control_b)):
        a, b = control_a[step], control_b[step]
        if math.isfinite(a) and math.isfinite(b):
            worst = max(worst, relative_difference(a, b))
        envelope[step] = worst
    return Band("calibrated", rtol=rtol, k=k, envelope=envelope, detail=detail)


def combine_bands(bands: list[Band]) -> Band:
    """The widest of several calibrated bands, step by step (a pair of two sides with their own chaos)."""
    steps = sorted({s for band in bands for s in band.envelope})
    envelope = {s: max(band.tolerance(s) for band in bands) / bands[0].safety for s in steps}
    return dataclasses.replace(bands[0], envelope=envelope, detail="; ".join(band.detail for band in bands))


def relative_difference(a: float, b: float, allowance: float = 0.0) -> float:
    """|a-b| / max(|a|, |b|, NEAR_ZERO), less `allowance` (what printed rounding alone can explain) from the
    gap, zero within the absolute floor ATOL. A non-finite value on either side is infinitely far, even against the
    same non-finite value: a run that blew up is never within the band."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    gap = abs(a - b) - allowance
    if gap <= ATOL:
        return 0.0
    return gap / max(abs(a), abs(b), NEAR_ZERO)


def nonfinite_from(values: Mapping[int, float], steps: Sequence[int]) -> tuple[int, str] | None:
    """(step, "nan" | "inf" | "-inf") of the first of `steps` whose value is not finite."""
    for step in steps:
        if not math.isfinite(values[step]):
            return step, repr(values[step])
    return None


def by_step(losses: Mapping[int, float] | Sequence[float]) -> dict[int, float]:
    """Losses keyed by step number; a plain sequence is steps 1, 2, ..."""
    if isinstance(losses, Mapping):
        return {int(k): float(v) for k, v in losses.items()}
    return {i: float(v) for i, v in enumerate(np.asarray(losses, dtype=np.float64).tolist(), start=1)}


@dataclass(frozen=True)
class StepwiseResult:
    passed: bool
    n_a: int
    n_b: int
    n_common: int
    first_step: int | None
    last_step: int | None
    max_rel_diff: float | None
    max_at_step: int | None
    first_divergence_step: int | None = None
    first_divergence_gap: float | None = None
    tolerance_at_divergence: float | None = None
    abs_gap_at_first_divergence: float | None = None
    nonfinite_step: int | None = None  # the first common step where either side is NaN or infinite
    nonfinite_a: tuple[int, str] | None = None  # (step, "nan" | "inf" | "-inf"): where a first went non-finite
    nonfinite_b: tuple[int, str] | None = None
    rounding_a: float | None = None  # the coarsest unit in the last printed place of a's losses (None: unrounded)
    rounding_b: float | None = None
    allowances: list[float] = field(default_factory=list)  # per common step: half a printed unit of each side
    judged_until: int | None = None  # the last step at which the band was below SATURATION
    identical_through: int | None = None  # every common step from the first through this one bit-identical
    missing_a: list[tuple[int, int]] = field(default_factory=list)  # b's steps a lacks, beyond a's interval
    missing_b: list[tuple[int, int]] = field(default_factory=list)
    missing_fraction: float = 0.0  # the larger side's share of the other's steps that fall in its gaps
    steps: list[int] = field(default_factory=list)
    rel_diffs: list[float] = field(default_factory=list)
    tolerances: list[float] = field(default_factory=list)  # the band's, by step number (its power: judged_until)
    onset: list[float] = field(default_factory=list)  # the onset bound: chaos grown from the steps before
    onset_caught: bool = False  # the first divergence exceeded the onset bound, within the band's own tolerance
    reason: str | None = None

    @property
    def too_gappy(self) -> bool:
        return self.missing_fraction > GAPS_UNDECIDED

    @property
    def identical(self) -> bool:
        """Whether every common step is bit-identical: then no band, however wide, is needed to say so."""
        return self.identical_through is not None and self.identical_through == self.last_step

    @property
    def full_power(self) -> bool:
        """Whether every common step was judged with a band below SATURATION (or is bit-identical)."""
        return (self.judged_until is not None and self.judged_until == self.last_step) or self.identical

    def to_dict(self) -> dict:
        return jsonable(dataclasses.asdict(self))


def _share_in_gaps(steps: Sequence[int], gaps: Sequence[tuple[int, int]]) -> float:
    """The fraction of `steps` (sorted) that fall inside the gaps; O(gaps x log n)."""
    inside = sum(bisect.bisect_right(steps, hi) - bisect.bisect_left(steps, lo) for lo, hi in gaps)
    return inside / len(steps)


def usual_spacing(steps: Sequence[int]) -> int:
    """A side's logging interval: the most common gap between its (sorted) steps, the smaller where two tie."""
    spacing = Counter(b - a for a, b in itertools.pairwise(steps))
    return max(spacing, key=lambda d: (spacing[d], -d)) if spacing else 1


def missing_ranges(mine: Sequence[int], other: Sequence[int]) -> list[tuple[int, int]]:
    """The stretches of `other`'s steps that `mine` lacks between two of its own steps further apart than its
    usual logging interval (the most common gap between its steps), as (first, last) of `other`'s steps. A side
    that logs every 10 steps has no gap where the other logs every step; one that lost steps 40-60 has."""
    if len(mine) < 2:
        return []
    usual = usual_spacing(mine)
    ordered = sorted(other)
    found = []
    for low, high in itertools.pairwise(mine):
        if high - low > usual:
            lost = ordered[bisect.bisect_right(ordered, low):bisect.bisect_left(ordered, high)]
            if lost:
                found.append((lost[0], lost[-1]))
    return found


def stepwise(a_losses: Mapping[int, float] | Sequence[float], b_losses: Mapping[int, float] | Sequence[float],
             k: int = STEP_K, rtol: float = STEP_RTOL, band: Band | None = None) -> StepwiseResult:
    """Compare two loss curves at every step both recorded, paired by step number."""
    band = band or Band("default", rtol=rtol, k=k)
    a, b = by_step(a_losses), by_step(b_losses)
    common = sorted(set(a) & set(b))
    if not common:
        return StepwiseResult(False, len(a), len(b), 0, None, None, None, None, reason="no common steps")
    units_a, units_b = printed_units(a), printed_units(b)
    allowance = slack(units_a, units_b, common)
    rel = [relative_difference(a[s], b[s], allowance.get(s, 0.0)) for s in common]
    tol = [band.tolerance(s) for s in common]
    onset = onset_limits(common, rel, band)
    worst = int(np.argmax(rel))
    judged = [s for s, t in zip(common, tol, strict=True) if t < SATURATION]
    # Beyond the band (while it has power), or beyond what float chaos can grow from the steps before, however
    # late: a jump out of a small difference is a divergence at its step even where the band has saturated.
    over = [i for i, (r, t, o) in enumerate(zip(rel, tol, onset, strict=True))
            if (r > t and t < SATURATION) or r > o]
    nonfinite_a, nonfinite_b = nonfinite_from(a, common), nonfinite_from(b, common)
    nonfinite = min((found[0] for found in (nonfinite_a, nonfinite_b) if found), default=None)
    first = over[0] if over else None
    equal = next((i for i, s in enumerate(common) if a[s] != b[s]), len(common))  # exactly, not within ATOL
    inside = {side: [s for s in sorted(steps) if common[0] <= s <= common[-1]] for side, steps in (("a", a), ("b", b))}
    missing_a, missing_b = missing_ranges(inside["a"], inside["b"]), missing_ranges(inside["b"], inside["a"])
    fraction = max(_share_in_gaps(inside[other], gaps) for gaps, other in ((missing_a, "b"), (missing_b, "a")))
    return StepwiseResult(
        passed=first is None and nonfinite is None, n_a=len(a), n_b=len(b), n_common=len(common),
        first_step=common[0], last_step=common[-1], max_rel_diff=rel[worst], max_at_step=common[worst],
        first_divergence_step=common[first] if first is not None else nonfinite,
        first_divergence_gap=rel[first] if first is not None else (math.inf if nonfinite is not None else None),
        tolerance_at_divergence=_limit(tol[first], onset[first]) if first is not None else None,
        abs_gap_at_first_divergence=abs(a[common[first]] - b[common[first]]) if first is not None else None,
        nonfinite_step=nonfinite, nonfinite_a=nonfinite_a, nonfinite_b=nonfinite_b,
        rounding_a=coarsest(units_a), rounding_b=coarsest(units_b),
        allowances=[allowance.get(s, 0.0) for s in common] if allowance else [],
        judged_until=judged[-1] if judged else None,
        identical_through=common[equal - 1] if equal else None,
        missing_a=missing_a, missing_b=missing_b, missing_fraction=fraction,
        steps=common, rel_diffs=rel, tolerances=tol, onset=onset,
        onset_caught=first is not None and math.isfinite(rel[first]) and not (rel[first] > tol[first] < SATURATION))


def _limit(tolerance: float, onset: float) -> float:
    """The tolerance a step was held to: the band's while it has power, and never above the onset bound."""
    return min(tolerance, onset) if tolerance < SATURATION else onset


@dataclass(frozen=True)
class Margin:
    kind: str  # "relative" (a fraction of the end point's mean over both sides) | "absolute"
    value: float
    source: str  # "user" | "default"

    def resolve(self, level: float) -> float:
        """The margin in the end point's units; a relative margin is taken of a level of at least NEAR_ZERO (at
        a loss of zero it would be zero, and identical runs could not be equivalent)."""
        return self.value * max(abs(level), NEAR_ZERO) if self.kind == "relative" else self.value

    def describe(self) -> str:
        amount = f"{self.value:.3g}" if self.kind == "absolute" else f"{self.value:.3g} relative"
        return f"{amount} ({self.source})"


def default_margins() -> dict[str, Margin]:
    return {name: Margin(kind, value, "default") for name, (kind, value) in DEFAULT_MARGINS.items()}


class Equivalence(StrEnum):
    """An end point's outcome. A StrEnum: report.json holds its value ("equivalent"), which Equivalence(text)
    reads back."""

    EQUIVALENT = "equivalent"
    DIFFERS = "differs"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class EquivalenceResult:
    """Two one-sided tests over seeds, paired by seed."""

    outcome: Equivalence
    n_seeds: int
    seeds: list[int]
    mean_a: float | None = None
    mean_b: float | None = None
    mean_diff: float | None = None
    ci_low: float | None = None  # the (1 - 2 alpha) interval of the mean paired difference a - b
    ci_high: float | None = None
    margin: float | None = None
    margin_kind: str | None = None
    margin_source: str | None = None
    resolution: float | None = None  # half-width of the interval: the test's power with these seeds
    confidence: float = CONFIDENCE
    method: str = "paired TOST"
    reason: str | None = None

    def to_dict(self) -> dict:
        return jsonable(dataclasses.asdict(self))


def equivalence(a_values: Mapping[int, float], b_values: Mapping[int, float], margin: Margin,
                confidence: float = CONFIDENCE) -> EquivalenceResult:
    """Equivalent when the (2 confidence - 1) interval of the mean paired difference lies within
    +-margin (each one-sided test at 1 - confidence); differs when it lies wholly outside; else undecided.

    Error rates (verified by simulation in tests/test_parity.py): sides that differ by exactly the margin
    are called equivalent at most 1 - confidence of the time; identical sides are called different at most
    1 - confidence of the time."""
    seeds = sorted(set(a_values) & set(b_values))
    n = len(seeds)
    a = np.array([a_values[s] for s in seeds], dtype=np.float64)
    b = np.array([b_values[s] for s in seeds], dtype=np.float64)
    base = {"n_seeds": n, "seeds": seeds, "margin_kind": margin.kind, "margin_source": margin.source,
            "confidence": confidence}
    if n < 2:
        return EquivalenceResult(Equivalence.UNDECIDED, **base, reason=f"needs at least 2 seeds on both sides; got {n}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return EquivalenceResult(Equivalence.DIFFERS, **base, reason="non-finite values")
    d = a - b
    mean_diff = float(np.mean(d))
    level = float(np.mean(np.concatenate([a, b])))
    bound = margin.resolve(level)
    half = float(stats.t.ppf(confidence, n - 1) * np.std(d, ddof=1) / math.sqrt(n))
    low, high = mean_diff - half, mean_diff + half
    if -bound < low and high < bound:
        outcome, reason = Equivalence.EQUIVALENT, None
    elif high <= -bound or low >= bound:
        outcome, reason = Equivalence.DIFFERS, None
    else:
        outcome = Equivalence.UNDECIDED
        reason = f"the interval {low:.3g} to {high:.3g} straddles the margin +-{bound:.3g}; more seeds would decide"
    return EquivalenceResult(outcome, **base, mean_a=float(np.mean(a)), mean_b=float(np.mean(b)),
                             mean_diff=mean_diff, ci_low=low, ci_high=high, margin=bound, resolution=half,
                             reason=reason)
