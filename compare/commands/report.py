"""python -m compare report: rebuild the report from run records already on disk. `publish` is the last step
of `compare run` too: analyse, write the report, print the summary and return the exit status."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from compare.analysis.faults import DEFAULT_FAULTS_OUT, FAULTS_JSON
from compare.analysis.records import RecordError, RunRecord, find_runs
from compare.analysis.summary import analyse
from compare.analysis.time_to_target import Target, evaluated_metrics
from compare.analysis.tradeoffs import TradeoffInputs, code_lines
from compare.commands.arguments import (
    AnalysisSettings,
    analysis_settings,
    resolve_targets,
)
from compare.launch.logs import TEARDOWN_NOTE
from compare.launch.process import Outcome
from compare.launch.tuning import TUNING_RECORD, Tuning, tuning_from_record
from compare.names import Exit, Parity
from compare.render.report import environment_from_runs, summary_table, write_report
from compare.render.speed import figures_note, speed_line
from compare.render.time_to_target import time_to_target_line
from compare.render.verdicts import parity_line
from workload import record_format
from workload.files import write_json_atomic

COMPARISON_RECORD = "comparison.json"
ROOT = Path(__file__).resolve().parents[2]
BACKEND_FILES = {"horovod": ROOT / "hvd_impl" / "backend.py", "ddp": ROOT / "native_impl" / "backend.py",
                 "shared": ROOT / "workload" / "backend.py"}
FAULTS_RECORD = Path(DEFAULT_FAULTS_OUT.name) / FAULTS_JSON  # `compare faults --out X/faults` beside a comparison


@dataclass(frozen=True, kw_only=True)
class ReportInputs:
    """What a report needs beside the run records. `compare run` knows all of it (its ComparisonPlan is one);
    `compare report` reads it back from what the run left (TUNING_RECORD, COMPARISON_RECORD)."""

    analysis: AnalysisSettings
    targets: tuple[Target, ...] = ()
    tuning: Tuning | None = None  # None: records that `compare run` did not write
    private_network: bool | None = None  # None: not known here (comparison.json keeps what the run said)
    reference_skipped: str | None = None  # why the single-process reference did not run


def _launch_failures(outcomes: list[Outcome]) -> list[dict]:
    return [{"framework": o.launch.framework, "world_size": o.launch.world_size, "seed": None,
             "status": "timed out" if o.timed_out else f"exit {o.returncode}", "path": str(o.launch.log_path),
             "error": o.describe(), "failing_rank": o.failing_rank, "log_tail": o.log_tail}
            for o in outcomes if not o.ok]


def _comparison(inputs: ReportInputs, outcomes: list[Outcome], wall_s: float | None) -> dict:
    record: dict = {"commands": [o.launch.shell_line() for o in outcomes],
                    "comparison_wall_s": round(wall_s, 1) if wall_s else None}
    if inputs.private_network is not None:
        record["network"] = ("each launch in a network namespace of its own, loopback only" if inputs.private_network
                             else "the host's network (launchers' servers bind every interface)")
    if inputs.reference_skipped:
        record["reference"] = f"skipped: {inputs.reference_skipped}"
    if inputs.targets:  # `compare report` judges them again
        record["targets"] = [vars(t) for t in inputs.targets]
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


def inputs_from_records(directory: Path, analysis: AnalysisSettings, targets: tuple[Target, ...]) -> ReportInputs:
    """`compare report`'s inputs: the tuning `compare run` recorded, and its --target values unless others are
    given. The network and a skipped reference stay in comparison.json as the run worded them."""
    targets = targets or stored_targets(_read_comparison(directory))
    return ReportInputs(analysis=analysis, targets=targets, tuning=tuning_from_record(directory / TUNING_RECORD))


def find_faults(out: Path) -> Path | None:
    """`compare faults` results beside this comparison: OUT/faults, OUT/../faults, or results/faults."""
    for candidate in (out / FAULTS_RECORD, out.parent / FAULTS_RECORD, DEFAULT_FAULTS_OUT / FAULTS_JSON):
        if candidate.is_file():
            return candidate
    return None


def backend_lines() -> dict[str, int]:
    """Lines of code of each framework's backend.py and of the base both build on ("shared")."""
    lines = {}
    for name, path in BACKEND_FILES.items():
        try:
            lines[name] = code_lines(path.read_text(encoding="utf-8"))
        except OSError:
            continue
    return lines


def tradeoff_inputs(out: Path) -> TradeoffInputs:
    """What the trade-offs table needs beyond the records: the fault results found beside them, the code sizes."""
    source = find_faults(out)
    faults = None
    if source is not None:
        try:
            faults = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            source = None
    return TradeoffInputs(faults=faults, faults_source=str(source) if source else None, code_lines=backend_lines())


def publish(out: Path, runs: list[RunRecord], inputs: ReportInputs, *, outcomes: list[Outcome] | None = None,
            wall_s: float | None = None) -> int:
    if not runs:
        raise RecordError(f"{out}: no run records found")
    settings = inputs.analysis
    analysis = analyse(runs, warmup=settings.warmup, k=settings.k, rtol=settings.rtol, margins=settings.margins,
                       allow=settings.allowed, targets=inputs.targets, tradeoff_inputs=tradeoff_inputs(out))
    launch_failures = _launch_failures(outcomes or [])
    analysis["failures"] = launch_failures + analysis["failures"]
    # What only `compare run` knows (its commands, network, wall time, a skipped reference) is kept in
    # OUT/comparison.json, so that `compare report` rebuilds the same report from the records on disk.
    comparison = _comparison(inputs, outcomes, wall_s) if outcomes else _read_comparison(out)
    if outcomes:
        write_json_atomic(out / COMPARISON_RECORD, comparison)
    env = environment_from_runs(runs)
    env["host"] = env.get("host") or (record_format.host_info() if outcomes else {})
    env.update({key: comparison[key] for key in ("network", "comparison_wall_s", "reference", "teardown")
                if comparison.get(key)})
    tuning = inputs.tuning
    if tuning is not None:
        env["compared"] = tuning.describe()
        analysis["tuning"] = tuning.record()
    paths = write_report(out, runs, analysis, commands=comparison.get("commands"), environment=env)
    compared_words = tuning.describe() if tuning is not None else None
    print("\n".join(terminal_lines(analysis, comparison, compared_words, wall_s, paths["md"])))
    if analysis["failures"]:
        return Exit.RUN_FAILED
    return Parity(analysis["verdict"]["parity"]).exit


def terminal_lines(analysis: dict, comparison: dict, compared: str | None, wall_s: float | None,
                   report_md: Path) -> list[str]:
    """What `compare run` and `compare report` print of a comparison, from its analysis (also as report.json
    stores it: tests/test_doc_samples.py renders the README's sample again from one)."""
    lines = [summary_table(analysis)]
    if (note := figures_note(analysis)) is not None:
        lines.append(note)
    lines += ["", parity_line(analysis), f"speed: {speed_line(analysis)}"]
    if (reached := time_to_target_line(analysis)) is not None:
        lines.append(f"time to target: {reached}")
    if compared is not None:
        lines.append(f"compared: {compared}")
    if comparison.get("reference"):
        lines.append(f"reference: {comparison['reference']}")
    if comparison.get("teardown"):
        lines.append(f"teardown: {comparison['teardown']}")
    if wall_s is not None:
        lines.append(f"wall time: {wall_s:.0f} s")
    lines.append(f"report: {report_md}  (also {report_md.with_suffix('.html').name}, "
                 f"{report_md.with_suffix('.json').name})")
    return "\n".join(lines).split("\n")


def main(ns: argparse.Namespace) -> int:
    analysis = analysis_settings(ns)
    root = ns.dir / "runs" if (ns.dir / "runs").is_dir() else ns.dir
    if not root.is_dir():
        raise RecordError(f"{ns.dir}: no such directory")
    runs = find_runs(root)
    workloads = [(r.meta.get("options") or {}).get("workload") for r in runs]
    targets = resolve_targets(ns.target, next((w for w in workloads if w), None))
    evaluated = evaluated_metrics(runs)
    for target in targets if runs else ():
        if target.metric not in evaluated:
            raise RecordError(f"--target {target.metric}: no Horovod or DDP record under {root} holds "
                              f"{target.metric} (it has: {', '.join(sorted(evaluated)) or 'none'})")
    return publish(ns.dir, runs, inputs_from_records(ns.dir, analysis, targets))
