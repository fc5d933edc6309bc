"""Speed launches that time a long window (compare run --timed-seconds) and the A/A check (--aa): the
planning arithmetic, which launches count as speed rounds, the A/A judge in both directions, and the
whole path through the real launchers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from compare.analysis.aa import compare_aa
from compare.analysis.records import RunRecord, find_runs
from compare.analysis.speed import compare_speed
from compare.analysis.timing import (
    BLOCK_STEPS,
    LAUNCH_LOG_SD,
    MIN_WINDOW_STEPS,
    MOST_OVERHEAD_MULTIPLE,
    block_variance,
    launch_median,
    steady_window_s,
    window_steps,
)
from compare.render.speed import aa_sentence
from tests.helpers import run


def test_window_steps_cover_the_window_after_the_warmup():
    assert window_steps(2.0, 0.001, 5) == 2005
    assert window_steps(0.5, 0.0007, 5) == 5 + int(np.ceil(0.5 / 0.0007))
    assert window_steps(0.01, 0.1, 5) == 5 + MIN_WINDOW_STEPS  # a slow step still times some steps
    for bad in ((0, 0.001), (2.0, 0.0), (-1, 0.001)):
        with pytest.raises(ValueError):
            window_steps(*bad, 5)


def test_the_window_is_chosen_from_the_overhead_and_the_spread():
    """T = sqrt(O v tau / a): the window that spends least time for a given precision when a round's variance is
    a + v tau / T and costs O + T; at least --timed-seconds' floor, at most a few overheads. A launch whose median
    settles slowly (bimodal or drifting steps) gets a longer window, a long start-up too."""
    best = np.sqrt(4.0 * 0.05 * 0.1) / LAUNCH_LOG_SD
    assert steady_window_s(4.0, 0.05, 0.1, 2.0) == pytest.approx(best) and 2.0 < best < 12.0
    # the cost (O + T)(a + v tau / T) is least there: a shorter or longer window costs more
    cost = [(4.0 + t) * (LAUNCH_LOG_SD**2 + 0.05 * 0.1 / t) for t in (best / 2, best, best * 2)]
    assert cost[1] < cost[0] and cost[1] < cost[2]
    assert steady_window_s(8.0, 0.05, 0.1, 2.0) > steady_window_s(4.0, 0.05, 0.1, 2.0)
    assert steady_window_s(4.0, 0.001, 0.04, 2.0) == 2.0  # a steady median: the floor
    assert steady_window_s(1.0, 1.0, 1.0, 0.5) == MOST_OVERHEAD_MULTIPLE * 1.0  # the cap
    # block variance: blocks of BLOCK_STEPS i.i.d. log-normal steps (sd 0.1) have log medians of variance
    # about (pi / 2) 0.01 / BLOCK_STEPS; a launch that switches between two speeds has far more
    rng = np.random.default_rng(3)
    steady = [0.002 * np.exp(rng.normal(0, 0.1, 4000)) for _ in range(3)]
    var, block_s = block_variance(steady, warmup=5)
    assert var == pytest.approx(np.pi / 2 * 0.01 / BLOCK_STEPS, rel=0.3)
    assert block_s == pytest.approx(0.002 * BLOCK_STEPS, rel=0.05)
    switching = [t * np.repeat(rng.choice([1.0, 1.5], 20), 200) for t in steady]
    assert block_variance(switching, warmup=5)[0] > 10 * var
    assert block_variance([steady[0][:2 * BLOCK_STEPS]], warmup=5) is None  # too few blocks to say


def record(framework: str, number: int, step_s: float, rng: np.random.Generator, *, timed: float | None,
           twin: bool = False, seed: int = 0, steps: int = 400) -> RunRecord:
    times = step_s * np.exp(rng.normal(0, 0.05, steps))
    rows = [{"step": i + 1, "loss": 1.0, "step_time_s": float(t)} for i, t in enumerate(times)]
    options = {"round": number, "window_seconds": timed, "aa_twin": twin}
    meta = {"framework": framework, "world_size": 1, "seed": seed, "status": "ok", "options": options}
    where = f"/nonexistent/{framework}-np1-round{number}" + ("-twin" if twin else "")
    return RunRecord(Path(where), meta, rows, [])


def test_with_timed_windows_the_parity_launch_is_not_a_speed_round():
    rng = np.random.default_rng(3)
    # Round 1 (the parity launch) says Horovod is 3x slower; the timed rounds say the sides are equal.
    runs = [record("horovod", 1, 0.003, rng, timed=None), record("ddp", 1, 0.001, rng, timed=None)]
    for number in range(2, 6):
        runs += [record("horovod", number, 0.001, rng, timed=2.0), record("ddp", number, 0.001, rng, timed=2.0)]
    speed = compare_speed(1, runs, warmup=5)
    assert [row["round"] for row in speed["rounds"]] == [2, 3, 4, 5]
    assert speed["status"] == "no clear difference" and 0.95 < speed["step_time_ratio"] < 1.05
    # Without timed launches (the old design, --timed-seconds 0) round 1 counts.
    old = [r for r in runs if r.round == 1] + [record(f, n, 0.001, rng, timed=None)
                                              for n in (2, 3) for f in ("horovod", "ddp")]
    assert [row["round"] for row in compare_speed(1, old, warmup=5)["rounds"]] == [1, 2, 3]


def aa_runs(rng: np.random.Generator, twin_slower: float, rounds: int = 4) -> list[RunRecord]:
    runs = [record("ddp", 1, 0.001, rng, timed=None)]
    for number in range(2, rounds + 2):
        level = 0.001 * np.exp(rng.normal(0, 0.02))  # the round's machine level, shared by the pair
        runs += [record("ddp", number, level, rng, timed=2.0),
                 record("ddp", number, level * twin_slower, rng, timed=2.0, twin=True)]
    return runs


def test_aa_holds_one_for_identical_launches_and_names_a_slower_twin():
    rng = np.random.default_rng(11)
    same = compare_aa(1, aa_runs(rng, 1.0), warmup=5)
    assert same["holds_one"] and same["slower"] is None and same["n_rounds"] == 4
    assert "holds 1" in aa_sentence(same, None) and "DDP against DDP" in aa_sentence(same, None)
    slowed = compare_aa(1, aa_runs(rng, 1.10), warmup=5)
    assert slowed["slower"] == "twin" and not slowed["holds_one"] and 1.05 < slowed["ratio"] < 1.15
    assert "the twin is slower" in aa_sentence(slowed, None)
    faster = compare_aa(1, aa_runs(rng, 0.90), warmup=5)
    assert faster["slower"] == "first"
    # The twins never enter the Horovod/DDP comparison.
    assert compare_speed(1, aa_runs(rng, 1.10), warmup=5) is None


def test_aa_withholds_on_contention_as_the_speed_verdict_does(tmp_path):
    rng = np.random.default_rng(5)
    runs = aa_runs(rng, 1.10)
    # contention.json beside each launch: the hypervisor took 20% of the CPU during every twin launch
    for launched in runs:
        directory = tmp_path / launched.path.name
        (directory / "seed-0").mkdir(parents=True)
        (directory / "contention.json").write_text(json.dumps({
            "wall_s": 5.0, "available_cores": 2, "ranks": 1, "threads_per_rank": 1, "own_cpu_s": 5.0,
            "others_cores": 0.0, "own_cpu_per_rank": 1.0, "steal_fraction": 0.2 if launched.is_twin else 0.0,
            "load_before": [0.1, 0.1, 0.1], "load_after": [0.2, 0.1, 0.1], "top_others": [],
            "started_unix": 0.0}))
    moved = [RunRecord(tmp_path / r.path.name / "seed-0", r.meta, r.steps, []) for r in runs]
    judged = compare_aa(1, moved, warmup=5)
    assert judged["status"] == "withheld" and judged["slower"] is None, judged
    assert "withheld" in aa_sentence(judged, None)


# ---- through the real launchers ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.serial
def test_timed_speed_rounds_and_an_aa_twin_through_the_launchers(tmp_path):
    out = tmp_path / "timed"
    result = run([sys.executable, "-m", "compare", "run", "--np", "1", "--seeds", "0", "--reference", "off",
                  "--timed-seconds", "0.5", "--repeats", "3", "--aa", "ddp", "--step-delay-for", "twin",
                  "--step-delay-ms", "1", "--out", str(out)], timeout=900)
    assert result.returncode in (0, 4), result.stdout[-3000:] + result.stderr[-3000:]
    runs = find_runs(out / "runs")
    parity = [r for r in runs if r.round == 1 and not r.is_calibration]
    speed_runs = [r for r in runs if r.round > 1]
    assert {r.framework for r in parity} == {"horovod", "ddp"} and all(r.timed_seconds is None for r in parity)
    # rounds 2-4: Horovod, DDP and DDP's twin, each timing the same window of steps
    assert sorted({r.round for r in speed_runs}) == [2, 3, 4] and len(speed_runs) == 9
    assert all(r.timed_seconds == 0.5 for r in speed_runs)
    window = {len(r.steps) for r in speed_runs}
    # the window's steps are planned from round 1's median step times (load moves them, not the rule)
    step_s = np.exp(np.mean([np.log(launch_median([r], 5)) for r in parity]))
    assert window == {window_steps(0.5, step_s, 5)}, (window, step_s)
    assert sum(r.is_twin for r in speed_runs) == 3
    # the twin waits 1 ms a step: named slower, and the Horovod/DDP verdict never reads it
    level = json.loads((out / "report.json").read_text())["analysis"]["levels"][0]
    assert [row["round"] for row in level["speed"]["rounds"]] == [2, 3, 4]
    assert level["aa"]["slower"] == "twin" and level["aa"]["ratio"] > 1.3, level["aa"]
    assert "A/A check at np 1, DDP against DDP" in result.stdout and "the twin is slower" in result.stdout


def test_timed_and_aa_options_refuse_bad_input(tmp_path):
    for args, message in ((["--timed-seconds", "-1"], "--timed-seconds must be 0 or a positive"),
                          (["--aa", "horovod", "--frameworks", "ddp"], "--aa horovod: not one of --frameworks"),
                          (["--aa", "ddp", "--timed-seconds", "0"], "--aa needs timed speed launches"),
                          (["--step-delay-for", "twin", "--step-delay-ms", "1"], "--step-delay-for twin needs --aa"),
                          (["--repeats", "0", "--timed-seconds", "0"], "--repeats must be a positive integer")):
        result = run([sys.executable, "-m", "compare", "run", "--out", str(tmp_path / "x"), *args], timeout=120)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_round_1_chooses_the_speed_launches_window(tmp_path):
    """window_plan reads round 1's launches: the overhead is a launch's wall time less its steps, the spread
    how its medians settle; without --timed-seconds the window is chosen from them (a launch that settles
    slowly gets more than the 2 s floor), with it the window is the one given."""
    from compare.commands import run as run_command
    from compare.commands.cli import build_parser

    rng = np.random.default_rng(9)
    runs = []
    for framework in ("horovod", "ddp"):
        directory = tmp_path / "runs" / f"{framework}-np1"
        directory.mkdir(parents=True)
        times = 0.002 * np.exp(rng.normal(0, 0.1, 1200)) * np.repeat(rng.choice([1.0, 1.5], 12), 100)
        (directory / "contention.json").write_text(json.dumps({"wall_s": 5.0 + float(times.sum())}))
        rows = [{"step": i + 1, "loss": 1.0, "step_time_s": float(t)} for i, t in enumerate(times)]
        runs.append(RunRecord(directory, {"framework": framework, "world_size": 1, "seed": 0, "status": "ok",
                                          "options": {"round": 1}}, rows, []))

    def planned(*args: str) -> run_command.ComparisonPlan:
        ns = build_parser(["run"]).parse_args(["run", "--np", "1", "--seeds", "0", "--reference", "off",
                                               "--network", "host", "--out", str(tmp_path / "out"), *args])
        return run_command.plan(ns)

    chosen = run_command.window_plan(planned(), runs)[1]
    assert chosen["chosen"] and chosen["overhead_s"] == pytest.approx(5.0)
    settling = block_variance([r.step_times for r in runs], 5)
    assert chosen["seconds"] == pytest.approx(steady_window_s(5.0, *settling, 2.0), abs=0.01) and chosen["seconds"] > 2
    assert chosen["steps"] == window_steps(chosen["seconds"], np.exp(np.mean(np.log(
        [np.median(r.step_times[5:]) for r in runs]))), 5)
    given = run_command.window_plan(planned("--timed-seconds", "0.5"), runs)[1]
    assert not given["chosen"] and given["seconds"] == 0.5
    line = run_command.window_line({1: chosen})
    assert line.startswith(f"speed launches: np 1 times {chosen['seconds']:g} s (") and "launch overhead 5 s" in line
