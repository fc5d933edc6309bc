"""One report for a migrated repository (MIGRATION.md): per file, every change with its lines before and after,
everything flagged, and what to check by hand; and the command that verifies it."""

from __future__ import annotations

import shlex

from compare.migrate.migrate_tree import FileMigration, TreeMigration
from compare.migrate.plan.launch_facts import launch_facts_of
from compare.migrate.report.migration_report import arguments_line, change_row, markdown_cell, place_changes


def _file_section(migrated: FileMigration, helpers_module: str | None) -> list[str]:
    migration = migrated.migration
    role = "the entry point" if migrated.entry else "a module the entry imports"
    lines = [f"### `{migrated.path}`", "",
             f"{role}; {len(migration.changes) + len(migrated.normalized)} change(s), {len(migration.flags)} "
             "place(s) need a person.", ""]
    if migrated.normalized:
        lines += [f"- line {n.line}: `{markdown_cell(n.before)}`: Horovod {n.how}; read as `import horovod.torch`, "
                  "then migrated as that import" for n in migrated.normalized]
        lines.append("")
    lines += ["| line | new line | Horovod | DDP | note |", "|---|---|---|---|---|"]
    lines += [change_row(change, f"imported from {helpers_module}" if change.line == 0 and helpers_module else None)
              for change in place_changes(migration)]
    for flag in migration.flags:
        where = f"line {flag.line}" if flag.line else "somewhere"
        code = f" `{markdown_cell(flag.code)}`" if flag.code else ""
        lines.append(f"\n- needs a person: **{flag.category}**, {where}:{code}: {flag.why}")
    return [*lines, ""]


def render_tree(tree: TreeMigration, source_name: str, output_name: str, *, script_args: list[str] | None = None,
                in_place: bool = False) -> str:
    flags = tree.flags
    changed = [f for f in tree.files if f.migration.code != f.source.text]
    lines = [f"# Migration report: `{source_name}` -> `{output_name}`", "",
             "Horovod (horovod.torch) to torch.distributed + DistributedDataParallel, for torchrun. "
             f"{len(tree.repository.files)} Python file(s) read; {len(changed)} changed"
             f"{'; ' + tree.helpers_path + ' added (the helpers every file imports)' if tree.helpers_path else ''}; "
             f"{len(flags)} place(s) need a person.", ""]
    lines += ["## Needs a person", ""]
    if not flags:
        lines.append("Nothing was flagged: every Horovod use found was rewritten (each change's note says what it "
                     "keeps, and what it assumes).")
    for path, flag in flags:
        where = f"line {flag.line}" if flag.line else "somewhere"
        lines.append(f"- `{path}` {where}, **{flag.category}**: {flag.why}")
    lines += ["", "## Files", ""]
    for migrated in tree.files:
        lines += _file_section(migrated, tree.helpers_path.removesuffix(".py") if tree.helpers_path else None)
    entry = tree.entry or next((f.path for f in tree.files if f.entry and "__main__" in f.source.text),
                               next((f.path for f in tree.files if f.entry), "ENTRY.py"))
    # the arguments the user gave, else none: the command runs as written, and a line says where they go
    args = [*(["--allow-partial"] if flags else []), *(["--", *script_args] if script_args else [])]
    if in_place:
        command = ["git", "worktree", "add", "../original", "HEAD", "&&", "python", "-m", "compare", "migrate",
                   "../original", "-o", "../original_ddp", "--verify", "--entry", entry, *args]
        how = ("The tree was rewritten in place: `git diff` shows the change, `git checkout .` undoes it. To verify, "
               "migrate the committed original again beside it (the same rewrite), which runs")
    else:
        command = ["python", "-m", "compare", "migrate", source_name, "-o", output_name, "--force", "--verify",
                   "--entry", entry, *args]
        how = "Verify it: this runs"
    lines += ["## Check it", "",
              f"{how} the original's entry point under horovodrun and the migrated one under torchrun (np 2, CPU), "
              "each started as its users start it (as its README's command does, nothing added to PYTHONPATH), and "
              "compares rank 0's losses with `python -m compare check`:",
              "", "```bash", " ".join(word if word == "&&" else shlex.quote(word) for word in command), "```", ""]
    if not script_args:
        lines += [arguments_line(entry, entry_options(tree, entry)), ""]
    return "\n".join(lines)



def entry_options(tree: TreeMigration, entry: str) -> dict[str, tuple[str, ...]]:
    """The command-line options the entry point takes, as the migration read them (dest -> option strings)."""
    facts = next((f.migration.launch for f in tree.files if f.path == entry), None)
    if (facts is None or not facts.options) and entry in tree.repository.files:
        facts = launch_facts_of(tree.repository.files[entry].text)
    return dict(facts.options) if facts is not None else {}


def summary_line(tree: TreeMigration) -> str:
    changes = sum(len(f.migration.changes) + len(f.normalized) for f in tree.files)
    files = sum(1 for f in tree.files if f.migration.code != f.source.text)
    text = f"{changes} change(s) in {files} file(s)"
    if tree.flags:
        text += f"; {len(tree.flags)} need a person"
    return text
