"""Faults injected into real jobs: a killed worker and a stopped (SIGSTOP) one.

DDP recovers under torchrun --max-restarts from its last checkpoint; Horovod goes on under elastic
horovodrun from its last state.commit(); a stopped worker makes both fail within a bounded time.
"""

from __future__ import annotations

import json
import sys
import time

import pytest
from helpers import ROOT, horovodrun, ok, read_losses, read_meta, read_steps, run, tool

from compare.analysis.parity import stepwise

pytestmark = pytest.mark.slow
JOB = ["--workload", "mlp", "--dataset-size", "2048", "--batch-size", "16", "--steps", "40", "--seed", "2"]


def test_torchrun_restart_resumes_from_checkpoint(tmp_path):
    ok(run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", "-m", "native_impl", *JOB,
            "--out", str(tmp_path / "full")]))
    # A hung gloo reconnect after a restart (seen here about once in four) fails after the collective
    # timeout and is restarted again: that is what the extra restarts are for.
    result = ok(run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", "--max-restarts", "3", "-m",
                     "native_impl", *JOB, "--checkpoint-every", "8", "--auto-resume", "--collective-timeout", "20",
                     "--fail-at-step", "13", "--fail-rank", "1", "--fail-mode", "kill", "--out", str(tmp_path / "ft")],
                    timeout=400))
    assert "injecting fault: kill on rank 1 after step 13" in result.stderr
    meta = read_meta(tmp_path / "ft")
    assert meta["status"] == "ok" and meta["resumed_from_step"] in (8,)  # at most one interval lost
    full, recovered = read_losses(tmp_path / "full"), read_losses(tmp_path / "ft")
    assert len(recovered) == 40  # the record tells the whole run: steps 1-8 kept, 9-40 from the restart
    assert recovered[8:] == full[8:]  # from the checkpoint on, exactly the uninterrupted curve
    assert stepwise(full, recovered).passed


@pytest.mark.parametrize("launcher", ["torchrun", "horovodrun-gloo"])
def test_stopped_worker_fails_within_a_bounded_time_naming_it(tmp_path, horovod_built, launcher):
    fault = ["--fail-at-step", "5", "--fail-rank", "1", "--fail-mode", "hang", "--collective-timeout", "10",
             "--out", str(tmp_path)]
    started = time.monotonic()
    if launcher == "torchrun":
        result = run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", "-m", "native_impl", *JOB, *fault],
                     timeout=180)
    else:
        result = horovodrun(2, "gloo", *JOB, *fault)
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert elapsed < 120, f"took {elapsed:.0f} s"
    assert "Timed out" in result.stdout + result.stderr
    meta = read_meta(tmp_path)
    assert meta["status"] == "failed"
    # The error names the stopped rank: DDP through monitored_barrier, Horovod by looking at its peers.
    named = "Ranks 1 failed to pass monitoredBarrier" if launcher == "torchrun" else "rank 1 (pid "
    assert named in meta["error"], meta["error"]
    assert named in result.stdout + result.stderr


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


def test_elastic_horovod_goes_on_after_a_killed_worker(tmp_path, horovod_built):
    discovery = str(ROOT / "scripts" / "horovod-local-hosts.sh")
    result = run([tool("horovodrun"), "-np", "2", "--min-np", "1", "--max-np", "2", "--host-discovery-script",
                  discovery, "--gloo", "--network-interfaces", "lo", "--blacklist-cooldown-range", "2", "4",
                  sys.executable, "-m", "hvd_impl", "--elastic", *JOB, "--checkpoint-every", "5",
                  "--fail-at-step", "12", "--fail-rank", "1", "--fail-mode", "kill", "--out", str(tmp_path)],
                 timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    meta = read_meta(tmp_path)
    assert meta["status"] == "ok" and meta["elastic_world_sizes"][:2] == [2, 1]
    steps = [entry["step"] for entry in read_steps(tmp_path)]
    assert steps == list(range(1, 41))  # steps 11-12, after the last commit, were trained again once


def test_elastic_is_horovods_only(tmp_path):
    result = run([sys.executable, "-m", "native_impl", "--elastic", "--checkpoint-every", "5", "--out", str(tmp_path)])
    assert result.returncode == 2 and "torchrun --max-restarts" in result.stderr


def test_compare_faults_command(tmp_path, horovod_built):
    out = tmp_path / "faults"
    result = run([sys.executable, "-m", "compare", "faults", "--scenarios", "kill", "--steps", "24",
                  "--out", str(out)], timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report = json.loads((out / "faults.json").read_text())
    by_framework = {r["framework"]: r for r in report["results"]}
    assert by_framework["ddp"]["recovered"] and by_framework["horovod"]["recovered"]
    assert by_framework["ddp"]["curve_after_resume_identical"] is True
    assert 0 <= by_framework["ddp"]["steps_lost"] <= 8 and 0 <= by_framework["horovod"]["steps_lost"] <= 8
    assert "| DDP (torchrun restarts) | kill | yes |" in (out / "faults.md").read_text()


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
