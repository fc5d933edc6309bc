"""Why two runs diverged: the differences found between their records first, then the usual causes that fit
the shape of the divergence (its first step, its size, an epoch boundary, reduced precision)."""

from __future__ import annotations

import math

from compare.analysis.judge import ParityVerdict

SMALL_GAP = 100  # a gap within this factor of the tolerance grew slowly: noise, not a changed computation


def _values(difference) -> str:
    return f"{difference.name} {difference.a} vs {difference.b}"


def likely_causes(verdict: ParityVerdict) -> list[str]:
    if verdict.outcome in ("holds", "undecided") and verdict.job.same_job:
        return []
    causes = []
    job = verdict.job.of_kind("job") + verdict.job.of_kind("allowed")
    if job:
        causes.append("the records differ in what they train: " + ", ".join(map(_values, job)))
    first = verdict.first_divergence
    losses = first[1].losses if first else None
    gap, tolerance = (losses.first_divergence_gap, losses.tolerance_at_divergence) if losses else (None, None)
    small_gap = bool(gap is not None and tolerance and math.isfinite(gap) and gap < SMALL_GAP * tolerance)
    # Summation order and thread counts move a loss by float noise: they can explain a gap near the band, never
    # a jump (horovodrun leaves OMP_NUM_THREADS unset where torchrun sets 1, beside any real bug).
    tuning = [d for d in verdict.job.of_kind("expected") if d.name not in ("framework", "launcher", "backend",
                                                                            "world_size")]
    if tuning and (gap is None or small_gap):
        causes.append("settings that change the summation order or threads: " + ", ".join(map(_values, tuning)))
    versions = verdict.job.of_kind("version")
    if versions:
        causes.append("versions differ: " + ", ".join(map(_values, versions)))
    if first is None:
        return causes
    step, seed = first
    if losses.nonfinite_step is not None and losses.nonfinite_step == step:
        causes.append(f"the loss is NaN or infinite on one side from step {step}: training blew up there "
                      "(learning rate too high for that side's effective batch, overflow in reduced precision, "
                      "bad input data)")
    elif losses.first_divergence_step is None and (bad := seed.first_eval_divergence) is not None:
        causes.append(f"the training losses agree but the evaluation at step {bad.step} differs ({bad.metric} "
                      f"{bad.a:.6g} vs {bad.b:.6g}): the models the ranks evaluate are not the same (replicas "
                      "out of sync, e.g. after uneven inputs; buffers such as batch-norm statistics not "
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
        causes.append(f"diverged at step {step}, the first step of an epoch: the data order of the new epoch "
                      "differs (DistributedSampler.set_epoch missing on one side, another sampler seed, "
                      "shuffling done differently)")
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
