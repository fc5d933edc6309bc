"""Processes and ports on this host, for any backend: a free loopback port, and the state of peer ranks."""

from __future__ import annotations

import os
import socket

import psutil


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def describe_peers(peers: list[tuple[str, int]]) -> str:
    """The state of the other ranks' processes that this host can see: stopped, gone or running."""
    host = socket.gethostname()
    found, remote = [], []
    for rank, (peer_host, pid) in enumerate(peers):
        if (peer_host, pid) == (host, os.getpid()):
            continue
        if peer_host != host:
            remote.append(rank)
            continue
        try:
            status = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            status = "gone"
        except psutil.Error:
            status = "unknown"
        if status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
            found.append(f"rank {rank} (pid {pid}) is stopped")
        elif status in ("gone", psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            found.append(f"rank {rank} (pid {pid}) has exited")
    if remote:
        found.append(f"rank{'s' if len(remote) > 1 else ''} {', '.join(map(str, remote))} on other hosts not checked")
    return "; ".join(found) if found else "every rank on this host is still running"
