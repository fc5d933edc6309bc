"""--verify: the original and the result launched as their users launch them (np 2, CPU), then `compare check`.

A horovodrun script runs under horovodrun and its migration under torchrun; a script that starts its own
workers (horovod.run, decided from its arguments by compare/migrate/launch_mode.py) runs as plain `python`
on both sides. Every Python process of both jobs prints through the rank tag (compare/migrate/rank_tag/):
so rank 0's lines are known in every launch, and so is the world size each side really ran at, which must
be the one asked for. Each side writes a run record into a directory of its own: the script's recorder
reads it from RUN_DIR (or `{run_dir}` in the script arguments); a script without the recorder is judged on
rank 0's printed loss lines (compare/loss_lines.py), turned into a run record here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from compare.importers import Series, build_record, source_digest
from compare.launch.lines import Launch, horovodrun, launch_env, torchrun
from compare.launch.logs import TEARDOWN_NOTE
from compare.launch.process import run_launch
from compare.loss_lines import VERIFY_TAG, LossLog, LossLogError, read_loss_log
from compare.migrate.launch_mode import LaunchMode
from compare.names import EXIT_RUN_FAILED
from workload.record_format import LAUNCH_LOG, METRICS, METRICS_PART, RUN_JSON, write_metrics, write_run_json

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RANK_TAG = Path(__file__).resolve().parent / "rank_tag"
TAG = re.compile(VERIFY_TAG)


def _rank_tag_finished() -> str:
    spec = importlib.util.spec_from_file_location("rank_tag", RANK_TAG / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # under its own name: it installs nothing here
    return module.FINISHED


FINISHED = re.compile(VERIFY_TAG + re.escape(_rank_tag_finished()))


def every_rank_finished(output: str) -> bool:
    """Each rank of the job said that its script ran to the end (the rank tag's last line)."""
    said = {(int(m["tag"]), int(m["size"])) for m in FINISHED.finditer(output)}
    sizes = {size for _, size in said}
    return len(sizes) == 1 and {rank for rank, _ in said} == set(range(sizes.pop()))


def launch_commands(original: Path, migrated: Path, script_args: list[str], *, np: int, mode: str,
                    controller: str) -> dict[str, list[str]]:
    """Each side as its users launch it (the same launcher lines as `compare run`, compare/launch/lines.py)."""
    horovod, ddp = [str(original), *script_args], [str(migrated), *script_args]
    if mode == "api":  # the scripts start their own workers
        return {"horovod": [sys.executable, *horovod], "ddp": [sys.executable, *ddp]}
    return {"horovod": horovodrun(np, controller, [sys.executable, *horovod]), "ddp": torchrun(np, ddp)}


def run_side(name: str, command: list[str], run_dir: Path, timeout: float, script_dir: Path) -> tuple[int, str]:
    """Run one launch with RUN_DIR set and the rank tag loaded, supervised as every launch is (its whole tree
    stopped on a timeout); its output goes to run_dir/launch.log. Returns (exit status, output): 0 for every
    launch that counts as ok, which includes one that failed only in a worker's interpreter teardown
    (docs/fault-tolerance.md, "Gloo's abort at exit")."""
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [word.replace("{run_dir}", str(run_dir)) for word in command]
    # The original's own modules (a data set, a model beside it) resolve for its migration too, wherever it is.
    python_path = os.pathsep.join(filter(None, [str(RANK_TAG), str(script_dir), str(PROJECT_ROOT),
                                                os.environ.get("PYTHONPATH")]))
    env = {**launch_env(name, threads=1), "RUN_DIR": str(run_dir), "PYTHONPATH": python_path}
    # A script writes no run record: its ranks' own word that they finished (the rank tag's last line) stands in.
    launch = Launch(name, 0, (0,), command, env, run_dir, run_dir / LAUNCH_LOG, finished_per_log=every_rank_finished)
    outcome = run_launch(launch, timeout)
    code = 124 if outcome.timed_out else int(outcome.returncode or 0)
    output = outcome.launch.log_path.read_text(errors="replace").split("\n", 1)[-1]
    print(f"  {name}: exit {code} in {outcome.duration_s:.1f} s ({_shown(run_dir / 'launch.log')})", flush=True)
    if outcome.teardown_abort:
        print(f"  {name}: {TEARDOWN_NOTE}", flush=True)
    return (0 if outcome.ok else code), output


def _shown(path: Path) -> Path:
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def record_from_output(output: str, run_dir: Path, *, framework: str, train: str | None = None,
                       evaluation: str | None = None, step_from: str = "log") -> LossLog:
    """run.json + metrics.jsonl from rank 0's printed loss and evaluation lines (metrics first, run.json last).
    Raises LossLogError when the lines cannot be read as rank 0's."""
    log = read_loss_log(output, train=train, evaluation=evaluation, step_from=step_from,
                        where=str(_shown(run_dir / LAUNCH_LOG)))
    series = Series(steps=log.steps, evals=log.evals, repeated=log.repeated,
                    fields={"regex": log.pattern, "steps": log.step_rule, "rank": "0"})
    source = run_dir / LAUNCH_LOG
    meta, lines = build_record(series, kind="text", source=source, digest=source_digest(source) if source.exists()
                               else "", framework=framework, world_size=log.world_size, seed=0, options={},
                               global_batch=None)
    meta["recorded_by"] = {"tool": "compare migrate --verify", "from": "rank 0's printed lines"}
    write_metrics(run_dir, lines)
    write_run_json(run_dir, meta)
    return log


def _world_size_problem(name: str, world: int | None, np: int, mode: LaunchMode) -> str | None:
    if world == np:
        return None
    if world is None:
        return (f"verify: cannot tell the world size the {name} side ran at (no rank-tagged line and no world "
                "size in its run record): nothing compared")
    hint = ""
    if mode.mode == "api":
        hint = "; the script starts its own workers, as many as its arguments say" + (
            f" (give {mode.option} {np} after --)" if mode.option else "")
    return f"verify: the {name} side ran at world size {world}, not {np}: nothing compared{hint}"


def verify(original: Path, migrated: Path, script_args: list[str], out: Path, *, np: int, mode: LaunchMode,
           controller: str, timeout: float, loss_regex: str | None, eval_regex: str | None = None,
           step_from: str = "log") -> int:
    commands = launch_commands(original, migrated, script_args, np=np, mode=mode.mode, controller=controller)
    dirs = {name: out / name for name in commands}
    launched = ("python (horovod.run)", "python (torch.multiprocessing.spawn)") if mode.mode == "api" else (
        "horovodrun", "torchrun")
    print(f"verify: {original.name} under {launched[0]} and {migrated.name} under {launched[1]}, np {np}",
          flush=True)
    print(f"  launch: {mode.why}", flush=True)
    for name, command in commands.items():
        for stale in (RUN_JSON, METRICS, METRICS_PART):
            (dirs[name] / stale).unlink(missing_ok=True)
        code, output = run_side(name, command, dirs[name], timeout, original.parent)
        if code != 0:
            tail = "\n".join(TAG.sub("", line) for line in output.strip().splitlines()[-15:])
            print(f"verify: the {name} run failed (exit {code}):\n{tail}", file=sys.stderr)
            return EXIT_RUN_FAILED
        record = dirs[name] / RUN_JSON
        if record.exists():
            world = json.loads(record.read_text()).get("world_size")
        else:
            try:
                log = record_from_output(output, dirs[name], framework=name, train=loss_regex,
                                         evaluation=eval_regex, step_from=step_from)
            except LossLogError as exc:
                hint = (" (the script imports recorder: does it take its directory from RUN_DIR?)"
                        if "import recorder" in original.read_text(errors="replace") else "")
                print(f"verify: the {name} run wrote no run record{hint}, and its output cannot be read: {exc}",
                      file=sys.stderr)
                return EXIT_RUN_FAILED
            world = log.world_size
            print(f"  {name}: {len(log.steps)} steps and {len(log.evals)} evaluations read from rank 0's lines "
                  f"(steps {log.step_rule})", flush=True)
            for step, first, kept in log.repeated[:3]:
                print(f"  {name}: step {step} was printed again with another loss ({first:.6g}, then {kept:.6g}; "
                      "the last is kept)", flush=True)
        problem = _world_size_problem(name, world, np, mode)
        if problem:
            print(problem, file=sys.stderr)
            return EXIT_RUN_FAILED
    check = subprocess.run([sys.executable, "-m", "compare", "check", str(dirs["horovod"]), str(dirs["ddp"])],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
                           cwd=PROJECT_ROOT)
    print(check.stdout.rstrip())
    return check.returncode
