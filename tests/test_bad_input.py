"""Bad input: one line naming the problem, exit status 2, no traceback, nothing that looks complete."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT, run

from compare.names import Exit

CASES = {
    "unknown workload": (["--workload", "nope"], "unknown workload 'nope'"),
    "batch size 0": (["--batch-size", "0"], "--batch-size must be a positive integer, got 0"),
    "negative learning rate": (["--lr", "-0.1"], "--lr must be a positive finite number, got -0.1"),
    "more workers than samples": (["--dataset-size", "40", "--batch-size", "32", "--seed", "0"],
                                  "leaves no full batch per worker"),
    "not a number": (["--steps", "many"], "invalid int value: 'many'"),
}


@pytest.mark.parametrize("module", ["hvd_impl", "native_impl", "workload.reference"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gives_one_line(tmp_path, module, case):
    args, message = CASES[case]
    if case == "more workers than samples" and module == "workload.reference":
        args = [*args, "--emulate-world-size", "2"]
    elif case == "more workers than samples":
        args = ["--dataset-size", "20", "--batch-size", "32"]
    out = tmp_path / "out"
    result = run([sys.executable, "-m", module, *args, "--out", str(out)], timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (out / "metrics.jsonl").exists()
    assert not (out / "run.json").exists()


@pytest.mark.parametrize("module", ["hvd_impl", "native_impl"])
def test_unwritable_out(tmp_path, module):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run([sys.executable, "-m", module, "--out", str(blocker / "run")], timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "is not writable" in result.stderr, result.stderr


def test_output_piped_into_a_reader_that_stops_ends_quietly():
    """`python -m compare check A B | head -1`: the reader goes away before the verdict is written; the command
    stops with the shell's status for it, and no traceback reaches the terminal."""
    records = ROOT / "tests" / "data" / "records"
    process = subprocess.Popen([sys.executable, "-m", "compare", "check", str(records / "base-s0"),
                                str(records / "lr5-s0")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                               text=True)
    process.stdout.close()  # the reader is gone before the command writes
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == Exit.PIPE_CLOSED, stderr
    assert stderr == "", stderr
