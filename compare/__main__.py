"""python -m compare: run Horovod and DDP under identical conditions and report parity and speed.

Each command is a module of compare/commands/, named in COMMANDS there; the parser is built in
compare/commands/cli.py, which `--help` lists them from, with the exit statuses from compare/names.py.
"""

from __future__ import annotations

import sys

from compare.analysis.records import RecordError
from compare.commands.cli import build_parser
from compare.names import EXIT_INTERRUPTED, EXIT_USAGE
from workload.errors import UsageError


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
