"""What a soak job leaves behind: processes and listening ports that carry the soak's marker (or look like
a launcher's and appeared during the soak), found, settled and killed. Used by scripts/soak.py."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

# Every process a soak job starts inherits this variable (launchers pass their environment on to the
# workers), so leftovers are told apart from other people's jobs running on the same machine.
MARKER = "HVD_COMPARE_SOAK"
# A new process with one of these on its command line but no marker is another run's: counted, not blamed.
LAUNCHER_WORDS = ("hvd_impl", "native_impl", "horovodrun", "torchrun", "mpirun", "orted", "prterun")

ProcKey = tuple[int, float]  # (pid, create_time): a pid alone may be reused


@dataclass(frozen=True)
class Proc:
    pid: int
    create_time: float
    name: str
    cmdline: str
    status: str

    @property
    def key(self) -> ProcKey:
        return (self.pid, self.create_time)

    def as_dict(self) -> dict:
        return {"pid": self.pid, "name": self.name, "status": self.status, "cmdline": self.cmdline[:300]}


@dataclass(frozen=True)
class Port:
    proto: str  # "tcp" | "udp"
    ip: str
    port: int
    pid: int | None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.proto, self.ip, self.port)

    def as_dict(self) -> dict:
        return {"proto": self.proto, "address": f"{self.ip}:{self.port}", "pid": self.pid}


@dataclass
class Leftovers:
    processes: list[Proc] = field(default_factory=list)
    ports: list[Port] = field(default_factory=list)
    foreign: list[Proc] = field(default_factory=list)  # launcher-like, but not started by this soak

    def __bool__(self) -> bool:
        return bool(self.processes or self.ports)

    def describe(self) -> str:
        procs = "; ".join(f"pid {p.pid} ({p.status}) {p.cmdline[:120]}" for p in self.processes)
        ports = ", ".join(f"{p.proto} {p.ip}:{p.port} (pid {p.pid})" for p in self.ports)
        return " | ".join(part for part in (procs and f"processes: {procs}", ports and f"ports: {ports}") if part)


def _proc(p: psutil.Process) -> Proc | None:
    try:
        with p.oneshot():
            return Proc(p.pid, p.create_time(), p.name(), " ".join(p.cmdline()), p.status())
    except psutil.Error:
        return None


def listening_sockets() -> list[Port]:
    """TCP sockets in LISTEN and bound UDP sockets with no peer (what `ss -ltnup` lists); TIME_WAIT and
    other connection states are not listening."""
    found = []
    for conn in psutil.net_connections(kind="inet"):
        if not conn.laddr:
            continue
        if conn.type == socket.SOCK_STREAM and conn.status == psutil.CONN_LISTEN:
            found.append(Port("tcp", conn.laddr.ip, conn.laddr.port, conn.pid))
        elif conn.type == socket.SOCK_DGRAM and not conn.raddr:
            found.append(Port("udp", conn.laddr.ip, conn.laddr.port, conn.pid))
    return found


class LeftoverDetector:
    """Baseline of processes and listening sockets before the soak; what a job adds that outlives it."""

    def __init__(self, soak_id: str):
        self.soak_id = soak_id
        self.own_pid = os.getpid()
        self.baseline_procs: set[ProcKey] = {p.key for p in map(_proc, psutil.process_iter()) if p}
        self.baseline_ports: set[tuple[str, str, int]] = {p.key for p in listening_sockets()}
        self.tracked: dict[ProcKey, Proc] = {}  # everything seen below this process while jobs ran

    def marker(self, job: int) -> str:
        return f"{self.soak_id}:{job}"

    def track_tree(self) -> None:
        """Called while a launch runs: remember the launcher and every process below it, so that one that
        is later re-parented away from the tree is still known to be ours."""
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.own_pid).children(recursive=True):
                proc = _proc(child)
                if proc:
                    self.tracked.setdefault(proc.key, proc)

    def scan(self, out_dir: Path | None = None) -> Leftovers:
        """Processes of this soak still alive (tracked, carrying its marker, or naming out_dir on their
        command line) and listening sockets that are new since the baseline and not held by someone else's
        process. A process that merely looks like a launcher but carries no marker is someone else's."""
        result = Leftovers()
        ours: set[int] = set()
        seen: set[int] = set()
        needle = str(out_dir.resolve()) if out_dir else None
        for p in psutil.process_iter():
            proc = _proc(p)
            if proc is None:
                continue
            seen.add(proc.pid)
            if proc.key in self.baseline_procs or proc.pid == self.own_pid:
                continue
            mine = (proc.key in self.tracked or self._marked(p)
                    or (needle is not None and needle in proc.cmdline))
            if mine:
                result.processes.append(proc)
                ours.add(proc.pid)
            elif any(word in proc.cmdline for word in LAUNCHER_WORDS):
                result.foreign.append(proc)
        for port in listening_sockets():
            if port.key in self.baseline_ports:
                continue
            # ours, or an owner that cannot be named (counted, to be safe), or one that started after the scan
            if port.pid is None or port.pid in ours or (port.pid not in seen and self._marked_pid(port.pid)):
                result.ports.append(port)
        return result

    def _marked(self, p: psutil.Process) -> bool:
        try:
            return p.environ().get(MARKER, "").startswith(self.soak_id + ":")
        except psutil.Error:  # gone, or a zombie
            return False

    def _marked_pid(self, pid: int) -> bool:
        try:
            return self._marked(psutil.Process(pid))
        except psutil.Error:
            return False

    def settle(self, out_dir: Path | None, grace_s: float) -> Leftovers:
        """Poll up to grace_s for processes and sockets still in teardown to go."""
        deadline = time.monotonic() + grace_s
        while True:
            found = self.scan(out_dir)
            if not found or time.monotonic() >= deadline:
                return found
            time.sleep(0.25)

    @staticmethod
    def kill(found: Leftovers) -> None:
        """SIGKILL works on stopped processes too; what is left must not disturb the next job."""
        procs = []
        for proc in found.processes:
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(proc.pid)
                if p.create_time() == proc.create_time:
                    p.kill()
                    procs.append(p)
        psutil.wait_procs(procs, timeout=5)
