"""Which launcher started this process: one table, read by both backends and the command line.

Like Lightning's environment plug-ins (TorchElasticEnvironment, MPIEnvironment, SLURMEnvironment), each
row answers "did I start this worker?" from what the launcher leaves in the worker's environment; the
first row that answers yes names the launcher in the run record. Standard library only, so that
recorder/ can carry a verbatim copy (its users install nothing of this project).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

# Set by the launchers that start workers from Python (hvd_impl/spawn.py, native_impl/spawn.py,
# docker/hvd_gloo_node.py): their workers cannot otherwise be told from horovodrun's or a hand launch.
MARKER = "WORKLOAD_LAUNCHER"
NO_LAUNCHER = "none"


def under_horovodrun_mpi() -> bool:
    """horovodrun --mpi replaces itself (execve) with `/bin/sh -c "mpirun ..."` and marks the workers with
    no variable of its own; its mpirun line always exports NCCL_SOCKET_IFNAME. Linux, local host only."""
    pid = os.getppid()
    for _ in range(16):  # up the process tree, a few levels at most
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if args[:2] == [b"/bin/sh", b"-c"] and len(args) > 2 and args[2].startswith(b"mpirun ") \
                and b"-x NCCL_SOCKET_IFNAME=" in args[2]:
            return True
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid: the field after the state
        if pid <= 1:
            return False
    return False


@dataclass(frozen=True)
class Launcher:
    name: str  # as the run record says it
    frameworks: tuple[str, ...]  # whose workers it starts: "horovod", "ddp"
    rank: tuple[str, ...]  # the variables that tell a worker its rank: one of them is set
    also: tuple[str, ...] = ()  # variables set beside the rank, all of them
    check: Callable[[], bool] | None = None  # when the variables cannot tell it from another row

    def started(self, framework: str, environ: Mapping[str, str]) -> bool:
        return (framework in self.frameworks and any(name in environ for name in self.rank)
                and all(name in environ for name in self.also) and (self.check is None or self.check()))


# In order: the first row that matches wins.
LAUNCHERS: tuple[Launcher, ...] = (
    Launcher("torchrun", ("ddp",), ("RANK",), also=("TORCHELASTIC_RUN_ID",)),
    Launcher("horovodrun", ("horovod",), ("HOROVOD_RANK",)),  # horovodrun on Gloo, and horovod.run
    Launcher("horovodrun", ("horovod",), ("OMPI_COMM_WORLD_RANK", "PMI_RANK"), check=under_horovodrun_mpi),
    Launcher("mpirun", ("horovod",), ("OMPI_COMM_WORLD_RANK", "PMI_RANK")),
    Launcher("srun", ("horovod",), ("PMIX_RANK",), also=("SLURM_PROCID",)),  # srun --mpi=pmix: no OMPI_ variables
    Launcher("srun", ("ddp",), ("RANK",), also=("SLURM_PROCID",)),  # one srun task per rank (docs/slurm.md)
    Launcher("env", ("ddp",), ("RANK",)),  # RANK, WORLD_SIZE, MASTER_ADDR set by hand or by a script
)


def detect_launcher(framework: str, environ: Mapping[str, str] | None = None) -> str:
    """The launcher that started this worker of `framework`, or "none" (a single process)."""
    environ = os.environ if environ is None else environ
    if MARKER in environ:
        return environ[MARKER]
    return next((row.name for row in LAUNCHERS if row.started(framework, environ)), NO_LAUNCHER)


def launcher_rank(environ: Mapping[str, str] | None = None) -> int:
    """This worker's rank as its launcher announced it, known before any framework starts (so that an
    error is printed once, not once per rank); 0 without a launcher."""
    environ = os.environ if environ is None else environ
    names = dict.fromkeys(name for row in LAUNCHERS for name in row.rank)  # in table order, each once
    return next((int(environ[name]) for name in names if name in environ), 0)
