"""python -m compare faults: the same faults injected into both frameworks' recovery paths.

DDP recovers the way torchrun does it: --max-restarts restarts the whole group, which resumes from its
last checkpoint (--auto-resume). Horovod recovers the way elastic Horovod does it: the surviving workers
roll back to the last state.commit() and go on at the new size. Per scenario: did it recover, how long
from the fault to the next completed step, how many steps were lost, and how the final loss compares
with an uninterrupted run of the same framework.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from compare.launch import Launch, executable, run_launch
from compare.parity import stepwise
from compare.records import RecordError, RunRecord, load_run
from workload.files import write_atomic, write_json_atomic
from workload.options import Options, to_argv

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("kill", "exit", "hang")
FAULT_STEP, FAULT_RANK = 13, 1


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


def command(framework: str, options: Options, out: Path, *, faulty: bool) -> list[str]:
    argv = to_argv(options, out=out, seeds=options.seeds)
    if framework == "ddp":
        restarts = ["--max-restarts", "3"] if faulty else []
        return [executable("torchrun"), "--standalone", "--nproc-per-node", "2", *restarts, "-m", "native_impl",
                *argv, "--auto-resume"]
    elastic = ["--min-np", "1", "--max-np", "2", "--host-discovery-script",
               str(ROOT / "scripts" / "horovod-local-hosts.sh"), "--blacklist-cooldown-range", "2", "4"]
    return [executable("horovodrun"), "-np", "2", *(elastic if faulty else ["-H", "localhost:2"]), "--gloo",
            "--network-interfaces", "lo", sys.executable, "-m", "hvd_impl", *argv, *(["--elastic"] if faulty else [])]


def launch(framework: str, options: Options, out: Path, *, faulty: bool) -> Launch:
    """The launch `compare faults` runs: the uninterrupted run, or the one set up to recover (faulty)."""
    return Launch(framework, 2, options.seeds, command(framework, options, out, faulty=faulty),
                  {"OMP_NUM_THREADS": str(options.threads), "PYTHONUNBUFFERED": "1"}, out, out / "launch.log")


def judge(framework: str, scenario: str, faulty: RunRecord | None, clean: RunRecord, launch_text: str,
          fault_time: float | None, log: str) -> FaultResult:
    """Pure: the outcome of one scenario from its records."""
    result = FaultResult(framework, scenario, recovered=False, launch=launch_text, log=log,
                         uninterrupted_final_loss=clean.final_loss)
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
        clean_launch = launch(framework, options, clean_dir, faulty=False)
        commands.append(clean_launch.shell_line())
        print(f"{framework}: uninterrupted run", file=sys.stderr, flush=True)
        clean_outcome = run_launch(clean_launch, ns.timeout)
        if not clean_outcome.ok:
            print(f"  {clean_outcome.describe()}", file=sys.stderr)
            return 3
        clean = load_run(clean_dir)
        for scenario in ns.scenarios:
            run_dir = out / f"{framework}-{scenario}"
            faulty_options = Options(**{**asdict(options), "fail_at_step": FAULT_STEP, "fail_rank": FAULT_RANK,
                                        "fail_mode": scenario})
            faulty_launch = launch(framework, faulty_options, run_dir, faulty=True)
            commands.append(faulty_launch.shell_line())
            print(f"{framework}: {scenario} rank {FAULT_RANK} after step {FAULT_STEP}", file=sys.stderr, flush=True)
            outcome = run_launch(faulty_launch, ns.timeout)
            marker = run_dir / f".fault-injected-rank-{FAULT_RANK}"
            try:
                faulty = load_run(run_dir)
            except RecordError:
                faulty = None
            result = judge(framework, scenario, faulty, clean, outcome.describe(),
                           marker.stat().st_mtime if marker.exists() else None, "" if outcome.ok else outcome.log_tail)
            results.append(result)
            print(f"  {'recovered' if result.recovered else 'NOT recovered'} ({outcome.describe()})",
                  file=sys.stderr, flush=True)
    write_faults(out, results, commands, ns)
    print(render_markdown(results))
    print(f"faults: {out / 'faults.md'}  (also faults.json)")
    return 0 if all(r.recovered for r in results) else 3


def render_markdown(results: list[FaultResult]) -> str:
    def fmt(value: object, spec: str = "") -> str:
        return "—" if value is None else format(value, spec)

    lines = ["| framework | fault | recovered | s from fault to next step | steps lost | final loss (uninterrupted) "
             "| rel. diff | curve after resume identical | world sizes |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {'Horovod (elastic)' if r.framework == 'horovod' else 'DDP (torchrun restarts)'} "
                     f"| {r.scenario} | {'yes' if r.recovered else 'no: ' + r.launch} | {fmt(r.seconds_to_next_step)} "
                     f"| {fmt(r.steps_lost)} | {fmt(r.final_loss, '.4f')} ({fmt(r.uninterrupted_final_loss, '.4f')}) "
                     f"| {fmt(r.final_loss_rel_diff, '.2g')} | {fmt(r.curve_after_resume_identical)} "
                     f"| {fmt(r.world_sizes)} |")
    return "\n".join(lines) + "\n"


def write_faults(out: Path, results: list[FaultResult], commands: list[str], ns: argparse.Namespace) -> None:
    write_json_atomic(out / "faults.json", {"schema_version": 1, "fault_step": FAULT_STEP, "fault_rank": FAULT_RANK,
                                            "interval": ns.interval, "collective_timeout": ns.collective_timeout,
                                            "results": [asdict(r) for r in results], "commands": commands})
    header = (f"# Faults: Horovod vs DDP at np 2\n\nRank {FAULT_RANK} fails after step {FAULT_STEP} of {ns.steps} "
              f"(kill: SIGKILL; exit: exit status 13; hang: SIGSTOP); checkpoint/commit every {ns.interval} steps; "
              f"collective timeout {ns.collective_timeout:g} s. Regenerate with `python -m compare faults`.\n\n")
    write_atomic(out / "faults.md", header + render_markdown(results))
