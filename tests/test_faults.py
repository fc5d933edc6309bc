"""Faults injected into real jobs: a killed, an exited and a stopped (SIGSTOP) worker.

Through `compare faults`, DDP recovers under torchrun --max-restarts from its last checkpoint and Horovod goes
on under elastic horovodrun from its last state.commit(); without a recovery path, a stopped worker makes both
fail within a bounded time, naming it.
"""

from __future__ import annotations

import json
import sys
import time

import pytest
from helpers import horovodrun, read_meta, run

pytestmark = pytest.mark.slow
JOB = ["--workload", "mlp", "--dataset-size", "2048", "--batch-size", "16", "--steps", "40", "--seed", "2"]


def test_stopped_worker_fails_within_a_bounded_time_naming_it(tmp_path, horovod_built):
    """A worker stopped (SIGSTOP) under horovodrun: the job fails within a bounded time and names it, Horovod by
    looking at its peers. torchrun's stopped worker is compare faults' DDP hang scenario below (the same fault,
    then restarted): its first attempt names the rank through monitored_barrier."""
    fault = ["--fail-at-step", "5", "--fail-rank", "1", "--fail-mode", "hang", "--collective-timeout", "10",
             "--out", str(tmp_path)]
    started = time.monotonic()
    result = horovodrun(2, "gloo", *JOB, *fault)
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert elapsed < 120, f"took {elapsed:.0f} s"
    assert "Timed out" in result.stdout + result.stderr
    meta = read_meta(tmp_path)
    assert meta["status"] == "failed"
    assert "rank 1 (pid " in meta["error"], meta["error"]
    assert "rank 1 (pid " in result.stdout + result.stderr


def test_horovod_peer_description_tells_stopped_from_exited(horovod_built):
    import os
    import signal
    import socket
    import subprocess

    from workload.processes import describe_peers

    host = socket.gethostname()
    stopped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(stopped.pid, signal.SIGSTOP)
        time.sleep(0.2)
        text = describe_peers([(host, os.getpid()), (host, stopped.pid), (host, exited.pid), (host, running.pid),
                               ("elsewhere", 1)])
    finally:
        for process in (stopped, running):
            process.kill()
            process.wait()
    assert text == (f"rank 1 (pid {stopped.pid}) is stopped; rank 2 (pid {exited.pid}) has exited; "
                    "rank 4 on other hosts not checked")
    assert describe_peers([(host, os.getpid()), (host, os.getpid() + 10**7)]).startswith("rank 1 (pid")


def test_elastic_is_horovods_only(tmp_path):
    result = run([sys.executable, "-m", "native_impl", "--elastic", "--checkpoint-every", "5", "--out", str(tmp_path)])
    assert result.returncode == 2 and "torchrun --max-restarts" in result.stderr


def test_compare_faults_command(tmp_path, horovod_built):
    """Every scenario on both recovery paths: kill and exit recover on both; a stopped worker (hang) fails
    DDP's collective after --collective-timeout and is restarted, while elastic Horovod waits on it until
    --hang-wait ends the launch: reported as expected, not as a failure."""
    out = tmp_path / "faults"
    result = run([sys.executable, "-m", "compare", "faults", "--scenarios", "kill,exit,hang", "--steps", "24",
                  "--collective-timeout", "10", "--hang-wait", "20", "--out", str(out)], timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report = json.loads((out / "faults.json").read_text())
    results = {(r["framework"], r["scenario"]): r for r in report["results"]}
    assert set(results) == {(f, s) for f in ("ddp", "horovod") for s in ("kill", "exit", "hang")}, sorted(results)
    for key in [("ddp", "kill"), ("ddp", "exit"), ("horovod", "kill"), ("horovod", "exit")]:
        assert results[key]["recovered"], (key, results[key]["log"][-500:])
        assert 0 <= results[key]["steps_lost"] <= 8, (key, results[key]["steps_lost"])
    assert results[("ddp", "kill")]["curve_after_resume_identical"] is True  # resumed from its checkpoint
    assert results[("horovod", "kill")]["world_sizes"][:2] == [2, 1]  # elastic: on at the smaller size
    assert results[("ddp", "hang")]["recovered"], results[("ddp", "hang")]["log"][-500:]
    # Before the restart, the collective timed out and rank 0 named the stopped rank through monitored_barrier
    # (native_impl/backend.py), in the error the launch printed.
    hang_log = (out / "ddp-hang" / "launch.log").read_text()
    assert "Timed out" in hang_log and "Ranks 1 failed to pass monitoredBarrier" in hang_log, hang_log[-3000:]
    hung = results[("horovod", "hang")]
    assert not hung["recovered"] and "waits for a stopped worker" in hung["expected_failure"], hung
    table = (out / "faults.md").read_text()
    for row in ("| DDP (torchrun restarts) | kill | yes |", "| DDP (torchrun restarts) | exit | yes |",
                "| DDP (torchrun restarts) | hang | yes |", "| Horovod (elastic) | exit | yes |"):
        assert row in table, table


@pytest.mark.parametrize("explain,note", [
    (lambda exc: "rank 1 (pid 7) is stopped", "rank 1 (pid 7) is stopped"),
    (lambda exc: (_ for _ in ()).throw(PermissionError("denied")), "could not tell which rank failed: PermissionError"),
])
def test_a_failure_is_recorded_with_its_explanation_or_without(tmp_path, explain, note):
    from workload.record import RunRecorder

    recorder = RunRecorder(tmp_path, enabled=True)
    recorder.start({"framework": "test"})
    with pytest.raises(RuntimeError) as info, recorder.failure_recorded(explain=explain):
        raise RuntimeError("Timed out waiting 10000ms")
    assert info.value.__notes__ == [note]  # the original error goes on, with the note
    meta = read_meta(tmp_path)
    assert meta["status"] == "failed" and meta["error"] == f"RuntimeError: Timed out waiting 10000ms [{note}]"
