"""python -m compare migrate: rewrite a Horovod PyTorch repository or script for DDP and torchrun, report every
change, flag what has no equivalent, and (--verify) prove the result trains the same. Its options, examples and
exit statuses are declared in compare/commands/options.py (MIGRATE_OPTIONS, MIGRATE_EPILOG)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from compare.install import require_comparison
from compare.loss_lines import LossLogError, compile_patterns
from compare.names import Exit, LaunchedBy
from compare.verify.launch_mode import LaunchMode, Undecided, decide
from compare.verify.step_times import ThroughputRegexError, compile_throughput
from workload.errors import UsageError
from workload.files import write_atomic

if TYPE_CHECKING:
    from compare.launch.scheduling import Scheduler
    from compare.migrate.migrate_tree import TreeMigration


def _check_options(ns: argparse.Namespace) -> None:
    if ns.in_place + ns.diff + (ns.out is not None) > 1:
        raise UsageError("give one of -o, --in-place and --diff")
    if ns.ddp_args is not None and not ns.verify:
        raise UsageError("--ddp-args goes with --verify")
    if ns.verify and (ns.in_place or ns.diff):
        raise UsageError("--verify runs the original beside its migration: give -o OUT (not --in-place or --diff)")
    if ns.launch is not None and (ns.script.is_dir() or ns.in_place or ns.diff):
        # the line is translated for the migrated script's file: a repository's MIGRATION.md has its own Launch
        # block, and --in-place and --diff write no new file to name
        raise UsageError("--launch with a PATH translates the line for the script's migrated file (-o, or its "
                         "default name): not with a repository, --in-place or --diff (give --launch alone instead)")
    if ns.entry is not None and not ns.script.is_dir():
        raise UsageError("--entry names a repository's entry point: PATH must be a directory")
    if ns.verify and ns.script.is_dir() and ns.entry is None:
        raise UsageError("--verify of a repository needs --entry PATH_IN_REPO (the script horovodrun runs)")
    if ns.script_args and not ns.verify:
        raise UsageError(f"unexpected arguments {' '.join(ns.script_args)} (script arguments go after -- with "
                         "--verify)")
    if ns.verify_np <= 0 or ns.timeout <= 0:
        raise UsageError("--verify-np and --timeout must be positive")
    if ns.speed_rounds < 0 or ns.warmup < 0:
        raise UsageError("--speed-rounds and --warmup must be >= 0")
    if (ns.speed_rounds or ns.throughput_regex) and not ns.verify:
        raise UsageError("--speed-rounds and --throughput-regex go with --verify")
    try:
        compile_throughput(ns.throughput_regex)
    except ThroughputRegexError as exc:
        raise UsageError(str(exc)) from None
    try:
        compile_patterns(ns.loss_regex, ns.eval_regex)
    except LossLogError as exc:
        raise UsageError(str(exc).replace("--regex", "--loss-regex")) from None
    if ns.verify:
        require_comparison("--verify")  # the light install migrates; running both sides needs the set-up
    _check_where(ns)


def _check_where(ns: argparse.Namespace) -> None:
    """--device and the Slurm options: with --verify only, and a device that is there (one line each)."""
    from compare.commands import scheduler

    if not ns.verify and (ns.device != "cpu" or ns.scheduler != "local"):
        raise UsageError("--device and --scheduler say where --verify runs both sides: give --verify")
    if (misuse := scheduler.local_misuse(ns)) is not None:
        raise UsageError(misuse)
    if ns.scheduler == "slurm":
        scheduler.slurm_settings(ns)  # its values checked now, before anything is written
        from compare.launch.slurm import unavailable

        if (why := unavailable()) is not None:
            raise UsageError(f"--scheduler slurm: {why}")
    if ns.device == "cuda":
        _check_cuda(ns.verify_np, local=ns.scheduler == "local")


def _check_cuda(np: int, *, local: bool) -> None:
    """Both sides on NCCL: a Horovod built with NCCL and, for a local verify, a GPU for every rank here (NCCL
    refuses two ranks on one device). A Slurm job's GPUs are on its nodes, not here."""
    import torch

    if local and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device here (use --device cpu, or --scheduler slurm "
                         "for GPUs on a cluster's nodes)")
    if local and np > torch.cuda.device_count():
        raise UsageError(f"--device cuda at --verify-np {np}: torch sees {torch.cuda.device_count()} CUDA device(s) "
                         "here, one a rank")
    try:
        import horovod.torch as hvd

        nccl = bool(hvd.nccl_built())
    except ImportError as exc:
        raise UsageError(f"--device cuda: Horovod cannot be imported here ({exc})") from None
    if not nccl:
        raise UsageError("--device cuda: this Horovod was built without NCCL (build it with "
                         "HOROVOD_GPU_OPERATIONS=NCCL: scripts/gpu-check.sh does)")


def _output_paths(ns: argparse.Namespace) -> tuple[Path, Path]:
    """The migrated script and its report, refused where they would overwrite anything without --force."""
    out = ns.out or ns.script.with_name(f"{ns.script.stem}_ddp.py")
    report = ns.report or out.with_suffix(".migration.md")
    if out.resolve() == ns.script.resolve():
        raise UsageError(f"{out}: the output would overwrite the script itself")
    for path in (out, report):
        if path.exists() and not ns.force:
            raise UsageError(f"{path} exists: give --force to overwrite it")
    return out, report


def _migrate(ns: argparse.Namespace, entry: Path) -> tuple[TreeMigration, LaunchMode | None]:
    """The rewrite, and with --verify how each side is launched: both decided before anything is written."""
    from compare.migrate.migrate_tree import migrate_tree
    from compare.migrate.read.repository import Repository

    tree = migrate_tree(Repository.read(ns.script), entry=ns.entry)
    try:
        mode = decide(tree.launch_facts(), ns.script_args, ns.launch_mode) if ns.verify else None
    except Undecided as exc:
        raise UsageError(f"{entry}: {exc}") from None
    if mode is not None and ns.scheduler == "slurm" and (mode.mode is not LaunchedBy.CLI or mode.original_prefix):
        raise UsageError(f"--scheduler slurm: {entry.name} starts its own workers ({mode.why}); only a horovodrun "
                         "script runs as Slurm jobs here")
    return tree, mode


def _print_flags(tree: TreeMigration) -> None:
    """Each flag on stderr, after the summary line (a repository's with its file)."""
    from compare.migrate.report.migration_report import where

    for path, flag in tree.flags:
        print(f"  needs a person, {'' if tree.repository.single_file else path + ' '}{where(flag)} "
              f"({flag.category}): {flag.why}", file=sys.stderr)


def cannot_verify(tree: TreeMigration, entry: str | None, device: str) -> str | None:
    """Why --verify cannot run both sides here (None: it can), as the report reads the tree: the entry point's
    Trainer on Horovod's Lightning accelerator, or a SyncBatchNorm in any of its files off the GPU."""
    runs = next((f.migration for f in tree.files if entry is None or f.path == entry), None)
    if runs is not None and runs.lightning:
        return ("the original's Trainer runs on Horovod's Lightning accelerator, which Lightning 2 no longer has, so "
                "it cannot run here; run the migrated script under torchrun")
    if any(f.migration.has_sync_batchnorm for f in tree.files) and device != "cuda":
        return "SyncBatchNorm needs GPUs on both sides (neither Horovod's nor torch's runs on CPU): give --device cuda"
    return None


def _verify(ns: argparse.Namespace, tree: TreeMigration, original: Path, out: Path, mode: LaunchMode,
            roots: dict[str, Path] | None = None, launches: list | None = None, entry: str | None = None) -> int:
    from compare.verify.verify import verify

    if (why := cannot_verify(tree, entry, ns.device)) is not None:
        print(f"migrate: not verified: {why}", file=sys.stderr)
        return Exit.RUN_FAILED

    verify_out = (ns.verify_out or Path("results/migrate") / ns.script.resolve().stem).resolve()
    migrated_args = shlex.split(ns.ddp_args) if ns.ddp_args is not None else None
    import_paths, module = None, None
    if roots is not None:
        import_paths, module = _as_launched(roots, launches or [], entry or original.name)
    return verify(original, out, ns.script_args, verify_out, np=ns.verify_np, mode=mode, import_paths=import_paths,
                  module=module,
                  migrated_args=migrated_args, device=ns.device, where=_where(ns),
                  controller=ns.verify_controller, timeout=ns.timeout, loss_regex=ns.loss_regex,
                  eval_regex=ns.eval_regex, step_from=ns.step_from, speed_rounds=ns.speed_rounds,
                  warmup=ns.warmup, throughput_regex=ns.throughput_regex)


def _as_launched(roots: dict[str, Path], launches: list, entry: str) -> tuple[dict[str, list[Path]], str | None]:
    """Each side's import path besides the script's own directory, and the module `-m` runs: as the repository's
    users start the entry (compare/migrate/read/launches.py), said in one line; the tree is not put on PYTHONPATH
    unless their command puts it there."""
    from compare.migrate.read.launches import Launch, target_path

    paths = {f.relative_to(roots["horovod"]).as_posix() for f in roots["horovod"].rglob("*.py")}
    launch = next((found for found in launches if target_path(found, paths) == entry),
                  Launch(entry, False, "", (), "--entry, run by its path"))
    extra = launch.import_roots()[0 if launch.as_module else 1:]
    print(f"  started as its users start it ({launch.found}): python {launch.describe()}"
          f"{'' if extra else ', nothing on PYTHONPATH'}", flush=True)
    return ({name: [root / p for p in extra] for name, root in roots.items()},
            launch.target if launch.as_module else None)


def _where(ns: argparse.Namespace) -> Scheduler:
    """Where the verify launches run: here, or each a Slurm job (compare run's scheduler, compare run's options)."""
    from compare.commands.scheduler import slurm_settings
    from compare.launch.scheduling import LocalScheduler
    from compare.launch.slurm import SlurmScheduler

    return SlurmScheduler(slurm_settings(ns), ns.timeout) if ns.scheduler == "slurm" else LocalScheduler()


def _write(ns: argparse.Namespace, tree: TreeMigration, paths: tuple[Path, Path] | None,
           launch: list[str] | None) -> Path:
    """The result and its report where the user asked: a script's beside it (X_ddp.py, X_ddp.migration.md), a
    repository's as a new tree (MIGRATION.md inside) or over itself; a script rewritten in place gets no report.
    Returns where the migrated code is."""
    from compare.migrate.report.migration_report import render, summary
    from compare.migrate.report.tree_output import REPORT_NAME, write_in_place, write_tree

    if tree.repository.single_file and ns.in_place:
        write_in_place(tree.repository.root, tree.outputs(), None)
        return ns.script
    if paths is not None:  # a script, -o
        out, report_path = paths
        migrated = tree.files[0]
        write_atomic(out, migrated.source.encode(migrated.migration.code))
        write_atomic(report_path, render(tree, str(ns.script), str(out), script_args=ns.script_args or None,
                                         launch_lines=launch))
        print(f"migrate: wrote {out} and {report_path}: {summary(tree)}")
        return out
    root = ns.script
    out = root if ns.in_place else (ns.out or root.with_name(f"{root.resolve().name}_ddp"))
    report = render(tree, str(root), str(out), script_args=ns.script_args or None, in_place=ns.in_place)
    if ns.in_place:
        write_in_place(root.resolve(), tree.outputs(), report)
    else:
        write_tree(root.resolve(), tree.outputs(), report, out, force=ns.force)
    print(f"migrate: wrote {out} ({REPORT_NAME} inside): {summary(tree)}")
    return out


def main(ns: argparse.Namespace) -> int:
    """A script or a repository, one path: the rewrite (a script is a repository of one file), then its diff, or
    the result and the one report written, then with --verify both sides run."""
    from compare.migrate.report.launch_line import torchrun_lines
    from compare.migrate.report.migration_report import summary
    from compare.migrate.report.tree_output import require_clean_git_tree

    if ns.script is None:
        if ns.launch is None:
            raise UsageError("give a PATH to migrate, or --launch \"horovodrun ...\"")
        print("\n".join(torchrun_lines(ns.launch)))
        return Exit.OK
    if not ns.script.exists():
        raise UsageError(f"{ns.script}: no such file or directory")
    _check_options(ns)
    single = not ns.script.is_dir()
    if ns.in_place:
        require_clean_git_tree(ns.script.resolve().parent if single else ns.script)
    # Everything is decided before anything is written.
    paths = _output_paths(ns) if single and not (ns.in_place or ns.diff) else None
    tree, mode = _migrate(ns, ns.script / ns.entry if ns.entry else ns.script)
    partial = bool(tree.flags) and not ns.allow_partial
    if ns.diff:
        sys.stdout.flush()
        sys.stdout.buffer.write(tree.diff())
        sys.stdout.buffer.flush()
        print(f"migrate: {summary(tree)} (a diff: nothing written)", file=sys.stderr)
        _print_flags(tree)
        return Exit.NEEDS_A_PERSON if partial else Exit.OK
    launch = torchrun_lines(ns.launch, (str(ns.script), str(paths[0]))) if ns.launch and paths else None
    out = _write(ns, tree, paths, launch)
    _print_flags(tree)
    if launch:
        print("\n".join(launch))
    if ns.verify and partial:
        print("migrate: not verified: Horovod uses remain that need a person (--allow-partial to run anyway)",
              file=sys.stderr)
        return Exit.NEEDS_A_PERSON
    if ns.verify:
        assert mode is not None
        if single:
            return _verify(ns, tree, ns.script.resolve(), out.resolve(), mode)
        root = ns.script.resolve()
        return _verify(ns, tree, root / ns.entry, out.resolve() / ns.entry, mode,
                       roots={"horovod": root, "ddp": out.resolve()}, launches=tree.launches, entry=ns.entry)
    return Exit.NEEDS_A_PERSON if partial else Exit.OK
