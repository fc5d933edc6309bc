"""python -m compare: run Horovod and DDP under identical conditions and report parity and speed.

  run     launch both implementations with their real launchers, then analyse and report
  check   parity of two existing run records (runs made elsewhere: a cluster, a container)
  report  rebuild the report from run records already on disk
  matrix  every training feature, in its idiomatic form on each side, compared at np 2
  faults  kill, exit or stop a worker and compare how each framework recovers
  bench   harness overhead, allreduce bandwidth, tuning sweep, start-up (docs/benchmarks.md)

Exit status: 0 parity holds, 1 parity fails, 2 usage or input error, 3 a run failed, 4 undecided,
5 the two sides are not the same job.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from compare.analysis.records import RecordError
from compare.commands import COMMANDS
from compare.commands.arguments import Parser
from compare.names import EXIT_USAGE
from workload.options import UsageError

BUILT_IN = ("run", "check", "report", "matrix", "faults", "bench")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m compare", description=__doc__.split("\n\n")[0],
                    formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in (*BUILT_IN, *COMMANDS):  # each module adds its parser, with `func` set to its main(ns) -> int
        importlib.import_module(f"compare.commands.{name}").add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        ns = build_parser().parse_args(argv)
        return ns.func(ns)
    except (UsageError, RecordError) as exc:
        print(f"python -m compare: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("python -m compare: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
