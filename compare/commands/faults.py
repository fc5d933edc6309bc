"""python -m compare faults: the same faults injected into both frameworks' recovery paths.

DDP recovers the way torchrun does it: --max-restarts restarts the whole group, which resumes from its
last checkpoint (--auto-resume). Horovod recovers the way elastic Horovod does it: the surviving workers
roll back to the last state.commit() and go on at the new size. Per scenario: did it recover, how long
from the fault to the next completed step, how many steps were lost, and how the final loss compares
with an uninterrupted run of the same framework.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from compare.analysis.parity import stepwise
from compare.analysis.records import RecordError, RunRecord, load_run
from compare.commands.arguments import DEFAULTS, word_list
from compare.launch.commands import recovery_launch
from compare.launch.logs import steps_done
from compare.launch.process import run_launch
from compare.names import EXIT_OK, EXIT_RUN_FAILED
from compare.render.blocks import Heading, Para, Table, num, render_markdown
from workload.errors import UsageError
from workload.files import write_atomic, write_json_atomic
from workload.options import Options

SCENARIOS = ("kill", "exit", "hang")
FAULT_STEP, FAULT_RANK = 13, 1
# Scenarios a framework is known not to recover from (docs/fault-tolerance.md): reported, not a failure.
EXPECTED_NOT_TO_RECOVER = {
    ("horovod", "hang"): "elastic Horovod waits for a stopped worker, which never exits; only the launch's time "
                         "limit ends it (docs/fault-tolerance.md)",
}
HEARTBEAT_S = 30  # a line this often while a launch runs, so that a long wait shows what it waits for


@dataclass
class FaultResult:
    framework: str
    scenario: str
    recovered: bool
    launch: str  # what the launcher said
    seconds_to_next_step: float | None = None
    steps_lost: int | None = None
    final_loss: float | None = None
    uninterrupted_final_loss: float | None = None
    final_loss_rel_diff: float | None = None
    curve_after_resume_identical: bool | None = None
    world_sizes: list[int] | None = None
    log: str = ""
    expected_failure: str | None = None  # why this framework is known not to recover here

    @property
    def as_expected(self) -> bool:
        return self.recovered or self.expected_failure is not None


def judge(framework: str, scenario: str, faulty: RunRecord | None, clean: RunRecord, launch_text: str,
          fault_time: float | None, log: str) -> FaultResult:
    """Pure: the outcome of one scenario from its records."""
    result = FaultResult(framework, scenario, recovered=False, launch=launch_text, log=log,
                         uninterrupted_final_loss=clean.final_loss,
                         expected_failure=EXPECTED_NOT_TO_RECOVER.get((framework, scenario)))
    if faulty is None or not faulty.ok:
        return result
    steps = faulty.steps
    result.recovered = len(steps) == len(clean.steps)
    result.final_loss = faulty.final_loss
    result.final_loss_rel_diff = abs(faulty.final_loss - clean.final_loss) / abs(clean.final_loss)
    result.world_sizes = faulty.meta.get("elastic_world_sizes")
    if fault_time is not None:
        after = [s for s in steps if s.get("wall_time", 0) > fault_time]
        if after:
            result.seconds_to_next_step = round(after[0]["wall_time"] - fault_time, 2)
            result.steps_lost = FAULT_STEP - (after[0]["step"] - 1)
    resumed = faulty.meta.get("resumed_from_step")
    if resumed is not None:
        tail = stepwise(clean.losses[resumed:], faulty.losses[resumed:], k=len(faulty.losses) - resumed)
        result.curve_after_resume_identical = bool(tail.passed and tail.max_rel_diff == 0)
    return result


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
            return EXIT_RUN_FAILED
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
            marker = run_dir / f".fault-injected-rank-{FAULT_RANK}"
            try:
                faulty = load_run(run_dir)
            except RecordError:
                faulty = None
            result = judge(framework, scenario, faulty, clean, outcome.describe(),
                           marker.stat().st_mtime if marker.exists() else None, "" if outcome.ok else outcome.log_tail)
            results.append(result)
            word = "recovered" if result.recovered else ("not recovered, as expected" if expected else "NOT recovered")
            print(f"  {word} ({outcome.describe()})", file=sys.stderr, flush=True)
    write_faults(out, results, commands, ns)
    print(render_markdown([fault_table(results)]))
    print(f"faults: {out / 'faults.md'}  (also faults.json)")
    return EXIT_OK if all(r.as_expected for r in results) else EXIT_RUN_FAILED


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


FAULT_HEADERS = ["framework", "fault", "recovered", "s from fault to next step", "steps lost",
                 "final loss (uninterrupted)", "rel. diff", "curve after resume identical", "world sizes"]


def fault_table(results: list[FaultResult]) -> Table:
    return Table(FAULT_HEADERS, [
        ["Horovod (elastic)" if r.framework == "horovod" else "DDP (torchrun restarts)", r.scenario,
         "yes" if r.recovered else ("no, as expected: " if r.expected_failure else "no: ") + r.launch,
         num(r.seconds_to_next_step, ""), num(r.steps_lost, ""),
         f"{num(r.final_loss, '.4f')} ({num(r.uninterrupted_final_loss, '.4f')})", num(r.final_loss_rel_diff, ".2g"),
         num(r.curve_after_resume_identical, ""), num(r.world_sizes, "")] for r in results])


def write_faults(out: Path, results: list[FaultResult], commands: list[str], ns: argparse.Namespace) -> None:
    write_json_atomic(out / "faults.json", {"schema_version": 1, "fault_step": FAULT_STEP, "fault_rank": FAULT_RANK,
                                            "interval": ns.interval, "collective_timeout": ns.collective_timeout,
                                            "results": [asdict(r) for r in results], "commands": commands})
    blocks = [Heading(1, "Faults: Horovod vs DDP at np 2"),
              Para(f"Rank {FAULT_RANK} fails after step {FAULT_STEP} of {ns.steps} (kill: SIGKILL; exit: exit status "
                   f"13; hang: SIGSTOP); checkpoint/commit every {ns.interval} steps; collective timeout "
                   f"{ns.collective_timeout:g} s. Regenerate with `python -m compare faults`."),
              fault_table(results)]
    write_atomic(out / "faults.md", render_markdown(blocks))


def add_parser(commands: argparse._SubParsersAction) -> None:
    faults = commands.add_parser("faults", help="the same faults on both frameworks' recovery paths",
                                 formatter_class=DEFAULTS,
                                 description="Kill, exit or stop a worker of each framework at np 2 and report "
                                             "recovery (torchrun --max-restarts with checkpoints; elastic Horovod).")
    faults.add_argument("--out", type=Path, default=Path("results/faults"), help="where records and the table go")
    faults.add_argument("--scenarios", type=word_list, default=list(SCENARIOS), help=", ".join(SCENARIOS))
    faults.add_argument("--steps", type=int, default=40, help="optimizer steps per run (the fault is at step 13)")
    faults.add_argument("--interval", type=int, default=8, help="steps between checkpoints / commits")
    faults.add_argument("--collective-timeout", type=float, default=20, help="seconds before a stopped worker fails")
    faults.add_argument("--timeout", type=float, default=300, help="seconds allowed for each launch")
    faults.add_argument("--hang-wait", type=float, default=120,
                        help="seconds to wait on a scenario known not to recover (elastic Horovod and a stopped "
                             "worker) before ending it")
    faults.set_defaults(func=main)


def main(ns: argparse.Namespace) -> int:
    unknown = [name for name in ns.scenarios if name not in SCENARIOS]
    if unknown or ns.steps <= 14 or ns.interval <= 0 or ns.collective_timeout <= 0 or ns.hang_wait <= 0:
        raise UsageError(f"scenarios are {', '.join(SCENARIOS)}; --steps must exceed 14, "
                         "--interval, --collective-timeout and --hang-wait be positive")
    return run_faults(ns)
