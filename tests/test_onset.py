"""Issue 43, items 1 and 2: a late jump is a divergence at its step however long the run (the onset bound), and
runs that failed alike are undecided, never "fails" nor "holds". Through `compare import` and `compare check` as
a user types them, on real records (tests/data/long/make.sh: mlp at np 2, 1920 steps; tests/data/records) and
on logs of long runs; both directions, and the bound itself as pure functions."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from compare.__main__ import main as compare_main
from compare.analysis.parity import (
    BAND_CEILING,
    ONSET_BURST,
    ONSET_DECADE_STEPS,
    ONSET_START,
    STEP_RTOL,
    Band,
    calibrated_band,
    relative_difference,
    stepwise,
)
from compare.analysis.records import load_run
from compare.analysis.simulate_parity import CASES, MIXTURE, draw_trial

DATA = Path(__file__).parent / "data"
LONG = DATA / "long"


def check(capsys, *args: Path | str) -> tuple[int, str]:
    code = compare_main(["check", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def imported(tmp_path: Path, name: str, lines: list[str], framework: str, seed: int = 0) -> Path:
    """A log as a script printed it, imported as a user does; returns the side's directory."""
    log = tmp_path / f"{name}.log"
    log.write_text("\n".join(lines) + "\n")
    side = tmp_path / name
    assert compare_main(["import", "text", str(log), "--out", str(side / f"seed-{seed}"), "--framework", framework,
                         "--world-size", "2", "--seed", str(seed)]) == 0
    return side


# ---- item 1: a late jump, however long the run ------------------------------------------------------------

def test_a_late_learning_rate_jump_in_a_long_real_run_fails_at_its_step(capsys):
    """Real: the learning rate 30x from step 1500 of 1920 (bit-identical before). The default band has had no
    power since step ~240; before the onset bound this was "undecided"."""
    code, out = check(capsys, LONG / "base", LONG / "lr30")
    assert code == 1, out
    assert "parity fails: diverges at step 1501 (seed 0)" in out
    assert "more than float chaos can grow from the steps before (the onset bound" in out
    assert "no --calibration" not in out  # a jump no chaos makes is a finding, calibrated or not


def test_a_long_identical_but_chaotic_real_pair_is_not_flagged(capsys):
    """Real: the same job with the initial weights one ulp apart; its float chaos grows from 1e-7 until the runs
    have parted (tenfold every ~15 steps at its fastest), and it must not be called a divergence."""
    base, ulp = load_run(LONG / "base").loss_by_step, load_run(LONG / "ulp").loss_by_step
    assert relative_difference(base[100], ulp[100]) < 1e-6 < 1e-3 < relative_difference(base[300], ulp[300])
    code, out = check(capsys, LONG / "base", LONG / "ulp")
    assert code == 4, out  # undecided: one seed, and the band lost its power before the end
    assert "diverges" not in out


def test_real_one_ulp_pairs_of_the_numerics_records_still_hold(capsys):
    for seed in (0, 1):
        code, out = check(capsys, DATA / "records" / f"base-s{seed}", DATA / "records" / f"ulp-s{seed}")
        assert code == 0, out


def long_curve(steps: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    s = np.arange(1, steps + 1)
    return (2.3 - 1.8 * (1 - np.exp(-s / 3000))) * (1 + 0.05 * rng.standard_normal(steps))


def printed_log(losses: np.ndarray, every: int, decimals: int = 4) -> list[str]:
    return [f"step {s} loss {losses[s - 1]:.{decimals}f}" for s in range(every, len(losses) + 1, every)]


@pytest.mark.parametrize("every", [1, 10])
def test_a_late_jump_in_an_imported_log_of_20000_steps_fails_at_its_step(tmp_path, capsys, every):
    """The issue's case: two logs of 20,000 steps (printed every `every` steps to 4 decimals), equal for most of
    the run, then 23% apart from step 15,001 (a late learning-rate blow-up): a divergence at the first logged
    step after it, not "undecided"."""
    a = long_curve(20_000)
    b = a * np.where(np.arange(1, a.size + 1) > 15_000, 1.23, 1.0)
    side_a = imported(tmp_path, "horovod", printed_log(a, every), "horovod")
    side_b = imported(tmp_path, "ddp", printed_log(b, every), "ddp")
    capsys.readouterr()
    code, out = check(capsys, side_a, side_b)
    assert code == 1, out
    assert f"parity fails: diverges at step {15_000 + every} (seed 0)" in out, out


def chaotic(a: np.ndarray, seed: int, decade_steps: float, onset: int, start: float = 1e-7,
            parted: float = 0.03) -> np.ndarray:
    """`a` with float chaos on it: a relative gap of `start` that from step `onset` grows tenfold every
    `decade_steps` steps until the runs have parted (`parted` per step), times a normal draw at every step."""
    rng = np.random.default_rng(seed)
    grown = math.log10(start) + np.maximum(0, np.arange(1, a.size + 1) - onset) / decade_steps
    envelope = 10.0 ** np.minimum(math.log10(parted), grown)
    return a * (1 + envelope * rng.standard_normal(a.size))


@pytest.mark.parametrize(("every", "decade_steps", "onset"),
                         [(1, 4.5, 10_000), (1, 15, 300), (1, 1500, 0), (10, 4.5, 10_000), (10, 300, 0)])
def test_long_identical_chaotic_logs_are_not_flagged(tmp_path, capsys, every, decade_steps, onset):
    """The same job whose float chaos grows exponentially (as fast as measured here: tenfold every 4-5 steps,
    or every ~15 from step 300 as mlp's one-ulp pair, or slowly over the whole run), imported from logs of
    20,000 steps: never "fails"."""
    a = long_curve(20_000, seed=1)
    side_a = imported(tmp_path, "horovod", printed_log(a, every, 6), "horovod")
    side_b = imported(tmp_path, "ddp", printed_log(chaotic(a, 2, decade_steps, onset), every, 6), "ddp")
    capsys.readouterr()
    code, out = check(capsys, side_a, side_b)
    assert code == 4, out
    assert "diverges" not in out


# ---- the bound, pure ------------------------------------------------------------------------------------

def test_the_onset_bound_grows_from_the_running_maximum_by_the_interval():
    band = Band("default")
    one = ONSET_START * ONSET_BURST * 10 ** (1 / ONSET_DECADE_STEPS)
    assert band.onset_limit(0.0, 100, 101) == pytest.approx(max(STEP_RTOL, one))
    assert band.onset_limit(1e-6, 100, 101) == pytest.approx(1e-6 * ONSET_BURST * 10 ** (1 / ONSET_DECADE_STEPS))
    ten = band.onset_limit(0.0, 100, 110)  # a log every 10 steps: chaos could grow over all 10
    assert ten == pytest.approx(ONSET_START * ONSET_BURST * 10 ** (10 / ONSET_DECADE_STEPS))
    assert band.onset_limit(0.0, 100, 130) == BAND_CEILING  # every 30 steps: chaos could part the runs between
    assert band.onset_limit(5e-3, 100_000, 100_001) == BAND_CEILING
    assert math.isfinite(band.onset_limit(1e-300, 0, 10**9))


def test_a_calibration_pair_that_jumps_lets_the_compared_pair_jump_with_it_and_nowhere_else():
    flat = {s: 1.0 for s in range(1, 101)}
    jumpy = {s: 1.0 + (1e-4 if s >= 50 else 1e-7) for s in range(1, 101)}
    band = calibrated_band(flat, jumpy)
    assert band.onset_limit(1e-7, 49, 50) >= 1e-3  # the pair grew 1000x there (and a step either side)
    assert band.onset_limit(1e-7, 47, 48) >= 1e-3
    assert band.onset_limit(1e-7, 80, 81) == pytest.approx(max(STEP_RTOL, 1e-7 * ONSET_BURST * 10 ** (1 / 3)))


def test_a_jump_after_saturation_is_caught_and_the_band_keeps_its_own_power_bookkeeping():
    a = list(long_curve(40_000))
    b = [x * (1.23 if step > 30_000 else 1.0) for step, x in enumerate(a, start=1)]
    result = stepwise(a, b)
    assert not result.passed and result.first_divergence_step == 30_001 and result.onset_caught
    assert result.tolerance_at_divergence < 1e-4
    assert result.judged_until < 300 and not result.full_power  # the band's power: step number alone, as before
    quiet = stepwise(a, a)
    assert quiet.passed and quiet.identical


def test_simulated_chaos_of_identical_jobs_never_trips_the_onset_bound():
    """Chaos drawn by the simulation (compare/analysis/simulate_parity.py: phases, jumps and per-pair starts
    measured on this project's workloads, apart from the judge's model): over every float32 profile, the onset
    bound adds no divergence to identical jobs, with a calibration or without."""
    rng = np.random.default_rng(43)
    tripped = []
    for i in range(140):
        profile = MIXTURE[i % len(MIXTURE)]
        trial = draw_trial(profile, CASES["identical jobs"], 1, rng)
        a, b, c = trial.a[0].loss_by_step, trial.b[0].loss_by_step, trial.calibration[0].loss_by_step
        for band in (Band("default"), calibrated_band(b, c)):
            result = stepwise(a, b, band=band)
            if result.onset_caught:
                tripped.append((profile.name, band.source, result.first_divergence_step))
    assert not tripped, tripped


# ---- item 2: runs that failed alike ----------------------------------------------------------------------

def copy_record(name: str, dest: Path, framework: str, nan_from: int | None, value: str = "nan",
                status: bool = False) -> Path:
    """A copy of a real record (tests/data/records), its loss non-finite from `nan_from` (stored as the recorder
    does: null, with "nonfinite"), marked failed by the trainer as a run whose loss went NaN is."""
    shutil.copytree(DATA / "records" / name, dest)
    meta = json.loads((dest / "run.json").read_text())
    meta.update(framework=framework, launcher={"horovod": "horovodrun", "ddp": "torchrun"}[framework])
    if status and nan_from is not None:
        meta.update(status="failed", error=f"TrainingDiverged: the training loss became {value} at step {nan_from}")
    (dest / "run.json").write_text(json.dumps(meta))
    lines = []
    for entry in map(json.loads, (dest / "metrics.jsonl").read_text().splitlines()):
        if nan_from is not None and entry["kind"] == "step" and entry["step"] >= nan_from:
            entry.update(loss=None, nonfinite={"loss": value})
        lines.append(json.dumps(entry))
    (dest / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return dest


@pytest.mark.parametrize("status", [False, True], ids=["records", "marked failed by the trainer"])
def test_both_sides_nan_from_the_same_step_is_undecided_on_both_sides(tmp_path, capsys, status):
    a = copy_record("base-s0", tmp_path / "horovod", "horovod", 60, status=status)
    b = copy_record("base-s0", tmp_path / "ddp", "ddp", 60, status=status)
    code, out = check(capsys, a, b)
    assert code == 4, out
    assert f"parity undecided: the runs failed alike: the loss is NaN on both sides ({a} and {b}) from step 60" in out
    assert "parity fails" not in out and "parity holds" not in out


def test_failed_alike_within_one_logging_interval_of_an_imported_log(tmp_path, capsys):
    """Logs printed every 5 steps; one side NaN from step 60, the other from step 65 (the next line): the same
    failure seen through the logging interval."""
    losses = [e["loss"] for e in map(json.loads, (DATA / "records" / "base-s0" / "metrics.jsonl").read_text()
                                     .splitlines()) if e["kind"] == "step"]

    def lines(bad_from: int, word: str) -> list[str]:
        return [f"step {s} loss {word if s >= bad_from else f'{losses[s - 1]:.6f}'}"
                for s in range(5, len(losses) + 1, 5)]

    side_a = imported(tmp_path, "horovod", lines(60, "nan"), "horovod")
    side_b = imported(tmp_path, "ddp", lines(65, "nan"), "ddp")
    capsys.readouterr()
    code, out = check(capsys, side_a, side_b)
    assert code == 4, out
    assert f"the runs failed alike: the loss is NaN on both sides ({side_a} and {side_b}) from step 60 (NaN on the " \
           f"{side_a} side from step 60, NaN on the {side_b} side from step 65)" in out, out


@pytest.mark.parametrize(("a_from", "b_from"), [(60, 90), (60, None)], ids=["another step", "one side only"])
def test_nan_at_another_step_or_on_one_side_still_fails(tmp_path, capsys, a_from, b_from):
    a = copy_record("base-s0", tmp_path / "horovod", "horovod", a_from)
    b = copy_record("base-s0", tmp_path / "ddp", "ddp", b_from)
    code, out = check(capsys, a, b)
    assert code == 1, out
    assert "parity fails: diverges at step 60" in out and "failed alike" not in out


def test_a_divergence_before_both_failed_still_fails(tmp_path, capsys):
    """Apart at step 40 (the real learning-rate change from step 30), then NaN on both sides from step 60: the
    divergence came first."""
    a = copy_record("base-s0", tmp_path / "horovod", "horovod", 60)
    b = copy_record("lr5-s0", tmp_path / "ddp", "ddp", 60)
    code, out = check(capsys, a, b)
    assert code == 1, out
    assert "parity fails: diverges at step 31" in out
