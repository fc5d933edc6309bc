"""Start the real launchers as subprocesses, watch them, and never leave anything running.

Each launch runs in a session of its own with a time limit; when it fails or runs out of time, the whole
process tree is killed (so no orphan keeps a port), and the tail of its log names the failing rank.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from compare.launch.contention import ContentionSampler
from compare.launch.lines import Launch
from compare.launch.logs import TEARDOWN_NOTE, aborted_after_the_work, failing_rank, log_excerpt
from workload.files import write_json_atomic
from workload.record_format import CONTENTION_RECORD


@dataclass
class Outcome:
    launch: Launch
    returncode: int | None
    duration_s: float
    timed_out: bool = False
    failing_rank: int | None = None
    log_tail: str = ""
    notes: list[str] = field(default_factory=list)
    contention: dict | None = None  # what else the machine did meanwhile (compare/launch/contention.py)
    teardown_abort: bool = False  # failed only in a worker's interpreter teardown, every record complete

    @property
    def ok(self) -> bool:
        return (self.returncode == 0 or self.teardown_abort) and not self.timed_out

    def describe(self) -> str:
        if self.ok:
            also = f" (exit {self.returncode}: {TEARDOWN_NOTE})" if self.teardown_abort else ""
            return f"{self.launch.label}: ok in {self.duration_s:.1f} s{also}"
        what = f"timed out after {self.duration_s:.0f} s" if self.timed_out else f"exited {self.returncode}"
        rank = f", rank {self.failing_rank} failed first" if self.failing_rank is not None else ""
        return f"{self.launch.label}: {what}{rank}"


def alive_tree(roots: list[psutil.Process]) -> dict[tuple[int, float], psutil.Process]:
    """The roots and everything below them, keyed by (pid, start time) so a reused pid is not mistaken."""
    found: dict[tuple[int, float], psutil.Process] = {}
    for proc in roots:
        with _quiet():
            for member in (proc, *proc.children(recursive=True)):
                found[(member.pid, member.create_time())] = member
    return found


def kill_tree(process: subprocess.Popen, seen: dict[tuple[int, float], psutil.Process] | None = None) -> None:
    """Terminate the launcher and every process below it (or ever seen below it: one that moved to a
    session of its own after its parent exited), then kill what is left."""
    roots = list((seen or {}).values())
    if process.returncode is None:  # once reaped, the launcher's pid may belong to someone else
        with _quiet():
            roots.append(psutil.Process(process.pid))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        tree = list(alive_tree(roots).values())  # again each round: what was forked meanwhile counts too
        with _quiet():
            os.killpg(process.pid, sig)
        for proc in tree:
            with _quiet():
                proc.send_signal(sig)  # psutil refuses a pid that now belongs to another process
                if sig == signal.SIGTERM:
                    proc.resume()  # a stopped (SIGSTOP) worker acts on SIGTERM only once continued
        _, alive = psutil.wait_procs(tree, timeout=5)
        roots = alive
        if not roots:
            break
    with _quiet():
        process.wait(timeout=5)


def _quiet() -> contextlib.suppress:
    """Processes may already be gone by the time they are signalled."""
    return contextlib.suppress(ProcessLookupError, PermissionError, psutil.Error, subprocess.TimeoutExpired)


def run_launch(launch: Launch, timeout_s: float, on_poll: Callable[[], None] | None = None,
               poll_s: float = 0.5) -> Outcome:
    launch.run_root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **launch.env}
    ranks = 1 if launch.framework == "reference" else launch.world_size
    sampler = ContentionSampler(ranks, int(launch.env.get("OMP_NUM_THREADS", "1") or 1))
    started = time.monotonic()
    with launch.log_path.open("w") as log:
        log.write(f"$ {launch.shell_line()}\n")
        log.flush()
        process = subprocess.Popen(launch.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
        launcher = psutil.Process(process.pid)
        seen: dict[tuple[int, float], psutil.Process] = {}
        timed_out = False
        try:
            while process.poll() is None:
                seen.update(alive_tree([launcher]))
                sampler.sample(seen)
                if time.monotonic() - started > timeout_s:
                    timed_out = True
                    break
                if on_poll:
                    on_poll()
                time.sleep(poll_s)
        finally:
            # Whatever happened (a timeout, Ctrl-C), nothing of this launch outlives it. Every launch of compare's
            # is on this host (horovodrun -H localhost:N) or a Slurm job, whose cancellation ends it everywhere.
            kill_tree(process, seen)
    duration = time.monotonic() - started
    contention = sampler.finish(seen)
    write_json_atomic(launch.run_root / CONTENTION_RECORD,
                      {"framework": launch.framework, "world_size": launch.world_size, **contention})
    if on_poll:
        on_poll()
    outcome = Outcome(launch, process.returncode, duration, timed_out, contention=contention)
    if not outcome.ok:
        log_text = launch.log_path.read_text(errors="replace")
        if not only_teardown_failed(outcome, log_text):
            outcome.failing_rank = failing_rank(log_text)
            outcome.log_tail = log_excerpt(launch.log_path)
    return outcome


def only_teardown_failed(outcome: Outcome, log_text: str) -> bool:
    """Whether a failed launch failed only in a worker's interpreter teardown, its work done
    (compare/launch/logs.py); if so the outcome is marked, and counts as ok."""
    outcome.teardown_abort = not outcome.timed_out and aborted_after_the_work(log_text, outcome.launch)
    return outcome.teardown_abort
