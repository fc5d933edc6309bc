"""Where a comparison's launches run: here (the launchers as child processes) or as Slurm jobs. Both
implement one small interface, so `compare run` plans, runs and times its rounds the same way on either, and
`compare migrate --verify` launches a user's script and its migration through the same two."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from compare.launch.lines import Launch, Program, build_launch, launch_env, launcher_command
from compare.launch.process import Outcome, run_launch
from workload.options import Options
from workload.record_format import LAUNCH_LOG


class Scheduler(Protocol):
    def make(self, framework: str, world_size: int, options: Options, run_root: Path, *,
             horovod_controller: str = "mpi", launcher: str = "cli", extra_env: dict[str, str] | None = None,
             private_network: bool = False) -> Launch:
        """One framework at one world size, every seed of `options` in turn, written under run_root."""
        ...

    def make_program(self, framework: str, world_size: int, program: Program, run_root: Path, *,
                     launcher: str = "cli", horovod_controller: str = "gloo", extra_env: dict[str, str] | None = None,
                     finished_per_log: Callable[[str], bool] | None = None) -> Launch:
        """Any program (a user's script) launched as `framework`'s users launch it, its log under run_root.
        launcher "cli": horovodrun / torchrun; "python": the program starts its own workers (here only)."""
        ...

    def run(self, launch: Launch, timeout_s: float, on_poll: Callable[[], None] | None = None) -> Outcome:
        """Run it to the end, or past timeout_s stop it (every process it started); say how it went."""
        ...


class LocalScheduler:
    """The launchers (horovodrun, mpirun, torchrun, spawn) started here, supervised as process trees."""

    def make(self, framework: str, world_size: int, options: Options, run_root: Path, **local) -> Launch:
        return build_launch(framework, world_size, options, run_root, **local)

    def make_program(self, framework: str, world_size: int, program: Program, run_root: Path, *,
                     launcher: str = "cli", horovod_controller: str = "gloo", extra_env: dict[str, str] | None = None,
                     finished_per_log: Callable[[str], bool] | None = None) -> Launch:
        if launcher == "cli":
            launcher = f"horovodrun-{horovod_controller}" if framework == "horovod" else "torchrun"
        command = launcher_command(launcher, world_size, program.words)
        return Launch(framework, world_size, (0,), command, launch_env(framework, threads=1, extra_env=extra_env),
                      run_root, run_root / LAUNCH_LOG, finished_per_log=finished_per_log)

    def run(self, launch: Launch, timeout_s: float, on_poll: Callable[[], None] | None = None) -> Outcome:
        return run_launch(launch, timeout_s, on_poll=on_poll)
