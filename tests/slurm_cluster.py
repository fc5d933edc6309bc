"""A real Slurm cluster on this machine, private to one test session (docs/slurm.md).

Debian's Slurm (slurmctld, slurmd) and munge, started from a configuration written into a temporary
directory: munged with its own key and socket, one slurmctld, and one slurmd per emulated node (`n1`,
`n2`, all at 127.0.0.1 on ports of their own). Without cgroups and without accounting: process tracking
by /proc, no task plugin, exit codes from the job completion file. Every daemon is stopped by its process
id at the end, whatever happened; nothing is written outside the directory.

    with SlurmCluster(tmp_path, nodes=2) as cluster:
        subprocess.run(["sbatch", "job.sh"], env=cluster.env(), check=True)
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLUSTER = "hvdc"
PACKAGES = "slurm-wlm slurm-wlm-basic-plugins munge libpmix-dev"


def unavailable() -> str | None:
    """Why a cluster cannot be started here, or None when it can."""
    missing = [name for name in (*DAEMONS, "sbatch", "srun", "squeue", "scontrol", "scancel")
               if _find(name) is None]
    if missing:
        return f"{', '.join(missing)} not found (`make setup EXTRAS=slurm` installs {PACKAGES})"
    if os.geteuid() != 0:
        return "the private cluster runs its daemons as root (SlurmUser=root)"
    return None


def _find(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d) / name).exists()),
                                      None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class SlurmCluster:
    """nodes emulated nodes n1..nN of cpus CPUs each, in one partition `debug`; a context manager."""

    dir: Path
    nodes: int = 2
    cpus: int = 2
    start_timeout: float = 60
    processes: dict[str, subprocess.Popen] = field(default_factory=dict, init=False)

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def jobcomp(self) -> Path:
        """One line per finished job: JobId, JobState, ExitCode=status:signal, NodeList... (jobcomp/filetxt)."""
        return self.dir / "jobcomp.txt"

    @property
    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for Slurm's commands: SLURM_CONF points at this cluster."""
        return {**(os.environ if base is None else base), "SLURM_CONF": str(self.conf)}

    def __enter__(self) -> SlurmCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> SlurmCluster:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._start_munge()
        self.conf.write_text(self.config_text())
        for name in self.node_names:
            for folder in ("spool", "tmp"):
                (self.dir / folder / name).mkdir(parents=True, exist_ok=True)
        (self.dir / "state").mkdir(exist_ok=True)
        self._spawn("slurmctld", [_find("slurmctld"), "-D", "-f", str(self.conf)])
        for name in self.node_names:
            self._spawn(f"slurmd-{name}", [_find("slurmd"), "-D", "-f", str(self.conf), "-N", name])
        self.wait_idle()
        return self

    def config_text(self) -> str:
        host = socket.gethostname().split(".")[0]  # slurmctld must find its own short name here
        d = self.dir
        nodes = "".join(f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={free_port()} "
                        f"CPUs={self.cpus} State=UNKNOWN\n" for name in self.node_names)
        return (
            "# A private test cluster (tests/slurm_cluster.py): no cgroups, no accounting, ports of its own.\n"
            f"ClusterName={CLUSTER}\n"
            f"SlurmctldHost={host}(127.0.0.1)\n"
            f"SlurmctldPort={free_port()}\n"
            "SlurmUser=root\nSlurmdUser=root\n"
            "AuthType=auth/munge\nCredType=cred/munge\n"
            f"AuthInfo=socket={self.munge_socket}\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSwitchType=switch/none\n"
            "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
            f"JobCompType=jobcomp/filetxt\nJobCompLoc={self.jobcomp}\n"
            "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
            "MpiDefault=none\nReturnToService=2\nMailProg=/bin/true\n"
            "SlurmdParameters=config_overrides\n"
            # Quick reactions for tests: 2 s from SIGTERM to SIGKILL on cancel or time limit, records kept 5 min.
            "KillWait=2\nMinJobAge=300\nInactiveLimit=0\nOverTimeLimit=0\nMessageTimeout=20\n"
            f"StateSaveLocation={d / 'state'}\n"
            f"SlurmdSpoolDir={d / 'spool' / '%n'}\n"
            f"TmpFS={d / 'tmp' / '%n'}\n"  # one per node: two slurmstepd would share PMIx's directory otherwise
            f"SlurmctldPidFile={d / 'slurmctld.pid'}\nSlurmdPidFile={d / 'slurmd.%n.pid'}\n"
            f"SlurmctldLogFile={d / 'slurmctld.log'}\nSlurmdLogFile={d / 'slurmd.%n.log'}\n"
            + nodes +
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n")

    @property
    def munge_socket(self) -> Path:
        return self.dir / "munge" / "run" / "munge.socket"

    def _start_munge(self) -> None:
        base = self.dir / "munge"
        run_dir = self.munge_socket.parent
        run_dir.mkdir(parents=True, exist_ok=True)
        # Clients (slurmstepd, srun) must reach the socket: its folders searchable by everyone.
        for folder, mode in ((self.dir, 0o711), (base, 0o711), (run_dir, 0o755)):
            folder.chmod(mode)
        key = base / "munge.key"
        key.write_bytes(secrets.token_bytes(128))
        key.chmod(0o600)
        self._spawn("munged", [_find("munged"), "-F", "--force", f"--key-file={key}",
                               f"--socket={self.munge_socket}", f"--pid-file={base / 'munged.pid'}",
                               f"--log-file={base / 'munged.log'}", f"--seed-file={base / 'munged.seed'}"])
        deadline = time.monotonic() + self.start_timeout
        while not self.munge_socket.exists():
            self._check_alive("munged")
            if time.monotonic() > deadline:
                raise RuntimeError("munged did not create its socket")
            time.sleep(0.05)

    def _spawn(self, name: str, command: list) -> None:
        log = (self.dir / f"{name}.out").open("w")
        self.processes[name] = subprocess.Popen([str(c) for c in command], stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=subprocess.STDOUT, env=self.env(), start_new_session=True)
        log.close()

    def _check_alive(self, name: str) -> None:
        process = self.processes[name]
        if process.poll() is not None:
            out = (self.dir / f"{name}.out").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{name} exited {process.returncode}: {out}")

    def scontrol(self, *args: str, check: bool = True) -> str:
        return subprocess.run([_find("scontrol"), *args], env=self.env(), capture_output=True, text=True,
                              timeout=30, check=check).stdout

    def node_states(self) -> dict[str, str]:
        out = subprocess.run([_find("sinfo"), "-h", "-N", "-o", "%N %T"], env=self.env(), capture_output=True,
                             text=True, timeout=30).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_idle(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            for name in self.processes:
                self._check_alive(name)
            states = self.node_states()
            if sorted(states) == self.node_names and all(s == "idle" for s in states.values()):
                return
            if time.monotonic() > deadline:
                log = (self.dir / "slurmctld.log")
                raise RuntimeError(f"nodes not idle after {self.start_timeout:.0f} s: {states}\n"
                                   f"{log.read_text(errors='replace')[-2000:] if log.exists() else ''}")
            time.sleep(0.1)

    def job_processes(self, job_id: str | None = None) -> dict[int, str]:
        """pid: command line of every process of this cluster's jobs that still runs (job_id: of that job).

        slurmstepd detaches from slurmd, so a job's processes are found by what Slurm marks them with:
        the step daemon's title (`slurmstepd: [JOB.STEP]`) and SLURM_JOB_ID with this cluster's name in
        the environment of everything it starts."""
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            variables = dict(item.decode(errors="replace").split("=", 1) for item in environ if b"=" in item)
            step = re.match(r"slurmstepd: \[(\d+)[.\]]", cmdline)
            job = step.group(1) if step else variables.get("SLURM_JOB_ID")
            ours = bool(step) or (variables.get("SLURM_CLUSTER_NAME") == CLUSTER and job is not None)
            if ours and job_id in (None, job):
                found[int(entry.name)] = cmdline
        return found

    def stop(self) -> None:
        """SIGTERM to each daemon (nodes first, munge last), then SIGKILL to what is left; then their jobs."""
        order = [n for n in self.processes if n.startswith("slurmd")] + [
            n for n in ("slurmctld", "munged") if n in self.processes]
        for name in order:
            process = self.processes[name]
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
        self.processes.clear()

