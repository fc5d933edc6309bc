"""The sample outputs in README.md and docs/: each produced here from a real run, never pasted by hand.

A page marks a sample with `<!-- sample: NAME -->` at the end of the line before a ```text block; this script
runs the sample's commands in a scratch directory (inputs copied from the repository) and rewrites the block:
the commands as shown, the first with when and on what it ran, then what the last printed (the lines kept).

    python scripts/readme_samples.py                    # every sample (compare-run times launches: a quiet machine)
    python scripts/readme_samples.py migrate-script     # only these
    python scripts/readme_samples.py --list             # each sample, its page, and whether it launches

A sample whose commands fail leaves its page as it was and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workload.files import write_atomic  # noqa: E402  (after the path: run as a script from anywhere)

PY = sys.executable


@dataclass(frozen=True)
class Sample:
    page: str  # where its markers are, relative to the repository
    shown: list[str]  # the commands as the page shows them (run as they are, in the scratch directory)
    keep: Callable[[str, Path], list[str]]  # (what the last shown command printed, the scratch dir) -> the lines
    prepare: list[str] = field(default_factory=list)  # commands run first, not shown
    copies: dict[str, str] = field(default_factory=dict)  # scratch name -> repository path
    launches: bool = False  # starts launchers: regenerate on a quiet machine (speed figures are the machine's)


def last(n: int) -> Callable[[str, Path], list[str]]:
    return lambda output, _scratch: [line for line in output.splitlines() if line.strip()][-n:]


def migrated_with_next_step(output: str, scratch: Path) -> list[str]:
    """What migrate prints, the report's first changes and the command its "Check it" section gives."""
    report = (scratch / "train_ddp.migration.md").read_text(encoding="utf-8")
    rows = [row.split(" | ") for row in report.splitlines() if re.match(r"\| \d+ \| [\d-]+ \| `", row)]
    changes = [f"  line {row[0].strip('| ')}: {row[2]} -> {row[3]}"[:110] for row in rows[:3]]
    check = re.search(r"`(python -m compare migrate [^`]*)`", report.split("## Check it", 1)[1])
    again = check.group(1) if check else "?"
    return [*output.strip().splitlines(), *changes, f"  next (the report's Check it): {again}"]


VERDICT = ("framework", "---------", "Horovod ", "DDP ", "reference ", "rounds:", "parity ", "speed:", "compared:",
           "wall time:")


def verdict(output: str, _scratch: Path) -> list[str]:
    """compare run's table and verdict lines, without the progress lines it writes to stderr."""
    return [line for line in output.splitlines() if line.startswith(VERDICT)]


SAMPLES: dict[str, Sample] = {
    "migrate-script": Sample(
        "README.md", ["python -m compare migrate train.py"], migrated_with_next_step,
        copies={"train.py": "examples/horovod_scripts/plain.py"}),
    "compare-run": Sample(
        "README.md", ["python -m compare run --np 1,2 --workload digits --out results/digits"], verdict,
        launches=True),
    "check-logs": Sample(
        "README.md",
        ["python -m compare import tensorboard runs/hvd-tb --out runs/hvd --framework horovod --world-size 2",
         "python -m compare check runs/hvd runs/ddp"], last(3),
        prepare=["horovodrun -np 2 --gloo python train_horovod.py --out runs/hvd-record --tensorboard runs/hvd-tb",
                 "torchrun --standalone --nproc-per-node 2 train_ddp.py --out runs/ddp"],
        copies={"train_horovod.py": "examples/user_scripts/train_horovod.py",
                "train_ddp.py": "examples/user_scripts/train_ddp.py"},
        launches=True),
    "migrate-verify": Sample(
        "docs/migrate-walkthrough.md",
        ["python -m compare migrate train.py -o train_ddp.py --force --verify"], last(14),
        copies={"train.py": "examples/horovod_scripts/plain.py"}, launches=True),
}


def environment() -> str:
    def version(module: str) -> str:
        code = f"import {module}; print({module}.__version__)"
        result = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=False)
        return result.stdout.strip() or "absent"

    when = time.strftime("%Y-%m-%d", time.gmtime())
    return f"{when}, {os.cpu_count()} cores, torch {version('torch')}, Horovod {version('horovod')}"


def run_sample(sample: Sample) -> list[str]:
    """The sample's lines, from a run in a scratch directory; raises RuntimeError when a command fails."""
    with tempfile.TemporaryDirectory(prefix="readme-sample-") as name:
        scratch = Path(name)
        for target, source in sample.copies.items():
            shutil.copy(ROOT / source, scratch / target)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "PATH": os.pathsep.join([str(Path(PY).parent), os.environ.get("PATH", "")])}
        output = ""
        for command in [*sample.prepare, *sample.shown]:
            argv = command.split()
            argv = [PY, *argv[1:]] if argv[0] == "python" else argv
            result = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, check=False)
            if result.returncode not in (0,):
                raise RuntimeError(f"{command}: exit {result.returncode}: {result.stderr.strip()[-400:]}")
            output = result.stdout + result.stderr
        return sample.keep(output, scratch)


def block(sample: Sample, lines: list[str], produced: str) -> str:
    first, *more = sample.shown
    shown = [f"$ {first}    # {produced}", *(f"$ {command}" for command in more)]
    return "```text\n" + "\n".join([*shown, *lines]) + "\n```\n"


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- sample: {re.escape(name)} -->\n)```text\n.*?\n```\n", re.DOTALL)
    if not pattern.search(text):
        raise RuntimeError(f"no <!-- sample: {name} --> marker before a ```text block")
    return pattern.sub(lambda m: m.group(1) + body, text, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"samples to produce (default: all of {', '.join(SAMPLES)})")
    parser.add_argument("--list", action="store_true", help="list the samples and stop")
    ns = parser.parse_args(argv)
    if ns.list:
        for name, sample in SAMPLES.items():
            print(f"{name:16} {sample.page:30} {'launches' if sample.launches else 'no launch'}")
        return 0
    unknown = [name for name in ns.names if name not in SAMPLES]
    if unknown:
        parser.error(f"unknown sample(s) {', '.join(unknown)}; samples are {', '.join(SAMPLES)}")
    produced, failed = environment(), 0
    for name in ns.names or list(SAMPLES):
        sample = SAMPLES[name]
        try:
            lines = run_sample(sample)
            page = ROOT / sample.page
            write_atomic(page, replace_block(page.read_text(encoding="utf-8"), name, block(sample, lines, produced)))
            print(f"{name}: {sample.page} updated")
        except (RuntimeError, OSError) as exc:
            failed = 1
            print(f"{name}: not updated: {exc}", file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main())
