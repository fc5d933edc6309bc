"""Likely causes of a divergence out of bit-identical histories: a change in the job, never float noise
(compare/analysis/causes.py; docs/parity.md, "Likely causes"). Synthetic run records, no training."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from fixtures import write_run
from helpers import run
from test_analysis import base_losses, lr_drift, reduction_noise

from compare.analysis.parity import stepwise
from compare.analysis.records import find_runs
from compare.analysis.summary import analyse
from compare.render.causes import cause_lines

STEPS = 80
STEP = np.arange(1, STEPS + 1)
ENV = {"horovod": {}, "ddp": {"OMP_NUM_THREADS": "1"}}  # horovodrun leaves it unset: a summation-order setting
FLOAT_NOISE = ("summation order", "thread")


def lr_cut(losses: np.ndarray) -> np.ndarray:
    """What a learning rate cut by 1% from step 53 does: bit-identical to step 52, 2.6e-4 apart at 53, growing."""
    return np.where(STEP >= 53, losses * (1 + 2.6e-4 * 1.1 ** (STEP - 53)), losses)


def noise_from_step_3(losses: np.ndarray) -> np.ndarray:
    """Float noise: 1e-7 relative from step 3, growing exponentially until it leaves the band (step 15)."""
    return np.where(STEP >= 3, losses * (1 + 1e-7 * 1.5 ** (STEP - 3)), losses)


def write_sides(root: Path, ddp_losses: Callable[[np.ndarray], np.ndarray], *, evals: list[dict] | None = None,
                ddp_evals: list[dict] | None = None, steps_per_epoch: int | None = None) -> None:
    """Horovod and DDP at np 2, seed 0, differing in OMP_NUM_THREADS (so a float-noise cause could be named)."""
    losses = base_losses(0, STEPS)
    for framework, values, entries in (("horovod", losses, evals), ("ddp", ddp_losses(losses), ddp_evals or evals)):
        write_run(root / framework / "seed-0", framework=framework, world_size=2, seed=0, losses=values,
                  env=ENV[framework], evals=entries, steps_per_epoch=steps_per_epoch)


def comparison_of(root: Path, rtol: float | None = None) -> dict:
    options = {} if rtol is None else {"rtol": rtol}
    return analyse(find_runs(root), **options)["levels"][0]["comparisons"]["horovod_vs_ddp"]


def names_float_noise(causes: list[str]) -> bool:
    return any(word in cause for cause in causes for word in FLOAT_NOISE)


def test_identical_through_is_the_last_of_the_exactly_equal_steps():
    a = base_losses(0, STEPS)
    assert stepwise(a, a).identical_through == STEPS
    assert stepwise(a, lr_cut(a)).identical_through == 52
    assert stepwise(a, a * (1 + 1e-9)).identical_through is None  # within the band, not identical
    resumed = stepwise({s: float(a[s - 1]) for s in range(11, STEPS + 1)}, a)
    assert (resumed.first_step, resumed.identical_through) == (11, STEPS)


@pytest.mark.parametrize("steps_per_epoch", [None, 52], ids=["mid-epoch", "epoch-start"])
def test_a_jump_out_of_bit_identical_losses_is_a_job_change(tmp_path, steps_per_epoch):
    write_sides(tmp_path, lr_cut, steps_per_epoch=steps_per_epoch)
    comparison = comparison_of(tmp_path)
    assert comparison["outcome"] == "fails" and comparison["first_divergence"] == {"step": 53, "seed": 0}
    assert comparison["seeds"][0]["losses"]["identical_through"] == 52
    causes = cause_lines(comparison["causes"])
    assert causes[0].startswith("identical to step 52, then 2.6e-04 apart at step 53: something in the job "
                                "changed at step 53"), causes
    assert not names_float_noise(causes), causes
    if steps_per_epoch:  # step 53 begins an epoch: that cause is a job change too, and stays
        assert len(causes) == 2 and "the first step of an epoch" in causes[1], causes
    else:
        assert len(causes) == 1, causes


def test_float_noise_from_step_3_still_names_summation_order(tmp_path):
    write_sides(tmp_path, noise_from_step_3)
    comparison = comparison_of(tmp_path)
    assert comparison["first_divergence"]["step"] == 15
    assert comparison["seeds"][0]["losses"]["identical_through"] == 2  # identical, but not up to the divergence
    causes = cause_lines(comparison["causes"])
    assert any("summation order differs more than the calibration expected" in c for c in causes), causes
    assert any("OMP_NUM_THREADS" in c for c in causes), causes
    assert not any("identical to step" in c for c in causes), causes


def test_a_divergence_at_step_2_keeps_the_first_update_cause(tmp_path):
    write_sides(tmp_path, lr_drift)  # identical at step 1 only
    comparison = comparison_of(tmp_path)
    assert comparison["first_divergence"]["step"] == 2
    assert comparison["seeds"][0]["losses"]["identical_through"] == 1
    causes = cause_lines(comparison["causes"])
    assert any("step 2, so the first update differs" in c for c in causes), causes
    assert not any("identical to step" in c or "not float noise" in c for c in causes), causes


def test_below_the_default_floor_a_one_step_gap_may_still_be_noise(tmp_path):
    """With --rtol below 1e-5 a summation order that changes at one step (Horovod's timing-dependent fusion)
    can part bit-identical losses by a few ulps: too small to call a job change."""
    write_sides(tmp_path, lambda losses: np.where(STEP >= 53, losses * (1 + 1e-6), losses))
    comparison = comparison_of(tmp_path, rtol=1e-7)
    assert comparison["first_divergence"]["step"] == 53
    assert comparison["seeds"][0]["losses"]["identical_through"] == 52
    causes = cause_lines(comparison["causes"])
    assert not any("identical to step" in c for c in causes) and names_float_noise(causes), causes


def evals(*values: float) -> list[dict]:
    return [{"step": 20 * (i + 1), "eval_loss": v, "eval_accuracy": 0.8, "eval_samples": 400}
            for i, v in enumerate(values)]


@pytest.mark.parametrize(("training", "earlier", "exact"), [
    (lambda losses: losses, 0.6, True),  # identical training, identical evaluations before: the evaluation changed
    (lambda losses: reduction_noise(losses, 0), 0.6, False),  # training within the band but not identical
    (lambda losses: losses, 0.6 * (1 + 1e-6), False),  # an earlier evaluation within tolerance, not identical
], ids=["identical", "training-noise", "earlier-eval-noise"])
def test_an_evaluation_that_differs_after_identical_ones(tmp_path, training, earlier, exact):
    write_sides(tmp_path, training, evals=evals(0.7, 0.6, 0.5), ddp_evals=evals(0.7, earlier, 0.5005))
    comparison = comparison_of(tmp_path)
    assert comparison["outcome"] == "fails" and comparison["first_divergence"]["step"] == 60
    assert comparison["seeds"][0]["losses"]["first_divergence_step"] is None
    causes = cause_lines(comparison["causes"])
    if exact:
        assert causes == [
            "training losses identical to step 80 and the evaluations identical through step 40, then the "
            "evaluation at step 60 differs (eval_loss 0.5 vs 0.5005): the evaluation changed at step 60 (what it "
            "evaluates: buffers such as batch-norm running statistics kept differently, replicas out of sync; or "
            "how: its shard, batch or averaging), not float noise"], causes
    else:
        assert any(c.startswith("the training losses agree but the evaluation at step 60 differs") for c in causes)
        assert any("OMP_NUM_THREADS" in c for c in causes), causes
        assert not any("identical" in c for c in causes), causes


def test_an_evaluation_metric_only_one_side_records_is_named_not_a_crash(tmp_path):
    one_sided = [{"step": 60, "eval_loss": 0.5}]
    write_sides(tmp_path, lambda losses: reduction_noise(losses, 0), evals=one_sided,
                ddp_evals=[{**one_sided[0], "eval_accuracy": 0.8, "eval_samples": 400}])
    causes = cause_lines(comparison_of(tmp_path)["causes"])
    assert any("(eval_accuracy missing vs 0.8)" in c for c in causes), causes


def test_check_prints_the_job_change(tmp_path):
    losses = base_losses(0, STEPS)
    for side, framework, values in (("a", "horovod", losses), ("b", "ddp", lr_cut(losses))):
        write_run(tmp_path / side / "seed-0", framework=framework, world_size=2, seed=0, losses=values,
                  env=ENV[framework])
    result = run([sys.executable, "-m", "compare", "check", str(tmp_path / "a"), str(tmp_path / "b")], timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("likely cause: identical to step 52, then 2.6e-04 apart at step 53: something in the job changed at "
            "step 53 (a learning-rate or schedule change, a data or code path taken from that step on), not float "
            "noise") in result.stdout, result.stdout
    assert "summation order" not in result.stdout and "likely cause: settings" not in result.stdout, result.stdout
