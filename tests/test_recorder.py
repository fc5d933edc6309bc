"""The recorder in a user's own script (docs/own-job.md): the record it writes, and the two user scripts
(Horovod's idiom, DDP's idiom) through horovodrun and torchrun, judged by `compare check` and `compare
report`, with a real difference found at its step; their TensorBoard and text logs imported and checked."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch
from helpers import ROOT, finished, ok, read_meta, read_steps, run, tool

import recorder
from compare.__main__ import main as compare_main
from compare.analysis.records import load_run

HOROVOD_SCRIPT = str(ROOT / "examples" / "user_scripts" / "train_horovod.py")
DDP_SCRIPT = str(ROOT / "examples" / "user_scripts" / "train_ddp.py")


def record(out: Path, losses: list[float], *, seed: int = 0, gather_every: int = 3) -> None:
    with recorder.Recorder(out, options={"lr": 0.1, "batch_size": 8}, seed=seed, gather_every=gather_every) as rec:
        for step, loss in enumerate(losses, 1):
            rec.step(torch.tensor(loss), lr=0.1, samples=8)
            if step == 4:
                rec.eval(eval_loss=torch.tensor(0.5), eval_accuracy=0.75)


def test_one_process_writes_a_record_that_compare_reads(tmp_path, capsys):
    out = tmp_path / "run"
    record(out, [2.0, 1.5, float("nan"), 1.0, float("-inf")])
    meta = read_meta(out)
    assert meta["status"] == "ok" and meta["framework"] == "single" and meta["world_size"] == 1
    assert meta["steps"] == 5 and meta["samples_per_step"] == 8 and meta["options"] == {"lr": 0.1, "batch_size": 8}
    assert meta["recorded_by"]["tool"] == "recorder" and meta["hosts"] and meta["versions"]["torch"]
    text = (out / "metrics.jsonl").read_text()
    assert "NaN" not in text and not (out / "metrics.jsonl.part").exists()
    lines = [json.loads(line) for line in text.splitlines()]
    steps = [line for line in lines if line["kind"] == "step"]
    losses = [s["loss"] for s in steps]
    assert losses[2] is None and losses[4] is None  # strict JSON: a loss that is not finite is null...
    assert [s.get("nonfinite") for s in steps] == [None, None, {"loss": "nan"}, None, {"loss": "-inf"}]
    assert losses[:2] + losses[3:4] == pytest.approx([2.0, 1.5, 1.0])  # ...and says which, for the judge
    assert math.isinf(load_run(out).loss_by_step[5])
    assert [s["samples"] for s in steps] == [8, 16, 24, 32, 40] and all(s["step_time_s"] >= 0 for s in steps)
    assert [line["kind"] for line in lines].index("eval") == 4  # after step 4, in order
    assert lines[4] == {"kind": "eval", "step": 4, "eval_accuracy": 0.75, "eval_loss": 0.5}
    assert "recorder: wrote" in capsys.readouterr().out


def test_an_exception_marks_the_run_failed_and_keeps_the_metrics_partial(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError), recorder.Recorder(out, seed=1, gather_every=1) as rec:
        rec.step(1.0)
        raise RuntimeError("CUDA out of memory\nmore detail")
    meta = read_meta(out)
    assert meta["status"] == "failed" and meta["error"] == "RuntimeError: CUDA out of memory"
    assert (out / "metrics.jsonl.part").exists() and not (out / "metrics.jsonl").exists()


def test_bad_values_are_refused_with_one_line(tmp_path):
    rec = recorder.Recorder(tmp_path / "run")
    with pytest.raises(ValueError, match="loss must be one number"):
        rec.step(torch.ones(3))
    with pytest.raises(ValueError, match="needs at least one metric"):
        rec.eval()
    rec.close()


def test_compare_check_tells_two_recorded_runs_apart_at_the_step(tmp_path, capsys):
    curve = [2.3 * math.exp(-0.1 * step) for step in range(30)]
    changed = curve[:14] + [value * 1.01 for value in curve[14:]]
    record(tmp_path / "a", curve)
    record(tmp_path / "b", curve)
    record(tmp_path / "c", changed)
    assert compare_main(["check", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert compare_main(["check", str(tmp_path / "a"), str(tmp_path / "c")]) == 1
    assert re.search(r"diverges at step 15\b", capsys.readouterr().out)


# --- the user scripts, through the real launchers -------------------------------------------------


@pytest.fixture(scope="module")
def user_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("user-scripts")
    runs = {name: root / name for name in ("horovod", "ddp", "ddp-lr", "tensorboard", "ddp.log")}
    ok(run([tool("horovodrun"), "-np", "2", "--gloo", sys.executable, HOROVOD_SCRIPT, "--out", str(runs["horovod"]),
            "--tensorboard", str(runs["tensorboard"])]))
    torchrun = [tool("torchrun"), "--standalone", "--nproc-per-node", "2", DDP_SCRIPT]
    result = finished(run([*torchrun, "--out", str(runs["ddp"]), "--print-loss"]), record=runs["ddp"])
    runs["ddp.log"].write_text(result.stdout)
    finished(run([*torchrun, "--out", str(runs["ddp-lr"]), "--lr-at-step", "10:0.2"]), record=runs["ddp-lr"])
    return runs


@pytest.mark.slow
def test_the_recorder_records_each_framework_as_it_ran(user_runs):
    for name, launcher in (("horovod", "horovodrun"), ("ddp", "torchrun")):
        meta = read_meta(user_runs[name])
        assert (meta["framework"], meta["launcher"], meta["world_size"]) == (name, launcher, 2)
        assert meta["status"] == "ok" and meta["samples_per_step"] == 64 and len(meta["hosts"]) == 2
        assert meta["recorded_by"]["script"]["path"].endswith(f"train_{name}.py")
        steps = read_steps(user_runs[name])
        assert [s["step"] for s in steps] == list(range(1, 45)) and steps[-1]["samples"] == 44 * 64


@pytest.mark.slow
def test_check_says_parity_holds_between_the_two_scripts(user_runs, capsys):
    assert compare_main(["check", str(user_runs["horovod"]), str(user_runs["ddp"])]) == 0
    assert "parity holds" in capsys.readouterr().out


@pytest.mark.slow
def test_check_fails_at_the_step_after_a_real_difference(user_runs, capsys):
    # The learning rate changes after step 10: step 11's update differs, so step 12's loss is the first.
    assert compare_main(["check", str(user_runs["horovod"]), str(user_runs["ddp-lr"])]) == 1
    out = capsys.readouterr().out
    assert re.search(r"diverges at step 12\b", out) and "parity fails" in out


@pytest.mark.slow
def test_report_reads_the_recorded_runs(user_runs, tmp_path, capsys):
    tree = tmp_path / "tree"
    for name in ("horovod", "ddp"):
        (tree / name).mkdir(parents=True)
        for file in ("run.json", "metrics.jsonl"):
            (tree / name / file).write_bytes((user_runs[name] / file).read_bytes())
    assert compare_main(["report", str(tree)]) == 0
    assert re.search(r"parity:? holds", capsys.readouterr().out) and (tree / "report.md").exists()


@pytest.mark.slow
def test_the_scripts_own_logs_imported_are_checked_against_the_other_framework(user_runs, tmp_path, capsys):
    tensorboard, text = tmp_path / "tb-horovod", tmp_path / "text-ddp"
    assert compare_main(["import", "tensorboard", str(user_runs["tensorboard"]), "--out", str(tensorboard),
                         "--framework", "horovod", "--world-size", "2", "--option", "lr=0.05"]) == 0
    assert compare_main(["import", "text", str(user_runs["ddp.log"]), "--out", str(text), "--framework", "ddp",
                         "--world-size", "2", "--global-batch", "64"]) == 0
    assert len(read_steps(tensorboard)) == len(read_steps(text)) == 44
    capsys.readouterr()
    assert compare_main(["check", str(tensorboard), str(user_runs["ddp"])]) == 0  # historical Horovod vs new DDP
    assert compare_main(["check", str(user_runs["horovod"]), str(text)]) == 0
    assert compare_main(["check", str(tensorboard), str(user_runs["ddp-lr"])]) == 1
    assert re.search(r"diverges at step 12\b", capsys.readouterr().out)
