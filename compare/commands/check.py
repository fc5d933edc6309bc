"""python -m compare check: parity of two sets of existing run records (runs made elsewhere: a cluster, a
container, an imported log)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compare.analysis.records import RecordError, RunRecord, find_runs, load_run
from compare.commands.arguments import DEFAULTS, analysis_arguments, check_analysis
from compare.names import EXIT_OK, EXIT_PARITY_FAILS, EXIT_RUN_FAILED


def add_parser(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser("check", help="parity of two existing run records", formatter_class=DEFAULTS)
    check.add_argument("dir_a", type=Path, help="a run directory (or a directory of seed-S run directories)")
    check.add_argument("dir_b", type=Path)
    analysis_arguments(check)
    check.set_defaults(func=main)


def _runs_in(directory: Path) -> list[RunRecord]:
    if not directory.is_dir():
        raise RecordError(f"{directory}: no such directory")
    if (directory / "run.json").exists():
        return [load_run(directory)]
    runs = find_runs(directory)
    if not runs:
        raise RecordError(f"{directory}: no run.json in it or below it")
    return runs


def main(ns: argparse.Namespace) -> int:
    check_analysis(ns)
    """Parity of two sets of run records, whatever frameworks made them."""
    from compare.analysis.parity import statistical, stepwise

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
            from compare.analysis.parity import likely_causes

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


