"""The headroom of each parity default (docs/parity.md, "The numbers behind each default"), recomputed from fresh
calibration runs of the built-in workloads at np 1, 2 and 4 through the real launchers (`compare run` launches
DDP again with its initial weights moved one ulp, for every seed).

A campaign (about an hour on 2 cores): `make test-campaign`, or `pytest -m campaign tests/test_parity_headroom.py`.
The measured figures are written to $PARITY_HEADROOM_OUT (default: the test's tmp_path) as headroom.json.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest
from helpers import run

from compare.analysis.parity import SATURATION, STEP_K, STEP_RTOL, Band, default_margins
from compare.names import EXIT_OK

pytestmark = pytest.mark.campaign
JOBS = {"mlp": ["--epochs", "3"], "digits": ["--epochs", "5"], "resnet": ["--steps", "32"], "lm": ["--steps", "64"]}
# Headroom a default needs: the compared pair's gap must stay inside what the default allows.
NEEDED = {"CHAOS_SAFETY": 1.0, "STEP_RTOL": 1.0, "margins": 1.0}


def _ratio(allowed: float, gap: float) -> float:
    return math.inf if gap <= 0 else allowed / gap


def headroom(comparison: dict) -> dict[str, float]:
    """The smallest allowed / observed over every seed's judged steps, for each default the verdict used."""
    band_room = step_room = default_room = math.inf
    default = Band("default")
    for seed in comparison["seeds"]:
        losses = seed["losses"]
        for step, gap, tolerance in zip(losses["steps"], losses["rel_diffs"], losses["tolerances"], strict=True):
            if tolerance < SATURATION:
                band_room = min(band_room, _ratio(tolerance, gap))
            if step <= STEP_K:
                step_room = min(step_room, _ratio(STEP_RTOL, gap))
            if default.tolerance(step) < SATURATION:
                default_room = min(default_room, _ratio(default.tolerance(step), gap))
    margins = default_margins()
    end_room = math.inf
    for name, result in comparison.get("end_points", {}).items():
        if result.get("mean_diff") is not None and result.get("mean_a") is not None:
            level = (result["mean_a"] + result["mean_b"]) / 2
            end_room = min(end_room, _ratio(margins[name].resolve(level), abs(result["mean_diff"])))
    return {"CHAOS_SAFETY": band_room, "STEP_RTOL": step_room, "DEFAULT_DECADE_STEPS": default_room,
            "margins": end_room}


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("workload", list(JOBS))
def test_each_default_keeps_its_headroom_on_fresh_calibration_runs(tmp_path, horovod_built, workload):
    out = tmp_path / "cmp"
    result = run([sys.executable, "-m", "compare", "run", "--np", "1,2,4", "--workload", workload, *JOBS[workload],
                  "--seeds", "0,1,2", "--repeats", "1", "--horovod-controller", "gloo", "--out", str(out)],
                 timeout=3500)
    assert result.returncode == EXIT_OK, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())["analysis"]
    found = {}
    for level in report["levels"]:
        comparison = level["comparisons"]["horovod_vs_ddp"]
        assert level["band"]["source"] == "calibrated"
        found[level["world_size"]] = headroom(comparison)
    target = Path(os.environ.get("PARITY_HEADROOM_OUT", tmp_path))
    target.mkdir(parents=True, exist_ok=True)
    (target / f"headroom-{workload}.json").write_text(json.dumps(found, indent=1, default=str))
    short = {(ws, name): room for ws, rooms in found.items() for name, room in rooms.items()
             if name in NEEDED and room < NEEDED[name]}
    assert not short, f"{workload}: defaults without headroom (world size, default): {short}; all: {found}"
