"""compare run's scheduler options (--scheduler slurm and the Slurm job settings), read into the typed
SlurmSettings that compare/launch/slurm.py takes: the launch layer never sees the command line."""

from __future__ import annotations

import argparse

from compare.launch.slurm import SlurmSettings
from workload.errors import UsageError

DEFAULT = SlurmSettings()


def slurm_settings(ns: argparse.Namespace) -> SlurmSettings:
    """The Slurm settings given; one line for a value that cannot be used."""
    if ns.nodes < 1:
        raise UsageError(f"--nodes must be positive, got {ns.nodes}")
    if ns.time is not None and ns.time < 1:
        raise UsageError(f"--time is in minutes and must be at least 1, got {ns.time}")
    return SlurmSettings(nodes=ns.nodes, partition=ns.partition, time_min=ns.time,
                         sbatch_args=tuple(ns.sbatch_arg or ()), horovod_form=ns.slurm_horovod,
                         ddp_form=ns.slurm_ddp)


def local_misuse(ns: argparse.Namespace) -> str | None:
    """A Slurm-only option given without --scheduler slurm (it would be ignored), or None."""
    if ns.scheduler == "slurm":
        return None
    given = [flag for flag, value, default in (("--nodes", ns.nodes, DEFAULT.nodes),
                                               ("--partition", ns.partition, DEFAULT.partition),
                                               ("--time", ns.time, DEFAULT.time_min),
                                               ("--sbatch-arg", ns.sbatch_arg, []),
                                               ("--slurm-horovod", ns.slurm_horovod, DEFAULT.horovod_form),
                                               ("--slurm-ddp", ns.slurm_ddp, DEFAULT.ddp_form))
             if value != default]
    return f"{', '.join(given)} need{'s' if len(given) == 1 else ''} --scheduler slurm" if given else None
