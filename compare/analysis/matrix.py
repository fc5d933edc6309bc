"""`compare matrix`'s verdicts: each feature's pair of run records judged as data.

Pure: takes run records, returns a FeatureJudgement; compare/render/matrix.py puts it in words and the
table, the command (compare/commands/matrix.py) declares the features and runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compare.analysis.judge import judge as judge_parity
from compare.analysis.parity import Band, stepwise
from compare.analysis.records import RunRecord
from compare.analysis.timing import speed_ratio
from compare.names import Parity


@dataclass(frozen=True)
class Feature:
    name: str
    horovod_form: str
    ddp_form: str
    horovod_args: tuple[str, ...] = ()
    ddp_args: tuple[str, ...] = ()
    kind: str = "parity"  # parity | uneven | horovod-only | ddp-only | tuning | resume | profile | cuda-only
    note: str = ""
    horovod_controller: str = "gloo"
    parity_expected: bool = True  # False: another algorithm on one side, the gap is information


@dataclass
class FeatureJudgement:
    feature: Feature
    outcome: Parity | None  # the parity judge's; None: not expected to hold, not judged
    gap: float | None = None  # step-wise max relative loss difference
    speed_ratio: float | None = None  # Horovod / DDP median step time
    effect: dict = field(default_factory=dict)  # as matrix.json keeps it
    comparison: dict | None = None  # the parity judge's verdict where it did not hold, for its summary
    steps_compared: int = 0
    evaluations_compared: int = 0
    resumed: list[tuple[str, int, float]] = field(default_factory=list)  # (writer -> reader, from step, gap)


def median_step(run: RunRecord, warmup: int) -> float:
    return float(np.median(run.step_times[warmup:])) if len(run.step_times) > warmup else float("nan")


def judge_feature(feature: Feature, hvd: RunRecord, ddp: RunRecord, *, warmup: int, rtol: float,
                  baseline: tuple[RunRecord, RunRecord] | None = None) -> FeatureJudgement:
    """One feature's pair of runs: parity (or the gap, where another algorithm makes one), the speed ratio,
    and for the tuning row its effect against each framework's own baseline run."""
    ratio = speed_ratio(hvd.step_times[warmup:], ddp.step_times[warmup:])["step_time_ratio"]
    if not feature.parity_expected:
        result = stepwise(hvd.loss_by_step, ddp.loss_by_step, rtol=rtol)
        return FeatureJudgement(feature, None, gap=result.max_rel_diff, speed_ratio=ratio)
    # The one judge of every verdict (compare/analysis/judge.py): the same job, every step by step number, and
    # the evaluations (the trained models themselves), against the documented default band.
    verdict = judge_parity({hvd.seed: hvd}, {ddp.seed: ddp}, band=Band("default", rtol=rtol),
                           with_end_points=False, a_name="horovod", b_name="ddp")
    seed = verdict.seeds[0]
    gaps = [e.gap for e in seed.evals if e.metric == "eval_loss"]
    judged = FeatureJudgement(feature, verdict.outcome, gap=seed.losses.max_rel_diff, speed_ratio=ratio,
                              effect={"eval_max_rel_diff": max(gaps, default=None)},
                              comparison=None if verdict.outcome is Parity.HOLDS else verdict.to_dict(),
                              steps_compared=seed.losses.n_common, evaluations_compared=len(seed.evals) // 2)
    if feature.kind == "tuning" and baseline is not None:
        judged.effect |= {
            "horovod_tuned_over_default": median_step(hvd, warmup) / median_step(baseline[0], warmup),
            "ddp_tuned_over_default": median_step(ddp, warmup) / median_step(baseline[1], warmup),
        }
    return judged


def judge_resume(feature: Feature, full: dict[str, RunRecord], resumed: dict[str, RunRecord], *,
                 rtol: float) -> FeatureJudgement:
    """Each resumed run (written by one framework, resumed by the other) against the uninterrupted run
    of the framework that resumed it, from the checkpoint step on."""
    directions = []
    for direction, run in resumed.items():
        first = run.meta.get("resumed_from_step") or 0
        result = stepwise(full[run.framework].loss_by_step, run.loss_by_step,
                          band=Band("default", rtol=rtol, k=10**9))
        directions.append((direction, first + 1, result.max_rel_diff))
    gaps = [gap for _, _, gap in directions]
    passed = all(g is not None and g <= rtol for g in gaps)
    return FeatureJudgement(feature, Parity.HOLDS if passed else Parity.FAILS, gap=max(gaps), resumed=directions)
