"""Likely causes in words: each cause compare/analysis/causes.py finds (as its to_dict) in the sentence the
report, report.json and `compare check` give it."""

from __future__ import annotations

from collections.abc import Callable

from compare.analysis.causes import CauseKind


def _values(differences: list[dict]) -> str:
    return ", ".join(f"{d['name']} {d['a']} vs {d['b']}" for d in differences)


def _number(value: float | None) -> str:
    return "missing" if value is None else f"{value:.6g}"


def _span(cause: dict) -> str:
    first, last = cause["identical_from"], cause["identical_through"]
    return f"identical to step {last}" if first == 1 else f"identical over steps {first}-{last}"


def _evaluation(cause: dict) -> str:
    return f"{cause['metric']} {_number(cause['a'])} vs {_number(cause['b'])}"


def _job_changed_at_step(cause: dict) -> str:
    step = cause["step"]
    return (f"{_span(cause)}, then {cause['gap']:.1e} apart at step {step}: something in the job changed at step "
            f"{step} (a learning-rate or schedule change, a data or code path taken from that step on), not float "
            "noise, which parts bit-identical losses by an ulp or so (1e-7)")


def _evaluation_changed(cause: dict) -> str:
    step, earlier = cause["step"], cause["evals_identical_through"]
    before = f" and the evaluations identical through step {earlier}" if earlier is not None else ""
    changed = f"the evaluation changed at step {step}" if earlier is not None else "the evaluation itself differs"
    return (f"training losses {_span(cause)}{before}, then the evaluation at step {step} differs "
            f"({_evaluation(cause)}): {changed} (what it evaluates: buffers such as batch-norm running statistics "
            "kept differently, replicas out of sync; or how: its shard, batch or averaging), not float noise")


def _epoch_start(cause: dict) -> str:
    return (f"diverged at step {cause['step']}, the first step of an epoch: the data order of the new epoch differs "
            "(DistributedSampler.set_epoch missing on one side, another sampler seed, shuffling done differently)")


def _nonfinite(cause: dict) -> str:
    if cause.get("both"):
        return (f"the loss is NaN or infinite on both sides from step {cause['step']}: both runs blew up there, so "
                "whatever they share (learning rate, data, reduced precision) is unstable; nothing after it can be "
                "compared")
    return (f"the loss is NaN or infinite on one side from step {cause['step']}: training blew up there (learning "
            "rate too high for that side's effective batch, overflow in reduced precision, bad input data)")


def _evaluation_differs(cause: dict) -> str:
    return (f"the training losses agree but the evaluation at step {cause['step']} differs ({_evaluation(cause)}): "
            "the models the ranks evaluate are not the same (replicas out of sync, e.g. after uneven inputs; "
            "buffers such as batch-norm statistics not synchronised), or the evaluation itself differs (shard, "
            "batch, averaging)")


def _reduced_precision(cause: dict) -> str:
    return (f"diverged at step {cause['step']} by a small gap ({cause['gap']:.2g} against a tolerance of "
            f"{cause['tolerance']:.2g}) in reduced precision (AMP or fp16 compression): rounding of half-precision "
            "values differs between the sides; calibrate with the same precision (`compare run` does), or allow a "
            "wider band (--rtol)")


def _slow_gap(cause: dict) -> str:
    return (f"diverged at step {cause['step']} by a small, slowly growing gap ({cause['gap']:.2g}): summation order "
            "differs more than the calibration expected (Horovod tensor fusion, HOROVOD_FUSION_THRESHOLD=0 makes it "
            "deterministic; thread counts; a world size above 2 changes the allreduce order)")


def _sudden_jump(cause: dict) -> str:
    size = f" by {cause['gap']:.2g}" if cause["gap"] is not None else ""
    return (f"diverged at step {cause['step']}{size}, a sudden jump after agreeing until then: something changed "
            "mid-run on one side (learning-rate schedule or warm-up, a later data shard, a code path taken from "
            "that step on)")


WORDS: dict[CauseKind, Callable[[dict], str]] = {
    CauseKind.JOB_CHANGED_AT_STEP: _job_changed_at_step,
    CauseKind.EVALUATION_CHANGED: _evaluation_changed,
    CauseKind.DIFFERENT_JOB: lambda c: f"the records differ in what they train: {_values(c['differences'])}",
    CauseKind.SUMMATION_ORDER: lambda c: ("settings that change the summation order or threads: "
                                          f"{_values(c['differences'])}"),
    CauseKind.VERSIONS: lambda c: f"versions differ: {_values(c['differences'])}",
    CauseKind.EPOCH_START: _epoch_start,
    CauseKind.NONFINITE: _nonfinite,
    CauseKind.EVALUATION_DIFFERS: _evaluation_differs,
    CauseKind.INITIAL_STATE: lambda c: (
        "diverged at step 1, whose loss is measured before any update: the initial state or the data differ "
        "(seed, parameter broadcast from rank 0, data shard or sampler seed, dropout seeding, or Horovod's "
        "broadcast_optimizer_state, whose zero-gradient step applies the optimizer's weight decay to the "
        "parameters before the first batch)"),
    CauseKind.FIRST_UPDATE: lambda c: (
        "diverged at step 2, so the first update differs: learning-rate scaling on one side, the optimizer-state "
        "broadcast (Horovod's broadcast_optimizer_state runs a zero-gradient step on a fresh optimizer: where "
        "DistributedOptimizer wraps it before the broadcast, Adam's step count starts at 1 and SGD's momentum "
        "buffer holds the weight decay), or gradient averaging (sum vs mean)"),
    CauseKind.REDUCED_PRECISION: _reduced_precision,
    CauseKind.SLOW_GAP: _slow_gap,
    CauseKind.SUDDEN_JUMP: _sudden_jump,
}


def cause_sentence(cause: dict) -> str:
    return WORDS[CauseKind(cause["kind"])](cause)


def cause_lines(causes: list[dict]) -> list[str]:
    """Each likely cause of a comparison ("causes" in the analysis) in one sentence, most telling first."""
    return [cause_sentence(cause) for cause in causes]
