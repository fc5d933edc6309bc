"""The launch stage hands its test files to its two workers longest first (tests/conftest.py LAUNCH_SECONDS), so
that neither worker is left alone at the end with a long file while the other stands idle."""

from __future__ import annotations

import subprocess
import sys

from conftest import LAUNCH_SECONDS
from helpers import ROOT


def test_the_launch_order_names_files_that_launch():
    for name in LAUNCH_SECONDS:
        path = ROOT / "tests" / name
        assert path.is_file(), f"tests/conftest.py LAUNCH_SECONDS names {name}, which is not there"
        assert "pytest.mark.slow" in path.read_text(), f"{name} has no launch test: it has no place in the order"


def test_the_launch_stage_collects_the_longest_files_first():
    """As scripts/test.sh's second stage collects: each file's tests together, the files by LAUNCH_SECONDS."""
    stage = ["--dist", "loadfile", "--no-loadscope-reorder", "-m", "slow and not serial and not campaign"]
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *stage],
                            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    files = [line.split("::")[0].removeprefix("tests/") for line in result.stdout.splitlines() if "::" in line]
    order = list(dict.fromkeys(files))
    assert len(order) == len(set(files)), "a file's tests are not together"
    weights = [LAUNCH_SECONDS.get(name, 0) for name in order]
    assert weights == sorted(weights, reverse=True), list(zip(order, weights, strict=True))
    assert order[0] == max(LAUNCH_SECONDS, key=LAUNCH_SECONDS.__getitem__)
