"""One module per `python -m compare` command.

The commands, their help lines, their modules and every option are declared in compare/commands/options.py;
compare/commands/cli.py derives the parsers from there and imports a command's module only to run it (so
`--help` and a `compare check` load neither torch, LibCST nor matplotlib).
"""
