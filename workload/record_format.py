"""The run record's format, said once (docs/run-record.md): its schema version, its file names, strict
JSON out and in, the atomic write, and what a record says about the machine and the software stack.

The writer (workload/record.py), the reader (compare/analysis/records.py), the importers, the launches
(contention, Slurm) and the commands that look for records all take these from here. recorder/__init__.py,
the one file a user copies into a project, keeps its own copy of the constants; tests/test_record_format.py
pins that copy to this module.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
from pathlib import Path

from workload.files import write_atomic

SCHEMA_VERSION = 1  # readers refuse any other (docs/run-record.md)

# One run directory: run.json, and metrics.jsonl, named metrics.jsonl.part until the run ends well.
RUN_JSON = "run.json"
METRICS = "metrics.jsonl"
METRICS_PART = "metrics.jsonl.part"
# Beside a launch's run directories (its run_root): what else used the machine, the launcher's log, and
# the Slurm job that ran it.
CONTENTION_RECORD = "contention.json"
LAUNCH_LOG = "launch.log"
SLURM_JOB_RECORD = "slurm-job.json"

STATUSES = ("running", "ok", "failed")
# Every run.json holds these keys (null where the writer cannot tell: an imported log has no host).
RUN_KEYS = (
    "schema_version", "status", "error", "framework", "launcher", "backend", "world_size", "data_world_size",
    "seed", "options", "effective_lr", "versions", "host", "hosts", "env", "start_time", "end_time",
    "duration_s", "steps", "samples_per_step",
)
REQUIRED_RUN_KEYS = ("framework", "world_size", "seed", "status")  # a reader refuses a run.json without them
REQUIRED_STEP_KEYS = ("step", "loss", "step_time_s")  # and a step line without these

# Only tuning variables are recorded: never a whole environment, which can hold secrets.
RECORDED_ENV = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY",
    "HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_GLOO_IFACE", "HOROVOD_GLOO_TIMEOUT_SECONDS",
    "HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
    "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME",
    "NCCL_ALGO", "NCCL_PROTO", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    # and which scheduler job ran it, where (set by Slurm in every task)
    "SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_PARTITION",
)


# Strict JSON: no NaN or Infinity tokens (jq, JavaScript and most readers reject them).

def strict(entry: dict) -> dict:
    """A metrics line with each non-finite number made null, and the entry saying what it was
    ("nonfinite": {"loss": "nan"})."""
    bad = {key: repr(value) for key, value in entry.items() if isinstance(value, float) and not math.isfinite(value)}
    if not bad:
        return entry
    return {**{key: None if key in bad else value for key, value in entry.items()}, "nonfinite": bad}


def metrics_line(entry: dict) -> str:
    return json.dumps(strict(entry), allow_nan=False) + "\n"


def metrics_text(lines: list[dict]) -> str:
    return "".join(map(metrics_line, lines))


def dumps(meta: dict) -> str:
    """run.json's text; a non-finite number in it is a bug of the writer, and raises."""
    return json.dumps(meta, indent=2, allow_nan=False) + "\n"


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not strict JSON (a non-finite number is written as null)")


def loads(text: str) -> object:
    """Strict JSON in: NaN and Infinity tokens are refused (a ValueError), as every other reader would."""
    return json.loads(text, parse_constant=_no_constant)


def write_run_json(run_dir: Path, meta: dict) -> None:
    """Atomically (a temporary file renamed over it): a reader sees the old record or the new one."""
    write_atomic(run_dir / RUN_JSON, dumps(meta))


def write_metrics(run_dir: Path, lines: list[dict]) -> None:
    """A whole metrics.jsonl at once (an imported run's); a stale .part file would read as another run."""
    (run_dir / METRICS_PART).unlink(missing_ok=True)
    write_atomic(run_dir / METRICS, metrics_text(lines))


def error_trace(out: Path, rank: int) -> Path:
    """Where a failed rank's traceback goes (workload/cli.py), rather than the terminal."""
    return Path(out) / f"error-rank-{rank}.txt"


def seed_directory(out: Path, seed: int, seeds: tuple[int, ...]) -> Path:
    """Where one seed's record goes: OUT itself for a single seed, OUT/seed-S when a launch runs several."""
    return out / f"seed-{seed}" if len(seeds) > 1 else out


def says_ok(run_dir: Path) -> bool:
    """Whether the record in `run_dir` is complete: run.json says "ok" and metrics.jsonl is there."""
    try:
        meta = loads((run_dir / RUN_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("status") == "ok" and (run_dir / METRICS).exists()


# What a record says about the machine and the software. torch and psutil are imported here, not above:
# a reader of records needs neither.

def versions() -> dict[str, str | None]:
    import numpy
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cuda": torch.version.cuda,
    }


def mpi_library_version() -> str | None:
    """The MPI library's own version string, through mpi4py, without initialising MPI."""
    try:
        import mpi4py

        mpi4py.rc.initialize = False  # Horovod (or nobody) initialises MPI, not this query
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        return MPI.Get_library_version().strip().splitlines()[0]
    except Exception:  # mpi4py absent or built against no MPI: the record just says so
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_info() -> dict:
    import psutil
    import torch

    gpus = []
    if torch.cuda.is_available():
        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": gpus,
    }


def tuning_env() -> dict[str, str]:
    return {key: os.environ[key] for key in RECORDED_ENV if key in os.environ}
