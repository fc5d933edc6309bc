"""Why two runs diverged: the differences found between their records first, then the usual causes that fit
the shape of the divergence (its first step, its size, an epoch boundary, reduced precision). Where the two
sides were bit-identical up to the divergence, that comes first of all: float noise cannot explain it.

Pure: a ParityVerdict in, typed causes out; compare/render/causes.py puts them into words."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import Enum

from compare.analysis.jobs import Difference, JobCheck
from compare.analysis.judge import ParityVerdict, SeedVerdict
from compare.analysis.parity import STEP_RTOL
from compare.analysis.records import jsonable
from compare.names import Parity

SMALL_GAP = 100  # a gap within this factor of the tolerance grew slowly: noise, not a changed computation

MIN_IDENTICAL_STEPS = 2
"""Bit-identical losses over at least this many common steps (step 1, measured before any update, and at least
one after an update) before the divergence: then the divergence is a change in the job, not float noise. A
divergence at step 1 or 2 keeps its own causes (the initial state, the first update)."""

NOISE_ONSET = STEP_RTOL
"""The largest relative gap that float noise can open in one step between bit-identical histories: a rounding
that differs (a summation order that changes from that step on, e.g. Horovod's timing-dependent fusion) moves
a float32 loss by an ulp or a few (1.2e-7 each); this is about 80 ulps, and the default floor of the band, so
it only decides where --rtol is set below it."""


COARSE_PRINTING = 1e-5
"""A log printed in units this coarse (5 decimals or fewer) cannot tell a jump from float noise where its values
were equal before it: equal printed values are not bit-identical runs. One printed to 6 decimals (1e-6 of a
loss of order 1, below NOISE_ONSET) still can."""


class CauseKind(str, Enum):
    """The usual causes; compare/render/causes.py words each."""

    JOB_CHANGED_AT_STEP = "job changed at step"  # bit-identical losses, then a gap float noise cannot open
    EVALUATION_CHANGED = "evaluation changed"  # bit-identical training (and evaluations before), then one differs
    DIFFERENT_JOB = "different job"  # the records differ in what they train
    SUMMATION_ORDER = "summation order"  # settings that move a loss by float noise differ
    VERSIONS = "versions"
    EPOCH_START = "epoch start"  # diverged at an epoch's first step: the new epoch's data order
    NONFINITE = "nonfinite"  # NaN or infinite on one side, or both, from the divergence on
    EVALUATION_DIFFERS = "evaluation differs"  # training losses agree, an evaluation does not
    INITIAL_STATE = "initial state"  # diverged at step 1, before any update
    FIRST_UPDATE = "first update"  # diverged at step 2
    REDUCED_PRECISION = "reduced precision"  # a small gap under AMP or fp16 compression
    SLOW_GAP = "slow gap"  # a small, slowly growing gap: summation order beyond the calibration
    SUDDEN_JUMP = "sudden jump"  # agreed until then, then a jump


@dataclass(frozen=True)
class Cause:
    kind: CauseKind
    step: int | None = None  # where the divergence, or the differing evaluation, is
    gap: float | None = None  # the relative gap there (None: no finite gap)
    tolerance: float | None = None  # the band's tolerance there
    differences: tuple[Difference, ...] = ()  # the records' differences the cause names
    identical_from: int | None = None  # bit-identical losses over steps identical_from..identical_through
    identical_through: int | None = None
    evals_identical_through: int | None = None  # the last step of the equal evaluations before the differing one
    metric: str | None = None  # the differing evaluation: its metric and each side's value
    a: float | None = None
    b: float | None = None
    both: bool | None = None  # NONFINITE: both sides went non-finite at that step

    def to_dict(self) -> dict:
        return jsonable({**dataclasses.asdict(self), "kind": self.kind.value})


def _identical_span(seed: SeedVerdict, through: int) -> tuple[int, int] | None:
    """(first, last) of the bit-identical steps, where those were at least MIN_IDENTICAL_STEPS common steps
    reaching `through`; else None."""
    losses = seed.losses
    last = losses.identical_through
    if last is None or last < through or losses.first_step is None:
        return None
    if sum(1 for s in losses.steps if s <= through) < MIN_IDENTICAL_STEPS:
        return None
    return losses.first_step, last


def exact_onset(seed: SeedVerdict) -> Cause | None:
    """The divergence of a pair whose losses were bit-identical through the step before it; None where the
    losses (or the evaluations before a differing one) were not exactly equal up to it."""
    losses = seed.losses
    step, gap = losses.first_divergence_step, losses.first_divergence_gap
    if step is not None:
        if step <= 2 or losses.nonfinite_step == step or gap is None or not gap >= NOISE_ONSET:
            return None
        if max(losses.rounding_a or 0.0, losses.rounding_b or 0.0) >= COARSE_PRINTING:
            return None  # values equal as printed to 3 decimals are not bit-identical runs
        span = _identical_span(seed, step - 1)
        if span is None:
            return None
        return Cause(CauseKind.JOB_CHANGED_AT_STEP, step=step, gap=gap, identical_from=span[0],
                     identical_through=span[1])
    bad = seed.first_eval_divergence
    if bad is None or (bad.metric == "eval_loss" and not bad.gap >= NOISE_ONSET):
        return None
    span = _identical_span(seed, min(bad.step, losses.last_step or bad.step))
    earlier = [e for e in seed.evals if e.step < bad.step]
    if span is None or any(e.a != e.b for e in earlier):
        return None
    return Cause(CauseKind.EVALUATION_CHANGED, step=bad.step, identical_from=span[0], identical_through=span[1],
                 evals_identical_through=max(e.step for e in earlier) if earlier else None, metric=bad.metric,
                 a=bad.a, b=bad.b)


def record_causes(job: JobCheck, noise_fits: bool) -> list[Cause]:
    """The causes the records' differences name: another job, summation-order settings (only where float
    noise could explain the gap), versions."""
    causes = []
    if different := job.of_kind("job") + job.of_kind("allowed"):
        causes.append(Cause(CauseKind.DIFFERENT_JOB, differences=tuple(different)))
    # Summation order and thread counts move a loss by float noise: they can explain a gap near the band, never
    # a jump (horovodrun leaves OMP_NUM_THREADS unset where torchrun sets 1, beside any real bug).
    tuning = [d for d in job.of_kind("expected") if d.name not in ("framework", "launcher", "backend", "world_size")]
    if tuning and noise_fits:
        causes.append(Cause(CauseKind.SUMMATION_ORDER, differences=tuple(tuning)))
    if versions := job.of_kind("version"):
        causes.append(Cause(CauseKind.VERSIONS, differences=tuple(versions)))
    return causes


def shape_cause(step: int, seed: SeedVerdict, reduced_precision: bool, small_gap: bool) -> Cause:
    """The usual cause that fits the shape of a divergence that was not bit-identical up to it: its first
    step, an epoch boundary, its size."""
    losses = seed.losses
    gap, tolerance = losses.first_divergence_gap, losses.tolerance_at_divergence
    if losses.nonfinite_step is not None and losses.nonfinite_step == step:
        both = all(found is not None and found[0] == step for found in (losses.nonfinite_a, losses.nonfinite_b))
        return Cause(CauseKind.NONFINITE, step=step, both=both)
    if losses.first_divergence_step is None and (bad := seed.first_eval_divergence) is not None:
        return Cause(CauseKind.EVALUATION_DIFFERS, step=bad.step, metric=bad.metric, a=bad.a, b=bad.b)
    if step == 1:
        return Cause(CauseKind.INITIAL_STATE, step=step)
    if step == 2:
        return Cause(CauseKind.FIRST_UPDATE, step=step)
    if seed.at_epoch_boundary:
        return Cause(CauseKind.EPOCH_START, step=step)
    if reduced_precision and small_gap:
        return Cause(CauseKind.REDUCED_PRECISION, step=step, gap=gap, tolerance=tolerance)
    if small_gap:
        return Cause(CauseKind.SLOW_GAP, step=step, gap=gap)
    finite = gap if gap is not None and math.isfinite(gap) else None
    return Cause(CauseKind.SUDDEN_JUMP, step=step, gap=finite)


def likely_causes(verdict: ParityVerdict) -> list[Cause]:
    """Why the two sides diverged (or are different jobs), most telling first; none where parity holds or is
    undecided on the same job."""
    if verdict.outcome in (Parity.HOLDS, Parity.UNDECIDED) and verdict.job.same_job:
        return []
    first = verdict.first_divergence
    # In reduced precision one changed rounding can part bit-identical histories by 1e-3 at once: no such rule.
    exact = exact_onset(first[1]) if first and not verdict.reduced_precision else None
    losses = first[1].losses if first else None
    gap, tolerance = (losses.first_divergence_gap, losses.tolerance_at_divergence) if losses else (None, None)
    # A gap beyond the onset bound is a jump out of the difference before it, however close to the bound
    small_gap = bool(gap is not None and tolerance and math.isfinite(gap) and gap < SMALL_GAP * tolerance
                     and not losses.onset_caught)
    causes = [exact] if exact else []  # bit-identical up to the divergence: no float-noise cause fits
    causes += record_causes(verdict.job, noise_fits=not exact and (gap is None or small_gap))
    if first is None:
        return causes
    step, seed = first
    if not exact:
        return [*causes, shape_cause(step, seed, verdict.reduced_precision, small_gap)]
    if losses.first_divergence_step == step and seed.at_epoch_boundary:
        causes.append(Cause(CauseKind.EPOCH_START, step=step))  # a job change too
    return causes
