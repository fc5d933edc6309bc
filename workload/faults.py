"""Injected faults (--fail-at-step) and which job a worker belongs to: a fault fires once per job, and a new
job in a reused --out starts without an earlier job's marker."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
from pathlib import Path

from workload.options import Options
from workload.record_format import error_trace

# What stays the same across the restarts of one job and differs between two jobs: torchrun's run id and
# store (kept across --max-restarts), the Gloo rendezvous of horovodrun or horovod.run (elastic Horovod's new
# workers too), mpirun's job, Slurm's job step. None without a launcher: every start is a new job.
_JOB_VARIABLES = (("TORCHELASTIC_RUN_ID", "MASTER_PORT"),
                  ("HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT"),
                  ("OMPI_MCA_orte_hnp_uri",), ("PMIX_NAMESPACE",), ("SLURM_JOB_ID", "SLURM_STEP_ID"))


def job_identity() -> str | None:
    for names in _JOB_VARIABLES:
        if all(name in os.environ for name in names):  # hashed: the file need not show addresses
            return hashlib.sha256("|".join(os.environ[name] for name in names).encode()).hexdigest()[:16]
    return None


def forget_earlier_job(options: Options, rank: int) -> None:
    """A fault marker and an error file in --out belong to the job that wrote them. A new job in a reused --out
    starts without them (an old marker would silently disable --fail-at-step); a restart of the same job
    (torchrun --max-restarts, elastic Horovod's new workers) or a continuation (--auto-resume) keeps them."""
    job_file = options.out / f".job-rank-{rank}"
    current = job_identity()
    try:
        previous = job_file.read_text().strip()
    except OSError:
        previous = None
    if not options.auto_resume and (current is None or previous != current):
        for stale in (fault_marker(options.out, rank), error_trace(options.out, rank)):
            stale.unlink(missing_ok=True)
    if current is not None and previous != current:
        options.out.mkdir(parents=True, exist_ok=True)
        job_file.write_text(current + "\n")


def fault_marker(out: Path, rank: int) -> Path:
    """The file that says this job's fault was injected (and when: its mtime), so a restart does not fail again."""
    return out / f".fault-injected-rank-{rank}"


def inject_fault(options: Options, rank: int, step: int) -> None:
    """Fail as asked, once per job: a marker in --out keeps a restarted job from failing again
    (forget_earlier_job removes an earlier job's marker)."""
    if options.fail_at_step != step or options.fail_rank != rank:
        return
    marker = fault_marker(options.out, rank)
    if marker.exists():
        return
    marker.write_text(f"{options.fail_mode} at step {step}\n")
    print(f"injecting fault: {options.fail_mode} on rank {rank} after step {step}", file=sys.stderr, flush=True)
    if options.fail_mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif options.fail_mode == "hang":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        os._exit(13)  # no clean-up, no goodbye to the other ranks: as a crash would
