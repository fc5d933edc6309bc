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
    python scripts/readme_samples.py --stored parity-fresh   # again from its stored records, no launch

A sample whose commands fail leaves its page as it was and makes the exit status 1. The Slurm samples run under
the tests' private two-node cluster (tests/slurm_cluster.py: root and `make setup EXTRAS=slurm`); the Ray and
Spark ones need EXTRAS=ray,spark. tests/test_doc_samples.py also fails on any block of output in the pages that
is not a sample here.
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
    cluster: bool = False  # its commands run against a private two-node Slurm cluster (tests/slurm_cluster.py)
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
        measured=(r"\d+(\.\d+)? s\b", r"[\d.]+ ms", r"[\d.]+ steps/s",
                  r"((Horovod|DDP)'s speed-up over (Horovod|DDP)|speed-up) [\d.]+x( either way)?", r"speed: no .*$")),
    "migrate-speed": Sample(
        "docs/migration.md",
        ["python -m compare migrate synthetic_throughput.py -o results/bench_ddp.py --force --verify --speed-rounds 2 "
         "-- --iters 5 --warmup-batches 5"],
        copies={"synthetic_throughput.py": "examples/horovod_scripts/synthetic_throughput.py"}, launches=True),
    "time-to-target": Sample(
        "docs/benchmarks.md",
        ["python -m compare run --workload digits --np 2 --seeds 0,1 --repeats 0 --reference off "
         "--epochs 4 --batch-size 16 --target eval_accuracy=0.8 --target eval_loss=0.001 --out results/target"],
        launches=True, stored=["results/target/report.json", "results/target/comparison.json"]),
    "design-half-widths": Sample(
        "docs/benchmarks.md", ["python scripts/speed_error_rates.py --half-widths"],
        copies={"scripts/speed_error_rates.py": "scripts/speed_error_rates.py"}),
    "bench": Sample(
        "docs/benchmarks.md", ["python -m compare bench --out results/bench", "cat results/bench/bench.md"],
        launches=True, stored=["results/bench/bench.json"]),
    "matrix": Sample(
        "docs/features.md", ["python -m compare matrix --out results/matrix"], launches=True,
        stored=["results/matrix/matrix.json"]),
    "faults": Sample(
        "docs/fault-tolerance.md", ["python -m compare faults --out results/faults"], launches=True,
        stored=["results/faults/faults.json"]),
    "soak": Sample(
        "docs/fault-tolerance.md", ["python scripts/soak.py --jobs 20 --out results/soak"],
        copies={"scripts/soak.py": "scripts/soak.py", "scripts/leftovers.py": "scripts/leftovers.py"}, launches=True,
        stored=["results/soak/soak.json"]),
    "setup": Sample(
        "docs/setup.md", ["python scripts/setup_times.py --out results/setup-times"],
        copies={"scripts/setup_times.py": "scripts/setup_times.py"}, launches=True,
        stored=["results/setup-times/setup-times.json"]),
    # The parity defaults' campaign (17 minutes on 2 cores) runs once, hidden, for the first of its tables; the
    # others are rendered from the record it stored (make them after it).
    "parity-fresh": Sample(
        "docs/parity.md", ["python scripts/parity_headroom.py render results/headroom/headroom.json --table fresh"],
        prepare=["python scripts/parity_headroom.py --out results/headroom"],
        copies={"scripts/parity_headroom.py": "scripts/parity_headroom.py"}, stored=["results/headroom/headroom.json"]),
    **{f"parity-{table}": Sample(
        "docs/parity.md", [f"python scripts/parity_headroom.py render results/headroom/headroom.json --table {table}"],
        copies={"scripts/parity_headroom.py": "scripts/parity_headroom.py",
                "results/headroom/headroom.json": "docs/samples/parity-fresh/results/headroom/headroom.json"})
       for table in ("step-rtol", "chaos-safety", "decade-steps", "margins", "bf16")},
    "migrate-launch": Sample(
        "docs/migration.md",
        ['python -m compare migrate --launch "horovodrun -np 8 -H a:4,b:4 python train.py --epochs 3"']),
    "verify-dual": Sample(
        "docs/migration.md", ["python -m compare migrate dual_launch.py --allow-partial --verify -- --epochs 2"],
        copies={"dual_launch.py": "examples/horovod_styles/dual_launch.py",
                "mnist_standin.py": "examples/horovod_styles/mnist_standin.py"}, launches=True,
        stored=["results/migrate/dual_launch/horovod", "results/migrate/dual_launch/ddp"]),
    "verify-ray": Sample(
        "docs/migration.md", ["python -m compare migrate ray_train_horovod.py --verify --timeout 240"],
        copies={"ray_train_horovod.py": "examples/platform_scripts/ray_train_horovod.py"}, launches=True,
        stored=["results/migrate/ray_train_horovod/horovod", "results/migrate/ray_train_horovod/ddp"]),
    "verify-spark": Sample(
        "docs/migration.md", ["python -m compare migrate spark_horovod_run.py --verify --timeout 240"],
        copies={"spark_horovod_run.py": "examples/platform_scripts/spark_horovod_run.py"}, launches=True,
        stored=["results/migrate/spark_horovod_run/horovod", "results/migrate/spark_horovod_run/ddp"]),
    "verify-spark-runner": Sample(
        "docs/migration.md", ["python -m compare migrate spark_horovod_runner.py --verify --timeout 240"],
        copies={"spark_horovod_runner.py": "examples/platform_scripts/spark_horovod_runner.py"}, launches=True,
        stored=["results/migrate/spark_horovod_runner/horovod", "results/migrate/spark_horovod_runner/ddp"]),
    "slurm-run": Sample(
        "docs/slurm.md",
        ["python -m compare run --scheduler slurm --nodes 2 --np 2 --seeds 0 --steps 30 --repeats 0 "
         "--reference off --out results/slurm"],
        launches=True, cluster=True,
        stored=["results/slurm/report.json", "results/slurm/comparison.json"]),
    "slurm-verify": Sample(
        "docs/migration.md",
        ["python -m compare migrate wrapper_module -o wrapper_module_ddp --verify --entry train.py --scheduler slurm "
         "--nodes 2 -- --epochs 1"],
        copies={"wrapper_module": "examples/repos/wrapper_module"}, launches=True, cluster=True,
        stored=["results/migrate/wrapper_module/horovod", "results/migrate/wrapper_module/ddp"]),
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


def run_commands(commands: list[str], scratch: Path, env: dict[str, str] | None = None) -> list[str]:
    """Each command's stdout, run in the scratch directory; raises RuntimeError when one fails."""
    outputs = []
    for command in commands:
        result = subprocess.run(argv_of(command), cwd=scratch, env=env or scratch_env(), capture_output=True,
                                text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{command}: exit {result.returncode}: {result.stderr.strip()[-400:]}")
        # The scratch directory stands for the directory the command is typed in: its path is not the output's.
        outputs.append(result.stdout.replace(f"{scratch}{os.sep}", ""))
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
    """A ```text block; a longer fence where the output holds fences of its own (bench.md's code blocks)."""
    fence = "````" if any(line.lstrip().startswith("```") for line in lines) else "```"
    return f"{fence}text\n" + "\n".join([f"$ {sample.shown[0]}{MARK}{produced}", *lines]) + f"\n{fence}\n"


def block_pattern(name: str) -> re.Pattern[str]:
    """The marker, then the block (indented as a whole where it sits in a list item): groups indent, lines (None:
    an empty block, whose closing fence is the next line: the page after it is never read as its lines)."""
    return re.compile(rf"<!-- sample: {re.escape(name)} -->\n(?P<indent> *)(?P<fence>`{{3,}})text\n"
                      rf"(?:(?P<lines>.*?)\n)??(?P=indent)(?P=fence)\n", re.DOTALL)


def indented(new: str, indent: str) -> str:
    return "".join(indent + line if line.strip() else line for line in new.splitlines(keepends=True))


def replace_block(text: str, name: str, new: str) -> str:
    pattern = block_pattern(name)
    if not pattern.search(text):
        raise RuntimeError(f"no <!-- sample: {name} --> marker before a ```text block")
    return pattern.sub(lambda m: f"<!-- sample: {name} -->\n" + indented(new, m.group("indent")), text, count=1)


def shown_lines(name: str) -> list[str]:
    """The sample's block as its page shows it, without the block's indent."""
    found = block_pattern(name).search((ROOT / SAMPLES[name].page).read_text(encoding="utf-8"))
    if not found:
        raise RuntimeError(f"{SAMPLES[name].page}: no block after <!-- sample: {name} -->")
    indent = found.group("indent")
    return [line.removeprefix(indent) for line in (found.group("lines") or "").split("\n")]


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


def copy_inputs(sample: Sample, scratch: Path) -> None:
    for target, source in sample.copies.items():
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, scratch / target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (scratch / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / source, scratch / target)


def run_sample(sample: Sample, scratch: Path, *, stored: bool = False) -> list[str]:
    """The shown commands' outputs, after the hidden ones (not when `stored`: their records are in the scratch
    directory already); with the sample's Slurm cluster when it has one."""
    if stored:
        return run_commands(sample.shown, scratch)
    if not sample.cluster:
        run_commands(sample.prepare, scratch)
        return run_commands(sample.shown, scratch)
    sys.path.insert(0, str(ROOT / "tests"))
    from slurm_cluster import SlurmCluster, unavailable  # the tests' private cluster: nothing outside its folder

    if (reason := unavailable()) is not None:
        raise RuntimeError(f"no Slurm cluster here: {reason}")
    with SlurmCluster(scratch / "cluster", nodes=2, cpus=4) as cluster:
        env = cluster.env({**scratch_env(), "OMP_NUM_THREADS": "1"})
        run_commands(sample.prepare, scratch, env)
        return run_commands(sample.shown, scratch, env)


def make(name: str, produced: str, *, stored: bool = False) -> None:
    """The sample's block made again; `stored`: from the records stored with it, without its hidden launches."""
    sample = SAMPLES[name]
    with tempfile.TemporaryDirectory(prefix="doc-sample-") as scratch_name:
        scratch = Path(scratch_name)
        copy_inputs(sample, scratch)
        if stored:
            if sample.launches or (sample.prepare and not sample.stored):
                raise RuntimeError("--stored: its shown commands launch, or its hidden launches keep no records")
            if (STORE / name).is_dir():
                shutil.copytree(STORE / name, scratch, dirs_exist_ok=True)
        outputs = run_sample(sample, scratch, stored=stored)
        store(name, sample, scratch)
    page = ROOT / sample.page
    write_atomic(page, replace_block(page.read_text(encoding="utf-8"), name,
                                     block(sample, body(sample, outputs), produced)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"samples to produce (default: all of {', '.join(SAMPLES)})")
    parser.add_argument("--list", action="store_true", help="list the samples and stop")
    parser.add_argument("--stored", action="store_true",
                        help="re-run the shown commands on the records stored with each sample, without its hidden "
                             "launches (after a change to what renders them)")
    ns = parser.parse_args(argv)
    if ns.list:
        for name, sample in SAMPLES.items():
            print(f"{name:20} {sample.page:30} {'launches' if sample.launches or sample.prepare else 'no launch'}"
                  f"{', on a private Slurm cluster' if sample.cluster else ''}")
        return 0
    unknown = [name for name in ns.names if name not in SAMPLES]
    if unknown:
        parser.error(f"unknown sample(s) {', '.join(unknown)}; samples are {', '.join(SAMPLES)}")
    produced, failed = environment(), 0
    for name in ns.names or list(SAMPLES):
        try:
            make(name, produced, stored=ns.stored)
            print(f"{name}: {SAMPLES[name].page} updated")
        except (RuntimeError, OSError) as exc:
            failed = 1
            print(f"{name}: not updated: {exc}", file=sys.stderr)
    return failed


if __name__ == "__main__":
    sys.exit(main())
