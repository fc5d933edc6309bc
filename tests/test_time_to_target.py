"""Time to target (compare/analysis/time_to_target.py, compare/render/time_to_target.py): steps and seconds
from the launch to the first evaluation at the target, over seeds, and the two-sided verdict."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from scipy import stats

from compare.__main__ import main as compare_main
from compare.analysis.records import find_runs
from compare.analysis.summary import analyse
from compare.analysis.time_to_target import Basis, Origin, Outcome, Target, Why, time_to_target
from compare.commands.arguments import DEFAULT_TARGET, resolve_targets, target
from compare.importers import Series, build_record
from compare.render.report import write_report
from compare.render.time_to_target import time_to_target_line, verdict_sentence
from tests.fixtures import write_run
from workload.errors import UsageError
from workload.record_format import CONTENTION_RECORD

ROOT = Path(__file__).resolve().parents[1]
NINETY = Target("eval_accuracy", 0.9)


def accuracy_by_epoch(step: int, seed: int) -> float:
    return min(0.5 + 0.1 * step / 10, 0.95)  # 0.6, 0.7, 0.8, 0.9 (step 40), 0.95


def launch(root: Path, framework: str, seeds: tuple[int, ...] = (0, 1, 2), *, world_size: int = 2,
           start: float = 1000.0, startup: float = 5.0, step_s: float = 0.1, steps: int = 60, every: int = 10,
           accuracy: Callable[[int, int], float] = accuracy_by_epoch, contended: bool = False,
           slower_seed: dict[int, float] | None = None) -> Path:
    """One launch of every seed, one after the other, as `compare run` lays it out: RUNS/FW-npN/seed-S/
    with the launch's contention.json above them; evaluations every `every` steps with wall times."""
    directory = root / "runs" / f"{framework}-np{world_size}"
    clock = start + startup
    for seed in seeds:
        pace = step_s * (slower_seed or {}).get(seed, 1.0)
        run = write_run(directory / f"seed-{seed}", framework=framework, world_size=world_size, seed=seed,
                        losses=[2.0 / (1 + 0.1 * i) for i in range(steps)], options={"workload": "digits"})
        lines = []
        for step in range(1, steps + 1):
            lines.append({"kind": "step", "step": step, "epoch": (step - 1) // every, "loss": 2.0 / (1 + 0.1 * step),
                          "lr": 0.05, "samples": step * 64, "step_time_s": pace,
                          "wall_time": round(clock + step * pace, 3)})
            if step % every == 0:
                lines.append({"kind": "eval", "step": step, "epoch": (step - 1) // every, "eval_loss": 1.0 / step,
                              "eval_accuracy": accuracy(step, seed), "eval_samples": 100,
                              "wall_time": round(clock + step * pace + 0.05, 3)})
        (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        clock += steps * pace + 1.0  # the next seed sets up its model and data
    (directory / CONTENTION_RECORD).write_text(json.dumps({
        "started_unix": start, "wall_s": clock - start, "ranks": world_size, "threads_per_rank": 1,
        "available_cores": 8, "others_cores": 7.5 if contended else 0.0, "own_cpu_s": 0.1, "own_cpu_per_rank": 0.01,
        "steal_fraction": 0.0, "load_before": [0.1, 0.1, 0.1], "load_after": [0.2, 0.1, 0.1]}))
    return directory


def verdicts(root: Path, *targets: Target):
    return time_to_target(find_runs(root / "runs"), targets or (NINETY,))


def test_ddp_reaches_sooner_with_startup_counted(tmp_path):
    launch(tmp_path, "horovod", step_s=0.115)
    launch(tmp_path, "ddp", step_s=0.1)
    (verdict,) = verdicts(tmp_path)
    assert verdict.outcome is Outcome.SOONER and verdict.sooner == "ddp" and verdict.basis is Basis.SECONDS
    ddp = verdict.sides["ddp"]
    assert [s.step for s in ddp.seeds] == [40, 40, 40]
    # seconds from the launch: start-up (5 s) plus the first step, then each seed's own time from its first
    # step to the evaluation (after step 40, 0.05 s of evaluation): 5 + 4.0 + 0.05
    assert [s.seconds for s in ddp.seeds] == pytest.approx([9.05] * 3, abs=1e-3)
    assert ddp.origin is Origin.LAUNCH and ddp.seconds.mean == pytest.approx(9.05, abs=1e-3)
    horovod_s = 5 + 40 * 0.115 + 0.05
    assert verdict.ratio == pytest.approx(horovod_s / 9.05, rel=1e-3)
    sentence = verdict_sentence(verdict.to_dict())
    assert sentence.startswith("np 2: DDP reaches 90% accuracy in 9.0 s (every seed), step 40 (every seed), "
                               "Horovod in 9.7 s (9.6-9.7), step 40 (every seed): DDP 1.07x sooner (95% interval ")
    assert f"DDP {horovod_s / 9.05:.2f}x sooner" in sentence


def test_horovod_sooner_is_named_too(tmp_path):
    launch(tmp_path, "horovod", step_s=0.08, startup=4.0)
    launch(tmp_path, "ddp", step_s=0.1)
    (verdict,) = verdicts(tmp_path)
    assert verdict.outcome is Outcome.SOONER and verdict.sooner == "horovod"
    assert verdict.ratio > 1 and verdict.low > 1  # stated as the later side's time over the sooner's
    assert "Horovod reaches 90% accuracy" in verdict_sentence(verdict.to_dict())


def test_intervals_over_seeds_and_no_clear_difference(tmp_path):
    paces = {0: 1.0, 1: 1.3, 2: 0.8}
    launch(tmp_path, "horovod", slower_seed={0: 1.1, 1: 0.9, 2: 1.0})
    launch(tmp_path, "ddp", slower_seed=paces)
    (verdict,) = verdicts(tmp_path)
    ddp = verdict.sides["ddp"]
    values = [s.seconds for s in ddp.seeds]
    logs = [math.log(v) for v in values]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert ddp.seconds.n == 3
    assert ddp.seconds.mean == pytest.approx(math.exp(mean))
    assert (ddp.seconds.low, ddp.seconds.high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert verdict.outcome is Outcome.NO_CLEAR_DIFFERENCE and verdict.sooner is None
    assert verdict.low < 1 < verdict.high
    # said from the side that took less time, with the interval of that factor, never as a Horovod/DDP ratio
    if verdict.ratio >= 1:
        said = f"DDP {verdict.ratio:.2f}x sooner, 95% interval {verdict.low:.2f}-{verdict.high:.2f}"
    else:
        said = f"Horovod {1 / verdict.ratio:.2f}x sooner, 95% interval {1 / verdict.high:.2f}-{1 / verdict.low:.2f}"
    sentence = verdict_sentence(verdict.to_dict())
    assert f"no clear difference ({said} over 3 paired seed(s))" in sentence and "Horovod/DDP" not in sentence


def test_a_side_that_never_reaches_it_failed_to_converge(tmp_path):
    launch(tmp_path, "horovod", step_s=0.05,  # faster steps, but seed 1 stalls at 0.85
           accuracy=lambda step, seed: 0.85 if seed == 1 else accuracy_by_epoch(step, seed))
    launch(tmp_path, "ddp")
    (verdict,) = verdicts(tmp_path)
    assert verdict.outcome is Outcome.NOT_REACHED and verdict.sooner == "ddp"
    missed = [s for s in verdict.sides["horovod"].seeds if not s.reached]
    assert [(s.seed, s.step, s.seconds, s.value, s.last_step) for s in missed] == [(1, None, None, 0.85, 60)]
    sentence = verdict_sentence(verdict.to_dict())
    assert "Horovod did not reach it in 1 of 3 seeds (within 60 steps, best 0.85), a failure to converge" in sentence
    assert sentence.endswith("DDP sooner")


def test_neither_reached_and_both_missed(tmp_path):
    launch(tmp_path, "horovod")
    launch(tmp_path, "ddp", accuracy=lambda step, seed: 0.8 if seed == 0 else accuracy_by_epoch(step, seed))
    never, partly = verdicts(tmp_path, Target("eval_accuracy", 0.99), Target("eval_accuracy", 0.9))
    assert never.outcome is Outcome.NEITHER_REACHED and never.sooner is None
    assert "neither side reached 99% accuracy" in verdict_sentence(never.to_dict())
    assert "not reached" in verdict_sentence(never.to_dict())
    (loss,) = verdicts(tmp_path, Target("eval_loss", 0.001))  # a loss's best is its lowest: 1/60 at step 60
    best = "(Horovod within 60 steps, best 0.0167; DDP within 60 steps, best 0.0167)"
    assert best in verdict_sentence(loss.to_dict())
    assert partly.outcome is Outcome.NOT_REACHED and partly.sooner == "horovod"
    launch(tmp_path, "horovod", accuracy=lambda step, seed: 0.8 if seed == 2 else accuracy_by_epoch(step, seed))
    (both,) = verdicts(tmp_path)
    assert both.outcome is Outcome.UNDECIDED and both.why is Why.BOTH_MISSED


def test_one_seed_gives_no_interval_and_contention_withholds(tmp_path):
    launch(tmp_path, "horovod", seeds=(0,), step_s=0.2)
    launch(tmp_path, "ddp", seeds=(0,))
    (verdict,) = verdicts(tmp_path)
    assert verdict.outcome is Outcome.UNDECIDED and verdict.why is Why.ONE_SEED
    assert verdict.sides["ddp"].seconds.low is None
    assert "(one seed)" in verdict_sentence(verdict.to_dict())
    launch(tmp_path, "horovod", step_s=0.2, contended=True)
    launch(tmp_path, "ddp")
    (verdict,) = verdicts(tmp_path)
    assert verdict.outcome is Outcome.UNDECIDED and verdict.why is Why.CONTENDED
    assert "no reliable verdict" in verdict_sentence(verdict.to_dict())


def test_training_loss_target_reads_the_mean_of_five_steps(tmp_path):
    launch(tmp_path, "horovod")
    launch(tmp_path, "ddp")
    (verdict,) = verdicts(tmp_path, Target("final_loss", 1.0))
    # loss 2/(1+0.1 s): the mean of steps s-4..s first falls to 1.0 at step 13 (a single step at 10)
    assert {s.step for side in verdict.sides.values() for s in side.seeds} == {13}
    assert "training loss 1" in verdict_sentence(verdict.to_dict())


def imported(root: Path, framework: str, seed: int, *, pace: float, accuracy: float = 0.95) -> None:
    """A run imported from a TensorBoard log: step and eval wall times, no launch start."""
    series = Series()
    for step in range(1, 41):
        series.add_step(step, {"loss": 1.0 / step, "wall_time": 5000.0 + step * pace})
    for step in (20, 40):
        series.add_eval(step, {"eval_accuracy": accuracy if step == 40 else 0.5, "wall_time": 5000.0 + step * pace})
    meta, lines = build_record(series, kind="tensorboard", source=Path("tb"), digest="0" * 16, framework=framework,
                               world_size=2, seed=seed, options={"workload": "digits"}, global_batch=64)
    directory = root / "runs" / f"imported-{framework}-{seed}"
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps(meta))
    (directory / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_imported_runs_with_wall_times(tmp_path):
    for seed in (0, 1):
        imported(tmp_path, "horovod", seed, pace=0.2 + 0.01 * seed)
        imported(tmp_path, "ddp", seed, pace=0.1 + 0.01 * seed)
    (verdict,) = verdicts(tmp_path)
    assert verdict.sides["ddp"].origin is Origin.FIRST_STEP
    assert [s.seconds for s in verdict.sides["ddp"].seeds] == pytest.approx([3.9, 39 * 0.11])
    assert verdict.outcome is Outcome.SOONER and verdict.sooner == "ddp" and verdict.basis is Basis.SECONDS
    assert "from its first logged step (no launch start)" in verdict_sentence(verdict.to_dict())


def test_imported_against_launched_compares_steps(tmp_path):
    imported(tmp_path, "horovod", 0, pace=0.2)
    imported(tmp_path, "horovod", 1, pace=0.2)
    launch(tmp_path, "ddp", seeds=(0, 1))
    (verdict,) = verdicts(tmp_path)
    assert verdict.basis is Basis.STEPS and verdict.outcome is Outcome.NO_CLEAR_DIFFERENCE
    assert verdict.ratio == pytest.approx(1.0)
    assert "in steps: seconds count from its first logged step" in verdict_sentence(verdict.to_dict())


def test_report_and_tradeoffs_carry_it(tmp_path):
    launch(tmp_path, "horovod", step_s=0.115)
    launch(tmp_path, "ddp")
    runs = find_runs(tmp_path / "runs")
    analysis = analyse(runs, targets=(NINETY, Target("eval_accuracy", 0.99)))
    assert [v["outcome"] for v in analysis["time_to_target"]] == ["sooner", "neither reached"]
    json.dumps(analysis, allow_nan=False)  # strict JSON, enums as their values
    write_report(tmp_path, runs, analysis)
    report = (tmp_path / "report.md").read_text()
    assert "**Time to target:** np 2: DDP reaches 90% accuracy" in report
    assert "## Time to target" in report
    assert "| s to 90% accuracy | s to 99% accuracy |" in report
    assert "not reached (0/3)" in report
    assert time_to_target_line(analysis).count("np 2:") == 2
    assert "time_to_target" not in analyse(runs)  # without --target nothing changes


def test_target_values_and_defaults():
    assert target("eval_accuracy=90%") == Target("eval_accuracy", 0.9)
    assert target("final_loss=0.2") == Target("final_loss", 0.2)
    assert resolve_targets([DEFAULT_TARGET, NINETY], "digits") == (NINETY,)
    for bad in ("bleu=3", "eval_accuracy", "eval_accuracy=x", "eval_accuracy=1.2", "eval_loss=0", "eval_loss=inf"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"target|number|accuracy|loss") as info:
            target(bad)
        assert "\n" not in str(info.value)
    with pytest.raises(UsageError, match="no default target"):
        resolve_targets([DEFAULT_TARGET], "resnet")


def test_bad_target_is_one_line_exit_2_before_any_launch(tmp_path, capsys):
    for argv in (["--target", "bleu=3"], ["--target", "eval_accuracy=2"], ["--workload", "lm", "--target"]):
        assert compare_main(["run", "--out", str(tmp_path / "out"), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "target" in err
    assert not (tmp_path / "out").exists()


def test_report_rejudges_with_another_target(tmp_path, capsys):
    launch(tmp_path, "horovod")
    launch(tmp_path, "ddp")
    assert compare_main(["report", str(tmp_path), "--target", "eval_loss=0.02"]) in (0, 4)
    assert "time to target: np 2: Horovod reaches eval loss 0.02 in 10.0 s" in capsys.readouterr().out
    for metrics in (tmp_path / "runs").rglob("metrics.jsonl"):  # records without evaluations (a CSV import)
        metrics.write_text("".join(line + "\n" for line in metrics.read_text().splitlines() if '"eval"' not in line))
    assert compare_main(["report", str(tmp_path), "--target", "eval_accuracy=0.9"]) == 2
    assert "holds eval_accuracy" in capsys.readouterr().err


@pytest.mark.slow
def test_real_launchers_reached_and_not_reached(tmp_path):
    """digits at np 2 through horovodrun and torchrun: 4 epochs of 44 global batches of 32 reach 80%
    accuracy (0.83 after the second epoch on one worker) and never an eval loss of 0.001; `compare report`
    then judges a third target from the same records."""
    out = tmp_path / "out"
    command = [sys.executable, "-m", "compare", "run", "--workload", "digits", "--np", "2", "--seeds", "0,1",
               "--repeats", "0", "--reference", "off", "--epochs", "4", "--batch-size", "16",
               "--target", "eval_accuracy=0.8", "--target", "eval_loss=0.001", "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 4), done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("time to target:"))
    print(line)
    document = json.loads((out / "report.json").read_text())["analysis"]
    reached, never = document["time_to_target"]
    assert reached["target"] == {"metric": "eval_accuracy", "value": 0.8}
    for side in reached["sides"].values():
        assert side["converged"] and side["origin"] == "launch"
        assert all(s["step"] % 44 == 0 and s["seconds"] > 1 for s in side["seeds"])  # an epoch's end, start-up in
    assert never["outcome"] == "neither reached"
    report = (out / "report.md").read_text()
    assert "## Time to target" in report and "reaches 80% accuracy" in line
    assert "neither side reached eval loss 0.001" in report and "not reached" in report
    again = subprocess.run([sys.executable, "-m", "compare", "report", str(out)], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
    assert "time to target: np 2:" in again.stdout  # the targets are kept with the comparison
