"""python -m compare bench --quick, through the real launchers: it runs and writes well-formed results.

These are benchmarks, not timed tests: nothing here asserts a speed, only that every figure is there.
"""

from __future__ import annotations

import json
import sys

import pytest
from helpers import ok, run

from compare.launch.tuning import load_tuning
from workload.options import parse_options

pytestmark = pytest.mark.slow


def test_bench_quick_writes_well_formed_results(tmp_path, horovod_built):
    out = tmp_path / "bench"
    ok(run([sys.executable, "-m", "compare", "bench", "--quick", "--out", str(out)], timeout=600))
    bench = json.loads((out / "bench.json").read_text())
    assert bench["schema_version"] == 1
    assert bench["failures"] == []
    assert all(launch["ok"] for launch in bench["launches"])

    assert {r["launcher"] for r in bench["allreduce"]} == {"torchrun", "horovodrun --gloo", "horovodrun --mpi"}
    for row in bench["allreduce"]:
        assert row["world_size"] == 2 and row["memory_copy_gbps"]["numpy_1_thread"] > 0
        assert [s["bytes"] for s in row["sizes"]] == [4096, 262144]
        # at n = 2 the bus factor 2(n-1)/n is 1
        assert all(s["algbw_gbps"] > 0 and s["busbw_gbps"] == pytest.approx(s["algbw_gbps"]) for s in row["sizes"])

    assert set(bench["sweeps"]) == {"ddp", "horovod"}
    for sweep in bench["sweeps"].values():
        names = [c["name"] for c in sweep["configs"]]
        assert {"default", "compute only", "step, phases timed"} <= set(names) and set(sweep["chosen"]) <= set(names)
        assert all(c["median_s"] > 0 and c["n"] > 0 for c in sweep["configs"])
    assert [row["framework"] for row in bench["decomposition"]] == ["ddp", "horovod"]
    for row in bench["decomposition"]:
        parts = row["compute_s"] + row["exposed_s"] + row["rest_s"]
        assert parts + row["unaccounted_s"] == pytest.approx(row["probe_step_mean_s"])
        assert row["probe_over_default"] > 0
        assert 0 < row["accounted"] <= 1 and min(row["compute_s"], row["exposed_s"], row["rest_s"]) > 0

    assert {(r["framework"], r["world_size"]) for r in bench["overhead"]} == {("ddp", 2), ("horovod", 2)}
    assert all(r["ratio"] > 0 and r["bare_median_s"] > 0 for r in bench["overhead"])
    assert {r["launcher"] for r in bench["startup"]} == {"torchrun", "horovodrun --mpi", "horovodrun --gloo"}
    assert all(0 < r["first_step_s"] < r["total_s"] for r in bench["startup"])
    assert bench["loop_costs"]["items"][0]["item"] == "bare"

    tuned = json.loads((out / "tuned.json").read_text())
    for framework in ("horovod", "ddp"):
        assert isinstance(tuned[framework], list) and isinstance(tuned["env"][framework], dict)
        parse_options([*tuned[framework], "--out", str(tmp_path / "x")], "test", "")  # the implementations take it
    assert load_tuning(out / "tuned.json").source == str(out / "tuned.json")  # and so does compare run --tuned

    text = (out / "bench.md").read_text()
    for heading in ("Harness overhead", "Allreduce bandwidth", "decomposed", "Tuning sweep", "Start-up"):
        assert heading in text
