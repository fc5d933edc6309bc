"""The migration report (Markdown), one for a script and for a repository (a script is a repository of one file):
what needs a person, every change with its line before and after, and the command that verifies the result.
A script's is written beside it (X_ddp.migration.md), a repository's inside the new tree (MIGRATION.md)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from compare.migrate.migrate_tree import FileMigration, TreeMigration
from compare.migrate.plan.launch_facts import launch_facts_of
from compare.migrate.plan.migration import Change, Flag, Migration


def place_changes(migration: Migration) -> list[Change]:
    """The changes with new_line filled in (helpers: the line of the first helper)."""
    new_lines = migration.code.splitlines()
    first_helper = next((i + 1 for i, line in enumerate(new_lines) if line.startswith("# Added by `python -m compare")),
                        None)
    came_from = [migration.lines.old_line(line) for line in range(1, len(new_lines) + 1)]
    for change in migration.changes:
        if change.line == 0:
            change.new_line = first_helper
        elif not change.after:
            change.new_line = None
        else:
            change.new_line = _nearest(new_lines, came_from, change.after, change.line,
                                       migration.lines.new_line(change.line))
    return migration.changes


def _nearest(new_lines: list[str], came_from: list[int | None], after: str, line: int, guess: int | None,
             ) -> int | None:
    """The line of the result that holds the new code: `guess`, the line the original's `line` became (a
    statement replaced by several: the first of them), or the nearest one that shows the code's last statement
    among those that came from `line` or that a pass added (code put at the block's end). Where the original's
    line is gone (code put in another statement's place: a hook at the wrap), the last that shows it, anywhere."""
    text = after.split("  #")[0].split("; ")[-1].removesuffix("...").strip()
    if guess is not None:
        found = [i + 1 for i, shown in enumerate(new_lines) if text and text in shown and came_from[i] in (line, None)]
        return min(found, key=lambda found_line: abs(found_line - guess), default=guess)
    found = [i + 1 for i, shown in enumerate(new_lines) if text and text in shown]
    if not found:  # up to the `...`
        text = text.split("...")[0].strip()
        found = [i + 1 for i, shown in enumerate(new_lines) if text and text in shown]
    return found[-1] if found else None


def change_row(change: Change, after: str | None = None) -> str:
    """A change's row in a file's table: its line before and after (`-`: added, removed), the Horovod code, the
    DDP code (or `after`), the note."""
    new_line = "-" if change.new_line is None else str(change.new_line)
    return (f"| {change.line or '-'} | {new_line} | {markdown_code(change.before, '(added)')} | "
            f"{markdown_code(change.after if after is None else after)} | {markdown_cell(change.note)} |")


def markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_code(text: str, none: str = "(removed)") -> str:
    """Code in a cell; `none` where there is none (the Horovod column's: added)."""
    return f"`{markdown_cell(text)}`" if text else none


def where(flag: Flag) -> str:
    """'line 12', 'line 12 (result line 14)' for what the check of the output found, 'result line 3' for a line
    the rewrite added."""
    if flag.result_line is None:
        return f"line {flag.line}" if flag.line else "somewhere"
    return f"line {flag.line} (result line {flag.result_line})" if flag.line else f"result line {flag.result_line}"


def _flag_item(path: str | None, flag: Flag) -> str:
    code = f" `{markdown_cell(flag.code)}`:" if flag.code else ""
    return f"- {f'`{path}` ' if path else ''}{where(flag)}, **{flag.category}**:{code} {flag.why}"


def _change_count(migrated: FileMigration) -> int:
    return len(migrated.migration.changes) + len(migrated.normalized)


def _entry(tree: TreeMigration) -> FileMigration | None:
    """The file the user runs: the script, --entry, else the first entry point with a __main__ of its own."""
    if tree.repository.single_file:
        return tree.files[0]
    path = tree.entry or next((f.path for f in tree.files if f.entry and "__main__" in f.source.text),
                              next((f.path for f in tree.files if f.entry), None))
    return next((f for f in tree.files if f.path == path), None)


def _entry_path(tree: TreeMigration) -> str:
    found = _entry(tree)
    return tree.entry or (found.path if found is not None else "ENTRY.py")


def _file_table(migrated: FileMigration, helpers_module: str | None) -> list[str]:
    """A file's changes: the Horovod names it loaded another way (read as their import), then the table."""
    lines = [f"- line {n.line}: `{markdown_cell(n.before)}`: Horovod {n.how}; read as `import horovod.torch`, "
             "then migrated as that import" for n in migrated.normalized]
    lines += [""] if lines else []
    lines += ["| line | new line | Horovod | DDP | note |", "|---|---|---|---|---|"]
    lines += [change_row(change, f"imported from {helpers_module}" if change.line == 0 and helpers_module else None)
              for change in place_changes(migrated.migration)]
    return lines


def _file_section(migrated: FileMigration, helpers_module: str | None) -> list[str]:
    """A repository's file: its heading, its role and counts, its table, its flags again beside its changes."""
    migration = migrated.migration
    role = "the entry point" if migrated.entry else "a module the entry imports"
    lines = [f"### `{migrated.path}`", "",
             f"{role}; {_change_count(migrated)} change(s), {len(migration.flags)} place(s) need a person.", ""]
    lines += _file_table(migrated, helpers_module)
    lines += [f"\n- needs a person: {_flag_item(None, flag).removeprefix('- ')}" for flag in migration.flags]
    return [*lines, ""]


def _check_it(tree: TreeMigration, source_name: str, output_name: str, script_args: list[str] | None,
              in_place: bool) -> list[str]:
    """How to verify the result: the command that runs both sides (the arguments the user gave, else none and a
    line that says where they go), or why --verify cannot run it."""
    single = tree.repository.single_file
    entry = _entry(tree)
    entry_path = _entry_path(tree)
    migration = entry.migration if entry is not None else None
    if migration is not None and migration.lightning:
        run = output_name if single else f"{output_name}/{entry_path}"
        return [f"The original's Trainer ran on Horovod's Lightning accelerator, which Lightning 2 no longer has, so "
                f"`--verify` cannot run it: run `{run}` under torchrun and compare its losses with a record of the "
                "original's past runs (`python -m compare import`, then `compare check`).", ""]
    # The line a user can paste: the output they chose (--force: it exists now), the entry point of a repository,
    # and where flags remain --allow-partial, without which --verify stops at exit 6.
    gpus = any(f.migration.has_sync_batchnorm for f in tree.files)  # --verify refuses it on CPU
    args = [*([] if single else ["--entry", entry_path]), *(["--device", "cuda"] if gpus else []),
            *(["--allow-partial"] if tree.flags else []),
            *(["--", *script_args] if script_args else [])]
    if in_place:
        command = ["git", "worktree", "add", "../original", "HEAD", "&&", "python", "-m", "compare", "migrate",
                   "../original", "-o", "../original_ddp", "--verify", *args]
        how = ("The tree was rewritten in place: `git diff` shows the change, `git checkout .` undoes it. To verify, "
               "migrate the committed original again beside it (the same rewrite), which runs")
    else:
        command = ["python", "-m", "compare", "migrate", source_name, "-o", output_name, "--force", "--verify", *args]
        how = "Verify it: this runs"
    front_end = migration.front_end if migration is not None else None
    started = "" if single else (", each side as its README's command starts it (nothing "
                                 "added to PYTHONPATH)")
    where = "np 2, GPUs" if gpus else "np 2, CPU"
    runs = (f"the original through its own front-end and the result through {front_end} ({where}), as plain python"
            if front_end else
            f"the original's entry point as its users launch it (horovodrun, or horovod.run when its arguments say so)"
            f" and the migrated one under torchrun ({where}){started}")
    lines = [f"{how} {runs}, and compares rank 0's losses with `python -m compare check`:", "",
             "```bash", " ".join(word if word == "&&" else shlex.quote(word) for word in command), "```", ""]
    if not script_args:
        lines += [arguments_line(source_name if single else entry_path, entry_options(tree, entry_path)), ""]
    return [*lines, "See docs/migration.md.", ""]


def render(tree: TreeMigration, source_name: str, output_name: str, *, script_args: list[str] | None = None,
           in_place: bool = False, launch_lines: list[str] | None = None) -> str:
    """The report of a migrated script or repository: `source_name` and `output_name` as the user gave them,
    `script_args` the entry point's own arguments (--verify ... -- ARGS), `launch_lines` torchrun's command for
    the user's horovodrun line (--launch)."""
    single = tree.repository.single_file
    flags = tree.flags
    entry = _entry(tree)
    front_end = (entry.migration.front_end if entry is not None else None) or "torchrun"
    changes = sum(_change_count(f) for f in tree.files)
    if single:
        counts = f"{changes} change(s)"
    else:
        changed = sum(1 for f in tree.files if f.migration.code != f.source.text)
        added = f"; {tree.helpers_path} added (the helpers every file imports)" if tree.helpers_path else ""
        counts = f"{len(tree.repository.files)} Python file(s) read; {changed} changed{added}"
    lines = [f"# Migration report: `{source_name}` -> `{output_name}`", "",
             f"Horovod (horovod.torch) to torch.distributed + DistributedDataParallel, for {front_end}. {counts}; "
             f"{len(flags)} place(s) need a person.", ""]
    if any(f.migration.has_sync_batchnorm for f in tree.files):
        lines += ["Runs on CPU: **no** (SyncBatchNorm needs GPUs on both sides).", ""]
    lines += ["## Needs a person", ""]
    if not flags and all(f.migration.checked for f in tree.files):
        lines.append("Nothing: every Horovod use was migrated. Each change's note says what it keeps, and what it "
                     "assumes.")
    elif not flags:
        lines.append("Not known: the whole result was not checked (compare.migrate.check.output_check); check it "
                     "before trusting it.")
    lines += [_flag_item(None if single else path, flag) for path, flag in flags]
    lines += ["", "## Changes", "",
              "Lines are the original's and the result's (`-`: removed; helpers are added after the imports)." if single
              else "Lines are each file's before and after (`-`: removed; `imported from`: the added helpers "
                   "module).", ""]
    if single:
        lines += [*_file_table(tree.files[0], None), ""]
    else:
        helpers_module = tree.helpers_path.removesuffix(".py") if tree.helpers_path else None
        for migrated in tree.files:
            lines += _file_section(migrated, helpers_module)
    if launch_lines:
        lines += ["## Launch", "", "```bash", *launch_lines, "```", ""]
    lines += ["## Check it", "", *_check_it(tree, source_name, output_name, script_args, in_place)]
    return "\n".join(lines)


def arguments_line(entry: str, options: Mapping[str, tuple[str, ...]]) -> str:
    """Where the entry point's own arguments go, with the options the migration found it to take."""
    found = sorted({next((f for f in flags if f.startswith("--")), flags[0]) for flags in options.values() if flags})
    named = f" (it takes {', '.join(f'`{flag}`' for flag in found)})" if found else ""
    return (f"The command runs `{entry}` with its defaults; its own arguments{named}, where it needs any, go at the "
            "end, after `--`.")


def entry_options(tree: TreeMigration, entry: str) -> dict[str, tuple[str, ...]]:
    """The command-line options the entry point takes, as the migration read them (dest -> option strings)."""
    facts = next((f.migration.launch for f in tree.files if f.path == entry), None)
    if (facts is None or not facts.options) and entry in tree.repository.files:
        facts = launch_facts_of(tree.repository.files[entry].text)
    return dict(facts.options) if facts is not None else {}


def summary(tree: TreeMigration) -> str:
    """One line for the terminal (each flag follows on a line of its own)."""
    text = f"{sum(_change_count(f) for f in tree.files)} change(s)"
    if not tree.repository.single_file:
        text += f" in {sum(1 for f in tree.files if f.migration.code != f.source.text)} file(s)"
    if tree.flags:
        categories = sorted({flag.category for _, flag in tree.flags})
        text += f"; {len(tree.flags)} need a person ({', '.join(categories)})"
    return text
