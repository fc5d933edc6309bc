"""python -m compare: run Horovod and DDP under identical conditions and report parity and speed.

Each command is a module of compare/commands/, named in COMMANDS there; `--help` lists them from that
registry, and the exit statuses from compare/names.py.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from compare.analysis.records import RecordError
from compare.commands import COMMANDS
from compare.commands.arguments import Parser
from compare.names import EXIT_INTERRUPTED, EXIT_MEANINGS, EXIT_USAGE
from workload.errors import UsageError


def exit_statuses() -> str:
    return "Exit status:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_MEANINGS.items())


def chosen_commands(argv: Sequence[str]) -> list[str]:
    """The command named on the line (the first word that is not an option: the top level takes only -h), or
    every command when there is none or it is unknown: then argparse lists them all."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return [word] if word in COMMANDS else list(COMMANDS)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = Parser(prog="python -m compare", description=__doc__.split("\n\n")[0],
                    formatter_class=argparse.RawDescriptionHelpFormatter, epilog=exit_statuses())
    # argparse lists each registered command with its own help line under "commands".
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser, title="commands",
                                     metavar="COMMAND")
    for name in chosen_commands(argv):  # each module adds its parser, with `func` set to its main(ns) -> int
        importlib.import_module(f"compare.commands.{COMMANDS[name]}").add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else argv
        ns = build_parser(argv).parse_args(argv)
        return ns.func(ns)
    except (UsageError, RecordError) as exc:
        print(f"python -m compare: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("python -m compare: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
