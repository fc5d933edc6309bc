"""python -m compare import (docs/own-job.md): TensorBoard event files written by SummaryWriter here, CSV,
JSON lines and text logs into run records that `compare check` judges; bad input in one line."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from helpers import read_meta, read_steps

import recorder
from compare.__main__ import main as compare_main
from compare.importers import Fields, LogFormatError, build_record, read_csv, read_jsonl, read_text

CURVE = [2.3 * math.exp(-0.08 * step) + 0.01 * math.sin(step) for step in range(40)]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """The other side: the same curve through the recorder (one process), as a user's new run would be."""
    out = tmp_path_factory.mktemp("recorded") / "run"
    with recorder.Recorder(out, options={"lr": 0.05}, seed=0) as rec:
        for loss in CURVE:
            rec.step(torch.tensor(loss, dtype=torch.float64), lr=0.05, samples=32)
    return out


def check(a: Path, b: Path) -> int:
    return compare_main(["check", str(a), str(b)])


def test_a_tensorboard_log_from_summary_writer_is_imported_and_checked(tmp_path, recorded, capsys):
    from torch.utils.tensorboard import SummaryWriter

    logs = tmp_path / "tb"
    writer = SummaryWriter(str(logs))
    for step, loss in enumerate(CURVE):  # counted from 0, as most scripts do
        writer.add_scalar("Loss/train", loss, step)
        writer.add_scalar("lr", 0.05, step)
        if step % 10 == 9:
            writer.add_scalar("Loss/val", loss + 0.1, step)
    writer.close()
    out = tmp_path / "imported"
    assert compare_main(["import", "tensorboard", str(logs), "--out", str(out), "--loss-field", "Loss/train",
                         "--lr-field", "lr", "--eval-loss-field", "Loss/val", "--framework", "horovod",
                         "--world-size", "1", "--seed", "0", "--option", "lr=0.05", "--option", "note=old run"]) == 0
    meta = read_meta(out)
    assert meta["framework"] == "horovod" and meta["world_size"] == 1 and meta["options"] == {"lr": 0.05,
                                                                                               "note": "old run"}
    imported = meta["imported"]
    assert imported["format"] == "tensorboard" and imported["step_offset"] == 1 and imported["steps_logged_every"] == 1
    assert any(item.startswith("step_time_s") for item in imported["unknown"])
    assert any(item.startswith("samples_per_step") for item in imported["unknown"])
    steps = read_steps(out)
    assert [s["step"] for s in steps] == list(range(1, 41)) and steps[0]["lr"] == pytest.approx(0.05)
    assert all(s["step_time_s"] is None for s in steps)
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
    assert [e["step"] for e in evals] == [10, 20, 30, 40]
    assert "NaN" not in (out / "metrics.jsonl").read_text()
    assert check(out, recorded) == 0  # float32 in the event file: within 1e-5
    assert "parity holds" in capsys.readouterr().out
    stated_otherwise = tmp_path / "np2"
    assert compare_main(["import", "tensorboard", str(logs), "--out", str(stated_otherwise), "--loss-field",
                         "Loss/train", "--world-size", "2"]) == 0
    assert check(stated_otherwise, recorded) == 5  # the world size makes another job: said, not compared


def test_a_csv_log_is_imported_and_a_changed_one_fails_at_its_step(tmp_path, recorded, capsys):
    rows = ["epoch,step,train_loss,val_loss"]
    for step, loss in enumerate(CURVE, 1):
        rows.append(f"0,{step},{loss!r},")
        if step % 20 == 0:
            rows.append(f"0,{step},,{loss + 0.2}")  # an evaluation row, as Lightning's CSVLogger writes
    good, changed = tmp_path / "metrics.csv", tmp_path / "changed.csv"
    good.write_text("\n".join(rows) + "\n")
    changed.write_text("\n".join(rows).replace(f"0,7,{CURVE[6]!r},", f"0,7,{CURVE[6] * 1.001!r},") + "\n")
    for source, out in ((good, tmp_path / "good"), (changed, tmp_path / "changed")):
        assert compare_main(["import", "csv", str(source), "--out", str(out), "--loss-field", "train_loss",
                             "--eval-loss-field", "val_loss", "--global-batch", "32"]) == 0
    steps = read_steps(tmp_path / "good")
    assert len(steps) == 40 and steps[-1]["samples"] == 40 * 32 and read_meta(tmp_path / "good")["steps"] == 40
    capsys.readouterr()
    assert check(tmp_path / "good", recorded) == 0
    assert check(tmp_path / "changed", recorded) == 1
    assert re.search(r"\bstep 7\b", capsys.readouterr().out)


def test_a_text_log_is_imported_with_the_default_pattern_and_with_a_regex(tmp_path, recorded):
    plain = tmp_path / "train.log"
    plain.write_text("starting\n" + "".join(f"Epoch 0 | Step: {s}, Loss: {loss!r} | 3.1 it/s\n"
                                            for s, loss in enumerate(CURVE, 1)) + "done\n")
    custom = tmp_path / "custom.log"
    custom.write_text("".join(f"it {s}: loss={loss!r} lr=0.05\n" for s, loss in enumerate(CURVE, 1)))
    assert compare_main(["import", "text", str(plain), "--out", str(tmp_path / "a")]) == 0
    assert compare_main(["import", "text", str(custom), "--out", str(tmp_path / "b"),
                         "--regex", r"it (?P<step>\d+): loss=(?P<loss>\S+) lr=(?P<lr>\S+)"]) == 0
    assert [s["loss"] for s in read_steps(tmp_path / "a")] == pytest.approx(CURVE)
    assert read_steps(tmp_path / "b")[0]["lr"] == 0.05
    assert check(tmp_path / "a", recorded) == 0 and check(tmp_path / "b", recorded) == 0


def test_jsonl_with_nested_keys_and_a_restarted_job(tmp_path):
    lines = [{"trainer": {"step": s, "loss": loss}} for s, loss in enumerate(CURVE[:10], 1)]
    lines += [{"trainer": {"step": 5, "loss": 9.0}}]  # a restart logged step 5 again: the last one counts
    lines += [{"event": "checkpoint"}]
    text = "\n".join(json.dumps(line) for line in lines)
    series = read_jsonl(text, Path("log.jsonl"), Fields(step="trainer.step", loss="trainer.loss"))
    assert sorted(series.steps) == list(range(1, 11)) and series.steps[5]["loss"] == 9.0 and len(series.repeated) == 1
    meta, metrics = build_record(series, kind="jsonl", source=Path("log.jsonl"), digest="x", framework="unknown",
                                 world_size=None, seed=3, options={}, global_batch=None)
    assert meta["world_size"] == 1 and meta["seed"] == 3 and meta["imported"]["steps_logged_twice"] == 1
    assert any(item.startswith("world_size") for item in meta["imported"]["unknown"])
    assert [m["step"] for m in metrics] == list(range(1, 11))


def test_a_log_every_ten_steps_keeps_its_numbers_and_says_so(tmp_path, capsys):
    source = tmp_path / "sparse.csv"
    source.write_text("step,loss\n" + "".join(f"{s},{1 / s}\n" for s in range(10, 110, 10)))
    assert compare_main(["import", "csv", str(source), "--out", str(tmp_path / "out")]) == 0
    assert [s["step"] for s in read_steps(tmp_path / "out")] == list(range(10, 110, 10))
    assert read_meta(tmp_path / "out")["imported"]["steps_logged_every"] == 10
    assert read_meta(tmp_path / "out")["steps"] == 100  # the run's length: 10 losses of 100 steps
    assert "a loss every 10 steps" in capsys.readouterr().err


@pytest.mark.parametrize(("kind", "content", "extra", "message"), [
    ("csv", "epoch,loss\n0,1.0\n", [], "no column 'step' for the step (--step-field); columns: epoch, loss"),
    ("csv", "step,acc\n1,0.5\n", [], "no column named like a loss"),
    ("csv", "step,loss\n1,abc\n", [], "log:2: loss 'abc' is not a number"),
    ("csv", "step,loss\n1.5,1.0\n", [], "step '1.5' is not a whole number"),
    ("jsonl", '{"step": 1, "loss": 1}\n{oops\n', [], "log:2: not valid JSON"),
    ("text", "step 1 loss 1.0\n", ["--regex", "(?P<step>\\d+)"], "needs the named groups"),
    ("text", "step 1 loss 1.0\n", ["--regex", "(?P<step>"], "not a valid regular expression"),
    ("text", "nothing here\n", [], "no training loss found (no line matches"),
    ("csv", "step,loss\n1,1\n", ["--option", "novalue"], "expected key=value"),
    ("tensorboard", "not an event file", [], "no scalar tag named like a loss"),
])
def test_bad_logs_are_one_line_and_exit_2(kind, content, extra, message, tmp_path, capsys):
    source = tmp_path / "log"
    source.write_text(content)
    out = tmp_path / "out"
    assert compare_main(["import", kind, str(source), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_a_missing_source_is_exit_2(tmp_path, capsys):
    assert compare_main(["import", "csv", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "out")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_pure_readers_agree_on_one_curve():
    fields = Fields(loss="loss")
    csv_series = read_csv("step,loss\n1,0.5\n2,0.25\n", Path("a.csv"), fields)
    text_series = read_text("step 1 loss 0.5\nstep 2 loss 0.25\n", Path("a.log"), Fields())
    assert csv_series.steps == text_series.steps == {1: {"loss": 0.5}, 2: {"loss": 0.25}}
    with pytest.raises(LogFormatError):
        read_csv("step,loss\n1,x\n", Path("a.csv"), fields)


def test_report_takes_an_imported_baseline_and_says_so(tmp_path, recorded):
    tree = tmp_path / "tree"
    source = tmp_path / "old.csv"
    source.write_text("step,loss\n" + "".join(f"{s},{loss!r}\n" for s, loss in enumerate(CURVE, 1)))
    assert compare_main(["import", "csv", str(source), "--out", str(tree / "horovod"), "--framework", "horovod",
                         "--world-size", "1", "--option", "lr=0.05"]) == 0
    (tree / "ddp").mkdir()
    meta = {**read_meta(recorded), "framework": "ddp"}
    (tree / "ddp" / "run.json").write_text(json.dumps(meta))
    (tree / "ddp" / "metrics.jsonl").write_bytes((recorded / "metrics.jsonl").read_bytes())
    assert compare_main(["report", str(tree)]) == 0
    report = (tree / "report.md").read_text()
    assert f"**Imported:** Horovod np 1 seed 0 from `{source}` (csv, sha256 " in report
    assert "**Speed:** no speed verdict: Horovod np 1 is imported" in report  # its times are not this machine's
    analysis = json.loads((tree / "report.json").read_text())["analysis"]
    assert [(r["framework"], r["format"]) for r in analysis["imported"]] == [("horovod", "csv")]


def test_the_example_logs_import_as_documented_and_agree(tmp_path, capsys):
    logs = Path(__file__).resolve().parents[1] / "examples" / "logs"
    common = ["--framework", "ddp", "--world-size", "2"]
    assert compare_main(["import", "csv", str(logs / "ddp_metrics.csv"), "--out", str(tmp_path / "csv"), *common,
                         "--loss-field", "train_loss", "--eval-loss-field", "val_loss",
                         "--eval-accuracy-field", "val_acc"]) == 0
    assert compare_main(["import", "jsonl", str(logs / "ddp_log.jsonl"), "--out", str(tmp_path / "jsonl"), *common,
                         "--step-field", "trainer.global_step", "--loss-field", "trainer.loss",
                         "--lr-field", "trainer.lr"]) == 0
    assert compare_main(["import", "text", str(logs / "ddp_train.log"), "--out", str(tmp_path / "text"), *common,
                         "--regex", r"it (?P<step>\d+): loss=(?P<loss>[\d.]+) lr=(?P<lr>[\d.]+)"]) == 0
    assert read_meta(tmp_path / "csv")["imported"]["step_offset"] == 1  # the CSV counts from 0
    assert len(read_steps(tmp_path / "csv")) == len(read_steps(tmp_path / "text")) == 44
    assert check(tmp_path / "csv", tmp_path / "jsonl") == 0 and check(tmp_path / "jsonl", tmp_path / "text") == 0
