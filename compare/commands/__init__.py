"""One module per `python -m compare` command.

Each module here defines `add_parser(commands)` (it adds its sub-parser, whose `func` default is the
command's entry point `main(ns) -> int`). COMMANDS names every command and its module, in `--help`'s order:
the parser (compare/commands/cli.py) imports only the module of the command given (a `compare check` never loads torch,
LibCST or matplotlib), and all of them for `--help`.
"""

COMMANDS: dict[str, str] = {
    "run": "run", "check": "check", "report": "report", "matrix": "matrix", "faults": "faults", "bench": "bench",
    "k8s": "k8s", "import": "import_records", "migrate": "migrate",
}
