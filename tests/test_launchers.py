"""Both implementations through their real launchers, writing complete run records."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from helpers import ROOT, horovodrun, ok, read_losses, read_meta, run, tool, torchrun

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


def pinned_cores(output: str) -> dict[int, int]:
    return {int(rank): int(core) for rank, core in re.findall(r"rank (\d+) pinned to core (\d+)", output)}


def test_mpirun_np2(tmp_path, horovod_built):
    # --pin-cores under mpirun, which may bind each rank itself: each keeps a core of its own.
    result = ok(run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable, "-m", "hvd_impl",
                     *FAST, "--pin-cores", "--out", str(tmp_path)]))
    meta = check_record(tmp_path, "horovod", "mpirun", "mpi", 2)
    cores = pinned_cores(result.stdout)
    assert sorted(cores) == [0, 1] and meta["cpu_affinity"] == [cores[0]], result.stdout
    assert len(set(cores.values())) == min(2, len(os.sched_getaffinity(0))), cores


def test_torchrun_np2(tmp_path):
    result = ok(torchrun(2, *FAST, "--pin-cores", "--out", str(tmp_path)))
    meta = check_record(tmp_path, "ddp", "torchrun", "gloo", 2)
    cores = pinned_cores(result.stdout)
    allowed = sorted(os.sched_getaffinity(0))
    assert cores == {0: allowed[0], 1: allowed[1 % len(allowed)]} and meta["cpu_affinity"] == [allowed[0]]


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


def test_threads_and_the_bucket_view_reach_the_workers(tmp_path):
    """--threads 2 sets torch's intra-op threads in every worker (the record reads torch.get_num_threads());
    --gradient-as-bucket-view reaches DDP itself (its line is read back from the wrapper) and changes where
    the gradients live, not what they are: the losses stay within float noise of the plain run (two threads
    may split a reduction differently)."""
    from compare.analysis.parity import stepwise

    ok(torchrun(2, *FAST, "--out", str(tmp_path / "plain")))
    result = ok(torchrun(2, *FAST, "--threads", "2", "--gradient-as-bucket-view", "--out", str(tmp_path / "view")))
    meta = read_meta(tmp_path / "view")
    assert meta["threads"] == 2 and meta["options"]["gradient_as_bucket_view"] is True
    assert "DDP: bucket cap 25 MiB, gradients as bucket views True" in result.stderr, result.stderr[-2000:]
    assert read_meta(tmp_path / "plain")["threads"] == 1
    assert stepwise(read_losses(tmp_path / "plain"), read_losses(tmp_path / "view")).passed


@pytest.mark.parametrize("workload", ["resnet", "lm"])
def test_the_larger_workloads_train_alike_on_cpu(tmp_path, horovod_built, workload):
    """The timing workloads through both launchers at np 2, a few steps each: the same losses step by step.
    The lm reads --text-dir (a copy of this repository's docs, text already on the machine): the workers'
    data fingerprint is that directory's, not the standard library's default text."""
    from compare.analysis.parity import stepwise
    from workload.workloads import WORKLOADS

    job = ["--workload", workload, "--steps", "4", "--batch-size", "8", "--dataset-size", "256", "--log-every", "2"]
    text = tmp_path / "text"  # a copy: both sides must read the same bytes while the docs may change
    if workload == "lm":
        text.mkdir()
        for doc in sorted((ROOT / "docs").glob("*.md")):
            (text / doc.name).write_bytes(doc.read_bytes())
        job += ["--text-dir", str(text)]
    ok(horovodrun(2, "gloo", *job, "--out", str(tmp_path / "hvd")))
    ok(torchrun(2, *job, "--out", str(tmp_path / "ddp")))
    metas = [read_meta(tmp_path / side) for side in ("hvd", "ddp")]
    assert all(m["status"] == "ok" and m["options"]["workload"] == workload for m in metas), metas
    hvd, ddp = read_losses(tmp_path / "hvd"), read_losses(tmp_path / "ddp")
    assert len(hvd) == len(ddp) == 4 and stepwise(hvd, ddp).passed, (hvd, ddp)
    if workload == "lm":
        expected = WORKLOADS["lm"].make_data(256, text).fingerprint()
        assert expected != WORKLOADS["lm"].make_data(256).fingerprint()
        assert {m["data"]["fingerprint"] for m in metas} == {expected}, [m.get("data") for m in metas]
