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
PLUGIN = """
import torch
from torch import nn
from torch.utils.data import TensorDataset
from workload.workloads import Workload

def samples(n, seed):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g))

def make_workload():
    return Workload(data=lambda settings: (samples(2048, 0), samples(128, 1)),
                    model=lambda data: nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
"""


def test_bench_quick_on_a_plugin_workload_writes_well_formed_results(tmp_path, horovod_built):
    """Every part of the quick bench on the user's own model (a small one, written as a user would): the
    bare loops, the implementations, the sweep and the decomposition all take it."""
    plugin = tmp_path / "my_model.py"
    plugin.write_text(PLUGIN)
    spec = f"{plugin}:make_workload"
    out = tmp_path / "bench"
    ok(run([sys.executable, "-m", "compare", "bench", "--quick", "--workload", spec, "--out", str(out)], timeout=600))
    bench = json.loads((out / "bench.json").read_text())
    assert bench["schema_version"] == 1
    assert bench["failures"] == [] and bench["settings"]["workload"] == spec
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


def test_bench_refuses_a_bad_plugin_in_one_line(tmp_path):
    result = run([sys.executable, "-m", "compare", "bench", "--workload", "no_such_module:make", "--out",
                  str(tmp_path / "bench")], timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "no_such_module" in result.stderr
    assert not (tmp_path / "bench").exists()
