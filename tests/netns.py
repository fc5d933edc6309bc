"""Hosts on one machine: network namespaces joined by veth links, each with its own hostname and sshd.

Each host is a network namespace (`ip netns`) with loopback and one interface, named IFACE in every
host (Horovod's --network-interfaces and GLOO_SOCKET_IFNAME take one name for all hosts), on a private
/24 with no route beyond it. Two hosts share one veth pair; more hang off a bridge in a hub namespace.
A command runs "on" a host through `Host.command`: inside its namespace, in a UTS namespace of its own
with the host's name as hostname, and with the host's own /etc/hosts (`ip netns exec` mounts
/etc/netns/NAME/hosts over /etc/hosts) that maps every host name to its address, as on real hosts.

Names are unique per run (prefix, pid, random token), and `Hosts` tears everything down on exit, whatever
happened: every process left in its namespaces is killed, the namespaces and /etc/netns entries are
deleted. Namespaces left by a run that was itself killed are swept on the next start.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "hvdc"
IFACE = "eth1"
SUBNET = "10.77.0"
SSHD = "/usr/sbin/sshd"  # sshd re-executes itself and insists on an absolute path


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def unavailable() -> str | None:
    """Why hosts cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    probe = f"{PREFIX}-probe-{os.getpid()}-{secrets.token_hex(2)}"
    try:
        made = _ip("netns", "add", probe, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"ip netns add failed: {exc}"
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def ssh_unavailable() -> str | None:
    if not Path(SSHD).exists() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "openssh-server and openssh-client are not installed (scripts/setup.sh installs them)"
    return None


@dataclass
class Host:
    name: str  # namespace name and hostname
    address: str

    def command(self, args: Sequence[str]) -> list[str]:
        """args, run on this host (unshare and sh exec, so the process started is the command itself)."""
        return ["ip", "netns", "exec", self.name, "unshare", "--uts", "--", "/bin/sh", "-c",
                'hostname "$0" && exec "$@"', self.name, *args]

    def pids(self) -> list[int]:
        result = _ip("netns", "pids", self.name, check=False)
        return [int(pid) for pid in result.stdout.split()]

    def listeners(self) -> set[tuple[str, int]]:
        """(address, port) of every listening TCP socket in this host's namespace."""
        out = subprocess.run(["ip", "netns", "exec", self.name, "ss", "-Hltn"], capture_output=True, text=True,
                             timeout=30).stdout
        found = set()
        for line in out.splitlines():
            local = line.split()[3]  # State Recv-Q Send-Q Local:Port Peer:Port
            address, _, port = local.rpartition(":")
            found.add((address.strip("[]").split("%")[0], int(port)))
        return found

    def routes(self) -> list[str]:
        return [line for family in ("-4", "-6") for line in _ip("-n", self.name, family, "route", "show").stdout
                .splitlines()]

    def links(self) -> list[str]:
        return [line.split()[0].split("@")[0] for line in _ip("-n", self.name, "-br", "link").stdout.splitlines()]


@dataclass
class Hosts:
    """count hosts, 10.77.0.1 ... 10.77.0.count; a context manager that always tears down."""

    count: int = 2
    # Debian's default /etc/hosts maps a machine's own name to 127.0.1.1; True copies that on every host.
    own_name_on_loopback: bool = False
    hosts: list[Host] = field(default_factory=list, init=False)
    base: str = field(init=False)  # the prefix of every name this instance makes
    _hub: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not 2 <= self.count <= 250:
            raise ValueError("2 to 250 hosts")
        self.base = f"{PREFIX}-{os.getpid()}-{secrets.token_hex(2)}"

    def __enter__(self) -> Hosts:
        sweep_stale()
        try:
            self._create()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def __getitem__(self, index: int) -> Host:
        return self.hosts[index]

    def _create(self) -> None:
        names = [f"{self.base}-{i}" for i in range(1, self.count + 1)]
        for i, name in enumerate(names, start=1):
            _ip("netns", "add", name)
            self.hosts.append(Host(name, f"{SUBNET}.{i}"))
        if self.count == 2:
            # Both ends are made inside their namespaces, so no name is ever taken in the machine's own.
            _ip("link", "add", IFACE, "netns", names[0], "type", "veth", "peer", "name", IFACE, "netns", names[1])
        else:
            self._hub = f"{self.base}-hub"
            _ip("netns", "add", self._hub)
            _ip("-n", self._hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self._hub, "link", "set", "br0", "up")
            for i, name in enumerate(names, start=1):
                _ip("link", "add", IFACE, "netns", name, "type", "veth", "peer", "name", f"p{i}", "netns", self._hub)
                _ip("-n", self._hub, "link", "set", f"p{i}", "master", "br0")
                _ip("-n", self._hub, "link", "set", f"p{i}", "up")
        for host in self.hosts:
            hosts_file = "127.0.0.1 localhost\n::1 localhost\n" + "".join(
                f"{'127.0.1.1' if h is host and self.own_name_on_loopback else h.address} {h.name}\n"
                for h in self.hosts)
            _ip("-n", host.name, "link", "set", "lo", "up")
            _ip("-n", host.name, "addr", "add", f"{host.address}/24", "dev", IFACE)
            _ip("-n", host.name, "link", "set", IFACE, "up")
            etc = Path("/etc/netns") / host.name
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts_file)

    def teardown(self) -> None:
        namespaces = [h.name for h in self.hosts] + ([self._hub] if self._hub else [])
        for name in namespaces:
            _remove_namespace(name)
        self.hosts.clear()
        self._hub = None


def _remove_namespace(name: str) -> None:
    """Kill what still runs in the namespace (a deleted namespace lives on while a process holds it)."""
    for _ in range(50):
        pids = [int(p) for p in _ip("netns", "pids", name, check=False).stdout.split()]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    _ip("netns", "del", name, check=False)
    shutil.rmtree(Path("/etc/netns") / name, ignore_errors=True)


def sweep_stale() -> None:
    """Remove namespaces of earlier runs whose test process no longer exists."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for line in listed:
        name = line.split(" ")[0]
        parts = name.split("-")
        if len(parts) >= 3 and parts[0] == PREFIX and parts[1].isdigit() and not _alive(int(parts[1])):
            _remove_namespace(name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Ssh:
    """An sshd on every host, reachable with a throwaway key; nothing is written under ~/.ssh.

    `bin_dir` holds an `ssh` wrapper that adds `-F config` (known hosts in the temporary directory, no
    host-key prompt, batch mode): put it first on PATH for a launcher (horovodrun) whose ssh command line
    takes no options but port and identity file.
    """

    hosts: Hosts
    dir: Path
    processes: list[subprocess.Popen] = field(default_factory=list, init=False)

    @property
    def config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def bin_dir(self) -> Path:
        return self.dir / "bin"

    def start(self, timeout: float = 30) -> Ssh:
        self.dir.mkdir(parents=True, exist_ok=True)
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key, "-f", str(self.dir / key)],
                           check=True, timeout=30)
        (self.dir / "authorized_keys").write_text((self.dir / "client_key.pub").read_text())
        self.config.write_text(
            "Host *\n"
            f"  IdentityFile {self.dir / 'client_key'}\n"
            "  IdentitiesOnly yes\n"
            "  User root\n"
            f"  UserKnownHostsFile {self.dir / 'known_hosts'}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking no\n"
            "  BatchMode yes\n"
            "  ConnectTimeout 20\n"
            "  LogLevel ERROR\n")
        self.bin_dir.mkdir(exist_ok=True)
        wrapper = self.bin_dir / "ssh"
        wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("ssh")} -F {self.config} "$@"\n')
        wrapper.chmod(0o755)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        for i, host in enumerate(self.hosts.hosts, start=1):
            config = self.dir / f"sshd_config.{i}"
            config.write_text(
                f"ListenAddress {host.address}\n"
                "Port 22\n"
                f"HostKey {self.dir / 'host_key'}\n"
                f"AuthorizedKeysFile {self.dir / 'authorized_keys'}\n"
                "PermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
                "UsePAM no\n"
                "StrictModes no\n"  # the keys sit under /tmp, which is world-writable
                "PrintMotd no\n"
                "PrintLastLog no\n"
                f"PidFile {self.dir / f'sshd.{i}.pid'}\n")
            log = self.dir / f"sshd.{i}.log"
            # -D: stay in the foreground, so the process started here is sshd itself and can be waited for.
            self.processes.append(subprocess.Popen(host.command([SSHD, "-D", "-f", str(config), "-E", str(log)]),
                                                   stdin=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + timeout
        for i, process in enumerate(self.processes, start=1):
            log = self.dir / f"sshd.{i}.log"
            while "Server listening" not in (log.read_text() if log.exists() else ""):
                if process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"sshd {i} did not start: {log.read_text() if log.exists() else ''}")
                time.sleep(0.05)
        return self

    def run(self, host: Host, target: Host, remote: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """`ssh target remote`, from host."""
        return subprocess.run(host.command([str(self.bin_dir / "ssh"), target.address, remote]),
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
        self.processes.clear()


class ListenerWatch:
    """Samples the listening sockets of each host while a job runs (`ss -ltn` in each namespace)."""

    def __init__(self, hosts: Sequence[Host], interval: float = 0.3):
        self.hosts = list(hosts)
        self.interval = interval
        self.seen: dict[str, set[tuple[str, int]]] = {h.name: set() for h in self.hosts}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for host in self.hosts:
                with contextlib.suppress(subprocess.SubprocessError, OSError, ValueError, IndexError):
                    self.seen[host.name] |= host.listeners()
            self._stop.wait(self.interval)

    @contextlib.contextmanager
    def running(self) -> Iterator[ListenerWatch]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=30)
