"""scripts/soak.py: short jobs through compare's orchestration leave no process and no listening port.

The leftover detector is checked against processes started here (it must see a listener of the soak's,
and must not blame someone else's), then the real script runs a few clean, killed and stopped jobs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import run, script_module

soak = script_module("soak")

LISTEN = ("import socket, sys, time\n"
          "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
          "print(s.getsockname()[1], flush=True); time.sleep(120)\n")


def listener(*extra_argv: str, marker: str | None = None) -> tuple[subprocess.Popen, int]:
    env = {"PATH": "/usr/bin:/bin", **({soak.MARKER: marker} if marker else {})}
    process = subprocess.Popen([sys.executable, "-c", LISTEN, *extra_argv], stdout=subprocess.PIPE, text=True, env=env)
    return process, int(process.stdout.readline())


def test_detector_reports_a_listener_of_the_soak_and_not_others(tmp_path):
    detector = soak.LeftoverDetector("test-soak")
    mine, my_port = listener(marker="test-soak:7")
    other, other_port = listener("torchrun")  # looks like a launcher, but is not the soak's
    named, _ = listener(str(tmp_path.resolve()))  # no marker, but names the job's directory
    try:
        found = detector.scan(tmp_path)
        pids = {p.pid for p in found.processes}
        ports = {(p.proto, p.ip, p.port) for p in found.ports}
        assert mine.pid in pids and named.pid in pids and other.pid not in pids
        assert ("tcp", "127.0.0.1", my_port) in ports and ("tcp", "127.0.0.1", other_port) not in ports
        assert other.pid in {p.pid for p in found.foreign}
        assert found  # a job that leaves this behind fails the soak
        detector.kill(found)
        mine.wait(timeout=10), named.wait(timeout=10)  # killed (and reaped by the detector's wait)
        after = detector.settle(tmp_path, grace_s=5)
        assert not after, after.describe()
        assert other.poll() is None  # someone else's process is left alone
    finally:
        for process in (mine, other, named):
            process.kill()
            process.wait()


def test_plan_cycles_through_every_combination():
    jobs = soak.plan(9, ["ddp", "horovod-gloo"], ["clean", "kill"])
    assert jobs[:4] == [("ddp", "clean"), ("horovod-gloo", "clean"), ("ddp", "kill"), ("horovod-gloo", "kill")]
    assert jobs[4:8] == jobs[:4] and jobs[8] == jobs[0]
    assert soak.expected_outcome(soak.SETUPS["ddp-restarts"], "kill") == "recovered"
    assert soak.expected_outcome(soak.SETUPS["horovod-mpi"], "hang") == "timed out and killed"


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.timeout(300)
def test_soak_script_leaves_nothing_behind(tmp_path, horovod_built):
    # Horovod Gloo first: its stopped worker ends by the Gloo timeout in about 20 s, torchrun's in about 45 s.
    result = run([sys.executable, "scripts/soak.py", "--jobs", "5", "--setups", "horovod-gloo,ddp",
                  "--scenarios", "clean,kill,hang", "--timeout", "90", "--out", str(tmp_path)], timeout=280)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    document = json.loads((tmp_path / "soak.json").read_text())
    assert document["complete"] is True
    totals = document["totals"]
    assert totals["jobs"] == 5
    assert totals["leftover_processes"] == 0 and totals["leftover_listening_ports"] == 0
    assert totals["jobs_leaving_something"] == 0
    jobs = document["jobs"]
    assert [(j["setup"], j["scenario"]) for j in jobs] == [
        ("horovod-gloo", "clean"), ("ddp", "clean"), ("horovod-gloo", "kill"), ("ddp", "kill"),
        ("horovod-gloo", "hang")]
    for job in jobs:
        assert job["as_expected"], job
        assert job["seconds"] > 0 and not job["leftover_processes"] and not job["leftover_ports"]
    assert "leftover processes: 0" in result.stdout and "leftover listening ports: 0" in result.stdout
    assert (tmp_path / "soak.md").read_text() in result.stdout
