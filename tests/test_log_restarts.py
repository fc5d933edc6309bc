"""A text log whose lines name no rank and whose steps go back (a job resumed from its checkpoint prints steps
61-100 again) imported as a user types it: read as a resumed run, the later values superseding from the
restart step (or the first kept, --on-restart keep-first), said on the screen and in run.json; several ranks
printing without prefixes are still refused, never mixed (compare/loss_lines/recording.py)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, read_meta, read_steps

from compare.__main__ import main as compare_main


def compare(*args: object, capsys=None) -> subprocess.CompletedProcess:
    """The command as a user types it: in a process of its own, or (capsys given) in this one, which is
    quicker on a loaded machine and reads the same arguments."""
    if capsys is None:
        return subprocess.run([sys.executable, "-m", "compare", *map(str, args)], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
    capsys.readouterr()
    code = compare_main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def curve(step: int) -> float:
    return 2.3 * math.exp(-0.03 * step) + 0.1


# The first run blows up after its checkpoint at step 60 and dies at step 100; the job resumes from step 60
# (a lower learning rate) and trains to 120. The resumed run's values are the run that exists.
FIRST = {step: curve(step) if step <= 60 else curve(step) * (1 + 0.05 * (step - 60)) for step in range(1, 101)}
RESUMED = {step: curve(step) * 1.0001 for step in range(61, 121)}
RUN = {**{s: v for s, v in FIRST.items() if s <= 60}, **RESUMED}


def lines(values: dict[int, float], start: str = "") -> list[str]:
    return [f"{start}2026-12-04 10:00:00 INFO step {step} loss {loss:.6f} lr 0.1" for step, loss in values.items()]


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("restarts")
    (root / "resumed.log").write_text("\n".join(
        ["starting", *lines(FIRST), "step 80 val_loss 1.5",  # an evaluation the resumed run supersedes
         "Traceback (most recent call last):", "RuntimeError: NCCL timeout", "resuming from checkpoint step 60",
         *lines(RESUMED), "step 120 val_loss 0.9"]) + "\n")
    (root / "clean.log").write_text("\n".join(lines(RUN)) + "\n")
    return root


def imported(source: Path, out: Path, *flags: str, capsys=None) -> subprocess.CompletedProcess:
    result = compare("import", "text", source, "--out", out, *flags, capsys=capsys)
    assert result.returncode == 0, result.stderr
    return result


def test_a_resumed_run_keeps_the_later_values_and_says_so(logs, tmp_path):
    result = imported(logs / "resumed.log", tmp_path / "run")
    assert "the run resumed at step 61" in result.stderr and "steps 61-100 were logged again" in result.stderr
    assert "--on-restart keep-first" in result.stderr
    steps = {s["step"]: s["loss"] for s in read_steps(tmp_path / "run")}
    assert sorted(steps) == list(range(1, 121))
    assert all(steps[s] == pytest.approx(RUN[s], abs=1e-6) for s in steps)
    imported_meta = read_meta(tmp_path / "run")["imported"]
    assert imported_meta["on_restart"] == "keep-last"
    [restart] = imported_meta["restarts"]
    assert (restart["step"], restart["steps_printed_again"], restart["through"]) == (61, 40, 100)
    assert restart["line"].endswith("resumed.log:106")  # "starting", 100 steps, an evaluation, 3 lines, then 61
    evals = [line for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
    assert len(evals) == 1 and '"step": 120' in evals[0]  # the first run's evaluation at 80 was superseded


def test_keep_first_keeps_the_first_runs_values_and_adds_the_steps_beyond(logs, tmp_path, capsys):
    result = imported(logs / "resumed.log", tmp_path / "run", "--on-restart", "keep-first", capsys=capsys)
    assert "the first run's values are kept" in result.stderr
    steps = {s["step"]: s["loss"] for s in read_steps(tmp_path / "run")}
    assert sorted(steps) == list(range(1, 121))
    assert all(steps[s] == pytest.approx({**RESUMED, **FIRST}[s], abs=1e-6) for s in steps)
    meta = read_meta(tmp_path / "run")["imported"]
    assert meta["on_restart"] == "keep-first" and [r["step"] for r in meta["restarts"]] == [61]


def test_check_judges_the_run_that_exists_and_keep_first_the_blown_up_one(logs, tmp_path, capsys):
    """Both directions through `compare check`: the resumed run read with its later values holds against a
    clean log of the same run; read with the first values (the blow-up) it fails."""
    imported(logs / "clean.log", tmp_path / "clean", capsys=capsys)
    imported(logs / "resumed.log", tmp_path / "last", capsys=capsys)
    imported(logs / "resumed.log", tmp_path / "first", "--on-restart", "keep-first", capsys=capsys)
    holds = compare("check", tmp_path / "clean", tmp_path / "last", capsys=capsys)
    assert holds.returncode == 0 and "parity holds" in holds.stdout, holds.stdout + holds.stderr
    fails = compare("check", tmp_path / "clean", tmp_path / "first", capsys=capsys)
    assert fails.returncode == 1 and "parity fails" in fails.stdout, fails.stdout + fails.stderr


@pytest.mark.parametrize("order", ["one rank after the other", "interleaved"])
def test_two_ranks_printing_without_prefixes_are_still_refused(tmp_path, order, capsys):
    """Both ranks print every step: their steps start over from the first step, which no resumed run does."""
    rank0, rank1 = lines(RUN), lines({s: v * 1.01 for s, v in RUN.items()})
    pairs = [x for pair in zip(rank0, rank1, strict=True) for x in pair]
    text = rank0 + rank1 if order == "one rank after the other" else pairs
    (tmp_path / "two.log").write_text("\n".join(text) + "\n")
    result = compare("import", "text", tmp_path / "two.log", "--out", tmp_path / "out", capsys=capsys)
    assert result.returncode == 2 and "several ranks print" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_on_restart_is_for_text_logs_and_names_its_choices(tmp_path, capsys):
    csv = tmp_path / "m.csv"
    csv.write_text("step,loss\n1,2.0\n")
    result = compare("import", "csv", csv, "--out", tmp_path / "out", "--on-restart", "keep-first", capsys=capsys)
    assert result.returncode == 2 and "for text logs" in result.stderr
    result = compare("import", "text", csv, "--out", tmp_path / "out", "--on-restart", "middle", capsys=capsys)
    assert result.returncode == 2 and "keep-last" in result.stderr
