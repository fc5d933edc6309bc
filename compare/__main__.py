"""python -m compare: run Horovod and DDP under identical conditions and report parity and speed.

Each command is a module of compare/commands/, named in BUILT_IN here or in COMMANDS there; `--help` lists
them from those names, and the exit statuses from compare/names.py.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from compare.analysis.records import RecordError
from compare.commands import COMMANDS
from compare.commands.arguments import Parser
from compare.names import EXIT_INTERRUPTED, EXIT_MEANINGS, EXIT_USAGE
from workload.options import UsageError

BUILT_IN = ("run", "check", "report", "matrix", "faults", "bench")


def exit_statuses() -> str:
    return "Exit status:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_MEANINGS.items())


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m compare", description=__doc__.split("\n\n")[0],
                    formatter_class=argparse.RawDescriptionHelpFormatter, epilog=exit_statuses())
    # argparse lists each registered command with its own help line under "commands".
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser, title="commands",
                                     metavar="COMMAND")
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
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
