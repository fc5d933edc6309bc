"""The sample outputs in README.md and docs/: each the verbatim output of its commands, made here, never pasted.

A page marks a sample with `<!-- sample: NAME -->` at the end of the line before a ```text block. This script runs
the sample's commands in a scratch directory (inputs copied from the repository) and rewrites the block: each
command as typed (the first with the date, commit and machine it ran on), then what it printed on stdout,
verbatim. What the test (tests/test_doc_samples.py) needs to check the sample without launching anything is
stored beside it, under docs/samples/NAME/: the records a sample's hidden launches made (its shown commands are
then re-run on them), or, for a shown command that launches, the records it wrote (the test re-renders them).

    make samples                                        # every sample (the launching ones: a quiet machine)
    python scripts/readme_samples.py migrate-script     # only these
    python scripts/readme_samples.py --list             # each sample, its page, and whether it launches

A sample whose commands fail leaves its page as it was and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workload.files import write_atomic  # noqa: E402  (after the path: run as a script from anywhere)

PY = sys.executable
STORE = ROOT / "docs" / "samples"  # per sample: what the test re-runs or re-renders it from
MARK = "    # made "  # the first command's comment: when, at which commit, on what


@dataclass(frozen=True)
class Sample:
    page: str  # where its marker is, relative to the repository
    shown: list[str]  # the commands as the page shows them; each one's stdout follows it
    prepare: list[str] = field(default_factory=list)  # run first and not shown: launches whose records it keeps
    copies: dict[str, str] = field(default_factory=dict)  # scratch name -> repository path
    stored: list[str] = field(default_factory=list)  # scratch paths kept under docs/samples/NAME/ for the test
    launches: bool = False  # a shown command launches: the test re-renders its stored records, never runs it
    # what differs from run to run in the output, masked by the test: measured times, rates, load
    measured: tuple[str, ...] = ()


SAMPLES: dict[str, Sample] = {
    "migrate-script": Sample(
        "README.md", ["python -m compare migrate train.py"], copies={"train.py": "examples/horovod_scripts/plain.py"}),
    "compare-run": Sample(
        "README.md", ["python -m compare run --out results/run"], launches=True,
        stored=["results/run/report.json", "results/run/comparison.json", "results/run/runs/sequential.json"]),
    "check-logs": Sample(
        "README.md",
        ["python -m compare import tensorboard runs/hvd-tb --out runs/hvd --framework horovod --world-size 2",
         "python -m compare check runs/hvd runs/ddp"],
        prepare=["horovodrun -np 2 --gloo python train_horovod.py --out runs/hvd-record --tensorboard runs/hvd-tb",
                 "torchrun --standalone --nproc-per-node 2 train_ddp.py --out runs/ddp"],
        copies={"train_horovod.py": "examples/user_scripts/train_horovod.py",
                "train_ddp.py": "examples/user_scripts/train_ddp.py"},
        stored=["runs/hvd-tb", "runs/ddp"]),
    "migrate-report": Sample(
        "docs/migrate-walkthrough.md",
        ["python -m compare migrate train.py -o results/plain_ddp.py",
         "grep broadcast_ results/plain_ddp.migration.md"],
        copies={"train.py": "examples/horovod_scripts/plain.py"}),
    "migrate-verify": Sample(
        "docs/migrate-walkthrough.md", ["python -m compare migrate train.py -o train_ddp.py --force --verify"],
        copies={"train.py": "examples/horovod_scripts/plain.py"}, launches=True,
        stored=["results/migrate/train/horovod", "results/migrate/train/ddp"],
        measured=(r"\d+(\.\d+)? s\b", r"[\d.]+ ms", r"[\d.]+ steps/s", r"(Horovod|DDP)/(Horovod|DDP) [\d.]+",
                  r"speed: no .*$")),
    "migrate-speed": Sample(
        "docs/migration.md",
        ["python -m compare migrate synthetic_throughput.py -o results/bench_ddp.py --force --verify --speed-rounds 2 "
         "-- --iters 5 --warmup-batches 5"],
        copies={"synthetic_throughput.py": "examples/horovod_scripts/synthetic_throughput.py"}, launches=True),
}


def environment() -> str:
    """When, at which commit, on what: the first command's comment."""
    def version(module: str) -> str:
        code = f"import {module}; print({module}.__version__)"
        result = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=False)
        return result.stdout.strip() or "absent"

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    when = time.strftime("%Y-%m-%d", time.gmtime())
    return (f"{when} at {commit}{changed}, {os.cpu_count()} cores, torch {version('torch')}, "
            f"Horovod {version('horovod')}")


def argv_of(command: str) -> list[str]:
    argv = shlex.split(command)
    return [PY, *argv[1:]] if argv[0] == "python" else argv


def scratch_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "PATH": os.pathsep.join([str(Path(PY).parent), os.environ.get("PATH", "")])}


def run_commands(commands: list[str], scratch: Path) -> list[str]:
    """Each command's stdout, run in the scratch directory; raises RuntimeError when one fails."""
    outputs = []
    for command in commands:
        result = subprocess.run(argv_of(command), cwd=scratch, env=scratch_env(), capture_output=True, text=True,
                                check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{command}: exit {result.returncode}: {result.stderr.strip()[-400:]}")
        outputs.append(result.stdout)
    return outputs


def body(sample: Sample, outputs: list[str]) -> list[str]:
    """The block's lines after the first command's: every command and its stdout, trailing blanks cut."""
    lines: list[str] = []
    for number, (command, output) in enumerate(zip(sample.shown, outputs, strict=True)):
        if number:
            lines.append(f"$ {command}")
        lines += [line.rstrip() for line in output.rstrip("\n").splitlines()]
    return lines


def block(sample: Sample, lines: list[str], produced: str) -> str:
    return "```text\n" + "\n".join([f"$ {sample.shown[0]}{MARK}{produced}", *lines]) + "\n```\n"


def replace_block(text: str, name: str, new: str) -> str:
    pattern = re.compile(rf"(<!-- sample: {re.escape(name)} -->\n)```text\n.*?\n```\n", re.DOTALL)
    if not pattern.search(text):
        raise RuntimeError(f"no <!-- sample: {name} --> marker before a ```text block")
    return pattern.sub(lambda m: m.group(1) + new, text, count=1)


def store(name: str, sample: Sample, scratch: Path) -> None:
    """What the test needs, from the scratch directory to docs/samples/NAME/ (replacing what was there)."""
    target = STORE / name
    shutil.rmtree(target, ignore_errors=True)
    for path in sample.stored:
        source = scratch / path
        if source.is_dir():
            shutil.copytree(source, target / path, ignore=shutil.ignore_patterns("*.png", "*.html"))
        else:
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target / path)


def make(name: str, produced: str) -> None:
    sample = SAMPLES[name]
    with tempfile.TemporaryDirectory(prefix="doc-sample-") as scratch_name:
        scratch = Path(scratch_name)
        for target, source in sample.copies.items():
            shutil.copy(ROOT / source, scratch / target)
        run_commands(sample.prepare, scratch)
        outputs = run_commands(sample.shown, scratch)
        store(name, sample, scratch)
    page = ROOT / sample.page
    write_atomic(page, replace_block(page.read_text(encoding="utf-8"), name,
                                     block(sample, body(sample, outputs), produced)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"samples to produce (default: all of {', '.join(SAMPLES)})")
    parser.add_argument("--list", action="store_true", help="list the samples and stop")
    ns = parser.parse_args(argv)
    if ns.list:
        for name, sample in SAMPLES.items():
            print(f"{name:16} {sample.page:30} {'launches' if sample.launches or sample.prepare else 'no launch'}")
        return 0
    unknown = [name for name in ns.names if name not in SAMPLES]
    if unknown:
        parser.error(f"unknown sample(s) {', '.join(unknown)}; samples are {', '.join(SAMPLES)}")
    produced, failed = environment(), 0
    for name in ns.names or list(SAMPLES):
        try:
            make(name, produced)
            print(f"{name}: {SAMPLES[name].page} updated")
        except (RuntimeError, OSError) as exc:
            failed = 1
            print(f"{name}: not updated: {exc}", file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main())
