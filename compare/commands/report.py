"""python -m compare report: rebuild the report from run records already on disk. `publish` is the last step
of `compare run` too: analyse, write the report, print the summary and return the exit status."""

from __future__ import annotations

import argparse
from pathlib import Path

from compare.analysis.records import RecordError, RunRecord, find_runs
from compare.analysis.summary import analyse
from compare.commands.arguments import DEFAULTS, analysis_arguments, check_analysis
from compare.launch.process import Outcome
from compare.launch.tuning import TUNING_RECORD, tuning_from_record
from compare.names import EXIT_OK, EXIT_PARITY_FAILS, EXIT_RUN_FAILED
from compare.render.report import summary_table, write_report
from workload import environment


def _launch_failures(outcomes: list[Outcome]) -> list[dict]:
    return [{"framework": o.launch.framework, "world_size": o.launch.world_size, "seed": None,
             "status": "timed out" if o.timed_out else f"exit {o.returncode}", "path": str(o.launch.log_path),
             "error": o.describe(), "failing_rank": o.failing_rank, "log_tail": o.log_tail}
            for o in outcomes if not o.ok]


def publish(out: Path, runs: list[RunRecord], ns: argparse.Namespace, *, outcomes: list[Outcome] | None = None,
            wall_s: float | None = None) -> int:
    if not runs:
        raise RecordError(f"{out}: no run records found")
    analysis = analyse(runs, warmup=ns.warmup, k=ns.k, rtol=ns.rtol, margin_sd=ns.margin_sd)
    launch_failures = _launch_failures(outcomes or [])
    analysis["failures"] = launch_failures + analysis["failures"]
    commands = [o.launch.shell_line() for o in outcomes] if outcomes else None
    env = {"machine": environment.host_info(), "comparison_wall_s": round(wall_s, 1) if wall_s else None}
    tuning = getattr(ns, "tuning", None)
    if hasattr(ns, "private_network"):
        env["network"] = ("each launch in a network namespace of its own, loopback only" if ns.private_network
                          else "the host's network (launchers' servers bind every interface)")
    if tuning is not None:
        env["compared"] = tuning.describe()
        analysis["tuning"] = tuning.record()
    paths = write_report(out, runs, analysis, commands=commands, environment=env if outcomes else None)
    print(summary_table(analysis))
    verdict = analysis["verdict"]
    print(f"\nparity: {verdict['parity']} ({verdict['parity_evidence']})")
    print(f"speed: {verdict['speed']}")
    if tuning is not None:
        print(f"compared: {tuning.describe()}")
    if wall_s is not None:
        print(f"wall time: {wall_s:.0f} s")
    print(f"report: {paths['md']}  (also {paths['html'].name}, {paths['json'].name})")
    if analysis["failures"]:
        return EXIT_RUN_FAILED
    return EXIT_PARITY_FAILS if verdict["parity"] == "fails" else EXIT_OK




def add_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser("report", help="rebuild the report from run records", formatter_class=DEFAULTS)
    report.add_argument("dir", type=Path, help="a comparison directory (holding runs/) or any tree of runs")
    analysis_arguments(report)
    report.set_defaults(func=main)


def main(ns: argparse.Namespace) -> int:
    check_analysis(ns)
    root = ns.dir / "runs" if (ns.dir / "runs").is_dir() else ns.dir
    if not root.is_dir():
        raise RecordError(f"{ns.dir}: no such directory")
    ns.tuning = tuning_from_record(ns.dir / TUNING_RECORD)
    return publish(ns.dir, find_runs(root), ns)
