"""Launching from Python: torch.multiprocessing.spawn for DDP, horovod.run for Horovod.

The same training and the same run record as under torchrun / horovodrun, and exactly the same losses.
"""

from __future__ import annotations

import sys

import pytest
from helpers import horovodrun, ok, read_losses, read_meta, run, torchrun

pytestmark = pytest.mark.slow
JOB = ["--workload", "mlp", "--steps", "12", "--batch-size", "16", "--dataset-size", "512", "--seed", "3",
       "--log-every", "4"]


@pytest.mark.parametrize("module,launcher,backend", [
    ("native_impl", "spawn", "gloo"),
    ("hvd_impl", "horovod.run", "gloo"),
])
def test_spawn_matches_command_line_launch(tmp_path, horovod_built, module, launcher, backend):
    ok(run([sys.executable, "-m", module, "--spawn", "2", *JOB, "--out", str(tmp_path / "spawn")]))
    meta = read_meta(tmp_path / "spawn")
    assert (meta["status"], meta["launcher"], meta["backend"], meta["world_size"]) == ("ok", launcher, backend, 2)
    if module == "hvd_impl":
        ok(horovodrun(2, "gloo", *JOB, "--out", str(tmp_path / "cli")))
    else:
        ok(torchrun(2, *JOB, "--out", str(tmp_path / "cli")))
    assert read_losses(tmp_path / "spawn") == read_losses(tmp_path / "cli")  # exactly


def test_horovod_run_on_mpi(tmp_path, horovod_built):
    ok(run([sys.executable, "-m", "hvd_impl", "--spawn", "2", "--spawn-controller", "mpi", *JOB,
            "--out", str(tmp_path)]))
    assert read_meta(tmp_path)["backend"] == "mpi"


@pytest.mark.parametrize("module", ["native_impl", "hvd_impl"])
def test_a_failing_worker_ends_the_group(tmp_path, horovod_built, module):
    result = run([sys.executable, "-m", module, "--spawn", "2", *JOB, "--fail-at-step", "4", "--fail-rank", "1",
                  "--out", str(tmp_path)], timeout=120)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"python -m {module}: error:") and "13" in last, result.stderr[-2000:]
    assert read_meta(tmp_path)["status"] != "ok"


def test_python_api_in_a_notebook_style_script(tmp_path, horovod_built):
    script = f"""
from pathlib import Path
from native_impl import train as ddp_train
from hvd_impl import train as hvd_train
from workload.options import Options

options = Options(workload="mlp", steps=8, batch_size=16, dataset_size=512, seeds=(0, 1))
print(ddp_train(Options(**{{**options.__dict__, "out": Path({str(tmp_path / 'ddp')!r})}}), nprocs=2))
print(hvd_train(Options(**{{**options.__dict__, "out": Path({str(tmp_path / 'hvd')!r})}}), np=2))
"""
    result = ok(run([sys.executable, "-c", script]))
    assert "seed-1" in result.stdout
    for side in ("ddp", "hvd"):
        assert read_meta(tmp_path / side / "seed-1")["status"] == "ok"
    assert read_losses(tmp_path / "ddp" / "seed-0") == read_losses(tmp_path / "hvd" / "seed-0")


def test_compare_with_python_launch(tmp_path, horovod_built):
    out = tmp_path / "cmp"
    result = ok(run([sys.executable, "-m", "compare", "run", "--launcher", "spawn", "--np", "2", "--seeds", "0",
                     "--reference", "off", *JOB[:8], "--out", str(out)]))
    assert "parity: holds" in result.stdout
    assert read_meta(out / "runs" / "ddp-np2")["launcher"] == "spawn"
    assert read_meta(out / "runs" / "horovod-np2")["launcher"] == "horovod.run"
