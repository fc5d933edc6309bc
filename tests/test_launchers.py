"""Both implementations through their real launchers, writing complete run records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import horovodrun, ok, read_losses, read_meta, run, tool, torchrun

pytestmark = pytest.mark.slow
FAST = ["--workload", "mlp", "--steps", "6", "--batch-size", "16", "--dataset-size", "512", "--log-every", "4"]


def check_record(run_dir, framework: str, launcher: str, backend: str, world_size: int) -> dict:
    meta = read_meta(run_dir)
    assert meta["schema_version"] == 1
    assert meta["status"] == "ok", meta
    assert (meta["framework"], meta["launcher"], meta["backend"], meta["world_size"]) == (
        framework, launcher, backend, world_size)
    assert meta["threads"] == 1
    assert meta["versions"]["torch"].startswith("2.")
    assert meta["samples_per_step"] == 16 * world_size
    assert not (run_dir / "metrics.jsonl.part").exists()
    entries = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [e for e in entries if e["kind"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, 7))
    assert all(e["step_time_s"] > 0 and e["samples"] == e["step"] * 16 * world_size for e in steps)
    assert [e["kind"] for e in entries].count("eval") == 1
    return meta


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_horovodrun_np2(tmp_path, horovod_built, controller):
    ok(horovodrun(2, controller, *FAST, "--out", str(tmp_path)))
    meta = check_record(tmp_path, "horovod", "horovodrun", controller, 2)
    assert meta["versions"]["horovod"] == "0.28.1"
    assert "Open MPI" in (meta["versions"]["mpi"] or "")


def test_mpirun_np2(tmp_path, horovod_built):
    ok(run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable, "-m", "hvd_impl",
            *FAST, "--out", str(tmp_path)]))
    check_record(tmp_path, "horovod", "mpirun", "mpi", 2)


def test_torchrun_np2(tmp_path):
    ok(torchrun(2, *FAST, "--out", str(tmp_path)))
    check_record(tmp_path, "ddp", "torchrun", "gloo", 2)


@pytest.mark.parametrize("module", ["hvd_impl", "native_impl"])
def test_no_launcher_is_one_worker(tmp_path, horovod_built, module):
    ok(run([sys.executable, "-m", module, *FAST, "--out", str(tmp_path)]))
    meta = read_meta(tmp_path)
    assert (meta["launcher"], meta["world_size"]) == ("none", 1)


def test_several_seeds_in_one_launch(tmp_path):
    ok(torchrun(2, *FAST, "--seeds", "3,4", "--out", str(tmp_path)))
    losses = {seed: read_losses(tmp_path / f"seed-{seed}") for seed in (3, 4)}
    assert read_meta(tmp_path / "seed-4")["seed"] == 4
    assert losses[3] != losses[4]


def test_help_lists_the_shared_options():
    for module in ("hvd_impl", "native_impl"):
        result = ok(run([sys.executable, "-m", module, "--help"]))
        for flag in ("--workload", "--steps", "--batch-size", "--lr", "--lr-scaling", "--optimizer", "--seed",
                     "--device", "--threads", "--out"):
            assert flag in result.stdout, (module, flag)
    assert Path(tool("torchrun")).is_file(), "torchrun is not installed beside this Python or on PATH"
