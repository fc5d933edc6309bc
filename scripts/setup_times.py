#!/usr/bin/env python
"""How long the set-up takes: two real set-ups into new virtual environments, each step timed by the set-up itself.

The first is what a new machine does once: `scripts/setup.sh` with CI's extras into a new virtual environment,
with an empty Horovod wheel cache (Horovod is built from source) and pip's cache off (mpi4py is built from
source, every package but one already on the machine is fetched again). The second is what setting up again
does: no extras, a new virtual environment, the wheel the first one built. The set-up prints each step's seconds
at its end (`set-up steps, in seconds:`); this script reads those lines, the size of each virtual environment
and the load average, and renders the table of docs/setup.md ("How long") from its record alone.

    .venv/bin/python scripts/setup_times.py --out results/setup-times

Debian packages already installed are not installed again (their step is then absent: "none missing"). Writes
OUT/setup-times.json and each set-up's output to OUT/first.log and OUT/again.log; the two virtual environments
(1.5-3 GB each) are removed at the end unless --keep. Exit status: 0 done, 1 a set-up failed, 2 usage error,
130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


def project_root() -> Path:
    """The repository whose set-up is timed: the one this script is in, or, run from a copy (the docs' samples
    run their scripts in a scratch directory), the one the `compare` package is imported from."""
    here = Path(__file__).resolve().parents[1]
    if (here / "scripts" / "setup.sh").is_file():
        return here
    spec = importlib.util.find_spec("compare")
    if spec is None or spec.origin is None:
        raise SystemExit("setup_times: scripts/setup.sh not found beside this script, nor a project on PYTHONPATH")
    return Path(spec.origin).resolve().parents[1]


ROOT = project_root()
sys.path.insert(0, str(ROOT))

from workload.files import write_json_atomic  # noqa: E402  (after the path: run as a script from anywhere)


@dataclass(frozen=True)
class SetUp:
    name: str  # the log's name and the record's key
    heading: str  # the table's column
    extras: str
    fresh_wheel_cache: bool  # an empty Horovod wheel cache: Horovod built from source
    pip_cache: bool


SET_UPS = (
    SetUp("first", "the first set-up: `EXTRAS=slurm,ray,spark`, nothing cached", "slurm,ray,spark",
          fresh_wheel_cache=True, pip_cache=False),
    SetUp("again", "again: no extras, Horovod's wheel cached", "", fresh_wheel_cache=False, pip_cache=True),
)

# The table's rows: each of setup.sh's step lines belongs to one (its words are the step's own, scripts/setup.sh).
ROWS = (
    ("Debian packages", re.compile(r"from Debian packages")),
    ("the virtual environment", re.compile(r"^creating virtual environment")),
    ("torch", re.compile(r"^installing torch==")),
    ("Horovod", re.compile(r"^building Horovod|^using cached Horovod wheel")),
    ("the project and its extras", re.compile(r"^installing the project")),
    ("`horovodrun --check-build`", re.compile(r"^checking the Horovod build")),
)
STEP_LINE = re.compile(r"^\s*(\d+)  (.+)$")


def step_seconds(output: str) -> list[tuple[int, str]]:
    """The set-up's own step times, from its closing block; the last one is `all`."""
    lines = output.splitlines()
    try:
        start = lines.index("set-up steps, in seconds:") + 1
    except ValueError:
        return []
    steps = []
    for line in lines[start:]:
        found = STEP_LINE.match(line)
        if not found:
            break
        steps.append((int(found.group(1)), found.group(2)))
    return steps


def tree_bytes(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            file = Path(folder) / name
            if not file.is_symlink():
                total += file.stat().st_size
    return total


def run_set_up(set_up: SetUp, out: Path, wheels: Path) -> dict:
    venv = out / "venvs" / set_up.name
    shutil.rmtree(venv, ignore_errors=True)
    env = {key: value for key, value in os.environ.items()
           if key not in ("TORCH_VERSION", "HOROVOD_VERSION", "HOROVOD_GPU_OPERATIONS", "VIRTUAL_ENV")}
    env.update(VENV=str(venv), HVD_CACHE=str(wheels), EXTRAS=set_up.extras)
    if not set_up.pip_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    output = []
    with open(out / f"{set_up.name}.log", "w", encoding="utf-8") as log, subprocess.Popen(
            ["bash", "scripts/setup.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True) as setup:
        assert setup.stdout is not None
        for line in setup.stdout:  # the log as it comes, and each step's header as progress
            log.write(line)
            log.flush()
            output.append(line)
            if line.startswith("==> "):
                print(f"  {time.monotonic() - started:4.0f} s  {line[4:].rstrip()}", file=sys.stderr, flush=True)
    return {"name": set_up.name, "heading": set_up.heading, "extras": set_up.extras,
            "exit": setup.returncode, "wall_s": round(time.monotonic() - started, 1),
            "steps": step_seconds("".join(output)), "venv_bytes": tree_bytes(venv),
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}


def cell(steps: list[tuple[int, str]], pattern: re.Pattern[str], row: str) -> str:
    found = [(seconds, name) for seconds, name in steps if pattern.search(name)]
    if not found:
        return "none missing" if row == "Debian packages" else "—"
    seconds, name = found[0]
    how = ""
    if name.startswith("building Horovod"):
        how = " (built from source)"
    elif name.startswith("using cached Horovod wheel"):
        how = " (cached wheel)"
    elif name.startswith("installing the project"):
        how = f" ({name.split('extras ')[-1].rstrip(')')})"
    elif name.startswith("installing torch=="):
        how = f" ({name.removeprefix('installing torch==')})"
    return f"{minutes(seconds)}{how}"


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def render_markdown(document: dict) -> str:
    runs = document["set_ups"]
    lines = [f"# Set-up times: {len(runs)} set-ups into new virtual environments", "",
             f"{document['machine']}; {document['when']} at {document['commit']}.", "",
             "| step | " + " | ".join(run["heading"] for run in runs) + " |",
             "|---" * (len(runs) + 1) + "|"]
    for row, pattern in ROWS:
        lines.append(f"| {row} | " + " | ".join(cell(run["steps"], pattern, row) for run in runs) + " |")
    totals = [next((seconds for seconds, name in run["steps"] if name == "all"), None) for run in runs]
    lines.append("| **all** | " + " | ".join(
        f"**{minutes(total)}**" if total is not None else "**failed**" for total in totals) + " |")
    lines += ["", "- the virtual environment: " + ", ".join(
        f"{run['venv_bytes'] / 1e9:.1f} GB ({run['name']})" for run in runs),
              "- load average at the start and end: " + ", ".join(
        f"{run['load_before']:.1f} and {run['load_after']:.1f} ({run['name']})" for run in runs)]
    failed = [f"{run['name']} (exit {run['exit']})" for run in runs if run["exit"]]
    if failed:
        lines.append(f"- failed: {', '.join(failed)}; its output is in OUT/NAME.log")
    return "\n".join(lines) + "\n"


def machine() -> str:
    release = Path("/etc/os-release")
    name = platform.platform()
    if release.exists():
        found = re.search(r'^PRETTY_NAME="?([^"\n]+)', release.read_text(), re.MULTILINE)
        name = found.group(1) if found else name
    return f"{name}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("results/setup-times"), help="where the record goes")
    parser.add_argument("--keep", action="store_true", help="keep the two virtual environments under OUT/venvs")
    ns = parser.parse_args(argv)
    out = ns.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    wheels = out / "wheels"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    document = {"when": datetime.date.today().isoformat(), "commit": commit, "machine": machine(), "set_ups": []}
    try:
        for number, set_up in enumerate(SET_UPS, 1):
            if set_up.fresh_wheel_cache:
                shutil.rmtree(wheels, ignore_errors=True)
            print(f"set-up {number} of {len(SET_UPS)}: {set_up.heading} (log: {out / set_up.name}.log)",
                  file=sys.stderr, flush=True)
            run = run_set_up(set_up, out, wheels)
            print(f"  {'done' if run['exit'] == 0 else 'failed, exit ' + str(run['exit'])} in "
                  f"{minutes(run['wall_s'])}", file=sys.stderr, flush=True)
            if run["exit"]:  # its last lines say why (the log goes with a scratch directory)
                tail = (out / f"{set_up.name}.log").read_text(encoding="utf-8").splitlines()[-15:]
                print("\n".join(f"  | {line}" for line in tail), file=sys.stderr, flush=True)
            document["set_ups"].append(run)
            write_json_atomic(out / "setup-times.json", document)
    except KeyboardInterrupt:
        print("setup_times: interrupted", file=sys.stderr)
        return 130
    finally:
        if not ns.keep:
            shutil.rmtree(out / "venvs", ignore_errors=True)
    print(render_markdown(document), end="")
    print(f"\nset-up times: {out / 'setup-times.json'}  (logs: first.log, again.log)")
    return 1 if any(run["exit"] for run in document["set_ups"]) else 0


if __name__ == "__main__":
    sys.exit(main())
