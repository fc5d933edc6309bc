"""Launching from Python: torch.multiprocessing.spawn for DDP, horovod.run for Horovod.

The same training and the same run record as under torchrun / horovodrun, and exactly the same losses: that,
and `compare run --launcher spawn`, are tested on the plug-in's runs under every launcher (tests/test_own_job.py).
"""

from __future__ import annotations

import statistics
import sys

import pytest
from helpers import horovodrun, ok, read_losses, read_meta, read_steps, run

pytestmark = pytest.mark.slow
JOB = ["--workload", "mlp", "--steps", "12", "--batch-size", "16", "--dataset-size", "512", "--seed", "3",
       "--log-every", "4"]


def test_horovod_run_steps_within_noise_of_horovodrun(tmp_path, horovod_built):
    # Horovod 0.28.1's runner has `self.cycle_time_ms = None,` (a trailing comma): horovod.run handed its
    # workers HOROVOD_CYCLE_TIME="(None,)" and HOROVOD_CACHE_CAPACITY="(None,)", which Horovod reads as 0: a
    # busy background loop and no response cache, steps 10x slower than under horovodrun at np 2.
    # scripts/patch-horovod.sh removes the commas. The handed values are the check; the step times, of one
    # adjacent pair (the machine is shared: beside another file's launches one pair came out 2.9x), show the 10x,
    # far outside the 5 allowed.
    job = [*JOB[:2], "--steps", "60", "--batch-size", "16", "--dataset-size", "2048", "--seed", "3"]
    times: dict[str, list[float]] = {"horovod.run": [], "horovodrun": []}
    for launcher in ("horovodrun", "horovod.run"):
        out = tmp_path / launcher
        if launcher == "horovod.run":
            ok(run([sys.executable, "-m", "hvd_impl", "--spawn", "2", *job, "--out", str(out)]))
        else:
            ok(horovodrun(2, "gloo", *job, "--out", str(out)))
        env = read_meta(out)["env"]
        for name in ("HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY"):
            assert env.get(name) != "(None,)", f"{launcher} handed its workers {name}={env[name]}"
        times[launcher] += [step["step_time_s"] for step in read_steps(out)[5:]]
    ratio = statistics.median(times["horovod.run"]) / statistics.median(times["horovodrun"])
    assert ratio < 5, f"horovod.run steps {ratio:.1f}x slower than horovodrun"


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
