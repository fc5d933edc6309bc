"""python -m compare report: rebuild the report from run records already on disk. `publish` is the last step
of `compare run` too: analyse, write the report, print the summary and return the exit status."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from compare.analysis.records import RecordError, RunRecord, find_runs
from compare.analysis.summary import analyse
from compare.analysis.time_to_target import Target, evaluated_metrics
from compare.commands.arguments import DEFAULTS, analysis_arguments, check_analysis, resolve_targets, target_argument
from compare.launch.logs import TEARDOWN_NOTE
from compare.launch.process import Outcome
from compare.launch.tuning import TUNING_RECORD, tuning_from_record
from compare.names import EXIT_RUN_FAILED, PARITY_EXIT
from compare.render.report import environment_from_runs, summary_table, write_report
from compare.render.time_to_target import time_to_target_line
from compare.render.verdicts import parity_line
from workload import record_format
from workload.files import write_json_atomic

COMPARISON_RECORD = "comparison.json"


def _launch_failures(outcomes: list[Outcome]) -> list[dict]:
    return [{"framework": o.launch.framework, "world_size": o.launch.world_size, "seed": None,
             "status": "timed out" if o.timed_out else f"exit {o.returncode}", "path": str(o.launch.log_path),
             "error": o.describe(), "failing_rank": o.failing_rank, "log_tail": o.log_tail}
            for o in outcomes if not o.ok]


def _comparison(ns: argparse.Namespace, outcomes: list[Outcome], wall_s: float | None) -> dict:
    record: dict = {"commands": [o.launch.shell_line() for o in outcomes],
                    "comparison_wall_s": round(wall_s, 1) if wall_s else None}
    if hasattr(ns, "private_network"):
        record["network"] = ("each launch in a network namespace of its own, loopback only" if ns.private_network
                             else "the host's network (launchers' servers bind every interface)")
    if getattr(ns, "reference_skipped", None):
        record["reference"] = f"skipped: {ns.reference_skipped}"
    if getattr(ns, "targets", None):  # `compare report` judges them again
        record["targets"] = [vars(t) for t in ns.targets]
    aborted = [f"{o.launch.label} (exit {o.returncode})" for o in outcomes if o.teardown_abort]
    if aborted:
        record["teardown"] = f"{', '.join(aborted)}: {TEARDOWN_NOTE}"
    return record


def _read_comparison(out: Path) -> dict:
    """The record `compare run` left, if any (a tree of imported or hand-made runs has none)."""
    try:
        record = json.loads((out / COMPARISON_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def stored_targets(comparison: dict) -> tuple[Target, ...]:
    """The --target values `compare run` was given, as comparison.json keeps them."""
    try:
        return tuple(Target(str(t["metric"]), float(t["value"])) for t in comparison.get("targets") or [])
    except (TypeError, KeyError, ValueError):
        return ()


def publish(out: Path, runs: list[RunRecord], ns: argparse.Namespace, *, outcomes: list[Outcome] | None = None,
            wall_s: float | None = None) -> int:
    if not runs:
        raise RecordError(f"{out}: no run records found")
    targets = tuple(getattr(ns, "targets", ())) or (() if outcomes else stored_targets(_read_comparison(out)))
    analysis = analyse(runs, warmup=ns.warmup, k=ns.k, rtol=ns.rtol, margins=ns.margins, allow=ns.allowed,
                       targets=targets)
    launch_failures = _launch_failures(outcomes or [])
    analysis["failures"] = launch_failures + analysis["failures"]
    # What only `compare run` knows (its commands, network, wall time, a skipped reference) is kept in
    # OUT/comparison.json, so that `compare report` rebuilds the same report from the records on disk.
    comparison = _comparison(ns, outcomes, wall_s) if outcomes else _read_comparison(out)
    if outcomes:
        write_json_atomic(out / COMPARISON_RECORD, comparison)
    env = environment_from_runs(runs)
    env["host"] = env.get("host") or (record_format.host_info() if outcomes else {})
    env.update({key: comparison[key] for key in ("network", "comparison_wall_s", "reference", "teardown")
                if comparison.get(key)})
    tuning = getattr(ns, "tuning", None)
    if tuning is not None:
        env["compared"] = tuning.describe()
        analysis["tuning"] = tuning.record()
    paths = write_report(out, runs, analysis, commands=comparison.get("commands"), environment=env)
    print(summary_table(analysis))
    verdict = analysis["verdict"]
    print(f"\n{parity_line(analysis)}")
    print(f"speed: {verdict['speed']}")
    if (reached := time_to_target_line(analysis)) is not None:
        print(f"time to target: {reached}")
    if tuning is not None:
        print(f"compared: {tuning.describe()}")
    if comparison.get("reference"):
        print(f"reference: {comparison['reference']}")
    if comparison.get("teardown"):
        print(f"teardown: {comparison['teardown']}")
    if wall_s is not None:
        print(f"wall time: {wall_s:.0f} s")
    print(f"report: {paths['md']}  (also {paths['html'].name}, {paths['json'].name})")
    if analysis["failures"]:
        return EXIT_RUN_FAILED
    return PARITY_EXIT[verdict["parity"]]


def add_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser("report", help="rebuild the report from run records", formatter_class=DEFAULTS)
    report.add_argument("dir", type=Path, help="a comparison directory (holding runs/) or any tree of runs")
    analysis_arguments(report)
    target_argument(report.add_argument_group("time to target (docs/benchmarks.md)"))
    report.set_defaults(func=main)


def main(ns: argparse.Namespace) -> int:
    check_analysis(ns)
    root = ns.dir / "runs" if (ns.dir / "runs").is_dir() else ns.dir
    if not root.is_dir():
        raise RecordError(f"{ns.dir}: no such directory")
    ns.tuning = tuning_from_record(ns.dir / TUNING_RECORD)
    runs = find_runs(root)
    workloads = [(r.meta.get("options") or {}).get("workload") for r in runs]
    ns.targets = resolve_targets(ns.target, next((w for w in workloads if w), None))
    evaluated = evaluated_metrics(runs)
    for target in ns.targets if runs else ():
        if target.metric not in evaluated:
            raise RecordError(f"--target {target.metric}: no Horovod or DDP record under {root} holds "
                              f"{target.metric} (it has: {', '.join(sorted(evaluated)) or 'none'})")
    return publish(ns.dir, runs, ns)
