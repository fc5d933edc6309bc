"""Two hosts on one machine (network namespaces, tests/netns.py): both frameworks across them.

DDP: torchrun started on each host, c10d rendezvous on host 1, gloo on the hosts' interface
(GLOO_SOCKET_IFNAME). Horovod: horovodrun -H on host 1, which starts host 2's worker over ssh
(--network-interfaces). Across hosts the two must still agree (`compare check`), and agree with the
same job on one host; a diverging run must make the check fail. The namespaces have no route beyond
their /24, so nothing the jobs do can leave them.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers import BIN, ROOT, horovodrun, launch_env, ok, read_losses, read_meta, read_steps, run, tool, torchrun
from netns import IFACE, SUBNET, Hosts, ListenerWatch, Ssh, ssh_unavailable, unavailable

from compare.analysis.parity import stepwise

pytestmark = pytest.mark.slow
STEPS = 30
JOB = ["--workload", "mlp", "--steps", str(STEPS), "--log-every", "1"]
RDZV_PORT = 29400  # the namespaces are private: a fixed port cannot collide with anything else


def need(reason: str | None) -> None:
    """Skip where hosts cannot be made (not root, no `ip netns`), but never in CI, which runs as root."""
    if reason:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"cannot make hosts here: {reason}")


@pytest.fixture(scope="module")
def hosts():
    need(unavailable())
    with Hosts(2) as made:
        yield made


@pytest.fixture(scope="module")
def ssh(hosts, tmp_path_factory):
    need(ssh_unavailable())
    access = Ssh(hosts, tmp_path_factory.mktemp("ssh")).start()
    try:
        yield access
    finally:
        access.stop()


def torchrun_across(hosts: Hosts, out: Path, rdzv_id: str, *args: str, rdzv_conf: Sequence[str] = (),
                    timeout: float = 300) -> tuple[list[int], list[str]]:
    """One torchrun per host, started together; their exit statuses and logs. rdzv_conf: per host."""
    command = [tool("torchrun"), "--nnodes", str(len(hosts.hosts)), "--nproc-per-node", "1",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{hosts[0].address}:{RDZV_PORT}", "--rdzv-id", rdzv_id]
    logs = [out.parent / f"{out.name}.node{i}.log" for i in range(len(hosts.hosts))]
    out.parent.mkdir(parents=True, exist_ok=True)
    processes = []
    for i, (host, log) in enumerate(zip(hosts.hosts, logs, strict=True)):
        conf = ["--rdzv-conf", rdzv_conf[i]] if rdzv_conf else []
        with log.open("w") as handle:
            processes.append(subprocess.Popen(
                host.command([*command, *conf, "-m", "native_impl", *args, "--out", str(out)]), cwd=ROOT,
                env=launch_env(GLOO_SOCKET_IFNAME=IFACE), stdin=subprocess.DEVNULL, stdout=handle,
                stderr=subprocess.STDOUT, start_new_session=True))
    deadline = time.monotonic() + timeout
    try:
        codes = [process.wait(timeout=max(1.0, deadline - time.monotonic())) for process in processes]
    finally:
        for process in processes:  # only on timeout or error: the namespaces' teardown would also get them
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return codes, [log.read_text() for log in logs]


def all_ok(result: tuple[list[int], list[str]]) -> list[str]:
    codes, texts = result
    assert codes == [0] * len(codes), "\n".join(f"node {i} exit {c}:\n{t[-3000:]}"
                                                 for i, (c, t) in enumerate(zip(codes, texts, strict=True)))
    return texts


def horovodrun_across(hosts: Hosts, ssh: Ssh, out: Path, *args: str) -> subprocess.CompletedProcess:
    slots = ",".join(f"{host.address}:1" for host in hosts.hosts)
    # --disable-cache: horovodrun would otherwise record its ssh check under ~/.horovod. The ssh wrapper
    # first on PATH keeps known hosts out of ~/.ssh; horovodrun passes PATH on to the remote worker too.
    return run(hosts[0].command([tool("horovodrun"), "-np", str(len(hosts.hosts)), "-H", slots, "--gloo",
                                 "--network-interfaces", IFACE, "--disable-cache", "--start-timeout", "120",
                                 sys.executable, "-m", "hvd_impl", *args, "--out", str(out)]),
               timeout=300, PATH=f"{ssh.bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def check(a: Path, b: Path) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "compare", "check", str(a), str(b)], timeout=120)


@pytest.fixture(scope="module")
def runs(hosts, ssh, tmp_path_factory, horovod_built):
    """Both frameworks across the two hosts and on one host, plus one diverging run across hosts."""
    root = tmp_path_factory.mktemp("multihost")
    watch = ListenerWatch(hosts.hosts)
    with watch.running():
        ok(horovodrun_across(hosts, ssh, root / "hvd-2hosts", *JOB))
        all_ok(torchrun_across(hosts, root / "ddp-2hosts", f"{hosts[0].name}-ddp", *JOB))
        # The same job with a real difference: from step 10 on, DDP's learning rate is 5% higher.
        all_ok(torchrun_across(hosts, root / "ddp-2hosts-lr", f"{hosts[0].name}-lr", *JOB,
                               "--lr-change-at-step", "10", "--lr-change-factor", "1.05"))
    ok(horovodrun(2, "gloo", *JOB, "--out", str(root / "hvd-1host")))
    ok(torchrun(2, *JOB, "--out", str(root / "ddp-1host")))
    return root, watch.seen


def test_hosts_are_separate_and_closed(hosts):
    probe = ("import socket\ntry:\n    socket.create_connection(('203.0.113.1', 80), timeout=10)\n"
             "except OSError as exc:\n    print(exc.errno)\n")
    for host in hosts.hosts:
        assert host.links() == ["lo", IFACE]
        routes = host.routes()
        # Only the hosts' own /24 (and IPv6 link-local): no default route, so nothing can leave.
        assert not [r for r in routes if r.startswith("default")], routes
        assert [r.split()[0] for r in routes if not r.startswith(("fe80::", "multicast", "ff00::"))] == [
            f"{SUBNET}.0/24"], routes
        assert subprocess.run(host.command(["hostname"]), capture_output=True, text=True).stdout.strip() == host.name
        result = subprocess.run(host.command([sys.executable, "-c", probe]), capture_output=True, text=True,
                                timeout=60)
        assert result.stdout.strip() == str(errno.ENETUNREACH), result.stdout + result.stderr
    # Each host resolves every host's name to its address, as on a cluster with working name resolution.
    lookup = subprocess.run(hosts[0].command(["getent", "hosts", hosts[1].name]), capture_output=True, text=True)
    assert lookup.stdout.split()[0] == hosts[1].address


def test_three_hosts_on_a_bridge(tmp_path):
    need(unavailable())
    server = ("import socket\ns = socket.create_server((%r, 5000))\nprint('up', flush=True)\n"
              "for _ in range(2):\n    c, _ = s.accept()\n    c.sendall(b'from ' + socket.gethostname().encode())\n"
              "    c.close()\n")
    client = "import socket, sys\nprint(socket.create_connection((sys.argv[1], 5000), timeout=20).recv(100).decode())\n"
    with Hosts(3) as three:
        target = three[2]
        listener = subprocess.Popen(target.command([sys.executable, "-c", server % target.address]),
                                    stdout=subprocess.PIPE, text=True)
        assert listener.stdout.readline().strip() == "up"
        for source in (three[0], three[1]):
            got = subprocess.run(source.command([sys.executable, "-c", client, target.address]),
                                 capture_output=True, text=True, timeout=60)
            assert got.stdout.strip() == f"from {target.name}", got.stderr
        listener.wait(timeout=60)
    assert not [n for n in _namespaces() if n.startswith(three.base)]


def _namespaces() -> list[str]:
    return [line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                       text=True).stdout.splitlines() if line.strip()]


def test_ssh_between_hosts_leaves_home_alone(hosts, ssh):
    known_hosts = Path.home() / ".ssh" / "known_hosts"
    before = known_hosts.read_bytes() if known_hosts.exists() else None
    result = ssh.run(hosts[0], hosts[1], "hostname; ip -4 -br addr show " + IFACE)
    assert result.returncode == 0, result.stderr
    name, address_line = result.stdout.splitlines()
    assert name == hosts[1].name and f"{hosts[1].address}/24" in address_line
    assert (ssh.dir / "known_hosts").exists()
    assert (known_hosts.read_bytes() if known_hosts.exists() else None) == before


def test_frameworks_agree_across_hosts(runs):
    root, _ = runs
    result = check(root / "hvd-2hosts", root / "ddp-2hosts")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parity holds" in result.stdout


def test_records_show_two_hosts(runs, hosts):
    root, _ = runs
    for name, framework, launcher, iface_variable in (("hvd-2hosts", "horovod", "horovodrun", "HOROVOD_GLOO_IFACE"),
                                                      ("ddp-2hosts", "ddp", "torchrun", "GLOO_SOCKET_IFNAME")):
        meta = read_meta(root / name)
        assert meta["status"] == "ok", meta
        assert (meta["framework"], meta["launcher"], meta["backend"], meta["world_size"]) == (
            framework, launcher, "gloo", 2)
        assert meta["host"]["hostname"] == hosts[0].name  # rank 0 ran on host 1, which writes the record
        assert meta["hosts"] == [hosts[0].name, hosts[1].name]  # every rank's host, in rank order
        assert meta["env"][iface_variable] == IFACE
        assert meta["steps"] == STEPS
        steps = [entry["step"] for entry in read_steps(root / name)]
        assert steps == list(range(1, STEPS + 1))


def test_same_verdict_as_on_one_host(runs):
    root, _ = runs
    one_host = check(root / "hvd-1host", root / "ddp-1host")
    assert one_host.returncode == 0, one_host.stdout + one_host.stderr
    for framework in ("hvd", "ddp"):  # and each framework trains across hosts as it does on one
        across, alone = read_losses(root / f"{framework}-2hosts"), read_losses(root / f"{framework}-1host")
        result = stepwise(across, alone, k=20, rtol=1e-5)  # what `compare check` applies
        assert result.passed, f"{framework}: max relative difference {result.max_rel_diff:.2e}"
        assert across[-1] < across[0]  # and it does learn


def test_check_fails_for_a_diverging_run_across_hosts(runs):
    root, _ = runs
    result = check(root / "hvd-2hosts", root / "ddp-2hosts-lr")
    assert result.returncode == 1, result.stdout + result.stderr
    # The update of step 10 is the first with the changed rate: the loss of step 11 is the first it moves.
    assert "diverges at step 11" in result.stdout and "parity fails" in result.stdout, result.stdout


def test_jobs_listen_only_inside_their_hosts(runs, hosts):
    _, seen = runs
    wildcard = {"0.0.0.0", "*", "::"}  # inside a namespace these cover only its own interfaces
    for host in hosts.hosts:
        allowed = {host.address, "127.0.0.1", "::1"} | wildcard
        assert {address for address, _ in seen[host.name]} <= allowed, seen[host.name]
        assert (host.address, 22) in seen[host.name]  # the watch did see this host's sockets
    # And it saw the jobs, not just sshd: rendezvous stores and gloo's listening sockets.
    assert [s for host in hosts.hosts for s in seen[host.name] if s[1] != 22]


def test_nothing_left_behind(hosts, ssh, runs):
    # The jobs are over: only each host's sshd still runs in its namespace (no worker outlived its launcher).
    for host, sshd in zip(hosts.hosts, ssh.processes, strict=True):
        deadline = time.monotonic() + 15
        while host.pids() != [sshd.pid] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert host.pids() == [sshd.pid], [_cmdline(pid) for pid in host.pids()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return f"{pid} (gone)"


def test_teardown_removes_everything(tmp_path):
    need(unavailable())
    with pytest.raises(RuntimeError, match="on purpose"), Hosts(2) as pair:
        sleeper = subprocess.Popen(pair[1].command(["sleep", "600"]))
        raise RuntimeError("a test failing on purpose")
    assert sleeper.wait(timeout=30) != 0  # killed by the teardown
    assert not [n for n in _namespaces() if n.startswith(pair.base)]
    assert not list(Path("/etc/netns").glob(f"{pair.base}*"))


# Debian's default /etc/hosts names the machine itself 127.0.1.1. Both launchers then need help, each its own.


@pytest.fixture(scope="module")
def debian_hosts():
    need(unavailable())
    with Hosts(2, own_name_on_loopback=True) as made:
        yield made


def test_torchrun_needs_is_host_when_its_name_is_loopback(debian_hosts, tmp_path):
    # Host 1 looks for the endpoint among the addresses its own name resolves to (127.0.1.1), so nobody
    # hosts the rendezvous store and both nodes time out (read_timeout 5 s instead of 60 s here).
    codes, logs = torchrun_across(debian_hosts, tmp_path / "plain", "plain", *JOB,
                                  rdzv_conf=["read_timeout=5", "read_timeout=5"])
    assert codes == [1, 1], logs
    assert all(f"while trying to connect to ({debian_hosts[0].address}, {RDZV_PORT})" in log for log in logs)
    all_ok(torchrun_across(debian_hosts, tmp_path / "is-host", "is-host", *JOB, rdzv_conf=["is_host=1", "is_host=0"]))
    assert read_meta(tmp_path / "is-host")["status"] == "ok"


def test_horovod_gloo_works_when_its_name_is_loopback(debian_hosts, tmp_path_factory, tmp_path, horovod_built):
    # Horovod 0.28.1 builds the Gloo device of its process sets without HOROVOD_GLOO_IFACE
    # (GlooContext::InitializeForProcessSet reads its own, empty gloo_iface_), so Gloo fell back to the
    # address of the machine's own name, 127.0.1.1, which the other host cannot reach: the job aborted with
    # `connect [127.0.1.1]`. The project's build patches it (scripts/patch-horovod.sh): the process sets take
    # the global context's interface, and the job trains across the hosts.
    lookup = subprocess.run(debian_hosts[0].command(["getent", "hosts", debian_hosts[0].name]),
                            capture_output=True, text=True)
    assert lookup.stdout.split()[0] == "127.0.1.1"  # the trap is there
    ssh = Ssh(debian_hosts, tmp_path_factory.mktemp("ssh-debian")).start()
    try:
        result = ok(horovodrun_across(debian_hosts, ssh, tmp_path / "hvd", *JOB))
    finally:
        ssh.stop()
    assert "127.0.1.1" not in result.stdout + result.stderr
    meta = read_meta(tmp_path / "hvd")
    assert (meta["status"], meta["backend"], meta["hosts"]) == ("ok", "gloo", [h.name for h in debian_hosts.hosts])
    assert meta["env"]["HOROVOD_GLOO_IFACE"] == IFACE


def failing_launch(hosts: Hosts, ssh: Ssh, out: Path, env: dict[str, str]):
    """A two-host Horovod launch, as compare's launch code runs it, whose rank 1 (host 2) stops itself at
    step 3: rank 0 fails after its 5 s collective timeout, horovodrun ends, and rank 1 is left stopped."""
    from compare.launch.lines import Launch

    slots = ",".join(f"{host.address}:1" for host in hosts.hosts)
    command = hosts[0].command([tool("horovodrun"), "-np", "2", "-H", slots, "--gloo", "--network-interfaces", IFACE,
                                "--disable-cache", "--start-timeout", "120", sys.executable, "-m", "hvd_impl", *JOB,
                                "--fail-at-step", "3", "--fail-rank", "1", "--fail-mode", "hang",
                                "--collective-timeout", "5", "--out", str(out)])
    env = {"PATH": f"{ssh.bin_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **env}
    return Launch("horovod", 2, (0,), command, env, out, out.parent / f"{out.name}.log")


def workers_on(host) -> list[str]:
    return [line for line in map(_cmdline, host.pids()) if "hvd_impl" in line]


def documented_cleanup() -> tuple[str, str]:
    """docs/multi-host.md's loop that ends a failed job's remote workers: (its marker as VAR=value, the line)."""
    text = (ROOT / "docs" / "multi-host.md").read_text(encoding="utf-8")
    started = re.search(r"^(\w+=[\w-]+) horovodrun .*$", text, re.MULTILINE)
    loop = re.search(r"^ssh host2 '.*'$", text, re.MULTILINE)
    assert started and loop, "docs/multi-host.md no longer shows the marked job and its loop"
    return started.group(1), loop.group(0)


def test_a_failed_launch_leaves_its_remote_worker_until_the_documented_loop_ends_it(hosts, ssh, tmp_path,
                                                                                    horovod_built):
    """horovodrun alone leaves host 2's stopped worker behind; docs/multi-host.md's loop, run over ssh as the
    page gives it, ends exactly the workers that carry the job's variable."""
    from compare.launch.process import run_launch

    marker, loop = documented_cleanup()
    name, value = marker.split("=", 1)
    failed = run_launch(failing_launch(hosts, ssh, tmp_path / "hvd", {name: value}), timeout_s=240)
    assert not failed.ok and not failed.timed_out, failed.log_tail
    try:
        assert workers_on(hosts[1]), "horovodrun left no worker behind: this test shows nothing any more"
        assert not workers_on(hosts[0])
        line = loop.replace("ssh host2 ", f"ssh {hosts[1].address} ", 1)
        ended = ok(run(hosts[0].command(["sh", "-c", line]), timeout=60,
                       PATH=f"{ssh.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")).stdout
        assert re.search(r"^killed \d+$", ended, re.MULTILINE), ended
        deadline = time.monotonic() + 15
        while workers_on(hosts[1]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not workers_on(hosts[1])
    finally:
        for pid in hosts[1].pids():  # the hosts share this machine's process table: end it here
            if "hvd_impl" in _cmdline(pid):
                os.kill(pid, signal.SIGKILL)
