"""How long `python -m compare --help` and each command's `--help` take, and what they import.

    python scripts/help_speed.py              # 5 runs of each, the median wall time
    python scripts/help_speed.py --runs 11

Each help runs in a fresh interpreter, as a user types it; the imports come from `-X importtime` of one more
run. The goal (issue 44): under 1 s on an idle 2-core machine, with neither torch nor the analysis imported.
A figure from a loaded machine says little: run it idle.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compare.commands.options import COMMAND_SPECS  # noqa: E402  (after the path: run from anywhere)

HEAVY = ("torch", "numpy", "scipy", "libcst", "matplotlib", "compare.analysis")


def one_run(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compare", *args, "--help"], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def heavy_imports(args: list[str], env: dict[str, str]) -> list[str]:
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "compare", *args, "--help"], cwd=ROOT,
                            env=env, capture_output=True, text=True, check=True)
    modules = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    return sorted(name for name in HEAVY if name in modules)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each help (default: 5)")
    ns = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"{'help':34} {'median s':>9} {'max s':>7}  heavy imports ({os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f})")
    worst = 0.0
    for args in ([], *([name] for name in COMMAND_SPECS)):
        times = [one_run(args, env) for _ in range(ns.runs)]
        worst = max(worst, statistics.median(times))
        label = " ".join(["python -m compare", *args, "--help"])
        print(f"{label:34} {statistics.median(times):9.3f} {max(times):7.3f}  "
              f"{', '.join(heavy_imports(args, env)) or 'none'}")
    print(f"slowest median: {worst:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
