"""--verify: the original under horovodrun and the result under torchrun (np 2, CPU), then `compare check`.

Each side writes a run record into a directory of its own: the script's recorder reads it from the
RUN_DIR environment variable (or `{run_dir}` in the script arguments). A script without the recorder is
judged on the loss lines it prints (--loss-regex), turned into a run record here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from compare.launch.commands import Launch, horovodrun, launch_env, torchrun
from compare.launch.logs import TEARDOWN_NOTE
from compare.launch.process import run_launch
from compare.names import EXIT_RUN_FAILED
from workload.files import write_json_atomic

DEFAULT_LOSS_REGEX = r"step\D{0,3}(?P<step>\d+).*?loss\W{0,3}(?P<loss>[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
# horovodrun prefixes each worker's line: "[0]<stdout>:" on Gloo, "[1,0]<stdout>:" on MPI; torchrun does not.
RANK_PREFIX = re.compile(r"^\[(?:\d+,)?(?P<rank>\d+)\]<std(?:out|err)>:")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def launch_commands(original: Path, migrated: Path, script_args: list[str], *, np: int, horovod_run: bool,
                    controller: str) -> dict[str, list[str]]:
    """Each side as its users launch it (the same launcher lines as `compare run`, compare/launch/commands.py)."""
    horovod, ddp = [str(original), *script_args], [str(migrated), *script_args]
    if horovod_run:  # the scripts start their own workers
        return {"horovod": [sys.executable, *horovod], "ddp": [sys.executable, *ddp]}
    return {"horovod": horovodrun(np, controller, [sys.executable, *horovod]), "ddp": torchrun(np, ddp)}


def run_side(name: str, command: list[str], run_dir: Path, timeout: float) -> tuple[int, str]:
    """Run one launch with RUN_DIR set, supervised as every launch is (its whole tree stopped on a timeout);
    its output goes to run_dir/launch.log. Returns (exit status, output): 0 for every launch that counts as
    ok, which includes one that failed only in a worker's interpreter teardown (compare/launch/logs.py)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [word.replace("{run_dir}", str(run_dir)) for word in command]
    python_path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**launch_env(name, threads=1), "RUN_DIR": str(run_dir), "PYTHONPATH": python_path}
    outcome = run_launch(Launch(name, 0, (0,), command, env, run_dir, run_dir / "launch.log"), timeout)
    code = 124 if outcome.timed_out else int(outcome.returncode or 0)
    output = outcome.launch.log_path.read_text(errors="replace").split("\n", 1)[-1]
    log = run_dir / "launch.log"
    shown = log.relative_to(Path.cwd()) if log.is_relative_to(Path.cwd()) else log
    print(f"  {name}: exit {code} in {outcome.duration_s:.1f} s ({shown})", flush=True)
    if outcome.teardown_abort:
        print(f"  {name}: {TEARDOWN_NOTE}", flush=True)
    return (0 if outcome.ok else code), output


def record_from_output(output: str, run_dir: Path, *, framework: str, np: int, pattern: str) -> int:
    """Write run.json + metrics.jsonl from the printed loss lines (rank 0's, the first of each step)."""
    regex = re.compile(pattern)
    losses: dict[int, float] = {}
    for line in output.splitlines():
        prefix = RANK_PREFIX.match(line)
        if prefix and prefix.group("rank") != "0":
            continue
        found = regex.search(line[prefix.end():] if prefix else line)
        if found:
            losses.setdefault(int(found.group("step")), float(found.group("loss")))
    steps = sorted(losses)
    metrics = "".join(json.dumps({"kind": "step", "step": i, "loss": losses[step], "step_time_s": None}) + "\n"
                      for i, step in enumerate(steps, start=1))
    part = run_dir / "metrics.jsonl.tmp"
    part.write_text(metrics)
    part.replace(run_dir / "metrics.jsonl")
    write_json_atomic(run_dir / "run.json", {
        "schema_version": 1, "status": "ok", "error": None, "framework": framework, "world_size": np,
        "data_world_size": np, "seed": 0, "options": {}, "steps": len(steps),
        "recorded_by": {"tool": "compare migrate --verify", "loss_regex": pattern, "printed_steps": steps}})
    return len(steps)


def verify(original: Path, migrated: Path, script_args: list[str], out: Path, *, np: int, horovod_run: bool,
           controller: str, timeout: float, loss_regex: str | None) -> int:
    commands = launch_commands(original, migrated, script_args, np=np, horovod_run=horovod_run, controller=controller)
    dirs = {name: out / name for name in commands}
    print(f"verify: {original.name} under {'horovod.run' if horovod_run else 'horovodrun'} and {migrated.name} "
          f"under {'torch.multiprocessing.spawn' if horovod_run else 'torchrun'}, np {np}", flush=True)
    for name, command in commands.items():
        for stale in ("run.json", "metrics.jsonl", "metrics.jsonl.part"):
            (dirs[name] / stale).unlink(missing_ok=True)
        code, output = run_side(name, command, dirs[name], timeout)
        if code != 0:
            tail = "\n".join(output.strip().splitlines()[-15:])
            print(f"verify: the {name} run failed (exit {code}):\n{tail}", file=sys.stderr)
            return EXIT_RUN_FAILED
        if not (dirs[name] / "run.json").exists():
            if loss_regex is None and "import recorder" not in original.read_text(errors="replace"):
                loss_regex = DEFAULT_LOSS_REGEX
            if loss_regex is None:
                print(f"verify: the {name} run wrote no run record in {dirs[name]} (does the script take its "
                      "directory from RUN_DIR?)", file=sys.stderr)
                return EXIT_RUN_FAILED
            found = record_from_output(output, dirs[name], framework=name, np=np, pattern=loss_regex)
            print(f"  {name}: {found} loss lines read from its output", flush=True)
            if found == 0:
                print(f"verify: no line of the {name} run matches the loss regex {loss_regex!r}", file=sys.stderr)
                return EXIT_RUN_FAILED
    check = subprocess.run([sys.executable, "-m", "compare", "check", str(dirs["horovod"]), str(dirs["ddp"])],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
                           cwd=PROJECT_ROOT)
    print(check.stdout.rstrip())
    return check.returncode
