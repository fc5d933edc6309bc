"""The top-level parser of `python -m compare`: each registered command's sub-parser, and the exit statuses.

Only the module of the command named on the line is imported (COMMANDS, compare/commands/__init__.py), so a
`compare check` never loads torch, LibCST or matplotlib; `--help` imports them all to list them.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from compare.commands import COMMANDS
from compare.names import EXIT_MEANINGS
from workload.optionspec import Parser

DESCRIPTION = "python -m compare: run Horovod and DDP under identical conditions and report parity and speed."


def exit_statuses() -> str:
    return "Exit status:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_MEANINGS.items())


def chosen_commands(argv: Sequence[str]) -> list[str]:
    """The command named on the line (the first word that is not an option: the top level takes only -h), or
    every command when there is none or it is unknown: then argparse lists them all."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return [word] if word in COMMANDS else list(COMMANDS)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = Parser(prog="python -m compare", description=DESCRIPTION,
                    formatter_class=argparse.RawDescriptionHelpFormatter, epilog=exit_statuses())
    # argparse lists each registered command with its own help line under "commands".
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser, title="commands",
                                     metavar="COMMAND")
    for name in chosen_commands(argv):  # each module adds its parser, with `func` set to its main(ns) -> int
        importlib.import_module(f"compare.commands.{COMMANDS[name]}").add_parser(commands)
    return parser
