"""Each launch of the comparison as a Slurm job, launched the way each framework's users launch it there.

Horovod: `srun --mpi=pmix python -m hvd_impl` (every rank a Slurm task), or `mpirun` inside the
allocation. DDP: `srun torchrun`, one torchrun per node with its c10d rendezvous on the first node, or
one Slurm task per rank with torch's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR) taken from
Slurm's. The batch script is written into the run directory (job.sbatch), readable and usable by hand
(`sbatch job.sbatch`); it is submitted with sbatch and watched by polling squeue (sbatch --wait reacts
in steps of about 10 s); on a timeout or Ctrl-C the job is cancelled (scancel) and waited for. The
job's state and exit code come from `scontrol show job`, the failing rank and the telling lines from
the job's log, as for a local launch. docs/slurm.md explains the scripts.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compare.defaults import DDP_FORMS, HOROVOD_FORMS, SLURM_NODES
from compare.launch.lines import Program, implementation_program, launch_label, thread_env
from compare.launch.logs import failing_rank as launcher_failing_rank
from compare.launch.logs import log_excerpt
from compare.launch.process import Outcome, only_teardown_failed
from workload.errors import UsageError
from workload.files import write_json_atomic
from workload.options import Options, to_argv
from workload.record_format import LAUNCH_LOG, SLURM_JOB_RECORD

SCRIPT_NAME = "job.sbatch"


@dataclass(frozen=True)
class SlurmSettings:
    """What `compare run --scheduler slurm` passes to every job."""

    nodes: int = SLURM_NODES
    partition: str | None = None
    time_min: int | None = None  # the job's time limit (--time); None: the launch timeout, rounded up
    sbatch_args: tuple[str, ...] = ()
    horovod_form: str = HOROVOD_FORMS[0]  # "srun": srun --mpi=pmix; "mpirun": mpirun inside the allocation
    ddp_form: str = DDP_FORMS[0]  # "torchrun": srun torchrun, one per node; "srun": one task per rank


def launched_by(settings: SlurmSettings) -> dict[str, str]:
    """What starts each side's ranks in its job, for the screen."""
    horovod = "srun --mpi=pmix" if settings.horovod_form == "srun" else "mpirun"
    ddp = "srun torchrun" if settings.ddp_form == "torchrun" else "srun (a task per rank)"
    return {"horovod": f"{horovod} (a Slurm job)", "ddp": f"{ddp} (a Slurm job)"}


class SlurmScheduler:
    """Every launch a Slurm job (compare.launch.scheduling's interface). A Slurm job needs no network
    namespace of its own (Slurm places the ranks): the local-only arguments are ignored."""

    def __init__(self, settings: SlurmSettings, timeout_s: float):
        if unavailable():
            raise UsageError(f"--scheduler slurm: {unavailable()}")
        self.settings, self.timeout_s = settings, timeout_s

    def make(self, framework: str, world_size: int, options: Options, run_root: Path, *,
             extra_env: dict[str, str] | None = None, **_local_only) -> SlurmLaunch:
        return build_slurm_job(framework, world_size, options, run_root, self.settings, extra_env=extra_env,
                               timeout_s=self.timeout_s)

    def make_program(self, framework: str, world_size: int, program: Program, run_root: Path, *,
                     extra_env: dict[str, str] | None = None,
                     finished_per_log: Callable[[str], bool] | None = None, **_local_only) -> SlurmLaunch:
        """A user's script as a Slurm job (`compare migrate --verify --scheduler slurm`), one torch thread a rank."""
        return slurm_job(framework, world_size, program, run_root, self.settings, threads=1, extra_env=extra_env,
                         timeout_s=self.timeout_s, finished_per_log=finished_per_log,
                         written_by="compare migrate --verify --scheduler slurm")

    def run(self, launch: SlurmLaunch, timeout_s: float, on_poll: Callable[[], None] | None = None) -> SlurmOutcome:
        return run_slurm_job(launch, timeout_s, on_poll=on_poll)


def unavailable() -> str | None:
    """Why Slurm jobs cannot be submitted from here, or None."""
    missing = [name for name in ("sbatch", "squeue", "scontrol", "scancel", "srun") if shutil.which(name) is None]
    return (f"Slurm's {', '.join(missing)} not found on PATH: run it on a machine of a Slurm cluster (on this one, "
            "`make setup EXTRAS=slurm` installs Debian's Slurm; docs/setup.md)") if missing else None


@dataclass(frozen=True)
class SlurmLaunch:
    """One Slurm job: a framework at a world size, every seed in turn. Has the attributes of a local Launch."""

    framework: str
    world_size: int
    seeds: tuple[int, ...]
    script: str  # the batch script's text, written to run_root/job.sbatch when the job is submitted
    env: dict[str, str]  # already exported by the script; kept for the report
    run_root: Path
    log_path: Path
    settings: SlurmSettings
    nodes: int
    command: list[str] = field(default_factory=list)  # the sbatch command line
    # The ranks of `compare run`'s jobs write run records, which say whether the work finished; a user's script
    # under `compare migrate --verify` writes none, and its log says it instead (lines.Launch's).
    finished_per_log: Callable[[str], bool] | None = None

    @property
    def label(self) -> str:
        return launch_label(self.framework, self.world_size)

    @property
    def script_path(self) -> Path:
        return self.run_root / SCRIPT_NAME

    def shell_line(self) -> str:
        return shlex.join(self.command)


def nodes_for(world_size: int, settings: SlurmSettings) -> int:
    """As many nodes as asked for, but no more than ranks; the ranks spread evenly."""
    nodes = min(settings.nodes, world_size)
    if world_size % nodes:
        raise UsageError(f"np {world_size} does not spread evenly over {nodes} nodes (--nodes {settings.nodes})")
    return nodes


def build_slurm_job(framework: str, world_size: int, options: Options, run_root: Path,
                    settings: SlurmSettings, *, extra_env: dict[str, str] | None = None, timeout_s: float = 600,
                    root: Path | None = None) -> SlurmLaunch:
    """One of `compare run`'s launches: an implementation, every seed of `options`, as a Slurm job."""
    program = implementation_program(framework, world_size, to_argv(options, out=run_root.resolve(),
                                                                    seeds=options.seeds))
    return slurm_job(framework, world_size, program, run_root, settings, threads=options.threads,
                     seeds=options.seeds, extra_env=extra_env, timeout_s=timeout_s, root=root)


def slurm_job(framework: str, world_size: int, program: Program, run_root: Path, settings: SlurmSettings, *,
              threads: int, seeds: tuple[int, ...] = (0,), extra_env: dict[str, str] | None = None,
              timeout_s: float = 600, root: Path | None = None,
              finished_per_log: Callable[[str], bool] | None = None,
              written_by: str = "compare run --scheduler slurm") -> SlurmLaunch:
    """`program` launched as `framework`'s users launch it under Slurm; its batch script and log in run_root."""
    run_root = run_root.resolve()
    nodes = nodes_for(world_size, settings)
    env = {**thread_env(threads), **(extra_env or {})}  # srun sets no thread count, torchrun 1
    time_min = settings.time_min or max(1, math.ceil(timeout_s / 60))
    script = batch_script(framework, world_size, nodes, threads, program, run_root, settings, env, time_min,
                          root=root or Path.cwd(), written_by=written_by)
    command = ["sbatch", "--parsable", *settings.sbatch_args, str(run_root / SCRIPT_NAME)]
    return SlurmLaunch(framework, world_size, seeds, script, env, run_root, run_root / LAUNCH_LOG,
                       settings, nodes, command, finished_per_log)


def _wrapped(words: list[str], indent: str = "    ", width: int = 100) -> list[str]:
    """Shell words over several lines, each ending in a backslash but the last: a script one can read."""
    units: list[str] = []  # an option and its value stay on one line
    for word in map(shlex.quote, words):
        if units and units[-1].startswith("--") and " " not in units[-1] and not word.startswith("--"):
            units[-1] += f" {word}"
        else:
            units.append(word)
    lines, current = [], ""
    for unit in units:
        if current and len(indent) + len(current) + 1 + len(unit) > width:
            lines.append(f"{indent}{current} \\")
            current = unit
        else:
            current = f"{current} {unit}".strip()
    lines.append(f"{indent}{current}")
    return lines


def _runs(first: str, program: Program) -> list[str]:
    """`first` (the launcher's words) and the program, its arguments wrapped below it."""
    head = f"{first}{shlex.join(program.target)}"
    return [f"{head} \\", *_wrapped(list(program.args))] if program.args else [head]


def _first_node_lines() -> list[str]:
    return [
        "# The first node hosts the rendezvous. Its address from Slurm's own table: a node's name need not",
        "# resolve (NodeAddr is what slurmd is reached at).",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'head_addr=$(scontrol show node "$head_node" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')',
        "rdzv_port=$((20000 + SLURM_JOB_ID % 20000))  # one port per job, the same on every node",
    ]


@dataclass(frozen=True)
class SideInJob:
    """How one side runs inside its allocation: the script's comment, the Slurm shape, the commands."""

    how: str
    tasks_per_node: int
    cpus_per_task: int
    body: list[str]
    nodes: int


def _horovod_in_job(form: str, per_node: int, threads: int, nodes: int, program: Program) -> SideInJob:
    if form == "srun":
        return SideInJob("Horovod, every rank a Slurm task: srun --mpi=pmix (Open MPI takes its ranks from PMIx)",
                         per_node, threads, _runs("srun --mpi=pmix --kill-on-bad-exit=1 python ", program), nodes)
    root_flag = " --allow-run-as-root" if os.geteuid() == 0 else ""
    return SideInJob("Horovod under mpirun inside the allocation (Open MPI starts one orted per node through srun)",
                     per_node, threads,
                     _runs(f'mpirun{root_flag} --bind-to none -np "$SLURM_NTASKS" python ', program), nodes)


def _ddp_in_job(form: str, per_node: int, threads: int, nodes: int, program: Program) -> SideInJob:
    if form == "torchrun":
        body = [*_first_node_lines(),
                "# is_host: the first node hosts the rendezvous store (torchrun would look for the address",
                "# among its own host name's, which need not hold it).",
                "srun --kill-on-bad-exit=1 bash -c 'exec torchrun --rdzv-conf is_host=$((SLURM_NODEID == 0)) "
                "\"$@\"' torchrun \\",
                f'    --nnodes "$SLURM_JOB_NUM_NODES" --nproc-per-node {per_node} --rdzv-backend c10d \\',
                '    --rdzv-endpoint "$head_addr:$rdzv_port" --rdzv-id "$SLURM_JOB_ID" \\',
                *_runs("    ", program)]
        return SideInJob("DDP: srun starts one torchrun per node; c10d rendezvous on the first node",
                         1, per_node * threads, body, nodes)
    body = [*_first_node_lines(),
            'export MASTER_ADDR="$head_addr" MASTER_PORT="$rdzv_port"',
            "srun --kill-on-bad-exit=1 bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS "
            "LOCAL_RANK=$SLURM_LOCALID \\",
            "    LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE exec \"$@\"' task \\",
            *_runs("    python ", program)]
    return SideInJob("DDP, every rank a Slurm task: torch's variables from Slurm's", per_node, threads, body, nodes)


def side_in_job(framework: str, world_size: int, nodes: int, threads: int, program: Program,
                settings: SlurmSettings) -> SideInJob:
    per_node = world_size // nodes
    if framework == "horovod":
        return _horovod_in_job(settings.horovod_form, per_node, threads, nodes, program)
    if framework == "ddp":
        return _ddp_in_job(settings.ddp_form, per_node, threads, nodes, program)
    if framework == "reference":  # one process, on one node
        return SideInJob("the single-process reference on the same global batches", 1, threads,
                         _runs("srun python ", program), 1)
    raise ValueError(f"unknown framework {framework!r}")


def batch_script(framework: str, world_size: int, nodes: int, threads: int, program: Program, run_root: Path,
                 settings: SlurmSettings, env: dict[str, str], time_min: int, *, root: Path,
                 written_by: str = "compare run --scheduler slurm") -> str:
    """The text of the batch script for one launch."""
    side = side_in_job(framework, world_size, nodes, threads, program, settings)
    bin_dir = str(Path(sys.executable).parent)
    header = [
        "#!/bin/bash",
        f"# hvd-compare: {framework} at np {world_size} on {side.nodes} node{'s' if side.nodes > 1 else ''}.",
        f"# {side.how}.",
        f"# Written by `python -m {written_by}`; to submit it again by hand:",
        f"#   sbatch {run_root / SCRIPT_NAME}",
        f"#SBATCH --job-name=hvdc-{framework}-np{world_size}",
        f"#SBATCH --nodes={side.nodes}",
        f"#SBATCH --ntasks-per-node={side.tasks_per_node}",
        f"#SBATCH --cpus-per-task={side.cpus_per_task}",
        f"#SBATCH --time={time_min}",
        f"#SBATCH --output={run_root / LAUNCH_LOG}",
        f"#SBATCH --chdir={root}",
    ]
    if settings.partition:
        header.append(f"#SBATCH --partition={settings.partition}")
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(env.items()))
    return "\n".join([
        *header,
        "",
        "set -euo pipefail",
        "# The same torch thread count on both sides (srun sets no OMP_NUM_THREADS, torchrun would set 1).",
        f"export {exports}",
        f"export PATH={shlex.quote(bin_dir)}:\"$PATH\"  # the project's Python, torchrun and mpirun's python",
        'echo "slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"',
        "set -x",
        *side.body,
        "",
    ])


def _slurm(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def submit(launch: SlurmLaunch) -> str:
    """Write the batch script into the run directory and submit it; the job id."""
    launch.run_root.mkdir(parents=True, exist_ok=True)
    launch.script_path.write_text(launch.script)
    launch.script_path.chmod(0o755)
    result = _slurm(*launch.command)
    if result.returncode != 0:
        raise RuntimeError(f"sbatch failed (exit {result.returncode}): {result.stderr.strip()}")
    return result.stdout.strip().split(";")[0]


def in_queue(job_id: str) -> str | None:
    """The job's state while squeue lists it (PENDING, RUNNING, COMPLETING...), None once it is gone."""
    try:
        result = _slurm("squeue", "-h", "-j", job_id, "-o", "%T")
    except subprocess.TimeoutExpired:
        return "UNKNOWN"  # slurmctld busy: ask again at the next poll
    if result.returncode != 0:
        # A job that ended long ago is "Invalid job id"; any other error is the controller's: ask again.
        return None if "Invalid job id" in result.stderr else "UNKNOWN"
    return result.stdout.strip() or None


def job_info(job_id: str) -> dict[str, str]:
    """JobState, ExitCode, NodeList and the rest of `scontrol show job` (kept MinJobAge seconds), else the
    job completion file (JobCompType=jobcomp/filetxt)."""
    out = _slurm("scontrol", "-o", "show", "job", job_id).stdout
    if "JobState=" not in out:
        out = _from_jobcomp(job_id)
    return dict(re.findall(r"(\w+)=(\S*)", out))


def _from_jobcomp(job_id: str) -> str:
    config = dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", _slurm("scontrol", "show", "config").stdout, re.M))
    if config.get("JobCompType") != "jobcomp/filetxt" or not config.get("JobCompLoc"):
        return ""
    try:
        lines = Path(config["JobCompLoc"]).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line.startswith(f"JobId={job_id} ")), "")


def cancel(job_id: str, wait_s: float = 60) -> None:
    """scancel, then wait until the queue no longer lists the job (its processes are gone by then)."""
    _slurm("scancel", job_id)
    deadline = time.monotonic() + wait_s
    while in_queue(job_id) is not None and time.monotonic() < deadline:
        time.sleep(0.2)


class SlurmOutcome(Outcome):
    """The local launch's Outcome, whose one-line description also names the Slurm job."""

    job = ""  # "slurm job 12 on n[1-2]", and how it ended when not COMPLETED

    def describe(self) -> str:
        return f"{super().describe()} ({self.job})" if self.job else super().describe()


_SRUN_TASK_EXIT = re.compile(r"srun: error: \S+: tasks? (\d+)(?:-\d+)?: Exited with exit code [1-9]")


def failing_rank(log: str, launch: SlurmLaunch) -> int | None:
    """srun's own line names the task that exited first; a task is a rank except under torchrun (a node)."""
    tasks_are_ranks = (launch.framework == "horovod" and launch.settings.horovod_form == "srun") or (
        launch.framework == "ddp" and launch.settings.ddp_form == "srun")
    ranked = launcher_failing_rank(log)  # the launchers' own summaries first
    if ranked is not None:
        return ranked
    match = _SRUN_TASK_EXIT.search(log)
    return int(match.group(1)) if match and tasks_are_ranks else None


def run_slurm_job(launch: SlurmLaunch, timeout_s: float, on_poll: Callable[[], None] | None = None,
               poll_s: float = 0.5):
    """Submit, watch until the job leaves the queue, cancel it on a timeout or Ctrl-C; an Outcome."""
    started = time.monotonic()
    try:
        job_id = submit(launch)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        outcome = SlurmOutcome(launch, 1, time.monotonic() - started)  # type: ignore[arg-type]
        outcome.log_tail = str(exc)
        with contextlib.suppress(OSError):  # the log the report points at
            launch.log_path.write_text(f"$ {launch.shell_line()}\n{exc}\n")
        return outcome
    timed_out = False
    try:
        while in_queue(job_id) is not None:
            if time.monotonic() - started > timeout_s:
                timed_out = True
                cancel(job_id)
                break
            if on_poll:
                on_poll()
            time.sleep(poll_s)
    except BaseException:  # Ctrl-C included: nothing of this job outlives the comparison
        cancel(job_id)
        raise
    duration = time.monotonic() - started
    if on_poll:
        on_poll()
    info = job_info(job_id)
    state = info.get("JobState", "UNKNOWN")
    status, _, signal_number = info.get("ExitCode", "").partition(":")
    returncode = int(status) if status.isdigit() else None
    if signal_number.isdigit() and int(signal_number):
        returncode = -int(signal_number)
    if state != "COMPLETED" and not returncode:
        returncode = 1  # cancelled or out of time: a failure, whatever the batch script's own status
    slurm_timeout = state == "TIMEOUT"
    outcome = SlurmOutcome(launch, returncode, duration, timed_out or slurm_timeout)  # type: ignore[arg-type]
    nodes = info.get("NodeList", "")
    reason = (f"over its time limit of {info.get('TimeLimit', '?')}" if slurm_timeout else
              f"cancelled after the {timeout_s:.0f} s timeout" if timed_out else state.lower())
    outcome.notes.append(f"slurm job {job_id} on {nodes}: {state} ({reason}), exit code {info.get('ExitCode', '?')}")
    outcome.job = f"slurm job {job_id} on {nodes}" + ("" if state == "COMPLETED" else f": {state}, {reason}")
    write_json_atomic(launch.run_root / SLURM_JOB_RECORD, {
        "scheduler": "slurm", "job_id": job_id, "state": state, "exit_code": info.get("ExitCode"),
        "nodes": nodes, "num_nodes": launch.nodes, "partition": info.get("Partition"),
        "time_limit": info.get("TimeLimit"), "script": str(launch.script_path), "submit": launch.shell_line(),
        "timed_out": outcome.timed_out, "duration_s": round(duration, 2)})
    if not outcome.ok:
        log_text = launch.log_path.read_text(errors="replace") if launch.log_path.exists() else ""
        if not only_teardown_failed(outcome, log_text):
            outcome.failing_rank = failing_rank(log_text, launch)
            outcome.log_tail = "\n".join([outcome.notes[-1], log_excerpt(launch.log_path)])
    return outcome
