"""--verify: the original and the result launched as their users launch them (np 2, CPU), then `compare check`.

A horovodrun script runs under horovodrun and its migration under torchrun; a script that starts its own
workers (horovod.run, decided from its arguments by compare/verify/launch_mode.py; a job that Ray starts,
its migration through Ray Train's TorchTrainer) runs as plain `python` on both sides. Every Python process of
both jobs prints through the rank tag (compare/verify/rank_tag/): so rank 0's lines are known in every
launch, and so is the world size each side really ran at, which must be the one asked for. (Ray's workers
copy their tagged lines to files as well, read here after the launch: Ray streams them to the driver only
while the driver lives.) Each side writes a run record into a directory of its own: the script's recorder
reads it from RUN_DIR (or `{run_dir}` in the script arguments); a script without the recorder is judged on
rank 0's printed loss lines (compare/loss_lines.py), turned into a run record here.

Every launch is also timed (compare/verify/step_times.py: the optimizer's step hooks, else printed
throughput), and the speed of the two sides is compared (compare/verify/speed.py); with
--speed-rounds N each side is launched up to N more times, interleaved, for a verdict over rounds under compare
run's group-sequential design (compare/verify/speed_design.py). A script that
prints no loss at all (Horovod's synthetic benchmark) is not judged for parity, and says so in one line:
its speed is the whole verdict.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compare.analysis import group_sequential
from compare.importers import Series, build_record, source_digest
from compare.launch.lines import Launch, Program
from compare.launch.logs import TEARDOWN_NOTE
from compare.launch.scheduling import LocalScheduler, Scheduler
from compare.launch.slurm import SlurmOutcome, SlurmScheduler, launched_by
from compare.loss_lines import VERIFY_TAG, LossLog, LossLogError, compile_patterns, read_loss_log, split_pieces
from compare.names import Exit, LaunchedBy
from compare.verify import speed_design
from compare.verify.launch_mode import LaunchMode
from compare.verify.speed import Launched, Timing, run_speed_rounds, side_line, speed_report
from compare.verify.step_times import (
    DEFINITION,
    STEP_TIMES_DIR,
    STEP_TIMES_SOURCE,
    THROUGHPUT,
    StepTimes,
    Throughput,
    clear_step_times,
    read_step_times,
    read_throughput,
)
from workload.record_format import (
    LAUNCH_LOG,
    METRICS,
    METRICS_PART,
    RUN_JSON,
    SCHEMA_VERSION,
    loads,
    write_metrics,
    write_run_json,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RANK_TAG = Path(__file__).resolve().parent / "rank_tag"
TAG = re.compile(VERIFY_TAG)


def rank_tag_module():
    """The rank tag, loaded under its own name: it installs nothing here."""
    spec = importlib.util.spec_from_file_location("rank_tag", RANK_TAG / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TAG_MODULE = rank_tag_module()
FINISHED = re.compile(VERIFY_TAG + re.escape(_TAG_MODULE.FINISHED))
STEP_TIMES_VARIABLE = _TAG_MODULE.STEP_TIMES_VARIABLE
LINES_VARIABLE, WORKER_LINES = _TAG_MODULE.LINES_VARIABLE, "worker-lines"  # Ray workers' tagged lines, copied


def worker_lines(directory: Path) -> str:
    """The tagged lines Ray's workers copied (the rank tag's _tag_ray_workers): Ray streams them to the driver only
    while it lives, so a short job's last lines may never reach its output."""
    files = sorted(directory.glob("lines-*.txt")) if directory.is_dir() else []
    return "".join(path.read_text(errors="replace") for path in files)


def every_rank_finished(output: str) -> bool:
    """Each rank of the job said that its script ran to the end (the rank tag's last line)."""
    said = {(int(m["tag"]), int(m["size"])) for m in FINISHED.finditer(output)}
    sizes = {size for _, size in said}
    return len(sizes) == 1 and {rank for rank, _ in said} == set(range(sizes.pop()))


def side_programs(original: Path, migrated: Path, script_args: list[str], *, original_prefix: tuple[str, ...] = (),
                  migrated_args: list[str] | None = None) -> dict[str, Program]:
    """What each side's ranks run, as `python`'s arguments. `original_prefix`: put before the original script (a
    front-end's stand-in, compare/verify/spark_launch.py); `migrated_args`: the migrated side's own arguments
    (`--horovod` became `--distributed`), else script_args."""
    return {"horovod": Program((*original_prefix, str(original)), tuple(script_args)),
            "ddp": Program((str(migrated),), tuple(script_args if migrated_args is None else migrated_args))}


def side_env(run_dir: Path, script_dirs: Path | list[Path], device: str) -> dict[str, str]:
    """What every process of one side's launch is given, wherever it runs: RUN_DIR, the rank tag and the
    directories its launch puts on the import path (a single script's own directory; for a repository, only what
    its users' launch puts there) on PYTHONPATH, where the step times go; on --device cpu, no GPU to see."""
    # A single script's own modules (a data set, a model beside it) resolve for its migration too, wherever it is.
    dirs = [script_dirs] if isinstance(script_dirs, Path) else script_dirs
    python_path = os.pathsep.join(filter(None, [str(RANK_TAG), *map(str, dirs), str(PROJECT_ROOT),
                                                os.environ.get("PYTHONPATH")]))
    env = {"RUN_DIR": str(run_dir), "PYTHONPATH": python_path,
           STEP_TIMES_VARIABLE: str(run_dir / STEP_TIMES_DIR), LINES_VARIABLE: str(run_dir / WORKER_LINES),
           # A job that Spark starts: its Python workers run this interpreter too (not `python3` from PATH)
           "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    if device == "cpu":  # a script that takes a GPU when it sees one (most do) runs on the CPU, as asked
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def side_launch(name: str, program: Program, run_dir: Path, script_dir: Path | list[Path], where: Scheduler, *,
                np: int, mode: LaunchedBy, controller: str, device: str) -> Launch:
    """One side as its users launch it, through `where` (here: the same launcher lines as `compare run`,
    compare/launch/lines.py; Slurm: compare/launch/slurm.py's batch scripts). A script writes no run record:
    its ranks' own word that they finished (the rank tag's last line) stands in."""
    program = Program(*(tuple(word.replace("{run_dir}", str(run_dir)) for word in part)
                        for part in (program.target, program.args)))
    return where.make_program(name, np, program, run_dir, launcher="python" if mode is LaunchedBy.API else "cli",
                              horovod_controller=controller, extra_env=side_env(run_dir, script_dir, device),
                              finished_per_log=every_rank_finished)


def run_launched(launch: Launch, where: Scheduler, timeout: float, *, label: str | None = None) -> tuple[int, str]:
    """Run one side's launch with the rank tag loaded, supervised as every launch is (its whole tree stopped, or
    its Slurm job cancelled, on a timeout); its output goes to launch.log in its run directory, each worker's
    step times to step-times/ beside it. Returns (exit status, output): 0 for every launch that counts as ok,
    which includes one that failed only in a worker's interpreter teardown (docs/fault-tolerance.md, "Gloo's
    abort at exit")."""
    name, run_dir = launch.framework, launch.run_root
    run_dir.mkdir(parents=True, exist_ok=True)
    clear_step_times(run_dir / STEP_TIMES_DIR)
    for stale in (run_dir / WORKER_LINES).glob("lines-*.txt"):
        stale.unlink()
    outcome = where.run(launch, timeout)
    code = 124 if outcome.timed_out else int(outcome.returncode or 0)
    log = launch.log_path.read_text(errors="replace") if launch.log_path.exists() else ""
    output = log.split("\n", 1)[-1]  # the command line a local launch's log starts with, or the job's first line
    copied = worker_lines(run_dir / WORKER_LINES)  # the same lines again where they did reach the driver
    if copied:
        output = output.rstrip("\n") + "\n" + copied
    job = f", {outcome.job}" if isinstance(outcome, SlurmOutcome) and outcome.job else ""
    print(f"  {label or name}: exit {code} in {outcome.duration_s:.1f} s{job} ({_shown(launch.log_path)})",
          flush=True)
    if outcome.teardown_abort:
        print(f"  {name}: {TEARDOWN_NOTE}", flush=True)
    if not log:  # a Slurm job that never started: what its outcome says is all there is
        output = outcome.log_tail
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
    if mode.mode is LaunchedBy.API:
        hint = "; the script starts its own workers, as many as its arguments say" + (
            f" (give {mode.option} {np} after --)" if mode.option else "")
    return f"verify: the {name} side ran at world size {world}, not {np}: nothing compared{hint}"


def prints_a_loss(output: str, loss_regex: str | None, eval_regex: str | None) -> bool:
    """Whether any line of the launch matches a training-loss pattern (the default ones, or --loss-regex)."""
    trains, _ = compile_patterns(loss_regex, eval_regex)
    return any(regex.search(piece.text) for piece in split_pieces(output) for regex in trains)


def tagged_world_size(output: str) -> int | None:
    sizes = {int(match["size"]) for match in TAG.finditer(output)}
    return max(sizes) if sizes else None


def timing_of(run_dir: Path, output: str, throughput_regex: re.Pattern) -> Timing:
    batch = None
    try:
        meta = loads((run_dir / RUN_JSON).read_text())
        batch = meta.get("samples_per_step") if isinstance(meta, dict) else None
    except (OSError, ValueError):
        pass
    return Timing(read_step_times(run_dir / STEP_TIMES_DIR), read_throughput(output, throughput_regex),
                  int(batch) if batch else None)


def timing_fields(timing: Timing) -> dict:
    """What run.json says about the launch's speed (docs/migration.md, "Speed")."""
    fields: dict = {}
    times: StepTimes | None = timing.step_times
    if times is not None:
        fields["step_times"] = {"source": STEP_TIMES_SOURCE, "definition": DEFINITION, "ranks": times.ranks,
                                "optimizer_steps": times.steps, "uneven": times.uneven, "seconds": times.seconds}
    printed: Throughput | None = timing.throughput
    if printed is not None:
        fields["throughput"] = {"source": "rank 0's printed lines", "unit": printed.unit, "values": printed.values}
    return fields


def add_timing(run_dir: Path, timing: Timing) -> None:
    """The launch's step times (and printed throughput) into its run record's run.json."""
    fields = timing_fields(timing)
    path = run_dir / RUN_JSON
    if not fields or not path.exists():
        return
    meta = loads(path.read_text())
    if isinstance(meta, dict):
        write_run_json(run_dir, {**meta, **fields})


def timing_record(run_dir: Path, timing: Timing, *, framework: str, world_size: int | None) -> None:
    """The run record of a script that prints no loss: its step times, each step's loss null."""
    seconds = timing.step_times.seconds if timing.step_times else []
    lines = [{"kind": "step", "step": i + 2, "loss": None, "step_time_s": t} for i, t in enumerate(seconds)]
    meta = {"schema_version": SCHEMA_VERSION, "status": "ok", "error": None, "framework": framework,
            "launcher": None, "backend": None, "world_size": world_size or 1, "data_world_size": world_size or 1,
            "seed": 0, "options": {}, "effective_lr": None, "versions": {}, "host": None, "hosts": [], "env": {},
            "start_time": None, "end_time": None, "duration_s": None, "steps": len(seconds) + 1 if seconds else 0,
            "samples_per_step": None, "parity": "not checked (the script prints no loss)",
            "recorded_by": {"tool": "compare migrate --verify", "from": "the optimizer's step hooks"},
            **timing_fields(timing)}
    write_metrics(run_dir, lines)
    write_run_json(run_dir, meta)


@dataclass
class Side:
    """One side's verify launch, as far as it was read."""

    timing: Timing
    world: int | None = None
    no_loss: bool = False
    problem: str | None = None  # why its output cannot be read (printed only if the other side prints a loss)


def read_side(name: str, output: str, run_dir: Path, original: Path, *, loss_regex: str | None,
              eval_regex: str | None, step_from: str, throughput_regex: re.Pattern, warmup: int) -> Side:
    timing = timing_of(run_dir, output, throughput_regex)
    print(side_line(name, timing, warmup), flush=True)
    record = run_dir / RUN_JSON
    if record.exists():
        add_timing(run_dir, timing)
        return Side(timing, json.loads(record.read_text()).get("world_size"))
    if loss_regex is None and not prints_a_loss(output, None, eval_regex):
        timing_record(run_dir, timing, framework=name, world_size=tagged_world_size(output))
        return Side(timing, tagged_world_size(output), no_loss=True,
                    problem=f"verify: the {name} run wrote no run record and prints no training loss")
    try:
        log = record_from_output(output, run_dir, framework=name, train=loss_regex, evaluation=eval_regex,
                                 step_from=step_from)
    except LossLogError as exc:
        hint = (" (the script imports recorder: does it take its directory from RUN_DIR?)"
                if "import recorder" in original.read_text(errors="replace") else "")
        return Side(timing, problem=f"verify: the {name} run wrote no run record{hint}, and its output cannot be "
                                    f"read: {exc}")
    add_timing(run_dir, timing)
    print(f"  {name}: {len(log.steps)} steps and {len(log.evals)} evaluations read from rank 0's lines "
          f"(steps {log.step_rule})", flush=True)
    for step, first, kept in log.repeated[:3]:
        print(f"  {name}: step {step} was printed again with another loss ({first:.6g}, then {kept:.6g}; "
              "the last is kept)", flush=True)
    return Side(timing, log.world_size)


def launch_round(make: Callable[[str, Path], Launch], where: Scheduler, out: Path, number: int, *,
                 timeout: float, throughput_regex: re.Pattern) -> list[Launched] | None:
    """Speed round `number` (2 onward): each side launched once, the order alternating (round 1, the verify
    launches, ran Horovod first). `make`: a side's launch into a run directory. None when a launch failed
    (said on stderr)."""
    found = []
    for name in ["ddp", "horovod"] if number % 2 == 0 else ["horovod", "ddp"]:
        run_dir = out / "speed" / f"round-{number}" / name
        code, output = run_launched(make(name, run_dir), where, timeout, label=f"round {number}, {name}")
        if code != 0:
            tail = "\n".join(TAG.sub("", line) for line in output.strip().splitlines()[-15:])
            print(f"verify: round {number}'s {name} launch failed (exit {code}):\n{tail}", file=sys.stderr)
            return None
        found.append(Launched(number, name, run_dir, timing_of(run_dir, output, throughput_regex)))
    return found


def verify(original: Path, migrated: Path, script_args: list[str], out: Path, *, np: int, mode: LaunchMode,
           controller: str, timeout: float, loss_regex: str | None, eval_regex: str | None = None,
           step_from: str = "log", speed_rounds: int = 0, warmup: int = 5,
           throughput_regex: str | None = None, import_paths: dict[str, list[Path]] | None = None,
           module: str | None = None, migrated_args: list[str] | None = None, device: str = "cpu",
           where: Scheduler | None = None) -> int:
    """`import_paths`: for a repository, what each side's launch puts on the import path besides the script's
    own directory (as its users start it: compare/migrate/read/launches.py; nothing, unless their command sets
    PYTHONPATH or runs `-m` from a directory); by default the original script's directory, for both. `module`:
    the entry run as `python -m MODULE` (from the directories of import_paths). `device`: cpu hides the GPUs
    from both sides, cuda shows them (each script takes its own, as its users run it); `where`: here (the default)
    or a SlurmScheduler, every launch a Slurm job."""
    where = where or LocalScheduler()
    programs = side_programs(original, migrated, script_args, original_prefix=mode.original_prefix,
                             migrated_args=migrated_args)
    dirs = {name: out / name for name in programs}
    if module is not None:
        programs = {name: dataclasses.replace(program, target=("-m", module)) for name, program in programs.items()}
    script_dirs = {name: (import_paths or {}).get(name, [original.parent]) for name in programs}

    def make(name: str, run_dir: Path) -> Launch:
        return side_launch(name, programs[name], run_dir, script_dirs[name], where, np=np, mode=mode.mode,
                           controller=controller, device=device)

    launched = mode.sides or (("python (horovod.run)", "python (torch.multiprocessing.spawn)")
                              if mode.mode is LaunchedBy.API else ("horovodrun", "torchrun"))
    if isinstance(where, SlurmScheduler):
        launched = tuple(launched_by(where.settings).values())
    print(f"verify: {original.name} under {launched[0]} and {migrated.name} under {launched[1]}, np {np}",
          flush=True)
    print(f"  launch: {mode.why}", flush=True)
    if device == "cuda":
        print("  device: cuda, the GPUs visible to both sides (each script takes its own: Horovod's NCCL "
              "operations, torch's NCCL process group)", flush=True)
    rates = re.compile(throughput_regex) if throughput_regex else THROUGHPUT
    sides: dict[str, Side] = {}
    for name in programs:
        for stale in (RUN_JSON, METRICS, METRICS_PART):
            (dirs[name] / stale).unlink(missing_ok=True)
        code, output = run_launched(make(name, dirs[name]), where, timeout)
        if code != 0:
            tail = "\n".join(TAG.sub("", line) for line in output.strip().splitlines()[-15:])
            print(f"verify: the {name} run failed (exit {code}):\n{tail}", file=sys.stderr)
            return Exit.RUN_FAILED
        side = sides[name] = read_side(name, output, dirs[name], original, loss_regex=loss_regex,
                                       eval_regex=eval_regex, step_from=step_from, throughput_regex=rates,
                                       warmup=warmup)
        if side.problem and not side.no_loss:
            print(side.problem, file=sys.stderr)
            return Exit.RUN_FAILED
        problem = _world_size_problem(name, side.world, np, mode)
        if problem:
            print(problem, file=sys.stderr)
            return Exit.RUN_FAILED
    no_loss = [name for name, side in sides.items() if side.no_loss]
    if no_loss and len(no_loss) < len(sides):  # one side prints a loss and the other none: not the same job
        print(f"{sides[no_loss[0]].problem}, while the other side does: nothing compared", file=sys.stderr)
        return Exit.RUN_FAILED
    if no_loss:
        print("parity: not checked (the script prints no loss)", flush=True)
        status = Exit.OK
    else:
        check = subprocess.run([sys.executable, "-m", "compare", "check", str(dirs["horovod"]), str(dirs["ddp"])],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
                               cwd=PROJECT_ROOT)
        print(check.stdout.rstrip(), flush=True)
        status = check.returncode
    launches = [Launched(1, name, dirs[name], side.timing) for name, side in sides.items()]
    design = speed_design.start_design(speed_rounds, np) if speed_rounds else None
    if design is not None:
        print(f"speed rounds: each side launched up to {speed_rounds} more time{'s' * (speed_rounds != 1)}, the "
              f"order alternating, until the interval is within ±{speed_design.target_for(np):.0%} (compare run's "
              f"target at np {np}); {group_sequential.METHOD}, looks {design['looks']}", flush=True)
        def launch(number: int) -> list[Launched] | None:
            return launch_round(make, where, out, number, timeout=timeout, throughput_regex=rates)

        launches = run_speed_rounds(launch, design, launches, np, warmup)
        if launches is None:
            return Exit.RUN_FAILED
    lines, timed = speed_report(launches, np, warmup, speed_rounds, design)
    print("\n".join(lines), flush=True)
    if no_loss and not timed:
        return Exit.UNDECIDED  # neither parity nor speed could be judged
    return status
