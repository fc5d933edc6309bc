"""python -m compare (or hvd-compare, pyproject.toml's console script): run Horovod and DDP under identical
conditions and report parity and speed.

Each command's options are declared in compare/commands/options.py, which the parser (compare/commands/cli.py)
is derived from; the command's module is imported only to run it. The exit statuses are compare/names.py's.
"""

from __future__ import annotations

import sys

from compare.commands.cli import chosen_command, entry_point, parse, program_name
from compare.install import not_installed
from compare.names import Exit
from workload.errors import UsageError


def bad_input(exc: Exception) -> bool:
    """A UsageError, or a RecordError of the analysis (a record that cannot be read is bad input too). The
    analysis is not imported to ask: `--help` must not load it, and a RecordError means it was loaded."""
    records = sys.modules.get("compare.analysis.records")
    return isinstance(exc, UsageError) or (records is not None and isinstance(exc, records.RecordError))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        ns = parse(argv)
        return entry_point(ns)(ns)
    except ModuleNotFoundError as exc:  # the light install (migrate alone) running another command
        if (line := not_installed(exc, chosen_command(argv))) is None:
            raise
        print(f"{program_name()}: error: {line}", file=sys.stderr)
        return Exit.USAGE
    except Exception as exc:
        if not bad_input(exc):
            raise
        print(f"{program_name()}: error: {exc}", file=sys.stderr)
        return Exit.USAGE
    except KeyboardInterrupt:
        print(f"{program_name()}: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
