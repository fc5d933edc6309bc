"""Stop a failed multi-host Horovod launch's workers on the other hosts too.

horovodrun starts each remote worker as `ssh HOST 'cd DIR ; VAR=value ... python ...'`; when the job
fails it kills its local ssh clients and nothing more. sshd does not signal a command that runs without
a terminal when its client goes, so a remote worker that is blocked (in a Gloo collective, or stopped)
keeps running on its host (docs/multi-host.md).

The launch carries a marker: a variable with a value of its own in its environment (MARKER), which
horovodrun writes into every remote command line and so into every remote worker's environment. After
a failure the launch code runs, over the same ssh and from where horovodrun ran, a short shell loop on
each remote host that finds the processes whose environment holds that exact marker and terminates
them (then kills what is left). Nothing else on the host can match.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

MARKER = "HVD_COMPARE_LAUNCH"
_LOCAL = {"localhost", "127.0.0.1", "::1"}


def new_marker() -> dict[str, str]:
    """The variable to add to a launch's environment."""
    return {MARKER: f"hvdc-{os.getpid()}-{secrets.token_hex(8)}"}


def horovodrun_index(command: Sequence[str]) -> int | None:
    """Where horovodrun sits in a launch's command (after a wrapper such as a namespace's), or None."""
    return next((i for i, word in enumerate(command) if Path(word).name == "horovodrun"), None)


def _option(words: Sequence[str], *names: str) -> str | None:
    for i, word in enumerate(words):
        for name in names:
            if word == name and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
    return None


def remote_hosts(command: Sequence[str]) -> list[str]:
    """The hosts horovodrun was given (-H/--hosts, or --hostfile), in order, without the local names."""
    start = horovodrun_index(command)
    if start is None:
        return []
    words = list(command[start + 1:])  # horovodrun's options come first: the first match is its own
    hosts: list[str] = []
    listed = _option(words, "-H", "--hosts")
    if listed:
        hosts = [entry.rsplit(":", 1)[0] for entry in listed.split(",") if entry.strip()]
    hostfile = _option(words, "-hostfile", "--hostfile")
    if hostfile:
        with contextlib.suppress(OSError):
            for line in Path(hostfile).read_text().splitlines():
                if line.split("#")[0].strip():
                    hosts.append(line.split()[0].split(":")[0])
    return [host for host in dict.fromkeys(hosts) if host not in _LOCAL]


def kill_script(marker_value: str, grace_s: float = 2) -> str:
    """The remote shell: SIGTERM (and SIGCONT, for a stopped worker) to every process whose environment
    holds the marker, then SIGKILL to what is left; prints the pids it signalled."""
    wanted = shlex.quote(f"{MARKER}={marker_value}")
    find = (f"for d in /proc/[0-9]*; do tr '\\0' '\\n' 2>/dev/null < \"$d/environ\" | grep -qxF {wanted} "
            "&& echo \"${d#/proc/}\"; done")
    return (f"pids=$({find}); [ -z \"$pids\" ] && exit 0; echo $pids; "
            f"kill -TERM $pids 2>/dev/null; kill -CONT $pids 2>/dev/null; sleep {grace_s:g}; "
            f"left=$({find}); [ -n \"$left\" ] && kill -KILL $left 2>/dev/null; exit 0")


def ssh_command(command: Sequence[str], host: str, remote: str, env: dict[str, str]) -> list[str]:
    """ssh to host the way horovodrun did: the same wrapper, ssh found on its PATH, its port and key."""
    start = horovodrun_index(command) or 0
    own = list(command[start + 1:])
    ssh = shutil.which("ssh", path=env.get("PATH")) or "ssh"
    args = [ssh, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "ConnectTimeout=10"]
    port = _option(own, "-p", "--ssh-port")
    identity = _option(own, "-i", "--ssh-identity-file")
    if port:
        args += ["-p", port]
    if identity:
        args += ["-i", identity]
    return [*command[:start], *args, host, remote]


def stop_remote_workers(command: Sequence[str], env: dict[str, str], timeout_s: float = 30) -> list[str]:
    """After a failed launch: stop its workers on every remote host. One note per host where any were found
    or the attempt failed; nothing when the launch has no marker or no remote host."""
    marker_value = env.get(MARKER)
    hosts = remote_hosts(command)
    if not marker_value or not hosts:
        return []
    notes = []
    # The ssh client itself must not carry the marker: on hosts that share one process table (containers,
    # namespaces) the loop would find it too.
    run_env = {key: value for key, value in {**os.environ, **env}.items() if key != MARKER}
    for host in hosts:
        try:
            result = subprocess.run(ssh_command(command, host, kill_script(marker_value), run_env), env=run_env,
                                    capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            notes.append(f"{host}: could not stop the remote workers: {exc}")
            continue
        if result.returncode != 0:
            notes.append(f"{host}: could not stop the remote workers (ssh exit {result.returncode}): "
                         f"{result.stderr.strip()[-300:]}")
        elif result.stdout.strip():
            notes.append(f"{host}: stopped the job's remote workers (pids {result.stdout.split()})")
    return notes
