"""How long `compare migrate DIR -o OUT` takes on a repository of about 15,000 lines: the project's fixture
repositories (examples/repos/) and Horovod scripts (examples/horovod_scripts/) copied into packages of one tree
until it is that large, then migrated as a user types it, in a fresh process, a few times.

    python scripts/migrate_benchmark.py [--lines 15000] [--repeats 3]

Prints the tree's size, each run's wall time and the median; the target is at most 20 s on the 2-core VM.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "examples" / "repos", ROOT / "examples" / "horovod_scripts"]


def build_tree(target: Path, lines: int) -> tuple[int, int]:
    """Copies of the sources, each a package of its own, until the tree holds `lines` lines of Python."""
    total = files = copies = 0
    while total < lines:
        copies += 1
        for source in SOURCES:
            if not source.is_dir():
                continue
            package = target / f"copy_{copies}_{source.name}"
            shutil.copytree(source, package, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
            for path in package.rglob("*.py"):
                total += len(path.read_text(encoding="utf-8", errors="replace").splitlines())
                files += 1
    return total, files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=15000, help="the tree's size in lines of Python")
    parser.add_argument("--repeats", type=int, default=3, help="migrations timed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "repo"
        total, files = build_tree(tree, args.lines)
        print(f"tree: {total} lines in {files} Python files ({tree})", flush=True)
        times = []
        for number in range(1, args.repeats + 1):
            out = Path(scratch) / f"out-{number}"
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "compare", "migrate", str(tree), "-o", str(out)],
                                  cwd=ROOT, capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - start)
            print(f"run {number}: {times[-1]:.1f} s (exit {done.returncode}: {done.stdout.strip()[:120]})", flush=True)
            if done.returncode not in (0, 6):
                print(done.stderr, file=sys.stderr)
                return 1
        print(f"median: {statistics.median(times):.1f} s for {total} lines (target: at most 20 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
