"""The parser of `python -m compare`, derived from the option table (compare/commands/options.py), and the
exit statuses of compare/names.py under `--help`.

The table is all the parser needs: a command's module is imported only to run it (`entry_point`), so `--help`,
of the top level or of a command, loads neither torch nor the analysis.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import PurePath
from typing import Any

from compare.commands.options import COMMAND_SPECS, Command, options_of
from compare.defaults import out_default
from compare.names import Exit
from workload.optionspec import Parser


def program_name() -> str:
    """What the user typed to start the tool: the console script or the module, for --help and errors."""
    return "hvd-compare" if PurePath(sys.argv[0]).name == "hvd-compare" else "python -m compare"


DESCRIPTION = ("Run Horovod and DDP under identical conditions and report parity and speed; migrate Horovod "
               "code to DDP; check your own runs and logs. `python -m compare COMMAND --help` for each command.")


def typed(value: Any) -> str:
    """A default as a user types it: 1,2 for a tuple, 600 for 600.0, a path as it is."""
    if isinstance(value, (tuple, list)):
        return ",".join(typed(item) for item in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Help with each default once, as it is typed; none for a required option, a switch, or an empty default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        says_default = "(default" in text or "%(default)" in text or "[" in text
        empty = default is None or default is False or default == [] or default == () or default == argparse.SUPPRESS
        if (says_default or action.required or empty
                or (not action.option_strings and action.nargs is None)):
            return text
        return f"{text} (default: {typed(default).replace('%', '%%')})"


def exit_statuses() -> str:
    return "Exit status:\n" + "\n".join(f"  {code.value:>3}  {code.words}" for code in Exit)


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command named on the line: the first word that is not an option (the top level takes only -h)."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in COMMAND_SPECS else None


def add_command(commands: argparse._SubParsersAction, name: str, spec: Command) -> argparse.ArgumentParser:
    """The command's parser from the table; `func` names its entry point, imported only when it runs."""
    parser = commands.add_parser(name, help=spec.help.replace("%", "%%"),
                                 description=textwrap.fill(spec.description, 100),
                                 epilog=spec.epilog or None, formatter_class=Formatter,
                                 allow_abbrev=False)  # a flag as the docs spell it: no prefix stands in for it
    groups: dict[str | None, Any] = {None: parser}
    for option in options_of(name):
        if option.group not in groups:
            groups[option.group] = parser.add_argument_group(option.group)
        kwargs, text = dict(option.kwargs), option.help
        if "--out" in option.flags:  # what it holds is the command's; where, by default: results/COMMAND
            text = spec.writes
            if not spec.out_beside_input:
                kwargs["default"] = out_default(name)
        text = argparse.SUPPRESS if option.hidden else text.replace("%", "%%")  # argparse %-formats help
        groups[option.group].add_argument(*option.flags, help=text, **kwargs)
    if spec.workload_options:
        from workload.options import add_arguments  # the training options, passed on to every launch

        add_arguments(parser, run_directory=False, launch=False)
        for action in parser._actions:
            if note := spec.workload_notes.get(next(iter(action.option_strings), "")):
                action.help = f"{action.help} ({note})"
    if spec.passthrough is not None:
        parser.usage = parser.format_usage().removeprefix("usage: ").rstrip() + " [-- ARGS ...]"
    parser.set_defaults(func=f"compare.commands.{spec.module}:{spec.entry}")
    return parser


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for this command line: the named command's options only (the others listed by name). Without
    a command line, every command's, for code that parses several."""
    parser = Parser(prog=program_name(), description=textwrap.fill(DESCRIPTION, 100), formatter_class=Formatter,
                    epilog=exit_statuses())
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser, title="commands",
                                     metavar="COMMAND")
    chosen = chosen_command(argv) if argv is not None else None
    for name, spec in COMMAND_SPECS.items():
        if argv is None or name == chosen:
            add_command(commands, name, spec)
        else:  # listed under "commands" with its help line; its options are built only when it is named
            commands.add_parser(name, help=spec.help.replace("%", "%%"))
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The namespace of a command line; for a command that passes arguments on, those after `--` go to its
    `passthrough` attribute."""
    argv = list(argv)
    chosen = chosen_command(argv)
    spec = COMMAND_SPECS.get(chosen) if chosen else None
    rest: list[str] | None = None
    if spec is not None and spec.passthrough is not None and "--" in argv:
        argv, rest = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    ns = build_parser(argv).parse_args(argv)
    if spec is not None and spec.passthrough is not None:
        setattr(ns, spec.passthrough, rest or [])
    return ns


def entry_point(ns: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    if callable(ns.func):  # a parser built by hand (a test's) set its main
        return ns.func
    module, _, function = ns.func.partition(":")
    return getattr(importlib.import_module(module), function)
