"""The migration report (Markdown): every change with its line before and after, and what needs a person."""

from __future__ import annotations

import re
from collections.abc import Mapping

from compare.migrate.check.line_map import map_lines
from compare.migrate.plan.migration import Change, Flag, Migration


def place_changes(migration: Migration) -> list[Change]:
    """The changes with new_line filled in (helpers: the line of the first helper)."""
    mapping = map_lines(migration.source, migration.code)
    new_lines = migration.code.splitlines()
    first_helper = next((i + 1 for i, line in enumerate(new_lines) if line.startswith("# Added by `python -m compare")),
                        None)
    for change in migration.changes:
        if change.line == 0:
            change.new_line = first_helper
        elif not change.after:
            change.new_line = None
        else:
            change.new_line = _nearest(new_lines, change.after, mapping.get(change.line))
    return migration.changes


def _nearest(new_lines: list[str], after: str, guess: int | None) -> int | None:
    """The line of the result that holds the new code, nearest the diff's guess (the diff aligns a replaced
    block by position only)."""
    text = after.split("  #")[0].split("; ")[-1].removesuffix("...").strip()
    found = [i + 1 for i, line in enumerate(new_lines) if text and text in line]
    if not found:
        return guess
    return min(found, key=lambda line: abs(line - guess)) if guess is not None else found[-1]


def change_row(change: Change, after: str | None = None) -> str:
    """A change's row in a report's table (a script's and each file's of a repository): its line before and
    after (`-`: added, removed), the Horovod code, the DDP code (or `after`), the note."""
    new_line = "-" if change.new_line is None else str(change.new_line)
    return (f"| {change.line or '-'} | {new_line} | {markdown_code(change.before)} | "
            f"{markdown_code(change.after if after is None else after)} | {markdown_cell(change.note)} |")


def markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_code(text: str) -> str:
    return f"`{markdown_cell(text)}`" if text else "(removed)"


def render(migration: Migration, source_name: str, output_name: str, launch_lines: list[str] | None = None) -> str:
    changes = place_changes(migration)
    flags = migration.flags
    lines = [f"# Migration report: `{source_name}` -> `{output_name}`", "",
             f"Horovod (horovod.torch) to torch.distributed + DistributedDataParallel, for "
             f"{migration.front_end or 'torchrun'}. "
             f"{len(changes)} change(s); {len(flags)} place(s) need a person.", ""]
    if migration.has_sync_batchnorm:
        lines += ["Runs on CPU: **no** (SyncBatchNorm needs GPUs on both sides).", ""]
    lines += ["## Changes", "",
              "Lines are the original's and the result's (`-`: removed; helpers are added after the imports).", "",
              "| line | new line | Horovod | DDP | note |", "|---|---|---|---|---|"]
    lines += [change_row(change) for change in changes]
    lines += ["", "## Needs a person", ""]
    if not flags and migration.checked:
        lines.append("Nothing: every Horovod use was migrated.")
    elif not flags:
        lines.append("Not known: the whole result was not checked (compare.migrate.check.output_check); check it "
                     "before trusting it.")
    for flag in flags:
        code = f" `{markdown_cell(flag.code)}`" if flag.code else ""
        lines.append(f"- **{flag.category}**, {where(flag)}:{code}: {flag.why}")
    if launch_lines:
        lines += ["", "## Launch", "", "```bash", *launch_lines, "```"]
    # The line a user can paste: the output they chose (--force: it exists now) and, where flags remain,
    # --allow-partial, without which --verify stops at exit 6.
    options = migration.launch.options
    again = (f"python -m compare migrate {source_name} -o {output_name} --force"
             f"{' --allow-partial' if flags else ''} --verify")
    check = (f"The original's Trainer ran on Horovod's Lightning accelerator, which Lightning 2 no longer has, so "
             f"`--verify` cannot run it: run `{output_name}` under torchrun and compare its losses with a record of "
             "the original's past runs (`python -m compare import`, then `compare check`)." if migration.lightning
             else f"`{again}` runs the original through its own front-end "
             f"and the result through {migration.front_end} (np 2, CPU), as plain python, and compares rank 0's "
             "losses with `python -m compare check`. See docs/migration.md." if migration.front_end
             else f"`{again}` runs the original as its users launch it "
             "(horovodrun, or horovod.run when its arguments say so) and the result under torchrun (np 2, CPU), and "
             f"compares rank 0's losses with `python -m compare check`. {arguments_line(source_name, options)} See "
             "docs/migration.md.")
    lines += ["", "## Check it", "", check, ""]
    return "\n".join(lines)


def arguments_line(entry: str, options: Mapping[str, tuple[str, ...]]) -> str:
    """Where the entry point's own arguments go, with the options the migration found it to take."""
    found = sorted({next((f for f in flags if f.startswith("--")), flags[0]) for flags in options.values() if flags})
    named = f" (it takes {', '.join(f'`{flag}`' for flag in found)})" if found else ""
    return (f"The command runs `{entry}` with its defaults; its own arguments{named}, where it needs any, go at the "
            "end, after `--`.")


def where(flag: Flag) -> str:
    """'line 12', 'line 12 (result line 14)' for what the check of the output found, 'result line 3' for a line
    the rewrite added."""
    if flag.result_line is None:
        return f"line {flag.line}" if flag.line else "somewhere"
    return f"line {flag.line} (result line {flag.result_line})" if flag.line else f"result line {flag.result_line}"


def summary(migration: Migration) -> str:
    """One line for the terminal."""
    categories = sorted({flag.category for flag in migration.flags})
    text = f"{len(migration.changes)} change(s)"
    if migration.flags:
        text += f"; {len(migration.flags)} need a person ({', '.join(categories)}): lines " + ", ".join(
            str(f.line) for f in migration.flags if f.line)
    return re.sub(r": lines $", "", text)
