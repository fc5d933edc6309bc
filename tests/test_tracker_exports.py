"""Experiment trackers' and large-model trainers' logs imported as a user types them: a Weights & Biases
"Download CSV" export (`compare import csv`), an MLflow file store captured with mlflow itself (`compare
import mlflow RUN_DIR`), and Megatron-LM / fairseq key-value lines (`compare import text`); each against its
sample in examples/logs/corpus and the values the capturing script dumped (corpus README)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, read_meta, read_steps

from compare.__main__ import main as compare_main
from compare.loss_lines import read_loss_log

CORPUS = ROOT / "examples" / "logs" / "corpus"


def expected(name: str) -> dict:
    return json.loads((CORPUS / f"{name}.expected.json").read_text())


def truth(name: str) -> dict[int, float]:
    return {int(k): float(v) for k, v in expected(name)["steps"].items()}


def mlflow_run() -> Path:
    return CORPUS / expected("mlflow_store")["run"]


def imported(capsys, kind: str, source: Path, out: Path, *flags: str) -> str:
    capsys.readouterr()
    code = compare_main(["import", kind, str(source), "--out", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 0, err
    return err


def losses(out: Path) -> dict[int, float]:
    return {s["step"]: s["loss"] for s in read_steps(out)}


def test_the_mlflow_file_store_imports_from_the_command_line(tmp_path):
    """`python -m compare import mlflow mlruns/<experiment>/<run>` in a process of its own."""
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "compare", "import", "mlflow", str(mlflow_run()), "--out", str(out),
                             *expected("mlflow_store")["flags"]], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert losses(out) == truth("mlflow_store")
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
    assert {e["step"]: (e["eval_loss"], e["eval_accuracy"]) for e in evals} == {
        int(k): (v["eval_loss"], v["eval_accuracy"]) for k, v in expected("mlflow_store")["evals"].items()}
    meta = read_meta(out)
    assert meta["imported"]["fields"]["format"] == "mlflow" and meta["start_time"] is not None
    assert all(s["lr"] == 0.5 for s in read_steps(out))


def test_the_mlflow_metrics_directory_does_too_and_anything_else_is_one_line(tmp_path, capsys):
    imported(capsys, "mlflow", mlflow_run() / "metrics", tmp_path / "run")
    assert losses(tmp_path / "run") == truth("mlflow_store")
    for source in (CORPUS / "mlruns", CORPUS / "wandb_export.csv"):
        assert compare_main(["import", "mlflow", str(source), "--out", str(tmp_path / "no")]) == 2
        err = capsys.readouterr().err
        assert "not an MLflow run directory" in err and err.count("\n") == 1
    assert not (tmp_path / "no").exists()


def test_a_resumed_mlflow_run_is_read_as_one(tmp_path, capsys):
    """mlflow.start_run(run_id=...) after a restart appends to the metric files: steps 6-10 logged again."""
    run = tmp_path / "mlruns" / "1" / "abc"
    (run / "metrics").mkdir(parents=True)
    points = [(s, 1.0 / s) for s in range(1, 11)] + [(s, 2.0 / s) for s in range(6, 13)]
    (run / "metrics" / "loss").write_text("".join(f"{1700000000000 + i} {v} {s}\n" for i, (s, v) in
                                                  enumerate(points)))
    err = imported(capsys, "mlflow", run, tmp_path / "last")
    assert "the run resumed at step 6" in err and "steps 6-10 were logged again" in err
    assert losses(tmp_path / "last") == {s: (1.0 if s < 6 else 2.0) / s for s in range(1, 13)}
    [restart] = read_meta(tmp_path / "last")["imported"]["restarts"]
    assert (restart["step"], restart["steps_printed_again"], restart["line"].endswith("loss:11")) == (6, 5, True)
    imported(capsys, "mlflow", run, tmp_path / "first", "--on-restart", "keep-first")
    assert losses(tmp_path / "first") == {s: (1.0 if s <= 10 else 2.0) / s for s in range(1, 13)}


def test_the_wandb_csv_export_imports_and_matches_the_mlflow_record(tmp_path, capsys):
    """The two trackers logged the same run: the two records hold parity (steps from 0 renumbered from 1)."""
    imported(capsys, "csv", CORPUS / "wandb_export.csv", tmp_path / "wandb")
    assert losses(tmp_path / "wandb") == truth("wandb_export")
    meta = read_meta(tmp_path / "wandb")["imported"]
    assert meta["fields"] == {"format": "wandb-csv", "step": "Step", "loss": "tiny-sgd-1 - train/loss"}
    assert meta["step_offset"] == 1
    imported(capsys, "mlflow", mlflow_run(), tmp_path / "mlflow")
    assert compare_main(["check", str(tmp_path / "wandb"), str(tmp_path / "mlflow")]) == 0
    assert "parity holds" in capsys.readouterr().out


def test_a_wandb_export_of_two_runs_needs_the_loss_named(tmp_path, capsys):
    rows = (CORPUS / "wandb_export.csv").read_text().splitlines()
    two = [f'{rows[0]},"other-run-2 - train/loss","other-run-2 - train/loss__MIN","other-run-2 - train/loss__MAX"']
    two += [f'{row},"9.5","9.5","9.5"' for row in rows[1:]]
    source = tmp_path / "two.csv"
    source.write_text("\n".join(two) + "\n")
    assert compare_main(["import", "csv", str(source), "--out", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert "2 loss column(s)" in err and "--loss-field" in err and err.count("\n") == 1
    imported(capsys, "csv", source, tmp_path / "other", "--loss-field", "other-run-2 - train/loss")
    assert set(losses(tmp_path / "other").values()) == {9.5}


def test_rows_where_the_panel_merged_points_are_named(tmp_path, capsys):
    rows = (CORPUS / "wandb_export.csv").read_text().splitlines()
    rows[5] = '"4","1.0","0.5","1.5"'  # a row that stands for several logged points
    source = tmp_path / "sampled.csv"
    source.write_text("\n".join(rows) + "\n")
    err = imported(capsys, "csv", source, tmp_path / "run")
    assert "1 row(s) of the W&B export merge several logged points" in err and "step 4" in err


@pytest.mark.parametrize(("line", "step", "loss", "lr"), [
    ("iteration 100/1000 | lr 1.0E-04 | loss scale 65536.0 | lm loss 2.31E+00 |", 100, 2.31, 1e-4),
    (" iteration      100/    1000 | consumed samples: 3200 | learning rate: 1.000000E-04 | global batch size:"
     "    32 | lm loss: 2.310000E+00 | loss scale: 65536.0 | grad norm: 0.512 |", 100, 2.31, 1e-4),
    ("2026-12-04 10:00:00 | INFO | train_inner | epoch 001:     10 / 20 loss=2.31, nll_loss=3.3, ppl=9.9, "
     "num_updates=100, lr=0.0001, gnorm=0.5, loss_scale=128, wall=1", 100, 2.31, 1e-4),
    ("| epoch 001 | step 100 | loss_scale 128.0 | loss 2.31 | lr 0.0001 |", 100, 2.31, 1e-4),
])
def test_key_value_lines_read_the_loss_never_the_loss_scale(line, step, loss, lr):
    log = read_loss_log(line + "\n")
    assert log.format == "key-value" and log.steps == {step: {"loss": loss, "lr": pytest.approx(lr)}}


def test_fairseqs_epoch_mean_is_no_step_and_its_validation_is_an_evaluation():
    log = read_loss_log((CORPUS / "fairseq.log").read_text())
    assert {s: v["loss"] for s, v in log.steps.items()} == truth("fairseq")  # 0.790 at 20 is the epoch's mean
    assert log.evals == {int(k): v for k, v in expected("fairseq")["evals"].items()}
    assert math.isclose(log.steps[20]["loss"], 0.523)
