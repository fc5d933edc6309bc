"""The speed design's honest checks, through the real launchers (make test-campaign; figures in
docs/benchmarks.md, "A/A and a planted slowdown").

Each of CAMPAIGN_RUNS (default 20) iterations runs two comparisons at np 1 with the default speed design
(--timed-seconds, --repeats): an A/A one, DDP against its twin through the same code path (`compare run
--frameworks ddp --aa ddp`), whose interval must hold 1; then the same with the twin slowed by 10 % of the
step time the A/A run just measured (--step-delay-for twin), which must be named slower. The claims: the
interval holds 1 in at least 95 % of the A/A runs (19 of 20) and the slowdown is named in at least 90 %
(18 of 20). A withheld verdict (another process took the CPU) counts against both. Every run's figures go to
results/campaign/speed_aa.json and are printed.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, run
from workload.files import write_json_atomic

RUNS = int(os.environ.get("CAMPAIGN_RUNS", "20"))
PLANTED = 0.10  # the slowdown planted in the twin, as a fraction of the measured step time
RECORD = ROOT / "results" / "campaign" / "speed_aa.json"


def aa_comparison(out: Path, *args: str) -> dict:
    """One A/A comparison at np 1 with the default speed design; its A/A figures from report.json."""
    result = run([sys.executable, "-m", "compare", "run", "--frameworks", "ddp", "--aa", "ddp", "--np", "1",
                  "--seeds", "0", "--reference", "off", "--out", str(out), *args], timeout=900)
    assert result.returncode in (0, 4), result.stdout[-3000:] + result.stderr[-3000:]
    level = json.loads((out / "report.json").read_text())["analysis"]["levels"][0]
    aa = level["aa"]
    first = [row["first_median_s"] for row in aa["rounds"]]
    return {"ratio": aa["ratio"], "ci": [aa["ci_low"], aa["ci_high"]], "log_sd": aa["log_sd"],
            "outcome": aa["outcome"], "slower": aa["slower"], "holds_one": aa["holds_one"],
            "rounds": aa["n_rounds"], "first_median_s": sorted(first)[len(first) // 2],
            "others_cores": [row["contention"][slot]["record"]["others_cores"]
                             for row in aa["rounds"] for slot in ("first", "twin")
                             if row["contention"][slot].get("record")]}


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.timeout(RUNS * 600)  # two comparisons of about 2 minutes each per run
def test_aa_holds_one_and_a_planted_slowdown_is_named(tmp_path):
    results: dict[str, list[dict]] = {"aa": [], "planted": []}
    for index in range(RUNS):
        aa = aa_comparison(tmp_path / f"aa-{index}")
        delay_ms = PLANTED * aa["first_median_s"] * 1000
        planted = {**aa_comparison(tmp_path / f"planted-{index}", "--step-delay-for", "twin",
                                   "--step-delay-ms", f"{delay_ms:.4f}"), "delay_ms": delay_ms}
        results["aa"].append(aa)
        results["planted"].append(planted)
        print(f"{index + 1}/{RUNS}: A/A {aa['ratio']:.3f} {aa['ci']} {aa['outcome']}; planted {delay_ms:.3f} ms: "
              f"{planted['ratio']:.3f} {planted['ci']} {planted['outcome']}", flush=True)
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(RECORD, results)
    holds = sum(r["holds_one"] for r in results["aa"])
    named = sum(r["slower"] == "twin" for r in results["planted"])
    print(f"A/A holds 1 in {holds}/{RUNS}; the planted {PLANTED:.0%} slowdown named in {named}/{RUNS}")
    assert not any(r["slower"] == "first" for r in results["planted"]), "a planted slowdown named the wrong side"
    assert holds >= math.ceil(0.95 * RUNS), results["aa"]
    assert named >= math.ceil(0.90 * RUNS), results["planted"]
