"""One module per `python -m compare` command that has grown past a few lines.

Each module here defines `add_parser(commands)` (it adds its sub-parser, whose `func` default is the
command's entry point `main(ns) -> int`). `compare/__main__.py` registers every name in COMMANDS.
"""

COMMANDS: tuple[str, ...] = ("k8s", "import_records", "migrate")
