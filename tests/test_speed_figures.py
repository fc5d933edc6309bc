"""One set of figures: the summary table's and the terminal's step times and throughput are the speed
verdict's (its counted rounds), not the parity launch's, so the table and the verdict cannot point different
ways (issue 43, item 5). Pure: simulated records, no launcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from compare.analysis.records import RunRecord
from compare.analysis.speed import SEQUENTIAL_RECORD
from compare.analysis.speed_figures import PARITY_LAUNCH, SPEED_ROUNDS
from compare.analysis.summary import analyse
from compare.render.report import summary_table
from compare.render.speed import figures_note, speed_line
from tests.helpers import run
from workload.record_format import CONTENTION_RECORD

BATCH = 64


def record(framework: str, number: int, step_s: float, rng: np.random.Generator, *, world_size: int = 1,
           seed: int = 0, window: float | None = 2.0, steps: int = 200) -> RunRecord:
    times = step_s * np.exp(rng.normal(0, 0.03, steps))
    rows = [{"step": i + 1, "loss": 1.0 / (i + 1), "step_time_s": float(t)} for i, t in enumerate(times)]
    meta = {"framework": framework, "world_size": world_size, "seed": seed, "status": "ok",
            "samples_per_step": BATCH, "options": {"round": number, "window_seconds": None if number == 1 else window}}
    where = f"/nonexistent/{framework}-np{world_size}" + (f"-round{number}" if number > 1 else f"/seed-{seed}")
    return RunRecord(Path(where), meta, rows, [])


def comparison(rng: np.random.Generator, rounds: int, *, parity_horovod_s: float = 0.003,
               horovod_s: float = 0.0008) -> list[RunRecord]:
    """Round 1 (the parity launch, two seeds) with Horovod 3x slower; then timed rounds with Horovod faster."""
    runs = [record(f, 1, s, rng, seed=seed) for seed in (0, 1)
            for f, s in (("horovod", parity_horovod_s), ("ddp", 0.001))]
    for number in range(2, rounds + 2):
        level = np.exp(rng.normal(0, 0.02))  # the round's machine, shared by its two launches
        runs += [record("horovod", number, horovod_s * level, rng), record("ddp", number, 0.001 * level, rng)]
    return runs


def table_agrees_with_verdict(rows: dict[str, dict], speed: dict) -> bool:
    """The check a reader makes: the table's Horovod/DDP step-time ratio is the verdict's, and a named winner
    is the side the table shows faster."""
    ratio = rows["horovod"]["step_ms"] / rows["ddp"]["step_ms"]
    faster = "horovod" if ratio < 1 else "ddp"
    return ratio == pytest.approx(speed["step_time_ratio"], rel=1e-9) and speed["winner"] in (None, faster)


def test_the_table_shows_the_rounds_the_verdict_reads():
    analysis = analyse(comparison(np.random.default_rng(1), 4), warmup=5)
    level = analysis["levels"][0]
    speed = level["speed"]
    assert speed["winner"] == "horovod" and speed["rounds_used"] == [2, 3, 4, 5]
    rows = {r["framework"]: r for r in analysis["summary"]}
    assert table_agrees_with_verdict(rows, speed)
    assert {r["source"] for r in rows.values()} == {SPEED_ROUNDS} and rows["ddp"]["rounds"] == 4
    assert rows["ddp"]["samples_per_s"] == pytest.approx(BATCH / (rows["ddp"]["step_ms"] / 1e3))
    # The parity launch's figures (what the table showed before) point the other way: the check catches them.
    parity = {f: {"step_ms": t["step"]["median"] * 1e3} for f, t in level["timing"].items()}
    assert not table_agrees_with_verdict(parity, speed)
    # The terminal table prints those figures, says what they are, and the parity launch's stay in the details.
    table = summary_table(analysis)
    assert f"{rows['horovod']['step_ms']:.2f}" in table and "4 speed rounds" in table
    assert f"{parity['horovod']['step_ms']:.2f}" not in table
    assert "over the rounds the verdict counts" in figures_note(analysis) and "Horovod is" in speed_line(analysis)


def test_contended_rounds_leave_the_figures_as_they_leave_the_verdict(tmp_path):
    """A round the verdict leaves out (contended) is left out of the figures too: they divide to its ratio. The
    table counts the rounds as the verdict and the design do (every round that timed both sides: 5 here), and
    names the one left out (issue 51: under the suite's load a contended round made the table say 1 round
    where the design said 2)."""
    rng = np.random.default_rng(2)
    runs = comparison(rng, 4)
    slow = record("horovod", 6, 0.01, rng)  # round 6: Horovod 10x slower, during contention
    slow = RunRecord(tmp_path / "horovod-np1-round6", slow.meta, slow.steps, [])
    (tmp_path / "horovod-np1-round6").mkdir()
    busy = {"wall_s": 10.0, "ranks": 1, "threads_per_rank": 1, "available_cores": 2, "own_cpu_s": 10.0,
            "others_cores": 1.0, "steal_fraction": 0.0, "top_others": []}
    (tmp_path / "horovod-np1-round6" / CONTENTION_RECORD).write_text(json.dumps(busy), encoding="utf-8")
    analysis = analyse([*runs, slow, record("ddp", 6, 0.001, rng)], warmup=5)
    speed = analysis["levels"][0]["speed"]
    assert speed["contended_rounds"] == [6] and speed["winner"] == "horovod"
    rows = {r["framework"]: r for r in analysis["summary"]}
    assert table_agrees_with_verdict(rows, speed) and rows["horovod"]["rounds"] == speed["n_rounds"] == 5
    assert rows["horovod"]["rounds_left_out"] == 1 and "5 speed rounds (1 left out: contended)" in summary_table(
        analysis)


def test_without_speed_rounds_the_table_says_what_it_shows():
    """--repeats 0: round 1 only, which the verdict then reads (too few rounds): the table shows the same
    figures and says round 1 is among them. One framework: no verdict, the parity launch's figures, said."""
    analysis = analyse(comparison(np.random.default_rng(3), 0), warmup=5)
    speed = analysis["levels"][0]["speed"]
    assert speed["status"] == "too few rounds" and speed["rounds_used"] == [1]
    rows = {r["framework"]: r for r in analysis["summary"]}
    assert table_agrees_with_verdict(rows, speed) and rows["horovod"]["step_ms"] > 2 * rows["ddp"]["step_ms"]
    assert "1 speed round (round 1 among them)" in summary_table(analysis)
    assert "include round 1, the parity launch" in figures_note(analysis)
    alone = analyse([r for r in comparison(np.random.default_rng(3), 2) if r.framework == "ddp"], warmup=5)
    assert alone["levels"][0]["speed"] is None
    assert [r["source"] for r in alone["summary"]] == [PARITY_LAUNCH]
    assert "parity launch" in summary_table(alone) and "the parity launch's" in figures_note(alone)


@pytest.mark.slow
def test_a_budget_that_runs_out_says_so_and_the_table_reads_the_verdicts_rounds(tmp_path, horovod_built):
    """Through horovodrun and torchrun (np 1, short jobs): a budget far too short for +-1% stops the rounds,
    and the terminal and the report say the target was not reached and why; the summary's step times are
    the verdict's rounds' (their ratio is the verdict's), each row saying so. About a minute."""
    out = tmp_path / "cmp"
    budget = 40
    result = run([sys.executable, "-m", "compare", "run", "--np", "1", "--seeds", "0", "--steps", "30",
                  "--reference", "off", "--timed-seconds", "0.5", "--precision", "1%", "--time-budget", str(budget),
                  "--out", str(out)], timeout=600)
    assert result.returncode in (0, 4), result.stdout[-3000:] + result.stderr[-3000:]
    design = json.loads((out / "runs" / SEQUENTIAL_RECORD).read_text())
    assert design["stopped"] == "budget" and design["world_sizes"]["1"]["stopped"] == "budget", design
    # the stop line (a first-look forecast, "rounds: np 1 spreads ...", may come before it)
    said = next(line for line in result.stdout.splitlines() if line.startswith(("rounds: stopped", "rounds: every")))
    assert said.startswith("rounds: stopped short of the target at np 1: the next round"), said
    assert "would not fit in the time budget of 40 s after" in said, said
    assert "(target ±1%)" in said, said
    report = json.loads((out / "report.json").read_text())["analysis"]
    speed = report["levels"][0]["speed"]
    assert "stopped short of the target" in (out / "report.md").read_text()
    # On a quiet machine two or three speed rounds fit; on a loaded one round 1 may spend the budget, and
    # the verdict then reads round 1 alone (as with --repeats 0): the table follows it either way.
    counted = max(design["rounds"], 1)
    assert speed["n_rounds"] == counted, (speed["n_rounds"], design)
    rows = {r["framework"]: r for r in report["summary"]}
    assert table_agrees_with_verdict(rows, speed), (rows, speed["step_time_ratio"])
    assert rows["ddp"]["source"] == SPEED_ROUNDS and rows["ddp"]["rounds"] == counted
    assert rows["ddp"]["parity_launch_counted"] == (design["rounds"] == 0)
    assert f"{counted} speed round" in result.stdout and "the speed verdict's" in result.stdout
