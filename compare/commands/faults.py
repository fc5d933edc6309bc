"""python -m compare faults: the same faults injected into both frameworks' recovery paths.

DDP recovers the way torchrun does it: --max-restarts restarts the whole group, which resumes from its
last checkpoint (--auto-resume). Horovod recovers the way elastic Horovod does it: the surviving workers
roll back to the last state.commit() and go on at the new size. Per scenario: did it recover, how long
from the fault to the next completed step, how many steps were lost, and how the final loss compares
with an uninterrupted run of the same framework.

The launches are here; each scenario's outcome is judged by compare/analysis/faults.py and tabulated by
compare/render/faults.py.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from compare.analysis.faults import (
    EXPECTED_NOT_TO_RECOVER,
    FAULTS_JSON,
    FaultResult,
    judge_fault,
)
from compare.analysis.records import RecordError, load_run
from compare.defaults import FAULT_RANK, FAULT_STEP, SCENARIOS
from compare.launch.lines import recovery_launch
from compare.launch.logs import steps_done
from compare.launch.process import run_launch
from compare.names import Exit
from compare.render.blocks import render_markdown
from compare.render.faults import fault_table, faults_markdown
from workload.errors import UsageError
from workload.faults import fault_marker
from workload.files import write_atomic, write_json_atomic
from workload.options import Options

HEARTBEAT_S = 30  # a line this often while a launch runs, so that a long wait shows what it waits for


def run_faults(ns: argparse.Namespace) -> int:
    out: Path = ns.out
    options = Options(workload="mlp", dataset_size=2048, batch_size=16, steps=ns.steps, seeds=(0,),
                      checkpoint_every=ns.interval, collective_timeout=ns.collective_timeout)
    results: list[FaultResult] = []
    commands: list[str] = []
    for framework in ("ddp", "horovod"):
        clean_dir = out / f"{framework}-uninterrupted"
        # This tool's own output: an earlier run's checkpoint, record or fault marker would be resumed
        # (--auto-resume) or honoured as this run's.
        shutil.rmtree(clean_dir, ignore_errors=True)
        clean_launch = recovery_launch(framework, options, clean_dir, faulty=False)
        commands.append(clean_launch.shell_line())
        print(f"{framework}: uninterrupted run", file=sys.stderr, flush=True)
        clean_outcome = run_launch(clean_launch, ns.timeout)
        if not clean_outcome.ok:
            print(f"  {clean_outcome.describe()}", file=sys.stderr)
            return Exit.RUN_FAILED
        clean = load_run(clean_dir)
        for scenario in ns.scenarios:
            run_dir = out / f"{framework}-{scenario}"
            shutil.rmtree(run_dir, ignore_errors=True)
            faulty_options = Options(**{**asdict(options), "fail_at_step": FAULT_STEP, "fail_rank": FAULT_RANK,
                                        "fail_mode": scenario})
            faulty_launch = recovery_launch(framework, faulty_options, run_dir, faulty=True)
            commands.append(faulty_launch.shell_line())
            expected = EXPECTED_NOT_TO_RECOVER.get((framework, scenario))
            limit = min(ns.timeout, ns.hang_wait) if expected else ns.timeout
            print(f"{framework}: {scenario} rank {FAULT_RANK} after step {FAULT_STEP}"
                  + (f" (expected not to recover: {expected}; waiting {limit:.0f} s to show it)" if expected else ""),
                  file=sys.stderr, flush=True)
            outcome = run_launch(faulty_launch, limit, on_poll=heartbeat(run_dir, limit))
            marker = fault_marker(run_dir, FAULT_RANK)
            try:
                faulty = load_run(run_dir)
            except RecordError:
                faulty = None
            result = judge_fault(framework, scenario, faulty, clean, outcome.describe(),
                                 marker.stat().st_mtime if marker.exists() else None,
                                 "" if outcome.ok else outcome.log_tail)
            results.append(result)
            word = "recovered" if result.recovered else ("not recovered, as expected" if expected else "NOT recovered")
            print(f"  {word} ({outcome.describe()})", file=sys.stderr, flush=True)
    write_faults(out, results, commands, ns)
    print(render_markdown([fault_table(results)]))
    print(f"faults: {out / 'faults.md'}  (also {FAULTS_JSON})")
    return Exit.OK if all(r.as_expected for r in results) else Exit.RUN_FAILED


def heartbeat(run_dir: Path, limit: float) -> Callable[[], None]:
    """For run_launch's on_poll: every HEARTBEAT_S seconds, one line saying how long it has waited and where
    the run stands."""
    started = time.monotonic()
    said = [0]

    def beat() -> None:
        waited = time.monotonic() - started
        if waited // HEARTBEAT_S > said[0]:
            said[0] = int(waited // HEARTBEAT_S)
            print(f"  waiting: {waited:.0f} s of at most {limit:.0f} s, {steps_done(run_dir, (0,))} steps recorded",
                  file=sys.stderr, flush=True)

    return beat


def write_faults(out: Path, results: list[FaultResult], commands: list[str], ns: argparse.Namespace) -> None:
    write_json_atomic(out / FAULTS_JSON, {"schema_version": 1, "fault_step": FAULT_STEP, "fault_rank": FAULT_RANK,
                                            "interval": ns.interval, "collective_timeout": ns.collective_timeout,
                                            "results": [asdict(r) for r in results], "commands": commands})
    write_atomic(out / "faults.md", faults_markdown(results, steps=ns.steps, interval=ns.interval,
                                                    collective_timeout=ns.collective_timeout))


def main(ns: argparse.Namespace) -> int:
    unknown = [name for name in ns.scenarios if name not in SCENARIOS]
    if unknown or ns.steps <= 14 or ns.interval <= 0 or ns.collective_timeout <= 0 or ns.hang_wait <= 0:
        raise UsageError(f"scenarios are {', '.join(SCENARIOS)}; --steps must exceed 14, "
                         "--interval, --collective-timeout and --hang-wait be positive")
    return run_faults(ns)
