"""Steps that one side lacks inside the common range are said out loud: `compare check` and the report name
them ("steps 40-60 missing on the DDP side"), and a side that saw too little of the run is undecided, never
"holds". Sparse logging (a loss every 10 steps on one side) is not a gap."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures import write_run
from test_analysis import base_losses, reduction_noise

from compare.__main__ import main as compare_main
from compare.analysis.parity import missing_ranges, stepwise
from compare.render.verdicts import evaluations_text, step_table


def pair(tmp_path: Path, drop=lambda step: False, steps: int = 80) -> tuple[Path, Path]:
    losses = base_losses(0, steps)
    a = write_run(tmp_path / "horovod", framework="horovod", world_size=2, seed=0, losses=losses)
    b = write_run(tmp_path / "ddp", framework="ddp", world_size=2, seed=0, losses=reduction_noise(losses, 0))
    metrics = b / "metrics.jsonl"
    kept = [line for line in metrics.read_text().splitlines() if not drop(json.loads(line)["step"])]
    metrics.write_text("\n".join(kept) + "\n")
    return a, b


def test_missing_ranges_follow_each_sides_own_interval():
    assert missing_ranges([*range(1, 40), *range(61, 81)], list(range(1, 81))) == [(40, 60)]
    assert missing_ranges(list(range(10, 81, 10)), list(range(1, 81))) == []  # logs every 10: no gap
    assert missing_ranges([10, 20, 30, 70, 80], list(range(10, 81, 10))) == [(40, 60)]


def test_a_record_lacking_steps_40_to_60_is_named_in_check(tmp_path, capsys):
    a, b = pair(tmp_path, drop=lambda step: 40 <= step <= 60)
    assert compare_main(["check", str(a), str(b)]) == 0  # 59 of 80 steps seen on both sides: enough to hold
    out = capsys.readouterr().out
    assert f"steps 40-60 missing on the {b} side" in out
    verdict = next(line for line in out.splitlines() if line.startswith("parity "))
    assert verdict.startswith("parity holds") and "40-60 missing" in verdict
    # the verdict first, the band's definition after it (it opened the output and hid the verdict)
    lines = out.splitlines()
    assert lines.index(verdict) < next(i for i, line in enumerate(lines) if line.startswith("band: "))


def test_too_little_in_common_is_undecided_not_holds(tmp_path, capsys):
    a, b = pair(tmp_path, drop=lambda step: 10 <= step <= 70)
    assert compare_main(["check", str(a), str(b)]) == 4
    out = capsys.readouterr().out
    assert "steps 10-70 missing" in out and "so the seed is undecided" in out
    assert next(line for line in out.splitlines() if line.startswith("parity ")).startswith("parity undecided")


def test_sparse_logging_on_one_side_is_no_gap(tmp_path, capsys):
    a, b = pair(tmp_path, drop=lambda step: step % 10 != 0)
    assert compare_main(["check", str(a), str(b)]) == 0
    assert "missing" not in capsys.readouterr().out


def test_the_reports_step_table_names_the_gap():
    losses = list(base_losses(0, 80))
    result = stepwise({s: v for s, v in enumerate(losses, 1)},
                      {s: v for s, v in enumerate(losses, 1) if not 40 <= s <= 60})
    assert result.missing_b == [(40, 60)] and not result.missing_a and result.passed
    comparison = {"a": "horovod", "b": "ddp", "seeds": [{"seed": 0, "losses": result.to_dict(), "evals": [],
                                                         "passed": True}]}
    assert "steps 40-60 missing on the DDP side" in step_table(comparison).rows[0][1]


def test_evaluations_on_one_side_only_are_named(tmp_path, capsys):
    losses = base_losses(0, 40)
    evals = [{"step": step, "eval_loss": 1.0, "eval_accuracy": 0.5, "eval_samples": 100} for step in (10, 20, 30)]
    a = write_run(tmp_path / "horovod", framework="horovod", world_size=2, seed=0, losses=losses, evals=evals)
    b = write_run(tmp_path / "ddp", framework="ddp", world_size=2, seed=0, losses=losses, evals=evals[:1])
    assert compare_main(["check", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert f"1 evaluation, 2 metrics, agrees; evaluation(s) at step 20, 30 on the {a} side only" in out


def test_evaluations_are_counted_as_events_not_as_metric_values():
    """One evaluation of two metrics is one evaluation (it said "2/2 evaluations agree"); a metric that differs
    names its step."""
    def evaluation(step, metric, passed=True):
        return {"step": step, "metric": metric, "a": 1.0, "b": 1.0, "gap": 0.0, "tolerance": 1e-3, "passed": passed}

    one = [evaluation(10, "eval_loss"), evaluation(10, "eval_accuracy")]
    assert evaluations_text(one) == "1 evaluation, 2 metrics, agrees"
    three = [evaluation(step, "eval_loss", passed=step != 30) for step in (10, 20, 30)]
    assert evaluations_text(three) == "3 evaluations, 1 metric, 1 differs (step 30)"
    comparison = {"a": "horovod", "b": "ddp", "seeds": [{"seed": 0, "losses": stepwise(
        dict(enumerate(base_losses(0, 40), 1)), dict(enumerate(base_losses(0, 40), 1))).to_dict(), "evals": one,
        "passed": True}]}
    assert step_table(comparison).rows[0][7] == "1 evaluation, 2 metrics, agrees"
