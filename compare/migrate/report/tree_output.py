"""Where a migrated repository goes: a new tree beside it (-o), the tree itself (--in-place, a clean git work tree
only, so that `git diff` shows the change and `git checkout .` undoes it). Files that do not change are copied
byte for byte; changed ones keep their names, encoding, line endings and permissions. Nothing is left
half-written: the new tree is made under a temporary name and renamed when complete, and each file rewritten in
place is replaced whole.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from workload.errors import UsageError
from workload.files import write_atomic

REPORT_NAME = "MIGRATION.md"


def write_tree(root: Path, outputs: dict[str, bytes], report: str, out: Path, *, force: bool) -> None:
    """The repository copied to `out` (its .git left out), the migrated files and the report written into it."""
    if out.resolve() == root.resolve() or out.resolve().is_relative_to(root.resolve()):
        raise UsageError(f"{out}: the output must lie outside the repository (or give --in-place)")
    if out.exists() and not force and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists: give --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        shutil.copytree(root, staging, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
        for relative, data in outputs.items():
            _replace(staging / relative, data)
        (staging / REPORT_NAME).write_text(report, encoding="utf-8")
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _replace(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    write_atomic(path, data)
    if mode is not None:
        os.chmod(path, mode)


def require_clean_git_tree(root: Path) -> None:
    """--in-place only where git can show and undo the change: a work tree with nothing uncommitted."""
    try:
        inside = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"], capture_output=True,
                                text=True, check=False, timeout=60)
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "."], capture_output=True,
                                text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--in-place: cannot run git ({exc}): give -o OUT_DIR instead") from None
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        raise UsageError(f"--in-place: {root} is not in a git work tree (git could not undo the change): give "
                         "-o OUT_DIR instead")
    if status.stdout.strip():
        raise UsageError(f"--in-place: {root} has uncommitted changes (`git status`): commit or stash them first, "
                         "so that `git diff` shows the migration alone")


def write_in_place(root: Path, outputs: dict[str, bytes], report: str | None) -> None:
    for relative, data in outputs.items():
        _replace(root / relative, data)
    if report is not None:
        write_atomic(root / REPORT_NAME, report)
