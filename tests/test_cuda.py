"""The CUDA paths, through the real launchers: both frameworks over NCCL, float16 AMP with a GradScaler,
SyncBatchNorm, fp16 gradient compression, and the single-process reference on the GPU.

Runs only where torch sees a CUDA device (scripts/gpu-check.sh runs the same checks, and builds Horovod with NCCL
first, on a GPU machine); the Horovod half also needs a Horovod built with NCCL (HOROVOD_GPU_OPERATIONS=NCCL).
One GPU holds one rank per framework: NCCL refuses two ranks on one device. At np 1 Horovod's DistributedOptimizer
sends no gradients (it registers its hooks only when size > 1) and SyncBatchNorm is plain batch norm, while DDP
still allreduces over NCCL. So the runs use np 2 where two GPUs are present, and on one GPU the tests whose point
is communication (fp16 compression and SyncBatchNorm across the frameworks, SyncBatchNorm against the reference)
are skipped. The resnet workload is not reproducible run to run on the GPU (cuDNN convolution and pooling backward
kernels): measured on an H200, the same DDP command twice differed by 1.1e-2 within 20 steps, so the sync-bn runs
are judged against a band calibrated by a repeated DDP run, as `compare check --calibration` does.
"""

from __future__ import annotations

import re
import sys

import pytest
import torch
from helpers import ROOT, horovodrun, ok, read_losses, read_meta, read_steps, reference, run, torchrun

from compare.analysis.parity import by_step, calibrated_band, stepwise
from compare.names import Exit

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
NP = 2 if GPUS >= 2 else 1  # one rank a GPU
communication = pytest.mark.skipif(GPUS < 2, reason=(
    "needs 2 GPUs: at np 1 (one GPU, one rank) Horovod sends no gradients and SyncBatchNorm is plain batch norm, "
    "so nothing this test is about would cross NCCL"))

JOB = ["--device", "cuda", "--steps", "24", "--log-every", "8", "--seed", "3"]
CONFIGS = {
    "plain": ["--workload", "mlp"],
    "amp": ["--workload", "mlp", "--amp"],
    "sync-bn": ["--workload", "resnet", "--batch-size", "32", "--sync-bn"],
    "fp16": ["--workload", "mlp", "--compression", "fp16"],
}
# The reference has no gradient compression: the fp16 runs are held to parity between the frameworks only.
WITH_REFERENCE = ("plain", "amp", "sync-bn")
NONDETERMINISTIC = ("sync-bn",)  # judged against a repeated DDP run of the same command
COMMUNICATION = ("sync-bn", "fp16")  # what they change happens between ranks: judged at np 2 only
# A real divergence with the same options as the plain run: from the update of step 10 on, a 5% higher rate.
LATE_CHANGE = ["--lr-change-at-step", "10", "--lr-change-factor", "1.05"]


def configs(names) -> list:
    return [pytest.param(name, marks=communication) if name in COMMUNICATION else name for name in names]


@pytest.fixture(scope="module")
def horovod_nccl() -> None:
    probe = run([sys.executable, "-c", "import horovod.torch as hvd; print(int(bool(hvd.nccl_built())))"], timeout=120)
    if probe.returncode != 0:
        pytest.fail(f"Horovod is not installed: run scripts/setup.sh\n{probe.stderr[-2000:]}")
    if probe.stdout.strip().splitlines()[-1] != "1":
        pytest.skip("Horovod was built without NCCL: HOROVOD_GPU_OPERATIONS=NCCL scripts/setup.sh")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """DDP and reference records of every configuration at np NP, launched once for the module."""
    root = tmp_path_factory.mktemp("cuda")
    for name, args in CONFIGS.items():
        ok(torchrun(NP, *JOB, *args, "--out", str(root / f"ddp-{name}")))
        if name in WITH_REFERENCE:
            ok(reference(NP, *JOB, *args, "--out", str(root / f"ref-{name}")))
        if name in NONDETERMINISTIC:
            ok(torchrun(NP, *JOB, *args, "--out", str(root / f"ddp-{name}-again")))
    ok(torchrun(NP, *JOB, *CONFIGS["plain"], *LATE_CHANGE, "--out", str(root / "ddp-plain-late")))
    return root


@pytest.fixture(scope="module")
def horovod_runs(runs, horovod_nccl) -> dict:
    for name, args in CONFIGS.items():
        ok(horovodrun(NP, "gloo", *JOB, *args, "--out", str(runs / f"hvd-{name}")))
    return runs


def _check_cuda_record(run_dir, framework: str, backend: str) -> None:
    meta = read_meta(run_dir)
    assert meta["status"] == "ok", meta.get("error")
    assert (meta["framework"], meta["backend"], meta["device"]) == (framework, backend, "cuda:0")
    assert meta["world_size"] == NP
    assert meta["host"]["gpus"], "the record names no GPU"
    steps = read_steps(run_dir)
    assert len(steps) == 24
    assert all(torch.isfinite(torch.tensor(entry["loss"])) for entry in steps)


@pytest.mark.parametrize("name", CONFIGS)
def test_ddp_trains_on_cuda_over_nccl(runs, name):
    _check_cuda_record(runs / f"ddp-{name}", "ddp", "nccl")
    assert read_meta(runs / f"ddp-{name}")["versions"]["nccl"]


@pytest.mark.parametrize("name", CONFIGS)
def test_horovod_trains_on_cuda(horovod_runs, name):
    # "nccl" here is Horovod's setting; that its gradients cross NCCL is shown by the parity with DDP at np 2.
    _check_cuda_record(horovod_runs / f"hvd-{name}", "horovod", "nccl")


def _parity(runs, name: str, a: str, b: str):
    """The default band where the GPU computes reproducibly; else the band of a repeated DDP run, from step 2.
    fp16 compression: Horovod compresses then averages, DDP's hook divides then sums, each rounding to half
    precision, so across ranks the frameworks part at the 1e-5 level (tests/test_features.py): a 1e-4 floor."""
    band = None
    if name in NONDETERMINISTIC:
        band = calibrated_band(by_step(read_losses(runs / f"ddp-{name}")),
                               by_step(read_losses(runs / f"ddp-{name}-again")), k=1)
    return stepwise(read_losses(runs / f"{a}-{name}"), read_losses(runs / f"{b}-{name}"), band=band,
                    rtol=1e-4 if name == "fp16" else 1e-5)


@pytest.mark.parametrize("name", configs(CONFIGS))
def test_horovod_and_ddp_agree_on_cuda(horovod_runs, name):
    result = _parity(horovod_runs, name, "hvd", "ddp")
    assert result.passed, f"max relative difference {result.max_rel_diff:.2e} at step {result.max_at_step}"


@pytest.mark.parametrize("name", configs(WITH_REFERENCE))
def test_ddp_follows_the_reference_on_cuda(runs, name):
    meta = read_meta(runs / f"ref-{name}")
    assert (meta["framework"], meta["device"]) == ("reference", "cuda:0")
    result = _parity(runs, name, "ddp", "ref")
    assert result.passed, f"max relative difference {result.max_rel_diff:.2e} at step {result.max_at_step}"


def test_amp_is_another_trajectory(runs):
    # float16 autocast changes the arithmetic: the parity check must see it, so a pass above means something.
    assert not stepwise(read_losses(runs / "ddp-plain"), read_losses(runs / "ddp-amp")).passed


def test_compare_check_on_cuda_records(horovod_runs):
    # The command-line check reads the GPU records as it reads any: holds on a pair, fails on a real divergence
    # of the same job (plain against amp would be "different jobs", exit 5, and never reach the losses).
    holds = run([sys.executable, "-m", "compare", "check", str(horovod_runs / "hvd-amp"),
                 str(horovod_runs / "ddp-amp")])
    assert holds.returncode == Exit.OK, holds.stdout + holds.stderr
    fails = run([sys.executable, "-m", "compare", "check", str(horovod_runs / "hvd-plain"),
                 str(horovod_runs / "ddp-plain-late")])
    assert fails.returncode == Exit.PARITY_FAILS, fails.stdout + fails.stderr
    # Nothing moves before the changed rate: the update of step 10 is the first, so the loss of step 11.
    at = re.search(r"diverges at step (\d+)", fails.stdout)
    assert at and 11 <= int(at.group(1)) <= 24, fails.stdout


def test_migrate_verify_runs_both_sides_on_nccl(tmp_path, horovod_nccl):
    """`compare migrate SCRIPT --verify --device cuda`: the original under horovodrun, its migration under torchrun,
    both seeing the GPUs; the script takes its local rank's, and the DDP side's process group is NCCL. Without
    --device cuda the same verify hides the GPUs from both sides, and the migration runs on Gloo."""
    script = ROOT / "examples" / "horovod_scripts" / "cpu_metrics_nccl.py"
    for device, backend in (("cuda", "nccl"), ("cpu", "gloo")):
        verify_out = tmp_path / device
        result = run([sys.executable, "-m", "compare", "migrate", str(script), "-o", str(tmp_path / "cm_ddp.py"),
                      "--force", "--verify", "--device", device, "--verify-np", str(NP), "--verify-out",
                      str(verify_out), "--", "--epochs", "1"], timeout=600)
        assert result.returncode == Exit.OK, result.stdout[-3000:] + result.stderr[-3000:]
        assert re.search(r"^parity holds", result.stdout, re.MULTILINE), result.stdout
        assert read_meta(verify_out / "ddp")["backend"] == backend
        assert ("device: cuda" in result.stdout) == (device == "cuda")
