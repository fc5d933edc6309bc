"""python -m compare (or hvd-compare, pyproject.toml's console script): run Horovod and DDP under identical
conditions and report parity and speed.

Each command's options are declared in compare/commands/options.py, which the parser (compare/commands/cli.py)
is derived from; the command's module is imported only to run it. The exit statuses are compare/names.py's.
"""

from __future__ import annotations

import os
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
        code = entry_point(ns)(ns)
        sys.stdout.flush()  # here, where a reader that went away is caught, not in the interpreter's exit
        return code
    except ModuleNotFoundError as exc:  # the light install (migrate alone) running another command
        if (line := not_installed(exc, chosen_command(argv))) is None:
            raise
        print(f"{program_name()}: error: {line}", file=sys.stderr)
        return Exit.USAGE
    except BrokenPipeError:
        # `compare check a b | head`: stop as other command-line tools do, without a traceback; stdout goes to
        # /dev/null so that the interpreter's flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.PIPE_CLOSED
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
