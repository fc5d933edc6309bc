"""Start the real launchers as subprocesses, watch them, and never leave anything running.

Each launch runs in a session of its own with a time limit; when it fails or runs out of time, the whole
process tree is killed (so no orphan keeps a port), and the tail of its log names the failing rank.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from workload.options import Options, to_argv


@dataclass(frozen=True)
class Launch:
    """One launcher invocation: a framework at a world size, running every seed in turn."""

    framework: str  # "horovod" | "ddp" | "reference"
    world_size: int
    seeds: tuple[int, ...]
    command: list[str]
    env: dict[str, str]
    run_root: Path  # the --out given to the implementation; seeds write run_root/seed-S
    log_path: Path

    @property
    def label(self) -> str:
        return f"{self.framework} np{self.world_size}"

    def shell_line(self) -> str:
        variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return f"{variables} {shlex.join(self.command)}".strip()


@dataclass
class Outcome:
    launch: Launch
    returncode: int | None
    duration_s: float
    timed_out: bool = False
    failing_rank: int | None = None
    log_tail: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        if self.ok:
            return f"{self.launch.label}: ok in {self.duration_s:.1f} s"
        what = f"timed out after {self.duration_s:.0f} s" if self.timed_out else f"exited {self.returncode}"
        rank = f", rank {self.failing_rank} failed first" if self.failing_rank is not None else ""
        return f"{self.launch.label}: {what}{rank}"


def executable(name: str) -> str:
    """Prefer the launcher installed beside this Python (the project's virtual environment)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else (shutil.which(name) or name)


# torchrun's rendezvous store and Horovod's driver bind every interface, whatever address they are
# given; inside a network namespace whose only interface is loopback, every interface is loopback.
PRIVATE_NETWORK = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "private-network"]


@functools.cache
def private_network_available() -> bool:
    """Whether a launch can run in a network namespace of its own (root, unshare and ip are needed)."""
    if not (shutil.which("unshare") and shutil.which("ip")):
        return False
    try:
        return subprocess.run([*PRIVATE_NETWORK, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def build_launch(framework: str, world_size: int, options: Options, run_root: Path, *,
                 horovod_controller: str = "mpi", launcher: str = "cli",
                 extra_env: dict[str, str] | None = None, private_network: bool = False) -> Launch:
    """launcher "cli" uses horovodrun / torchrun; "spawn" starts the workers from Python
    (horovod.run / torch.multiprocessing.spawn). private_network: inside a loopback-only namespace."""
    argv = to_argv(options, out=run_root, seeds=options.seeds)
    threads = str(options.threads)
    # torchrun sets OMP_NUM_THREADS=1 and horovodrun sets nothing: give both the same thread count.
    env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    if framework in ("horovod", "ddp") and launcher == "spawn":
        module = "hvd_impl" if framework == "horovod" else "native_impl"
        command = [sys.executable, "-m", module, "--spawn", str(world_size), *argv]
        if framework == "horovod":
            command[5:5] = ["--spawn-controller", horovod_controller]
    elif framework == "horovod":
        command = [executable("horovodrun"), "-np", str(world_size), f"--{horovod_controller}",
                   "--network-interfaces", "lo", "-H", f"localhost:{world_size}",
                   sys.executable, "-m", "hvd_impl", *argv]
    elif framework == "ddp":
        # --standalone: a c10d rendezvous on localhost with a free port; gloo kept on loopback too.
        env["GLOO_SOCKET_IFNAME"] = "lo"
        command = [executable("torchrun"), "--standalone", "--nproc-per-node", str(world_size),
                   "-m", "native_impl", *argv]
    elif framework == "reference":
        command = [sys.executable, "-m", "workload.reference", "--emulate-world-size", str(world_size), *argv]
    else:
        raise ValueError(f"unknown framework {framework!r}")
    if private_network:
        command = [*PRIVATE_NETWORK, *command]
    return Launch(framework, world_size, options.seeds, command, env, run_root, run_root / "launch.log")


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


_TELLING = re.compile(r"error|injecting fault|exit with status|Exit code|exitcode|Root Cause|timed? ?out", re.I)


def log_excerpt(path: Path, telling: int = 12, last: int = 12) -> str:
    """The lines that say what went wrong (errors, the first failure), then the end of the log.
    The last lines alone are often only the launcher's own traceback."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    head = [line for line in lines[1:-last] if _TELLING.search(line) and "Traceback" not in line][:telling]
    return "\n".join([*head, *(["..."] if head else []), *lines[-last:]])


def run_launch(launch: Launch, timeout_s: float, on_poll: Callable[[], None] | None = None,
               poll_s: float = 0.5) -> Outcome:
    launch.run_root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **launch.env}
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
                if time.monotonic() - started > timeout_s:
                    timed_out = True
                    break
                if on_poll:
                    on_poll()
                time.sleep(poll_s)
        finally:
            # Whatever happened (a timeout, Ctrl-C), nothing of this launch outlives it.
            kill_tree(process, seen)
    duration = time.monotonic() - started
    if on_poll:
        on_poll()
    outcome = Outcome(launch, process.returncode, duration, timed_out)
    if not outcome.ok:
        log_text = launch.log_path.read_text(errors="replace")
        outcome.failing_rank = failing_rank(log_text)
        outcome.log_tail = log_excerpt(launch.log_path)
    return outcome


def steps_done(run_root: Path, seeds: tuple[int, ...]) -> int:
    """Optimizer steps recorded so far across a launch's seeds (read from the files rank 0 writes)."""
    done = 0
    for seed in seeds:
        seed_dir = run_root / f"seed-{seed}" if len(seeds) > 1 else run_root
        for name in ("metrics.jsonl", "metrics.jsonl.part"):
            try:  # the trainer renames .part to metrics.jsonl when it finishes: possibly between two opens
                with (seed_dir / name).open("rb") as handle:
                    done += sum(1 for line in handle if line.startswith(b'{"kind": "step"'))
                break
            except FileNotFoundError:
                continue
    return done
