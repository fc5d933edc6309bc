"""Why two runs diverged: the differences found between their records first, then the usual causes that fit
the shape of the divergence (its first step, its size, an epoch boundary, reduced precision). Where the two
sides were bit-identical up to the divergence, that comes first of all: float noise cannot explain it."""

from __future__ import annotations

import math

from compare.analysis.judge import ParityVerdict, SeedVerdict
from compare.analysis.parity import STEP_RTOL

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


def _values(difference) -> str:
    return f"{difference.name} {difference.a} vs {difference.b}"


def _number(value: float | None) -> str:
    return "missing" if value is None else f"{value:.6g}"


def _identical_span(seed: SeedVerdict, through: int) -> str | None:
    """'identical to step N' (or 'identical over steps M-N' for records that start later), N the last of the
    bit-identical steps, where those were at least MIN_IDENTICAL_STEPS common steps reaching `through`; else
    None."""
    losses = seed.losses
    last = losses.identical_through
    if last is None or last < through or losses.first_step is None:
        return None
    if sum(1 for s in losses.steps if s <= through) < MIN_IDENTICAL_STEPS:
        return None
    return f"identical to step {last}" if losses.first_step == 1 else f"identical over steps {losses.first_step}-{last}"


def exact_onset(seed: SeedVerdict) -> str | None:
    """The divergence of a pair whose losses were bit-identical through the step before it, in words; None
    where the losses (or the evaluations before a differing one) were not exactly equal up to it."""
    losses = seed.losses
    step, gap = losses.first_divergence_step, losses.first_divergence_gap
    if step is not None:
        if step <= 2 or losses.nonfinite_step == step or gap is None or not gap >= NOISE_ONSET:
            return None
        span = _identical_span(seed, step - 1)
        if span is None:
            return None
        return (f"{span}, then {gap:.1e} apart at step {step}: something in the job changed at step {step} (a "
                "learning-rate or schedule change, a data or code path taken from that step on), not float "
                "noise, which parts bit-identical losses by an ulp or so (1e-7)")
    bad = seed.first_eval_divergence
    if bad is None or (bad.metric == "eval_loss" and not bad.gap >= NOISE_ONSET):
        return None
    span = _identical_span(seed, min(bad.step, losses.last_step or bad.step))
    earlier = [e for e in seed.evals if e.step < bad.step]
    if span is None or any(e.a != e.b for e in earlier):
        return None
    before = f" and the evaluations identical through step {max(e.step for e in earlier)}" if earlier else ""
    changed = f"the evaluation changed at step {bad.step}" if earlier else "the evaluation itself differs"
    return (f"training losses {span}{before}, then the evaluation at step {bad.step} differs ({bad.metric} "
            f"{_number(bad.a)} vs {_number(bad.b)}): {changed} (what it evaluates: buffers such as batch-norm "
            "running statistics kept differently, replicas out of sync; or how: its shard, batch or averaging), "
            "not float noise")


def _epoch_cause(step: int) -> str:
    return (f"diverged at step {step}, the first step of an epoch: the data order of the new epoch differs "
            "(DistributedSampler.set_epoch missing on one side, another sampler seed, shuffling done differently)")


def likely_causes(verdict: ParityVerdict) -> list[str]:
    if verdict.outcome in ("holds", "undecided") and verdict.job.same_job:
        return []
    first = verdict.first_divergence
    # In reduced precision one changed rounding can part bit-identical histories by 1e-3 at once: no such rule.
    exact = exact_onset(first[1]) if first and not verdict.reduced_precision else None
    causes = [exact] if exact else []  # bit-identical up to the divergence: no float-noise cause fits
    job = verdict.job.of_kind("job") + verdict.job.of_kind("allowed")
    if job:
        causes.append("the records differ in what they train: " + ", ".join(map(_values, job)))
    losses = first[1].losses if first else None
    gap, tolerance = (losses.first_divergence_gap, losses.tolerance_at_divergence) if losses else (None, None)
    small_gap = bool(gap is not None and tolerance and math.isfinite(gap) and gap < SMALL_GAP * tolerance)
    # Summation order and thread counts move a loss by float noise: they can explain a gap near the band, never
    # a jump (horovodrun leaves OMP_NUM_THREADS unset where torchrun sets 1, beside any real bug).
    tuning = [d for d in verdict.job.of_kind("expected") if d.name not in ("framework", "launcher", "backend",
                                                                            "world_size")]
    if tuning and not exact and (gap is None or small_gap):
        causes.append("settings that change the summation order or threads: " + ", ".join(map(_values, tuning)))
    versions = verdict.job.of_kind("version")
    if versions:
        causes.append("versions differ: " + ", ".join(map(_values, versions)))
    if first is None:
        return causes
    step, seed = first
    if exact:
        if losses.first_divergence_step == step and seed.at_epoch_boundary:
            causes.append(_epoch_cause(step))  # a job change too
        return causes
    if losses.nonfinite_step is not None and losses.nonfinite_step == step:
        causes.append(f"the loss is NaN or infinite on one side from step {step}: training blew up there "
                      "(learning rate too high for that side's effective batch, overflow in reduced precision, "
                      "bad input data)")
    elif losses.first_divergence_step is None and (bad := seed.first_eval_divergence) is not None:
        causes.append(f"the training losses agree but the evaluation at step {bad.step} differs ({bad.metric} "
                      f"{_number(bad.a)} vs {_number(bad.b)}): the models the ranks evaluate are not the same "
                      "(replicas out of sync, e.g. after uneven inputs; buffers such as batch-norm statistics not "
                      "synchronised), or the evaluation itself differs (shard, batch, averaging)")
    elif step == 1:
        causes.append("diverged at step 1, whose loss is measured before any update: the initial state or the "
                      "data differ (seed, parameter broadcast from rank 0, data shard or sampler seed, dropout "
                      "seeding)")
    elif step == 2:
        causes.append("diverged at step 2, so the first update differs: learning-rate scaling on one side, the "
                      "optimizer-state broadcast (Horovod's broadcast_optimizer_state runs a zero-gradient step "
                      "on a fresh optimizer, which moves the parameters under AdamW or momentum with weight "
                      "decay), or gradient averaging (sum vs mean)")
    elif seed.at_epoch_boundary:
        causes.append(_epoch_cause(step))
    elif verdict.reduced_precision and small_gap:
        causes.append(f"diverged at step {step} by a small gap ({gap:.2g} against a tolerance of "
                      f"{tolerance:.2g}) in reduced precision (AMP or fp16 compression): rounding of half-precision "
                      "values differs between the sides; calibrate with the same precision "
                      "(`compare run` does), or allow a wider band (--rtol)")
    elif small_gap:
        causes.append(f"diverged at step {step} by a small, slowly growing gap ({gap:.2g}): summation order "
                      "differs more than the calibration expected (Horovod tensor fusion, "
                      "HOROVOD_FUSION_THRESHOLD=0 makes it deterministic; thread counts; a world size above "
                      "2 changes the allreduce order)")
    else:
        size = f" by {gap:.2g}" if gap is not None and math.isfinite(gap) else ""
        causes.append(f"diverged at step {step}{size}, a sudden jump after agreeing until then: something "
                      "changed mid-run on one side (learning-rate schedule or warm-up, a later data shard, "
                      "a code path taken from that step on)")
    return causes
