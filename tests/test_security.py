"""Security defaults: single-host workers listen on loopback, records hold no secrets, loads run no code.

What listens where, measured (docs/fault-tolerance.md, "Security defaults"): the workers' own sockets are
the project's to place; torchrun's rendezvous store and Horovod's driver bind every interface in the
frameworks' code and are listed there, not tested here.
"""

from __future__ import annotations

import ast
import ipaddress
import os
import subprocess
import sys
import time

import psutil
import pytest
from helpers import ROOT, tool

pytestmark = pytest.mark.slow
JOB = ["--workload", "mlp", "--steps", "400", "--log-every", "50"]
SECRET = "hunter2-not-for-records"


def listening_addresses(command: list[str], env: dict[str, str], timeout: float = 120,
                        listening_only: bool = True) -> dict[str, set[str]]:
    """Run a launch and collect, per process name, the addresses its processes listen on (or, with
    listening_only False, the local addresses of all their sockets, connected ones included)."""
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    found: dict[str, set[str]] = {}
    deadline = time.monotonic() + timeout
    try:
        while process.poll() is None and time.monotonic() < deadline:
            try:
                tree = {process.pid} | {c.pid for c in psutil.Process(process.pid).children(recursive=True)}
                names = {pid: psutil.Process(pid).name() for pid in tree if psutil.pid_exists(pid)}
            except psutil.Error:
                break
            for conn in psutil.net_connections("inet"):
                if conn.pid in names and conn.laddr and (conn.status == psutil.CONN_LISTEN or not listening_only):
                    found.setdefault(names[conn.pid], set()).add(conn.laddr.ip)
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
        process.wait()
    assert process.returncode == 0, f"{command} exited {process.returncode}"
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1, an IPv4 loopback peer on a dual-stack socket
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


@pytest.mark.parametrize("launcher", ["torchrun", "horovodrun-gloo"])
def test_single_host_workers_listen_on_loopback_only(tmp_path, horovod_built, launcher):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if launcher == "torchrun":
        command = [tool("torchrun"), "--standalone", "--nproc-per-node", "2", "-m", "native_impl"]
    else:
        command = [tool("horovodrun"), "-np", "2", "--gloo", "--network-interfaces", "lo", "-H", "localhost:2",
                   sys.executable, "-m", "hvd_impl"]
    # Every socket of the workers, connected ones too: gloo's listeners may close once the mesh is up.
    found = listening_addresses([*command, *JOB, "--out", str(tmp_path)], env, listening_only=False)
    workers = found.get("python", set())
    assert workers, f"no worker socket seen: {found}"  # the check looked at the right processes
    assert all(is_loopback(address) for address in workers), found
    if launcher == "torchrun":
        # The launcher's own store binds every interface, and the same watch sees it: it can fail (compare run
        # puts that server in a loopback-only namespace, below).
        servers = set().union(*(addresses for name, addresses in found.items() if name != "python"))
        assert {"0.0.0.0", "::"} & servers, found


def test_compare_run_in_a_private_network_exposes_no_socket(tmp_path, horovod_built):
    """compare run's default on a machine that allows it (root): every launch in a loopback-only network
    namespace, so even the servers that bind every interface (torchrun's store, Horovod's driver) are out
    of reach. Outside one the same watch sees torchrun's store (test_single_host_workers_listen_on_loopback_only):
    the check can fail."""
    from compare.launch.lines import private_network_available

    if not private_network_available() and not os.environ.get("CI"):
        pytest.skip("network namespaces need root, unshare and ip")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    found = listening_addresses([sys.executable, "-m", "compare", "run", "--np", "2", "--seeds", "0", *JOB,
                                 "--reference", "off", "--repeats", "0", "--out", str(tmp_path)], env, timeout=300)
    assert found == {}, found
    assert "loopback only" in (tmp_path / "report.md").read_text()


def test_records_and_checkpoints_hold_no_secrets(tmp_path, horovod_built):
    """horovodrun hands its workers a secret key (_HOROVOD_SECRET_KEY); the user's environment may hold
    tokens. Neither may reach run.json, metrics or a checkpoint."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "API_TOKEN": SECRET, "HOROVOD_SECRET_NOTE": SECRET}
    out = tmp_path / "run"
    subprocess.run([tool("horovodrun"), "-np", "2", "--gloo", "--network-interfaces", "lo", "-H", "localhost:2",
                    sys.executable, "-m", "hvd_impl", "--steps", "8", "--checkpoint-every", "4", "--out", str(out)],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    written = [path for path in out.rglob("*") if path.is_file()]
    assert {"run.json", "metrics.jsonl", "checkpoint.pt"} <= {path.name for path in written}
    for path in written:
        data = path.read_bytes()
        assert SECRET.encode() not in data, path
        assert b"SECRET_KEY" not in data and b"API_TOKEN" not in data, path


def test_every_torch_load_is_weights_only():
    calls = []
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
                weights_only = [k for k in node.keywords if k.arg == "weights_only"]
                calls.append((path, weights_only and isinstance(weights_only[0].value, ast.Constant)
                              and weights_only[0].value.value is True))
    assert calls, "no torch.load found: the scan looks in the wrong place"
    assert all(ok for _, ok in calls), [str(path) for path, ok in calls if not ok]
