"""python -m compare: run Horovod and DDP under identical conditions and report parity and speed.

  run     launch both implementations with their real launchers, then analyse and report
  check   parity of two existing run records (runs made elsewhere: a cluster, a container)
  report  rebuild the report from run records already on disk
  matrix  every training feature, in its idiomatic form on each side, compared at np 2
  faults  kill, exit or stop a worker and compare how each framework recovers
  bench   harness overhead, allreduce bandwidth, tuning sweep, start-up (docs/benchmarks.md)

Exit status: 0 parity holds (or cannot be decided), 1 parity fails, 2 usage or input error, 3 a run failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compare.records import RecordError
from workload.options import UsageError

EXIT_OK, EXIT_PARITY_FAILS, EXIT_USAGE, EXIT_RUN_FAILED = 0, 1, 2, 3


class CompareUsageError(Exception):
    """Bad input: one line on stderr and exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise CompareUsageError(message)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def _frameworks(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in ("horovod", "ddp")]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"frameworks are horovod and ddp, got {text!r}")
    return names


def build_parser() -> argparse.ArgumentParser:
    from workload.options import add_arguments
    parser = _Parser(prog="python -m compare", description=__doc__.split("\n\n")[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    defaults = argparse.ArgumentDefaultsHelpFormatter

    run = commands.add_parser("run", help="launch both frameworks and report", formatter_class=defaults,
                              description="Launch each framework at each world size with its real launcher "
                                          "(horovodrun, torchrun), every seed in one launch, then analyse.")
    suite = run.add_argument_group("comparison")
    suite.add_argument("--np", type=_int_list, default=(1, 2), help="world sizes, e.g. 1,2,4")
    suite.add_argument("--frameworks", type=_frameworks, default=("horovod", "ddp"), help="horovod, ddp or both")
    suite.add_argument("--horovod-controller", choices=["mpi", "gloo"], default="mpi",
                       help="horovodrun --mpi or --gloo")
    suite.add_argument("--launcher", choices=["cli", "spawn"], default="cli",
                       help="cli: horovodrun and torchrun; spawn: horovod.run and torch.multiprocessing.spawn")
    suite.add_argument("--reference", choices=["auto", "on", "off"], default="auto",
                       help="also train one process on the same global batches (auto: on for mlp and digits)")
    suite.add_argument("--timeout", type=float, default=600, help="seconds allowed for each launch")
    suite.add_argument("--network", choices=["auto", "private", "host"], default="auto",
                       help="private: each launch in a network namespace of its own with only loopback, so "
                            "nothing it listens on is reachable from outside (needs root); auto: private "
                            "when possible")
    suite.add_argument("--tuned", type=Path, default=None, metavar="FILE",
                       help="compare tuned against tuned: each framework's settings from FILE (the tuned.json "
                            "that `compare bench` writes); without it, defaults against defaults")
    suite.add_argument("--out", type=Path, default=Path("results/latest"),
                       help="where the run records (OUT/runs/) and the report go")
    _analysis_arguments(run)
    add_arguments(run, run_directory=False, launch=False)  # the workload options, passed on to every launch

    check = commands.add_parser("check", help="parity of two existing run records", formatter_class=defaults)
    check.add_argument("dir_a", type=Path, help="a run directory (or a directory of seed-S run directories)")
    check.add_argument("dir_b", type=Path)
    _analysis_arguments(check)

    matrix = commands.add_parser("matrix", help="every feature on both sides at np 2", formatter_class=defaults,
                                 description="Run each training feature in its idiomatic form on both frameworks "
                                             "(np 2, mlp) and write matrix.json and matrix.md.")
    matrix.add_argument("--out", type=Path, default=Path("results/matrix"), help="where records and the table go")
    matrix.add_argument("--steps", type=int, default=30, help="optimizer steps per run")
    matrix.add_argument("--seed", type=int, default=0)
    matrix.add_argument("--timeout", type=float, default=300, help="seconds allowed for each launch")
    matrix.add_argument("--only", type=lambda text: [w.strip() for w in text.split(",")], default=None,
                        help="run only the features whose names contain one of these words, e.g. resume,ZeRO")
    _analysis_arguments(matrix)

    faults = commands.add_parser("faults", help="the same faults on both frameworks' recovery paths",
                                 formatter_class=defaults,
                                 description="Kill, exit or stop a worker of each framework at np 2 and report "
                                             "recovery (torchrun --max-restarts with checkpoints; elastic Horovod).")
    faults.add_argument("--out", type=Path, default=Path("results/faults"), help="where records and the table go")
    faults.add_argument("--scenarios", type=lambda text: [w.strip() for w in text.split(",")],
                        default=["kill", "exit", "hang"], help="kill, exit, hang")
    faults.add_argument("--steps", type=int, default=40, help="optimizer steps per run (the fault is at step 13)")
    faults.add_argument("--interval", type=int, default=8, help="steps between checkpoints / commits")
    faults.add_argument("--collective-timeout", type=float, default=20, help="seconds before a stopped worker fails")
    faults.add_argument("--timeout", type=float, default=300, help="seconds allowed for each launch")

    from compare.bench import add_parser as add_bench_parser

    add_bench_parser(commands)
    import importlib

    from compare.commands import COMMANDS

    for name in COMMANDS:  # each sets its parser's `func` default to its main(ns) -> int
        importlib.import_module(f"compare.commands.{name}").add_parser(commands)

    report = commands.add_parser("report", help="rebuild the report from run records", formatter_class=defaults)
    report.add_argument("dir", type=Path, help="a comparison directory (holding runs/) or any tree of runs")
    _analysis_arguments(report)
    return parser


def _analysis_arguments(parser: argparse.ArgumentParser) -> None:
    from compare.parity import MARGIN_SD, STEP_K, STEP_RTOL

    group = parser.add_argument_group("analysis")
    group.add_argument("--warmup", type=int, default=5, help="steps excluded from timing")
    group.add_argument("--k", type=int, default=STEP_K, help="steps compared step by step")
    group.add_argument("--rtol", type=float, default=STEP_RTOL, help="step-wise relative tolerance")
    group.add_argument("--margin-sd", type=float, default=MARGIN_SD,
                       help="equivalence margin in seed-to-seed standard deviations")


def main(argv: list[str] | None = None) -> int:
    try:
        ns = build_parser().parse_args(argv)
        if getattr(ns, "func", None) is not None:
            return ns.func(ns)
        if ns.command == "bench":
            from compare.bench import run_bench

            return run_bench(ns)
        if hasattr(ns, "warmup") and (ns.warmup < 0 or ns.k <= 0 or ns.rtol <= 0 or ns.margin_sd <= 0):
            raise CompareUsageError("--warmup must be >= 0, and --k, --rtol and --margin-sd positive")
        if ns.command == "run":
            from compare.suite import run_suite

            return run_suite(ns)
        if ns.command == "matrix":
            from compare.matrix import run_matrix

            if ns.steps < 4:
                raise CompareUsageError("--steps must be at least 4 (the resume row stops half-way)")
            return run_matrix(ns)
        if ns.command == "faults":
            from compare.faults import SCENARIOS, run_faults

            unknown = [name for name in ns.scenarios if name not in SCENARIOS]
            if unknown or ns.steps <= 14 or ns.interval <= 0 or ns.collective_timeout <= 0:
                raise CompareUsageError(f"scenarios are {', '.join(SCENARIOS)}; --steps must exceed 14, "
                                        "--interval and --collective-timeout be positive")
            return run_faults(ns)
        if ns.command == "check":
            from compare.suite import check_dirs

            return check_dirs(ns)
        from compare.suite import rebuild_report

        return rebuild_report(ns)
    except (CompareUsageError, UsageError, RecordError) as exc:
        print(f"python -m compare: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("python -m compare: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
