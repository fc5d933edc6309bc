"""What a new user walking the README and docs ran into (issue 19), held through the real launchers."""

from __future__ import annotations

import pytest
from helpers import horovodrun, ok, read_meta, run, tool, torchrun

FAULT = ["--workload", "mlp", "--dataset-size", "512", "--batch-size", "16", "--steps", "6", "--seed", "1",
         "--fail-at-step", "3", "--fail-rank", "1", "--fail-mode", "exit"]


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["torchrun", "horovodrun"])
def test_a_new_run_does_not_inherit_an_old_runs_fault_marker(tmp_path, launch):
    launch_job = (lambda *a: torchrun(2, *a)) if launch == "torchrun" else (lambda *a: horovodrun(2, "gloo", *a))
    first = launch_job(*FAULT, "--out", str(tmp_path))
    assert first.returncode != 0 and (tmp_path / ".fault-injected-rank-1").exists()
    # The same command again in the same --out: a new job, so the fault fires again.
    second = launch_job(*FAULT, "--out", str(tmp_path))
    assert second.returncode != 0, "the old marker silently disabled --fail-at-step"
    assert "injecting fault: exit on rank 1 after step 3" in second.stdout + second.stderr
    # A clean run in the same --out leaves none of the old run's error files beside its ok record.
    ok(launch_job(*FAULT[:-6], "--out", str(tmp_path)))
    assert read_meta(tmp_path)["status"] == "ok"
    assert not list(tmp_path.glob("error-rank-*.txt")) and not list(tmp_path.glob(".fault-injected-*"))


@pytest.mark.slow
def test_a_restart_of_the_same_job_still_sees_its_marker(tmp_path):
    # torchrun --max-restarts: the restarted group is the same job; the fault fires once and the job recovers.
    result = ok(run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "-m",
                     "native_impl", *FAULT, "--out", str(tmp_path)]))
    assert (result.stdout + result.stderr).count("injecting fault") == 1
    assert read_meta(tmp_path)["status"] == "ok"
