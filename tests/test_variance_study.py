"""The variance study (docs/benchmarks.md) through the real launchers: every set-up in the same rounds, its
spread within and across launches and the ratio's interval written per world size. A campaign (a few minutes)."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import ROOT, ok, run

pytestmark = pytest.mark.campaign


def test_the_study_launches_each_setup_in_the_same_rounds(tmp_path, horovod_built):
    out = tmp_path / "variance"
    ok(run([sys.executable, str(ROOT / "scripts" / "variance_study.py"), "--rounds", "2", "--np", "1",
            "--variants", "default", "pinned", "--out", str(out)], timeout=900))
    rows = json.loads((out / "variance.json").read_text())
    expected = {(variant, warmup) for variant in ("default", "pinned") for warmup in (5, "settled")}
    assert {(r["variant"], r["warmup"]) for r in rows} == expected
    assert all(r["rounds"] == 2 and r["horovod_across"] >= 0 and r["half_width"] > 0 for r in rows)
    pinned = json.loads(next((out / "runs" / "pinned").rglob("run.json")).read_text())
    assert pinned["options"]["pin_cores"] is True and len(pinned["cpu_affinity"]) == 1
