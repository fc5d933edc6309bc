"""Where a comparison's launches run: here (the launchers as child processes) or as Slurm jobs. Both
implement one small interface, so `compare run` plans, runs and times its rounds the same way on either."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from compare.launch.lines import Launch, build_launch
from compare.launch.process import Outcome, run_launch
from workload.options import Options


class Scheduler(Protocol):
    def make(self, framework: str, world_size: int, options: Options, run_root: Path, *,
             horovod_controller: str = "mpi", launcher: str = "cli", extra_env: dict[str, str] | None = None,
             private_network: bool = False) -> Launch:
        """One framework at one world size, every seed of `options` in turn, written under run_root."""
        ...

    def run(self, launch: Launch, timeout_s: float, on_poll: Callable[[], None] | None = None) -> Outcome:
        """Run it to the end, or past timeout_s stop it (every process it started); say how it went."""
        ...


class LocalScheduler:
    """The launchers (horovodrun, mpirun, torchrun, spawn) started here, supervised as process trees."""

    def make(self, framework: str, world_size: int, options: Options, run_root: Path, **local) -> Launch:
        return build_launch(framework, world_size, options, run_root, **local)

    def run(self, launch: Launch, timeout_s: float, on_poll: Callable[[], None] | None = None) -> Outcome:
        return run_launch(launch, timeout_s, on_poll=on_poll)
