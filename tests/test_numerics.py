"""The judge on the numbers users really bring, through `compare check` and `compare import text` as a user
types them: NaN and infinities, printed rounding, losses near zero, small evaluation sets, one side without
evaluations, and very long runs. The records under tests/data/records are real (tests/data/records/make.sh:
the digits workload by torchrun at np 2); each case changes them the way the user's situation does."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from fixtures import write_run

from compare.__main__ import main as compare_main
from compare.analysis.judge import group_by_seed, judge
from compare.analysis.parity import Band, calibrated_band, stepwise
from compare.analysis.records import load_run

RECORDS = Path(__file__).parent / "data" / "records"


def copy_run(name: str, dest: Path, *, framework: str | None = None, loss=None, evals=None,
             strict: bool = False) -> Path:
    """A copy of a real record; `loss(step, value)` rewrites each training loss, `evals(entry)` each
    evaluation (None drops it). strict=False writes Python's json defaults (NaN and Infinity tokens)."""
    shutil.copytree(RECORDS / name, dest)
    meta = json.loads((dest / "run.json").read_text())
    if framework:
        meta["framework"] = framework
        meta["launcher"] = {"horovod": "horovodrun", "ddp": "torchrun"}[framework]
    (dest / "run.json").write_text(json.dumps(meta))
    lines = []
    for line in (dest / "metrics.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["kind"] == "step" and loss is not None:
            entry["loss"] = loss(entry["step"], entry["loss"])
        if entry["kind"] == "eval" and evals is not None:
            entry = evals(entry)
            if entry is None:
                continue
        if strict:
            bad = {k: repr(v) for k, v in entry.items() if isinstance(v, float) and not math.isfinite(v)}
            entry = {**{k: (None if k in bad else v) for k, v in entry.items()}, **({"nonfinite": bad} if bad else {})}
        lines.append(json.dumps(entry, allow_nan=not strict))
    (dest / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return dest


def check(capsys, *args: Path | str) -> tuple[int, str]:
    code = compare_main(["check", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def pair(tmp_path: Path, a_loss=None, b_loss=None, seeds=(0,), **kw) -> tuple[Path, Path]:
    for seed in seeds:
        copy_run(f"base-s{seed}", tmp_path / "horovod" / f"seed-{seed}", framework="horovod", loss=a_loss, **kw)
        copy_run(f"base-s{seed}", tmp_path / "ddp" / f"seed-{seed}", framework="ddp", loss=b_loss, **kw)
    return tmp_path / "horovod", tmp_path / "ddp"


# ---- NaN and infinities ---------------------------------------------------------------------------------

def nan_from(step: int):
    return lambda s, v: math.nan if s >= step else v


def test_both_sides_nan_from_step_50_is_never_holds_and_names_it(tmp_path, capsys):
    """They trained alike and failed alike (issue 43): undecided, naming the step and both sides; never "fails"."""
    a, b = pair(tmp_path, nan_from(50), nan_from(50), seeds=(0, 1))
    code, out = check(capsys, a, b)
    assert code == 4, out
    assert f"parity undecided: the runs failed alike: the loss is NaN on both sides ({a} and {b}) from step 50 " \
           "(seeds 0, 1)" in out, out
    assert "parity fails" not in out and "parity holds" not in out


def test_both_sides_nan_is_undecided_without_end_points_too(tmp_path):
    """`compare matrix` and the comparisons with the reference judge without end points: NaN there too."""
    a, b = pair(tmp_path, nan_from(50), nan_from(50))
    verdict = judge(group_by_seed([load_run(a / "seed-0")], "a"), group_by_seed([load_run(b / "seed-0")], "b"),
                    band=Band("default"), with_end_points=False)
    assert verdict.outcome == "undecided" and verdict.seeds[0].failed_alike == 50


@pytest.mark.parametrize("strict", [False, True], ids=["NaN tokens", "strict nulls"])
def test_one_side_nan_fails_from_that_step(tmp_path, capsys, strict):
    a, b = pair(tmp_path, None, nan_from(22), strict=strict)
    code, out = check(capsys, a, b)
    assert code == 1, out
    assert f"parity fails: diverges at step 22 (seed 0): the {b} side's loss is NaN from step 22 (the {a} side's " \
           "stays finite)" in out, out


@pytest.mark.parametrize(("va", "vb"), [(math.inf, -math.inf), (math.inf, math.nan), (math.inf, math.inf)])
def test_infinities_never_agree(tmp_path, capsys, va, vb):
    """Records store a non-finite value as null and say which in "nonfinite": +inf against -inf must stay apart."""
    a = copy_run("base-s0", tmp_path / "horovod", framework="horovod", strict=True,
                 loss=lambda s, v: va if s >= 40 else v)
    b = copy_run("base-s0", tmp_path / "ddp", framework="ddp", strict=True, loss=lambda s, v: vb if s >= 40 else v)
    assert load_run(a).loss_by_step[40] == va
    code, out = check(capsys, a, b)
    # both sides failed from step 40: never "holds", and each side's value is named as it was recorded
    assert code == 4 and "on both sides" in out and "from step 40" in out, out
    if va != vb:
        assert f"+inf on the {a} side from step 40, {'-inf' if vb < 0 else 'NaN'} on the {b} side" in out, out


def test_a_run_that_diverged_is_judged_not_refused(tmp_path, capsys):
    """The trainer marks a run whose loss went NaN failed (TrainingDiverged) but keeps its whole record."""
    a, b = pair(tmp_path, None, nan_from(30))
    meta = json.loads((b / "seed-0" / "run.json").read_text())
    meta.update(status="failed", error="TrainingDiverged: the training loss became nan at step 30: training diverged")
    (b / "seed-0" / "run.json").write_text(json.dumps(meta))
    code, out = check(capsys, a, b)
    assert code == 1 and "diverges at step 30" in out, out


# ---- printed rounding -----------------------------------------------------------------------------------

def printed(tmp_path: Path, name: str, decimals: int, framework: str, seed: int = 0) -> Path:
    """A run's losses printed by a script as `step N loss X` with `decimals` decimals, imported as a user does."""
    log = tmp_path / f"{name}-{framework}-{decimals}.log"
    lines = [f"step {e['step']} loss {e['loss']:.{decimals}f}"
             for e in map(json.loads, (RECORDS / name / "metrics.jsonl").read_text().splitlines())
             if e["kind"] == "step"]
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / framework / f"seed-{seed}"
    assert compare_main(["import", "text", str(log), "--out", str(out), "--framework", framework,
                         "--world-size", "2", "--seed", str(seed)]) == 0
    return tmp_path / framework


def test_the_same_runs_printed_at_6_and_3_decimals_hold(tmp_path, capsys):
    for seed in (0, 1):
        a = printed(tmp_path, f"base-s{seed}", 6, "horovod", seed)
        b = printed(tmp_path, f"base-s{seed}", 3, "ddp", seed)
    capsys.readouterr()
    code, out = check(capsys, a, b)
    assert code == 0, out
    assert f"the {b} side's losses are printed in units of 0.001" in out
    recorded = json.loads((b / "seed-0" / "run.json").read_text())["imported"]["printed_resolution"]
    assert recorded["loss"] == 0.001


@pytest.mark.parametrize("decimals", [3, 4])
def test_printed_losses_against_the_full_record_hold(tmp_path, capsys, decimals):
    a = printed(tmp_path, "base-s0", decimals, "horovod")
    capsys.readouterr()
    code, out = check(capsys, a / "seed-0", RECORDS / "base-s0")
    assert code == 0 and "diverges" not in out, out
    assert f"printed in units of {10.0 ** -decimals:g}" in out


def test_both_sides_at_3_decimals_with_a_true_gap_of_1e_6_hold(tmp_path, capsys):
    shifted = copy_run("base-s0", tmp_path / "shifted", loss=lambda s, v: v + 1e-6)
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    for source, log in ((RECORDS / "base-s0", log_a), (shifted, log_b)):
        steps = [e for e in map(json.loads, (source / "metrics.jsonl").read_text().splitlines()) if e["kind"] == "step"]
        log.write_text("".join(f"step {e['step']} loss {e['loss']:.3f}\n" for e in steps))
    for log, name in ((log_a, "a"), (log_b, "b")):
        assert compare_main(["import", "text", str(log), "--out", str(tmp_path / name), "--world-size", "2"]) == 0
    capsys.readouterr()
    code, out = check(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 0 and "diverges" not in out and "job changed" not in out, out


def test_rounding_does_not_hide_a_real_divergence(tmp_path, capsys):
    """A 5% learning-rate change from step 30, both sides printed to 3 decimals: still caught, soon after."""
    a = printed(tmp_path, "base-s0", 3, "horovod")
    b = printed(tmp_path, "lr5-s0", 3, "ddp")
    capsys.readouterr()
    code, out = check(capsys, a, b)
    assert code != 0, out
    found = re.search(r"diverges at step (\d+)", out)
    assert found and 30 <= int(found[1]) <= 45, out


def test_the_unrounded_records_of_that_change_fail_at_once(tmp_path, capsys):
    code, out = check(capsys, copy_run("base-s0", tmp_path / "a", framework="horovod"),
                      copy_run("lr5-s0", tmp_path / "b", framework="ddp"))
    assert code == 1 and re.search(r"diverges at step 3[0-2]\b", out), out


# ---- losses near zero -----------------------------------------------------------------------------------

def test_identical_runs_whose_loss_reaches_zero_hold(tmp_path, capsys):
    to_zero = lambda s, v: 0.0 if s > 100 else v  # noqa: E731
    a, b = pair(tmp_path, to_zero, to_zero, seeds=(0, 1))
    code, out = check(capsys, a, b)
    assert code == 0, out


def test_a_gap_of_2e_7_near_zero_is_noise(tmp_path, capsys):
    a, b = pair(tmp_path, lambda s, v: 1e-7 if s > 100 else v, lambda s, v: 3e-7 if s > 100 else v, seeds=(0, 1))
    code, out = check(capsys, a, b)
    assert code == 0 and "diverges" not in out, out


def test_a_real_gap_near_zero_still_fails(tmp_path, capsys):
    a, b = pair(tmp_path, lambda s, v: 0.001 if s > 100 else v, lambda s, v: 0.002 if s > 100 else v)
    code, out = check(capsys, a, b)
    assert code == 1 and "diverges at step 101" in out, out


# ---- accuracy and small evaluation sets ---------------------------------------------------------------

def with_accuracy(accuracy: float, samples: int):
    return lambda entry: {**entry, "eval_accuracy": accuracy, "eval_samples": samples}


def accuracy_pair(tmp_path: Path, acc_a: float, acc_b: float, samples: int, seeds=(0, 1)) -> tuple[Path, Path]:
    for seed in seeds:
        copy_run(f"base-s{seed}", tmp_path / "horovod" / f"seed-{seed}", framework="horovod",
                 evals=with_accuracy(acc_a, samples))
        copy_run(f"base-s{seed}", tmp_path / "ddp" / f"seed-{seed}", framework="ddp",
                 evals=with_accuracy(acc_b, samples))
    return tmp_path / "horovod", tmp_path / "ddp"


def test_accuracies_1_4_points_apart_on_100_samples_are_not_parity(tmp_path, capsys):
    """One sample's flip (1.5 points on 100) passes each evaluation, but the 1-point margin must still decide."""
    code, out = check(capsys, *accuracy_pair(tmp_path, 0.914, 0.900, 100))
    assert code in (1, 4) and "parity holds" not in out, out
    assert "eval_accuracy: equivalent" not in out


def test_the_same_accuracy_on_100_samples_holds(tmp_path, capsys):
    code, out = check(capsys, *accuracy_pair(tmp_path, 0.91, 0.91, 100))
    assert code == 0, out


def test_a_small_evaluation_set_is_said_to_be_one(tmp_path, capsys):
    """Accuracies 0.5 points apart on average over 3 seeds, 100 samples each: no sample count can show that."""
    for seed, (acc_a, acc_b) in enumerate([(0.91, 0.90), (0.90, 0.90), (0.92, 0.915)]):
        name = "base-s0" if seed != 1 else "base-s1"
        copy_run(name, tmp_path / "horovod" / f"seed-{seed}", framework="horovod", evals=with_accuracy(acc_a, 100))
        copy_run(name, tmp_path / "ddp" / f"seed-{seed}", framework="ddp", evals=with_accuracy(acc_b, 100))
        for side in ("horovod", "ddp"):  # three seeds of two real ones: give each its seed
            meta_path = tmp_path / side / f"seed-{seed}" / "run.json"
            meta = json.loads(meta_path.read_text())
            meta["seed"] = seed
            meta["options"]["seeds"] = [seed]
            meta_path.write_text(json.dumps(meta))
    code, out = check(capsys, tmp_path / "horovod", tmp_path / "ddp")
    assert code == 4 and "parity undecided" in out, out
    assert "100 evaluation samples cannot resolve a 1-point margin" in out, out


# ---- one side without evaluations ---------------------------------------------------------------------

def test_one_side_without_evaluations_is_named(tmp_path, capsys):
    a = copy_run("base-s0", tmp_path / "horovod", framework="horovod")
    b = copy_run("base-s0", tmp_path / "ddp", framework="ddp", evals=lambda entry: None)
    code, out = check(capsys, a, b)
    assert code == 0, out  # the training agrees; the missing evaluations are said, not guessed
    assert f"only the {a} side evaluated: the {b} side has no evaluations" in out, out


# ---- long runs ------------------------------------------------------------------------------------------

def test_the_band_stays_finite_at_any_step():
    default = Band("default")
    assert math.isfinite(default.tolerance(200_000)) and default.tolerance(200_000) <= 1.0
    steps = range(1, 1001)
    band = calibrated_band({s: 1.0 for s in steps}, {s: 1.0 + 1e-6 * s for s in steps})
    assert math.isfinite(band.tolerance(200_000)) and band.tolerance(500) == pytest.approx(100 * 5e-4 / 1.0005)


def test_identical_long_runs_hold_in_every_step():
    losses = {s: float(v) for s, v in enumerate(2.3 * np.exp(-np.arange(200_000) / 40_000) + 0.1, start=1)}
    result = stepwise(losses, dict(losses))
    assert result.passed and result.identical and result.full_power and result.n_common == 200_000


def test_a_long_identical_record_pair_holds(tmp_path, capsys):
    """20,000 steps through `compare check` (benchmarks/long_check.py times 200,000)."""
    losses = list(2.3 * np.exp(-np.arange(20_000) / 4_000) + 0.1)
    a = write_run(tmp_path / "horovod", framework="horovod", world_size=2, seed=0, losses=losses)
    b = write_run(tmp_path / "ddp", framework="ddp", world_size=2, seed=0, losses=losses)
    code, out = check(capsys, a, b)
    assert code == 0 and "bit-identical at every step" in out, out


# ---- imported logs on different step grids ------------------------------------------------------------

def test_two_logs_printed_at_different_intervals_are_not_paired_blindly(tmp_path, capsys):
    """MNIST-style `[samples/total]` counters, logged every 2 and every 3 batches, without --global-batch:
    each log's grid is its own logging interval, so step 3 is batch 6 on one side and batch 9 on the other."""
    losses = [2.3 - 0.01 * i for i in range(1, 61)]
    for name, every in (("a", 2), ("b", 3)):
        log = tmp_path / f"{name}.log"
        log.write_text("".join(f"Train Epoch: 1 [{i * 32}/1920 ({100 * i // 60}%)]\tLoss: {losses[i - 1]:.6f}\n"
                               for i in range(every, 61, every)))
        assert compare_main(["import", "text", str(log), "--out", str(tmp_path / name), "--world-size", "1"]) == 0
    capsys.readouterr()
    code, out = check(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 5 and "step grid" in out and "--global-batch" in out, out
