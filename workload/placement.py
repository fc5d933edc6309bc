"""Where a rank runs: pinned to one core of those it may use, the same way on both sides (`--pin-cores`).

Pinned in the shared trainer after the framework has started, so that Horovod's background thread, Gloo's
threads and torch's own are all moved: Linux applies an affinity to one thread, so every thread of the process
(/proc/self/task) is set, and the threads started later inherit it from the main thread.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cpu_affinity() -> list[int]:
    """The cores this process may run on (what the record says)."""
    return sorted(os.sched_getaffinity(0))


def pin_to_core(local_rank: int) -> int:
    """Pin every thread of this process to the local_rank-th core it may use (wrapping round when there are
    more ranks than cores, which `compare run` refuses to time); returns the core."""
    cores = cpu_affinity()
    core = cores[local_rank % len(cores)]
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(ProcessLookupError, PermissionError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), {core})
    return core
