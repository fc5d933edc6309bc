"""What a run record says about the machine and the software stack."""

from __future__ import annotations

import os
import platform
import socket

import psutil
import torch

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


def versions() -> dict[str, str | None]:
    import numpy

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
