"""The three commands of `python -m compare`: run, check and report. Processes and files live here;
the analysis itself is pure (compare/analysis.py)."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

from compare.analysis import analyse
from compare.launch import Launch, Outcome, build_launch, private_network_available, run_launch, steps_done
from compare.progress import ProgressReporter
from compare.records import RecordError, RunRecord, find_runs, load_run
from compare.report import summary_table, write_report
from compare.tuning import TUNING_RECORD, load_tuning, mismatch, tuning_from_record
from workload import environment
from workload.files import write_json_atomic
from workload.options import Options, UsageError, check_writable, options_from_namespace, validate
from workload.trainer import planned_steps
from workload.workloads import WORKLOADS

EXIT_OK, EXIT_PARITY_FAILS, EXIT_USAGE, EXIT_RUN_FAILED = 0, 1, 2, 3
DEFAULT_SEEDS = (0, 1, 2)
REFERENCE_AUTO = ("mlp", "digits")  # small enough that one process on the global batch is cheap


def plan(ns: argparse.Namespace) -> tuple[list[Launch], Options, int]:
    """Every launch of a comparison, in the order they run. Validates the options first."""
    options = options_from_namespace(ns)
    if ns.seeds is None:
        options = replace(options, seeds=DEFAULT_SEEDS if ns.seed == 0 else (ns.seed,))
    validate(options)
    tuning = ns.tuning = load_tuning(getattr(ns, "tuned", None))
    network = getattr(ns, "network", "host")
    if network == "private" and not private_network_available():
        raise UsageError("--network private needs root, unshare and ip (iproute2): use --network host")
    private = ns.private_network = network == "private" or (network == "auto" and private_network_available())
    framework_options = {name: tuning.options_for(name, options) for name in ns.frameworks}
    reference = ns.reference == "on" or (ns.reference == "auto" and options.workload in REFERENCE_AUTO)
    data = WORKLOADS[options.workload].make_data(options.dataset_size, options.text_dir)
    launches = []
    for world_size in sorted(set(ns.np)):
        if world_size <= 0:
            raise UsageError(f"--np values must be positive, got {world_size}")
        planned_steps(options, len(data.train), world_size)  # fails early: too few samples for this np
        for framework in ns.frameworks:
            launches.append(build_launch(framework, world_size, framework_options[framework],
                                         ns.out / "runs" / f"{framework}-np{world_size}",
                                         horovod_controller=ns.horovod_controller, launcher=ns.launcher,
                                         extra_env=tuning.env.get(framework), private_network=private))
        if reference and world_size > 1:
            launches.append(build_launch("reference", world_size, options,
                                         ns.out / "runs" / f"reference-np{world_size}", private_network=private))
    return launches, options, len(data.train)


def run_suite(ns: argparse.Namespace) -> int:
    launches, options, train_samples = plan(ns)
    check_writable(ns.out)
    print(f"comparing {ns.tuning.describe()}", flush=True)
    ns.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(ns.out / TUNING_RECORD, ns.tuning.record())  # for `compare report` to say it again
    if (warning := mismatch(ns.tuning, options, ns.horovod_controller)) is not None:
        print(f"python -m compare: warning: {warning}", file=sys.stderr, flush=True)
    total = sum(planned_steps(options, train_samples, launch.world_size) * len(launch.seeds) for launch in launches)
    reporter = ProgressReporter(total)
    outcomes: list[Outcome] = []
    started = time.monotonic()
    try:
        for index, launch in enumerate(launches, 1):
            shutil.rmtree(launch.run_root, ignore_errors=True)  # this tool's own output: no stale records
            reporter.begin(launch.label, index, len(launches))
            outcome = run_launch(launch, ns.timeout,
                                 on_poll=lambda launch=launch: reporter.update(steps_done(launch.run_root,
                                                                                          launch.seeds)))
            outcomes.append(outcome)
            reporter.end(outcome.describe(), steps_done(launch.run_root, launch.seeds), outcome.ok)
            if not outcome.ok:
                print(f"--- last lines of {outcome.launch.log_path} ---\n{outcome.log_tail}\n---",
                      file=sys.stderr, flush=True)
    finally:
        reporter.close()
    wall = time.monotonic() - started
    runs = find_runs(ns.out / "runs") if (ns.out / "runs").is_dir() else []
    if not runs:
        print("python -m compare: no run finished a single seed: nothing to analyse", file=sys.stderr)
        return EXIT_RUN_FAILED
    return _report(ns.out, runs, ns, outcomes=outcomes, wall_s=wall)


def _launch_failures(outcomes: list[Outcome]) -> list[dict]:
    return [{"framework": o.launch.framework, "world_size": o.launch.world_size, "seed": None,
             "status": "timed out" if o.timed_out else f"exit {o.returncode}", "path": str(o.launch.log_path),
             "error": o.describe(), "failing_rank": o.failing_rank, "log_tail": o.log_tail}
            for o in outcomes if not o.ok]


def _report(out: Path, runs: list[RunRecord], ns: argparse.Namespace, *, outcomes: list[Outcome] | None = None,
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


def _runs_in(directory: Path) -> list[RunRecord]:
    if not directory.is_dir():
        raise RecordError(f"{directory}: no such directory")
    if (directory / "run.json").exists():
        return [load_run(directory)]
    runs = find_runs(directory)
    if not runs:
        raise RecordError(f"{directory}: no run.json in it or below it")
    return runs


def check_dirs(ns: argparse.Namespace) -> int:
    """Parity of two sets of run records, whatever frameworks made them."""
    from compare.parity import statistical, stepwise

    side_a, side_b = _runs_in(ns.dir_a), _runs_in(ns.dir_b)
    failed = [run for run in side_a + side_b if not run.ok]
    for run in failed:
        print(f"run failed: {run.path} ({run.status}: {run.error or 'no error recorded'})", file=sys.stderr)
    by_seed_a = {run.seed: run for run in side_a if run.ok}
    by_seed_b = {run.seed: run for run in side_b if run.ok}
    common = sorted(set(by_seed_a) & set(by_seed_b))
    if not common:
        if failed:
            return EXIT_RUN_FAILED
        raise RecordError(f"{ns.dir_a} and {ns.dir_b} share no seed: nothing to compare")
    passed = True
    for seed in common:
        result = stepwise(by_seed_a[seed].losses, by_seed_b[seed].losses, k=ns.k, rtol=ns.rtol)
        passed &= bool(result.passed)
        where = (f"; first beyond tolerance at step {result.first_divergence_step} "
                 f"(relative gap {result.first_divergence_gap:.2e})" if result.first_divergence_step else "")
        print(f"seed {seed}: step-wise {'PASS' if result.passed else 'FAIL'}: max relative difference "
              f"{result.max_rel_diff:.2e} over {result.k} steps (tolerance {ns.rtol:g}){where}")
        if not result.passed:
            from compare.parity import likely_causes

            for cause in likely_causes(by_seed_a[seed].meta, by_seed_b[seed].meta, result):
                print(f"  likely cause: {cause}")
    if len(common) >= 2:
        stat = statistical({s: by_seed_a[s].final_loss for s in common}, {s: by_seed_b[s].final_loss for s in common},
                           margin_sd=ns.margin_sd)
        word = {True: "PASS", False: "FAIL", None: "UNDECIDED"}[stat.passed]
        print(f"statistical ({len(common)} seeds): {word}: mean final loss {stat.mean_a:.6g} vs {stat.mean_b:.6g}, "
              f"difference bound {stat.diff_upper_bound:.3g} vs margin {stat.margin:.3g}")
        passed &= stat.passed is not False
    print(f"parity {'holds' if passed else 'fails'}")
    if failed:
        return EXIT_RUN_FAILED
    return EXIT_OK if passed else EXIT_PARITY_FAILS


def rebuild_report(ns: argparse.Namespace) -> int:
    root = ns.dir / "runs" if (ns.dir / "runs").is_dir() else ns.dir
    if not root.is_dir():
        raise RecordError(f"{ns.dir}: no such directory")
    ns.tuning = tuning_from_record(ns.dir / TUNING_RECORD)
    return _report(ns.dir, find_runs(root), ns)
