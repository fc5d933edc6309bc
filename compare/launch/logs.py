"""Reading a launch's log and its run directories while it runs: the failing rank, the telling lines, progress."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from workload.record_format import METRICS, METRICS_PART, says_ok, seed_directory

if TYPE_CHECKING:
    from compare.launch.lines import Launch

_RANK_PATTERNS = (
    re.compile(r"Root Cause.*?\brank\s*:\s*(\d+)", re.S),      # torchrun's summary: the first failure
    re.compile(r"Process (\d+) exit with status code [1-9]"),   # horovodrun on Gloo, first to fail first
    re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]"),      # mpirun
    re.compile(r"error \(rank (\d+)\)"),                       # the implementations' own one-line errors
)


_TORCHRUN_ENTRY = re.compile(r"\brank\s*:\s*(\d+) \(local_rank.*?\n\s*exitcode\s*:\s*(-?\d+)")


def failing_rank(log: str) -> int | None:
    """The rank that failed first, as the launcher's own failure summary names it.

    torchrun's "Root Cause" is only the first failure it happened to observe; when one rank crashed and
    the others only followed (exit status 1 from their one-line error, or torchrun's own SIGTERM), the
    crashed one is the cause."""
    entries = {int(rank): int(code) for rank, code in _TORCHRUN_ENTRY.findall(log)}
    causes = [rank for rank, code in entries.items() if code not in (1, -15)]
    if len(causes) == 1:
        return causes[0]
    for pattern in _RANK_PATTERNS:
        match = pattern.search(log)
        if match:
            return int(match.group(1))
    return None


_TELLING = re.compile(r"error|injecting fault|exit with status|Exit code|exitcode|Root Cause|timed? ?out", re.I)


# What a worker prints when Gloo's thread aborts it as its interpreter exits: PyTorch's bug, not the
# training (docs/fault-tolerance.md, "Gloo's abort at exit").
TEARDOWN_ABORT = "terminate called without an active exception"
TEARDOWN_NOTE = ("a worker aborted as its interpreter exited, after every record was complete: PyTorch's Gloo "
                 "teardown race (docs/fault-tolerance.md), not the training; the records stand")


def records_complete(run_root: Path, seeds: tuple[int, ...]) -> bool:
    """Every seed's record is complete (rank 0 writes "ok" only after the last step of every rank)."""
    return all(says_ok(seed_directory(run_root, seed, seeds)) for seed in seeds)


def aborted_after_the_work(log: str, launch: Launch) -> bool:
    """A launch that failed only because a worker aborted in its interpreter's teardown, the work done: every
    record complete, or, for ranks that write none, the launch's own evidence in the log."""
    if TEARDOWN_ABORT not in log:
        return False
    if launch.finished_per_log is not None:
        return launch.finished_per_log(log)
    return records_complete(launch.run_root, launch.seeds)


def log_excerpt(path: Path, telling: int = 12, last: int = 12) -> str:
    """The lines that say what went wrong (errors, the first failure), then the end of the log.
    The last lines alone are often only the launcher's own traceback."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    head = [line for line in lines[1:-last] if _TELLING.search(line) and "Traceback" not in line][:telling]
    return "\n".join([*head, *(["..."] if head else []), *lines[-last:]])


def steps_done(run_root: Path, seeds: tuple[int, ...]) -> int:
    """Optimizer steps recorded so far across a launch's seeds (read from the files rank 0 writes)."""
    done = 0
    for seed in seeds:
        seed_dir = seed_directory(run_root, seed, seeds)
        for name in (METRICS, METRICS_PART):
            try:  # the trainer renames .part to metrics.jsonl when it finishes: possibly between two opens
                with (seed_dir / name).open("rb") as handle:
                    done += sum(1 for line in handle if line.startswith(b'{"kind": "step"'))
                break
            except FileNotFoundError:
                continue
    return done
