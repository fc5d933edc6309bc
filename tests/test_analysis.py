"""The analysis and report layer on synthetic run records: no training, no torch, a few seconds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from fixtures import write_run

from compare.analysis.jobs import check_job
from compare.analysis.parity import STEP_RTOL, relative_difference, stepwise
from compare.analysis.records import RecordError, find_runs, load_run
from compare.analysis.summary import analyse
from compare.analysis.timing import breakdown, scaling_efficiency, speed_ratio, step_stats, throughput
from compare.render.causes import cause_lines
from compare.render.report import summary_table, write_report
from compare.render.speed import speed_line

STEPS = 40


def base_losses(seed: int, steps: int = STEPS) -> np.ndarray:
    """A decaying loss curve whose level depends on the seed, like real training."""
    rng = np.random.default_rng(100 + seed)
    return 2.3 * np.exp(-np.arange(steps) / 15) + 0.3 + rng.normal(0, 0.02, steps)


def reduction_noise(losses: np.ndarray, seed: int) -> np.ndarray:
    """Relative perturbations of ~1e-7 per step that accumulate slowly, like a different summation order."""
    rng = np.random.default_rng(200 + seed)
    return losses * (1 + np.cumsum(rng.normal(0, 1e-7, losses.size)) / 2)


def lr_drift(losses: np.ndarray) -> np.ndarray:
    """Another learning rate: step 1 (before any update) agrees, then the curves drift apart by >= 1e-3."""
    drift = np.concatenate([[0.0], 1e-3 * np.arange(1, losses.size)])
    return losses * (1 + drift)


def times(median_s: float, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(300 + seed).lognormal(np.log(median_s), 0.1, n)


def write_pair(root: Path, world_size: int, seeds: range, *, ddp_losses=reduction_noise, ddp_options=None,
               evals: bool = True, reference: bool = False) -> None:
    for seed in seeds:
        losses = base_losses(seed)
        accuracy = [{"eval_loss": float(losses[-1]), "eval_accuracy": 0.8 + 0.01 * seed}] if evals else None
        common = {"seed": seed, "evals": accuracy}
        write_run(root / f"horovod-np{world_size}" / f"seed-{seed}", framework="horovod",
                  world_size=world_size, losses=losses, step_times=times(0.012, STEPS, seed), **common)
        write_run(root / f"ddp-np{world_size}" / f"seed-{seed}", framework="ddp", world_size=world_size,
                  losses=ddp_losses(losses, seed), step_times=times(0.010, STEPS, seed + 50),
                  options=ddp_options, **common)
        if reference:
            write_run(root / f"reference-np{world_size}" / f"seed-{seed}", framework="reference",
                      world_size=1, data_world_size=world_size, seed=seed,
                      losses=reduction_noise(losses, seed + 7), step_times=times(0.02, STEPS, seed + 90))


# ---- step-wise parity ----------------------------------------------------------------------------


def test_divergent_pair_fails_and_names_the_step():
    a = base_losses(0)
    result = stepwise(a, lr_drift(a))
    assert result.passed is False
    assert result.first_divergence_step == 2
    assert result.first_divergence_gap == pytest.approx(1e-3, rel=1e-3)
    assert result.abs_gap_at_first_divergence == pytest.approx(abs(a[1]) * 1e-3, rel=1e-3)
    assert len(result.rel_diffs) == STEPS  # all common steps, for the plot


def test_reduction_order_noise_passes():
    for seed in range(5):
        a = base_losses(seed)
        result = stepwise(a, reduction_noise(a, seed))
        assert result.passed is True, result
        assert result.first_divergence_step is None
        assert 1e-9 < result.max_rel_diff < STEP_RTOL
        assert result.full_power and result.judged_until == STEPS


def test_stepwise_counts_only_common_steps_and_rejects_nan():
    a = base_losses(0)
    short = stepwise(a, a[:7])
    assert short.passed is True and short.n_common == 7 and short.last_step == 7
    empty = stepwise(a, [])
    assert empty.passed is False and empty.reason
    b = a.copy()
    b[4] = np.nan
    nan = stepwise(a, b)
    assert nan.passed is False and nan.first_divergence_step == 5
    json.dumps(nan.to_dict(), allow_nan=False)  # inf is made None for strict JSON


def test_relative_difference():
    assert relative_difference(1.0, 1.1) == pytest.approx(0.1 / 1.1)
    assert relative_difference(2.0, 2.0) == relative_difference(0.0, 1e-12) == 0.0  # the absolute floor
    assert relative_difference(1.0, math.nan) == math.inf
    # a run that blew up is never within the band, even against another that blew up the same way
    for a, b in ((math.nan, math.nan), (math.inf, -math.inf), (math.inf, math.nan), (math.inf, math.inf)):
        assert relative_difference(a, b) == math.inf, (a, b)
    assert relative_difference(0.0, 2e-7) < 1e-5  # near zero: judged against NEAR_ZERO, not against 2e-7
    assert relative_difference(0.5, 0.5004, allowance=0.0005) == 0.0  # printed rounding explains it
    assert relative_difference(0.5, 0.502, allowance=0.0005) == pytest.approx(0.0015 / 0.502)


def test_load_run_reads_steps_evals_and_properties(tmp_path):
    losses = base_losses(0)
    run = load_run(write_run(tmp_path / "r", framework="ddp", world_size=2, seed=3, losses=losses,
                             evals=[{"eval_loss": 0.4, "eval_accuracy": 0.9}]))
    assert (run.framework, run.world_size, run.seed, run.ok) == ("ddp", 2, 3, True)
    assert run.global_batch == 64
    assert run.final_loss == pytest.approx(float(np.mean(losses[-5:])))
    assert run.final_eval["eval_accuracy"] == 0.9
    assert run.step_times.shape == (STEPS,)


def test_corrupt_line_names_file_and_line(tmp_path):
    run_dir = write_run(tmp_path / "r", framework="ddp", world_size=2, seed=0, losses=[1.0, 0.9, 0.8, 0.7])
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = '{"kind": "step", "step": 3, "loss": 0.8,'
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError, match=r"metrics\.jsonl:3: not valid JSON") as info:
        load_run(run_dir)
    assert "\n" not in str(info.value)


def test_truncated_last_line_of_a_finished_run_is_an_error(tmp_path):
    run_dir = write_run(tmp_path / "r", framework="ddp", world_size=2, seed=0, losses=[1.0, 0.9, 0.8],
                        truncate_last_line=True)
    with pytest.raises(RecordError, match=r"r/metrics\.jsonl:3: truncated line"):
        load_run(run_dir)


def test_truncated_part_file_of_an_interrupted_run_loads(tmp_path):
    run_dir = write_run(tmp_path / "r", framework="ddp", world_size=2, seed=0, losses=[1.0, 0.9, 0.8],
                        status="failed", truncate_last_line=True)
    run = load_run(run_dir)
    assert run.status == "failed" and not run.ok
    assert len(run.steps) == 2  # the line the killed writer left half-written is dropped


def test_step_line_without_loss_names_file_and_line(tmp_path):
    run_dir = write_run(tmp_path / "r", framework="ddp", world_size=2, seed=0, losses=[1.0, 0.9])
    path = run_dir / "metrics.jsonl"
    path.write_text(path.read_text() + '{"kind": "step", "step": 3, "step_time_s": 0.1}\n')
    with pytest.raises(RecordError, match=r"metrics\.jsonl:3: step line lacks loss"):
        load_run(run_dir)


def test_unknown_schema_version_is_refused(tmp_path):
    run_dir = write_run(tmp_path / "r", framework="ddp", world_size=2, seed=0, losses=[1.0],
                        extra_meta={"schema_version": 2})
    with pytest.raises(RecordError, match=r"run\.json: unsupported schema_version 2 \(this tool reads 1\)"):
        load_run(run_dir)


def test_ok_status_without_final_metrics_is_incomplete(tmp_path):
    run_dir = write_run(tmp_path / "r", framework="ddp", world_size=2, seed=0, losses=[1.0, 0.9])
    (run_dir / "metrics.jsonl").rename(run_dir / "metrics.jsonl.part")
    run = load_run(run_dir)
    assert run.status == "incomplete" and not run.ok and run.error


def test_find_runs_is_recursive_and_sorted(tmp_path):
    write_run(tmp_path, framework="ddp", world_size=1, seed=9, losses=[1.0])
    for seed in (1, 0):
        write_run(tmp_path / "deep" / "x" / f"seed-{seed}", framework="ddp", world_size=1, seed=seed,
                  losses=[1.0])
    runs = find_runs(tmp_path)
    assert [r.seed for r in runs] == [9, 0, 1]


# ---- timing --------------------------------------------------------------------------------------


def test_speed_ratio_ci_contains_true_ratio():
    a = times(0.012, 400, 1)
    b = times(0.010, 400, 2)
    result = speed_ratio(a, b, seed=0)
    assert result["step_time_ratio"] == result["speedup_of_b"] > 1
    assert result["ci_low"] <= 1.2 <= result["ci_high"]
    assert result["ci_high"] - result["ci_low"] < 0.1
    assert speed_ratio(a, b, seed=0) == result  # reproducible


def test_step_stats_throughput_scaling_and_breakdown(tmp_path):
    stats = step_stats(np.array([9.0, 9.0, 1.0, 2.0, 3.0]), warmup=2)
    assert stats["n"] == 3 and stats["median"] == 2.0 and stats["sd"] == pytest.approx(1.0)
    assert step_stats(np.array([1.0]), warmup=5) == {"n": 0, "median": None, "p90": None, "mean": None,
                                                      "sd": None}
    assert throughput(64, 0.01) == pytest.approx(6400)
    assert scaling_efficiency(6000, 4000, 2) == pytest.approx(0.75)
    assert throughput(64, None) is None and scaling_efficiency(None, 4000, 2) is None
    run = load_run(write_run(tmp_path / "r", framework="ddp", world_size=2, seed=0, losses=[1.0] * 4,
                             step_times=[1.0, 0.1, 0.1, 0.1]))
    parts = breakdown([run], warmup=1)
    assert parts["step_time_s"] == pytest.approx(0.1)
    assert parts["backward_s"] == pytest.approx(0.045)
    assert parts["unaccounted_s"] == pytest.approx(0.1 * 0.05)


# ---- analysis ------------------------------------------------------------------------------------


def test_analysis_of_matching_runs_holds(tmp_path):
    write_pair(tmp_path, 1, range(3))
    write_pair(tmp_path, 2, range(3), reference=True)
    analysis = analyse(find_runs(tmp_path))
    json.dumps(analysis, allow_nan=False)
    assert analysis["verdict"]["parity"] == "holds", analysis["verdict"]
    # One launch per side: the speed verdict is withheld (compare run --repeats), the ratio still shown.
    assert speed_line(analysis).startswith("no speed verdict at np 1: 1 round of launches")
    assert "DDP's speed-up over Horovod 1.2" in speed_line(analysis)
    level = analysis["levels"][1]
    assert level["world_size"] == 2
    assert set(level["comparisons"]) == {"horovod_vs_ddp", "horovod_vs_reference", "ddp_vs_reference"}
    assert set(level["comparisons"]["horovod_vs_ddp"]["end_points"]) == {"final_loss", "eval_loss",
                                                                          "eval_accuracy"}
    assert level["timing"]["ddp"]["scaling_efficiency"] == pytest.approx(1.0, abs=0.1)
    assert level["speed"]["step_time_ratio"] == pytest.approx(1.2, abs=0.1)
    assert len(analysis["summary"]) == 5


def test_analysis_of_divergent_runs_fails_and_explains(tmp_path):
    write_pair(tmp_path, 2, range(2), ddp_losses=lambda losses, seed: lr_drift(losses))
    analysis = analyse(find_runs(tmp_path))
    assert analysis["verdict"]["parity"] == "fails"
    comparison = analysis["levels"][0]["comparisons"]["horovod_vs_ddp"]
    assert comparison["first_divergence"] == {"step": 2, "seed": 0}
    assert any("step 2, so the first update differs" in c for c in cause_lines(comparison["causes"]))


def test_another_learning_rate_is_another_job(tmp_path):
    write_pair(tmp_path, 2, range(2), ddp_losses=lambda losses, seed: lr_drift(losses), ddp_options={"lr": 0.1})
    analysis = analyse(find_runs(tmp_path))
    assert analysis["verdict"]["parity"] == "different jobs"
    comparison = analysis["levels"][0]["comparisons"]["horovod_vs_ddp"]
    assert any("lr 0.05 vs 0.1" in c for c in cause_lines(comparison["causes"]))


def test_one_seed_is_decided_step_wise_alone(tmp_path):
    write_pair(tmp_path, 2, range(1), evals=False)
    analysis = analyse(find_runs(tmp_path))
    assert analysis["verdict"]["parity"] == "holds"
    final = analysis["levels"][0]["comparisons"]["horovod_vs_ddp"]["end_points"]["final_loss"]
    assert final["outcome"] == "equivalent" and final["method"].startswith("step-wise")


def test_failed_run_is_listed_and_excluded(tmp_path):
    write_pair(tmp_path, 2, range(2))
    write_run(tmp_path / "ddp-np2" / "seed-1", framework="ddp", world_size=2, seed=1,
              losses=lr_drift(base_losses(1))[:5], status="failed", truncate_last_line=True,
              extra_meta={"log_tail": "RuntimeError: connection reset"})
    analysis = analyse(find_runs(tmp_path))
    [failure] = analysis["failures"]
    assert (failure["framework"], failure["world_size"], failure["seed"]) == ("ddp", 2, 1)
    assert failure["error"] and failure["log_tail"].startswith("RuntimeError")
    comparison = analysis["levels"][0]["comparisons"]["horovod_vs_ddp"]
    assert [s["seed"] for s in comparison["seeds"]] == [0] and comparison["seeds"][0]["passed"] is True


def test_nothing_to_compare_is_undecided(tmp_path):
    write_run(tmp_path / "only", framework="ddp", world_size=2, seed=0, losses=base_losses(0))
    analysis = analyse(find_runs(tmp_path))
    assert analysis["verdict"]["parity"] == "undecided"
    assert any("no Horovod runs at np 2" in n for n in analysis["notes"])


# ---- report --------------------------------------------------------------------------------------


def test_write_report(tmp_path):
    runs_dir, out = tmp_path / "runs", tmp_path / "report"
    write_pair(runs_dir, 1, range(2))
    write_pair(runs_dir, 2, range(2), reference=True)
    write_run(runs_dir / "ddp-np4" / "seed-0", framework="ddp", world_size=4, seed=0, losses=[1.0, 0.9],
              status="failed", extra_meta={"log_tail": "Traceback ...\nRuntimeError: boom"})
    runs = find_runs(runs_dir)
    analysis = analyse(runs)
    paths = write_report(out, runs, analysis, commands=["python -m compare run --np 1,2"])

    document = json.loads(paths["json"].read_text())
    assert document["schema_version"] == 1
    assert document["analysis"]["verdict"]["parity"] == "holds"
    assert document["commands"] == ["python -m compare run --np 1,2"]
    assert document["environment"]["versions"]["horovod"] == "0.28.1"

    markdown = paths["md"].read_text()
    assert markdown.startswith("# Horovod vs DDP: parity holds")
    assert markdown.splitlines()[2].startswith("**parity holds (Horovod vs DDP at np 1: ")
    assert "![Training loss curves](loss_curves.png)" in markdown
    assert "RuntimeError: boom" in markdown
    assert markdown.index("## Environment") > markdown.index("## Failures") > markdown.index("## Summary")

    page = paths["html"].read_text()
    assert page.count('src="data:image/png;base64,') == 4
    assert "<strong>parity holds (" in page
    # The first screen is the verdict card: its outcome as a badge, the per-step relative difference beside it;
    # the failures stay in view; the details are folded.
    card = page[page.index('<section class="card card-holds">'):page.index("</section>")]
    assert '<span class="badge">parity holds</span>' in card and 'alt="Per-step relative loss difference"' in card
    assert page.index("</section>") < page.index("<h2>Failures</h2>") < page.index("<details>") \
        < page.index("<h2>Parity</h2>") < page.index("</details>")
    assert markdown.count("(rel_diff.png)") == 1 and markdown.index("(rel_diff.png)") < markdown.index("## Summary")

    for name in ("loss_curves", "rel_diff", "step_times", "scaling"):
        png = paths[name]
        assert png.parent == out and png.stat().st_size > 1000
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out.glob("*.tmp"))  # atomic writes leave no temporary files


def test_summary_table_is_aligned(tmp_path):
    write_pair(tmp_path, 2, range(2))
    table = summary_table(analyse(find_runs(tmp_path)))
    lines = table.splitlines()
    assert lines[0].startswith("framework") and len(lines) == 4
    assert lines[2].startswith("Horovod") and lines[3].startswith("DDP")
    assert not any(math.isnan(float(x)) for x in lines[2].split()[2:4])  # step ms, samples/s


def test_the_job_check_names_tuning_variables_but_not_the_interface_choice():
    meta = {"options": {"lr": 0.05}, "seed": 0, "env": {"HOROVOD_GLOO_IFACE": "eth1", "OMP_NUM_THREADS": "1"}}
    other = {**meta, "env": {"GLOO_SOCKET_IFNAME": "eth1", "OMP_NUM_THREADS": "2"}}
    differences = check_job(meta, other).differences
    assert [(d.name, d.kind) for d in differences] == [("env.OMP_NUM_THREADS", "expected")]


def early_jump(losses: np.ndarray, at: int = 9, size: float = 1e-4) -> np.ndarray:
    """What one seed of the digits reference does against DDP at np 2 (measured): 1e-7 apart, then a jump to
    1e-4 at step 9 that stays; its own one-ulp calibration pair jumps the same way at the same step."""
    return losses * (1 + np.where(np.arange(1, losses.size + 1) >= at, size, 0.0))


@pytest.mark.parametrize("calibrated_seeds", [(0, 1), (0,)])
def test_every_seed_is_calibrated_and_an_early_jump_its_pair_shows_is_noise(tmp_path, calibrated_seeds):
    write_pair(tmp_path, 2, range(2), reference=True)
    jumpy = base_losses(1)  # seed 1's reference parts from DDP at step 9, as its calibration pair does
    write_run(tmp_path / "reference-np2" / "seed-1", framework="reference", world_size=1, data_world_size=2,
              seed=1, losses=early_jump(jumpy))
    for seed in calibrated_seeds:
        reference = load_run(tmp_path / "reference-np2" / f"seed-{seed}").losses
        write_run(tmp_path / "calibration-reference-np2" / f"seed-{seed}", framework="reference", world_size=1,
                  data_world_size=2, seed=seed, options={"perturb_init_ulps": 1},
                  losses=early_jump(reference, size=-1e-4) if seed == 1 else reference * (1 + 1e-7))
    analysis = analyse(find_runs(tmp_path))
    comparison = analysis["levels"][0]["comparisons"]["ddp_vs_reference"]
    if calibrated_seeds == (0, 1):  # the jump is inside the widest pair's band from step 1 on
        assert analysis["verdict"]["parity"] == "holds", analysis["verdict"]
        assert comparison["band"]["source"] == "calibrated" and "seeds 0,1" in comparison["band"]["detail"]
    else:  # seed 0's quiet pair alone cannot know seed 1's jump: a divergence at the floor, named at its step
        assert analysis["verdict"]["parity"] == "fails"
        assert comparison["first_divergence"] == {"step": 9, "seed": 1}


@pytest.mark.parametrize(("jump", "named"), [(1e-2, False), (3e-5, True)])
def test_thread_settings_are_named_as_a_cause_of_small_gaps_only(tmp_path, jump, named):
    """horovodrun leaves OMP_NUM_THREADS unset where torchrun sets 1: float noise, which cannot explain a jump."""
    write_pair(tmp_path, 2, range(1), ddp_losses=lambda losses, seed: early_jump(losses, at=10, size=jump))
    for framework, env in (("horovod", {}), ("ddp", {"OMP_NUM_THREADS": "1"})):
        write_run(tmp_path / f"{framework}-np2" / "seed-0", framework=framework, world_size=2, seed=0, env=env,
                  losses=early_jump(base_losses(0), at=10, size=jump) if framework == "ddp" else
                  reduction_noise(base_losses(0), 0))  # not bit-identical before: noise could explain a small gap
    comparison = analyse(find_runs(tmp_path))["levels"][0]["comparisons"]["horovod_vs_ddp"]
    assert comparison["outcome"] == "fails" and comparison["first_divergence"]["step"] == 10
    causes = cause_lines(comparison["causes"])
    assert any("OMP_NUM_THREADS" in c for c in causes) is named, causes
