"""The command-line entry both implementations share: parse, start the framework, train, report errors.

Bad input ends with one line on stderr and exit status 2; a failure during training with one line and
exit status 1, the traceback going to OUT/error-rank-R.txt rather than the terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from workload.backend import Backend
from workload.options import Options, UsageError, check_writable, parse_options
from workload.trainer import train

# Rank as the launchers announce it, known before any framework starts (to print an error once).
_RANK_VARIABLES = ("RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def launcher_rank() -> int:
    for name in _RANK_VARIABLES:
        if name in os.environ:
            return int(os.environ[name])
    return 0


def say_error(prog: str, message: str, rank: int | None = None) -> None:
    where = f" (rank {rank})" if rank else ""
    print(f"{prog}: error{where}: {message}", file=sys.stderr, flush=True)


def run_training(options: Options, start_backend: Callable[[Options], Backend], prog: str) -> int:
    """Start the framework, train every seed, shut down. Returns the exit status."""
    try:
        check_writable(options.out)
        backend = start_backend(options)
    except UsageError as exc:
        say_error(prog, str(exc), launcher_rank())
        return 2
    try:
        train(options, backend)
    except UsageError as exc:  # found in the data, the same on every rank: said once
        if backend.rank == 0:
            say_error(prog, str(exc))
        _shutdown_after_failure(backend)
        return 2
    except Exception as exc:
        trace = Path(options.out) / f"error-rank-{backend.rank}.txt"
        try:
            trace.write_text(traceback.format_exc())
            where = f" (traceback in {trace})"
        except OSError:
            where = ""
        say_error(prog, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{where}", backend.rank)
        _shutdown_after_failure(backend)
        return 1
    backend.shutdown()
    return 0


def _shutdown_after_failure(backend: Backend) -> None:
    # The other ranks may be gone: their absence must not turn one clear error into a second traceback.
    with contextlib.suppress(Exception):
        backend.shutdown()


def main(start_backend: Callable[[Options], Backend], prog: str, description: str,
         argv: list[str] | None = None) -> int:
    try:
        options, _ = parse_options(argv, prog, description)
    except UsageError as exc:
        if launcher_rank() == 0:
            say_error(prog, str(exc))
        return 2
    return run_training(options, start_backend, prog)
