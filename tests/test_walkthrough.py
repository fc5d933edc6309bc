"""What a new user walking the README and docs ran into , held through the real launchers."""

from __future__ import annotations

import json
import sys
import time

import pytest
from fixtures import write_run
from helpers import horovodrun, ok, read_meta, run, tool, torchrun

from workload.errors import UsageError

FAULT = ["--workload", "mlp", "--dataset-size", "512", "--batch-size", "16", "--steps", "6", "--seed", "1",
         "--fail-at-step", "3", "--fail-rank", "1", "--fail-mode", "exit"]


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["torchrun", "horovodrun"])
def test_a_new_run_does_not_inherit_an_old_runs_fault_marker(tmp_path, launch):
    launch_job = (lambda *a: torchrun(2, *a)) if launch == "torchrun" else (lambda *a: horovodrun(2, "gloo", *a))
    first = launch_job(*FAULT, "--out", str(tmp_path))
    assert first.returncode != 0 and (tmp_path / ".fault-injected-rank-1").exists()
    # The same command again in the same --out: a new job, so the fault fires again.
    second = launch_job(*FAULT, "--out", str(tmp_path))
    assert second.returncode != 0, "the old marker silently disabled --fail-at-step"
    assert "injecting fault: exit on rank 1 after step 3" in second.stdout + second.stderr
    # A clean run in the same --out leaves none of the old run's error files beside its ok record.
    ok(launch_job(*FAULT[:-6], "--out", str(tmp_path)))
    assert read_meta(tmp_path)["status"] == "ok"
    assert not list(tmp_path.glob("error-rank-*.txt")) and not list(tmp_path.glob(".fault-injected-*"))


@pytest.mark.slow
def test_a_restart_of_the_same_job_still_sees_its_marker(tmp_path):
    # torchrun --max-restarts: the restarted group is the same job; the fault fires once and the job recovers.
    result = ok(run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "-m",
                     "native_impl", *FAULT, "--out", str(tmp_path)]))
    assert (result.stdout + result.stderr).count("injecting fault") == 1
    assert read_meta(tmp_path)["status"] == "ok"


# ---- compare run: the reference and one-sided features ---------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--zero"], "--zero has no Horovod equivalent"),
    (["--powersgd-rank", "2"], "--powersgd-rank has no Horovod equivalent"),
    (["--adasum"], "--adasum has no DDP equivalent"),
    (["--elastic", "--checkpoint-every", "4"], "--elastic has no DDP equivalent"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_compare_run_rejects_one_sided_features_up_front(tmp_path, args, message):
    result = run([sys.executable, "-m", "compare", "run", *args, "--out", str(tmp_path / "cmp")], timeout=120)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert message in result.stderr and "compare matrix" in result.stderr
    assert not (tmp_path / "cmp").exists()  # nothing launched


def test_one_sided_feature_is_fine_on_its_own_side():
    from compare.commands.cli import build_parser
    from compare.commands.run import plan

    ns = build_parser().parse_args(["run", "--zero", "--frameworks", "ddp", "--np", "2", "--seeds", "0"])
    comparison = plan(ns)
    assert comparison.options.zero and {launch.framework for launch in comparison.launches} <= {"ddp", "reference"}


def test_uneven_inputs_plan_skips_the_reference_and_says_why():
    from compare.commands.cli import build_parser
    from compare.commands.run import plan

    ns = build_parser().parse_args(["run", "--uneven-inputs", "--np", "2", "--seeds", "0"])
    comparison = plan(ns)
    assert "reference" not in {launch.framework for launch in comparison.launches}
    assert "--uneven-inputs needs real ranks" in comparison.reference_skipped
    with pytest.raises(UsageError, match="--reference on: --uneven-inputs"):
        plan(build_parser().parse_args(["run", "--uneven-inputs", "--reference", "on", "--np", "2"]))


@pytest.mark.slow
def test_compare_run_uneven_inputs_and_the_reports_environment(tmp_path, horovod_built):
    out = tmp_path / "cmp"
    result = run([sys.executable, "-m", "compare", "run", "--np", "2", "--seeds", "0", "--uneven-inputs",
                  "--dataset-size", "512", "--batch-size", "16", "--epochs", "2", "--repeats", "0",
                  "--horovod-controller", "gloo", "--out", str(out)], timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "reference: skipped: --uneven-inputs needs real ranks" in result.stdout
    first = (out / "report.md").read_text()
    # compare report rebuilds the same environment: commands, network, wall time and the skipped reference.
    rebuilt = run([sys.executable, "-m", "compare", "report", str(out)], timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr[-3000:]
    for report in (first, (out / "report.md").read_text()):
        environment = report[report.index("## Environment"):]
        assert "| component | Horovod | DDP |" in environment
        rows = {line.split(" | ")[0].strip("| "): line for line in environment.splitlines() if line.startswith("| ")}
        assert "| horovod | 0.28.1 | — |" in rows["horovod"] and "Open MPI" in rows["mpi"]
        assert rows["launcher"] == "| launcher | horovodrun | torchrun |"
        assert rows["torch"].count("2.") >= 2  # both sides' torch
        assert '{"hostname"' not in environment and "| hostname |" in environment  # a table, not raw JSON
        assert "- network: " in environment and "- comparison wall s: " in environment
        assert "- reference: skipped: --uneven-inputs needs real ranks" in environment
        assert "horovodrun -np 2" in environment and "torchrun --standalone" in environment  # the commands
    document = json.loads((out / "report.json").read_text())
    assert document["environment"]["sides"]["ddp"]["launcher"] == "torchrun"
    assert document["environment"]["versions"]["horovod"] == "0.28.1"


# ---- pure pieces: progress, the matrix's judgement, faults, bench ---------------------------------------------

def test_progress_after_a_failed_launch_says_no_time_left(capsys):
    from compare.render.progress import ProgressReporter

    reporter = ProgressReporter(120, live=False)
    reporter.begin("horovod np1", 1, 3, planned_steps=40)
    reporter.end("horovod np1: ok", 40, ok=True)
    reporter.begin("ddp np1", 2, 3, planned_steps=40)
    reporter.end("ddp np1: exit 1", 0, ok=False)
    middle = capsys.readouterr().err.splitlines()[-1]
    assert "40/120 steps (40 not run after failures), about" in middle  # the estimate counts only what is left
    reporter.begin("horovod np2", 3, 3, planned_steps=40)
    reporter.end("horovod np2: exit 1", 0, ok=False)
    last = capsys.readouterr().err.splitlines()[-1]
    assert "40/120 steps (80 not run after failures)]" in last and "left" not in last


def test_matrix_judges_evaluations_and_every_step_past_the_join(tmp_path):
    from compare.analysis.matrix import judge_feature
    from compare.analysis.records import load_run
    from compare.commands.matrix import FEATURES
    from compare.render.matrix import feature_row

    baseline = FEATURES[0]
    uneven = next(f for f in FEATURES if f.name == "uneven inputs")
    losses = [1.0 - 0.01 * i for i in range(40)]
    late = [*losses[:30], *(x * 1.01 for x in losses[30:])]  # differs only after step 30, as past a join
    same_eval, other_eval = [{"eval_loss": 0.95, "eval_accuracy": 0.65}], [{"eval_loss": 0.96, "eval_accuracy": 0.65}]

    def pair(name, b_losses, b_evals):
        a = write_run(tmp_path / name / "a", framework="horovod", world_size=2, seed=0, losses=losses, evals=same_eval)
        b = write_run(tmp_path / name / "b", framework="ddp", world_size=2, seed=0, losses=b_losses, evals=b_evals)
        return load_run(a), load_run(b)

    def row(feature, name, b_losses, b_evals):
        return feature_row(judge_feature(feature, *pair(name, b_losses, b_evals), warmup=5, rtol=1e-5))

    assert row(baseline, "same", losses, same_eval).verdict == "parity holds"
    failing = row(baseline, "eval", losses, other_eval)
    assert failing.verdict == "parity fails" and "the evaluation at step 40 differs" in failing.detail
    assert row(uneven, "late", late, same_eval).verdict == "parity fails"


def test_faults_expected_failure_is_not_a_failure():
    from compare.analysis.faults import EXPECTED_NOT_TO_RECOVER, FaultResult

    assert ("horovod", "hang") in EXPECTED_NOT_TO_RECOVER
    expected = FaultResult("horovod", "hang", recovered=False, launch="timed out",
                           expected_failure=EXPECTED_NOT_TO_RECOVER[("horovod", "hang")])
    assert expected.as_expected
    assert not FaultResult("ddp", "hang", recovered=False, launch="timed out").as_expected


def test_bench_summary_is_short_and_says_what_was_chosen():
    from compare.render.bench import sweep_choice, terminal_summary

    assert sweep_choice([]).startswith("the defaults stay: no configuration was clearly faster")
    assert sweep_choice(["bucket_cap_mb=1"]).startswith("chosen `bucket_cap_mb=1`, clearly faster than the defaults")
    lines = terminal_summary({"sweeps": {"ddp": {"chosen": []}}, "tuned_effect": [], "failures": [], "wall_s": 12.0})
    assert lines == ["sweep ddp: the defaults stay", "wall time: 12 s"]


def test_faults_says_that_it_waits(monkeypatch, tmp_path, capsys):
    import compare.commands.faults as faults

    monkeypatch.setattr(faults, "HEARTBEAT_S", 0.01)
    beat = faults.heartbeat(tmp_path, 120)
    time.sleep(0.03)
    beat()
    assert "waiting: 0 s of at most 120 s, 0 steps recorded" in capsys.readouterr().err


def test_bench_without_a_sweep_sets_an_earlier_tuned_file_aside(tmp_path):
    out = tmp_path / "bench"
    out.mkdir()
    (out / "tuned.json").write_text('{"horovod": [], "ddp": [], "env": {}}\n')
    result = run([sys.executable, "-m", "compare", "bench", "--skip", "allreduce,sweep,overhead,costs,e2e",
                  "--out", str(out)], timeout=120)
    assert result.returncode == 0, result.stderr
    assert not (out / "tuned.json").exists() and (out / "tuned.stale.json").exists()
    assert "tuned.stale.json" in result.stderr
    assert len(result.stdout.splitlines()) <= 5 and "bench.md" in result.stdout  # a summary, not the Markdown
