"""The command-line entry both implementations share: parse, start the framework, train, report errors.

Bad input ends with one line on stderr and exit status 2; a failure during training with one line and
exit status 1, the traceback going to OUT/error-rank-R.txt rather than the terminal.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from workload.backend import Backend
from workload.errors import EXIT_FAILED, EXIT_USAGE, UsageError
from workload.launchers import launcher_rank
from workload.options import Options, check_writable, parse_options
from workload.record_format import error_trace
from workload.trainer import run_with_backend, train


def say_error(prog: str, message: str, rank: int | None = None) -> None:
    where = f" (rank {rank})" if rank else ""
    print(f"{prog}: error{where}: {message}", file=sys.stderr, flush=True)


def run_training(options: Options, start_backend: Callable[[Options], Backend], prog: str,
                 train_fn: Callable[[Options, Backend], list[Path]] = train) -> int:
    """Start the framework, train every seed, shut down. Returns the exit status."""
    rank = launcher_rank()
    try:
        check_writable(options.out)
    except UsageError as exc:
        say_error(prog, str(exc), rank)
        return EXIT_USAGE
    try:
        run_with_backend(options, start_backend, train_fn)
    except UsageError as exc:  # from the options and the data: the same on every rank, said once
        if rank == 0:
            say_error(prog, str(exc))
        return EXIT_USAGE
    except Exception as exc:
        say_error(prog, f"{one_line(exc)}{_save_traceback(options.out, rank)}", rank)
        return EXIT_FAILED
    return 0


def one_line(exc: BaseException) -> str:
    """The exception as one line: its first line, and its last when they differ (launchers put the
    failing process there)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1]}"
    notes = "".join(f" [{note}]" for note in getattr(exc, "__notes__", []))  # e.g. which rank stopped answering
    return f"{type(exc).__name__}: {text}".rstrip(": ") + notes


def _save_traceback(out: Path, rank: int) -> str:
    trace = error_trace(out, rank)
    try:
        trace.write_text(traceback.format_exc())
    except OSError:
        return ""
    return f" (traceback in {trace})"


def main(start_backend: Callable[[Options], Backend], prog: str, description: str,
         argv: list[str] | None = None, spawn: Callable[[Options, int, str], object] | None = None,
         train_fn: Callable[[Options, Backend], list[Path]] = train) -> int:
    try:
        options, ns = parse_options(argv, prog, description)
    except UsageError as exc:
        if launcher_rank() == 0:
            say_error(prog, str(exc))
        return EXIT_USAGE
    if ns.spawn is None or spawn is None:
        return run_training(options, start_backend, prog, train_fn)
    try:
        check_writable(options.out)
        spawn(options, ns.spawn, ns.spawn_controller)
    except UsageError as exc:
        say_error(prog, str(exc))
        return EXIT_USAGE
    except Exception as exc:  # a spawned worker failed: the launcher ended the group and says which one
        say_error(prog, f"{one_line(exc)}{_save_traceback(options.out, 0)}")
        return EXIT_FAILED
    return 0
