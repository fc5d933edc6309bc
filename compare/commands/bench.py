"""python -m compare bench: each framework against its limits on this machine, and the harness's own cost.

  allreduce      allreduce bandwidth from 4 KiB to 64 MiB (torch gloo, Horovod on Gloo and on MPI) next to
                 the host's memory-copy bandwidth
  sweep          at np 2, in the bare loops: DDP bucket_cap_mb, gradient_as_bucket_view and threads (one
                 process), Horovod cycle time, fusion threshold and MPI idle polling (one launch each); with
                 probes that decompose the step: compute, exposed communication, the rest, and their floors
  overhead       the project's step (Trainer._train_step on hvd_impl's / native_impl's backend) against the
                 bare step (benchmarks/bare_*.py) in one process, and the implementations' launches against
                 the bare loops' launches, at np 1 and 2; the sweep's choice against the defaults through the
                 implementations (kept in OUT/tuned.json only if confirmed); launch to first step for
                 torchrun, horovodrun --mpi and horovodrun --gloo
  costs          what the project's step does beyond the bare step, item by item (one process, no framework)
  e2e            the wall time of the default comparison, `python -m compare run`

Absolute times on a shared machine are noise: every comparison here is a ratio of medians of runs made
side by side in this one invocation, interleaved (A B ... then ... B A). Writes OUT/bench.json,
OUT/bench.md, OUT/tuned.json and, under OUT/runs/, every launch's log and records. docs/benchmarks.md
explains the method and the figures measured on the project's reference machine.

This module launches and writes; the figures come from compare/analysis/bench.py and are put in words by
compare/render/bench.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from compare.analysis.bench import (
    allreduce_table,
    confirmed_settings,
    decomposition,
    merge_launches,
    overhead_rows,
    scaling_rows,
    startup_rows,
    summarize_sweep,
    tuned_file,
    tuned_rows,
    tuned_settings,
)
from compare.analysis.records import RecordError, jsonable, load_run
from compare.analysis.timing import breakdown, measured
from compare.commands.bench_settings import PARTS, QUICK, Settings
from compare.launch.lines import Launch, benchmark_launch, build_launch
from compare.launch.process import Outcome, run_launch
from compare.names import Exit
from compare.render.bench import markdown, terminal_summary
from workload import record_format
from workload.errors import UsageError
from workload.files import write_atomic, write_json_atomic
from workload.options import Options, check_writable, parse_options
from workload.record_format import LAUNCH_LOG, RUN_JSON
from workload.workloads import WORKLOADS, load_workload

BENCH_SCHEMA_VERSION = 1
LAUNCHER_LABELS = {"torchrun": "torchrun", "horovodrun-mpi": "horovodrun --mpi", "horovodrun-gloo": "horovodrun --gloo"}


# --- launching ----------------------------------------------------------------------------------------

@dataclass
class Bench:
    """One invocation: its settings, output directory, and the record of every launch it made."""

    settings: Settings
    out: Path
    launches: list[dict] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)

    def run(self, launch: Launch, watch: Path | None = None, timeout: float | None = None) -> tuple[Outcome, dict]:
        """Run one launch (fresh directory, time limit, process tree killed at the end). `watch`: a file
        whose first appearance marks the first training step (run.json is written just before it)."""
        shutil.rmtree(launch.run_root, ignore_errors=True)
        seen: dict[str, float] = {}

        def poll() -> None:
            if watch is not None and "first" not in seen and watch.exists():
                seen["first"] = time.time()

        launched = time.time()
        outcome = run_launch(launch, timeout or self.settings.timeout, on_poll=poll, poll_s=0.05)
        timing = {"launched_unix": launched, "total_s": outcome.duration_s,
                  "first_step_s": seen["first"] - launched if "first" in seen else None}
        self.launches.append({"label": launch.framework, "world_size": launch.world_size, "ok": outcome.ok,
                              "duration_s": round(outcome.duration_s, 2), "log": str(launch.log_path),
                              "command": launch.shell_line()})
        print(f"bench [{len(self.launches)}] {launch.framework}: {outcome.describe().split(': ', 1)[1]}",
              file=sys.stderr, flush=True)
        if not outcome.ok:
            self.failures.append({"launch": launch.framework, "error": outcome.describe().split(": ", 1)[1],
                                  "log": str(launch.log_path), "log_tail": outcome.log_tail})
        return outcome, timing

    def read_json(self, outcome: Outcome, path: Path) -> dict | None:
        if not outcome.ok:
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            self.failures.append({"launch": outcome.launch.framework, "error": f"{path}: {exc}"})
            return None


def bare_args(settings: Settings, out: Path, *, steps: int, rounds: int, block_warmup: int,
              configs: list[dict], dataset_size: int | None) -> list[str]:
    args = ["--workload", settings.workload, "--batch-size", str(settings.batch_size), "--threads",
            str(settings.threads), "--steps", str(steps), "--rounds", str(rounds), "--block-warmup",
            str(block_warmup), "--configs", json.dumps(configs), "--out", str(out)]
    return args + (["--dataset-size", str(dataset_size)] if dataset_size else [])


def project_options(settings: Settings, out: Path, extra: list[str]) -> Options:
    """The project's options for an overhead launch: one epoch holds every step at np 2, evaluated once."""
    argv = ["--workload", settings.workload, "--batch-size", str(settings.batch_size), "--threads",
            str(settings.threads), "--steps", str(settings.steps), "--epochs", "1000",
            "--dataset-size", str(overhead_dataset_size(settings)), *extra, "--out", str(out)]
    options, _ = parse_options(argv, "python -m compare bench", "")
    return options


def overhead_dataset_size(settings: Settings) -> int:
    return settings.steps * settings.batch_size * max(settings.world_sizes)


# --- the parts ----------------------------------------------------------------------------------------

def run_allreduce(bench: Bench) -> list[dict]:
    settings, rows = bench.settings, []
    for launcher in ("torchrun", "horovodrun-gloo", "horovodrun-mpi"):
        out = bench.out / "runs" / f"allreduce-{launcher}"
        args = ["--framework", "torch" if launcher == "torchrun" else "horovod", "--sizes",
                ",".join(map(str, settings.sizes)), "--min-time", str(settings.allreduce_min_time),
                "--out", str(out / "result.json")]
        outcome, _ = bench.run(benchmark_launch(f"allreduce {LAUNCHER_LABELS[launcher]} np2", "benchmarks.allreduce",
                                             args, 2, launcher, out, settings.threads))
        result = bench.read_json(outcome, out / "result.json")
        if result:
            rows.append({"launcher": LAUNCHER_LABELS[launcher], **result})
    return rows


def gradient_megabytes(workload: str) -> float:
    spec = WORKLOADS[workload]
    model = spec.make_model(spec.make_data(512, None))
    return sum(p.numel() for p in model.parameters()) * 4 / 2**20


PROBES = [{"name": "compute only", "mode": "nocomm"}, {"name": "compute + sync", "mode": "synced"},
          {"name": "allreduce of the gradients", "mode": "allreduce"},
          {"name": "allreduce of 1 number", "mode": "allreduce", "elements": 1},
          {"name": "step, phases timed", "mode": "phases"}]
DEFAULT = {"name": "default", "args": []}


def ddp_sweep(settings: Settings, gradient_mb: float) -> list[dict]:
    """DDP's configurations, all in one process. Bucket sizes follow the gradients: below their total a
    cap splits them into several buckets; above it, every cap is alike."""
    view = ["--gradient-as-bucket-view"]
    configs = [DEFAULT, {"name": "gradient_as_bucket_view", "gradient_as_bucket_view": True, "args": view}]
    if settings.full_sweep:
        for cap in (_cap(gradient_mb / 8), _cap(gradient_mb / 3), 100.0):
            for as_view in (False, True):
                configs.append({"name": f"bucket_cap_mb {cap:g}" + (" + view" if as_view else ""),
                                "bucket_cap_mb": cap, "gradient_as_bucket_view": as_view,
                                "args": ["--bucket-cap-mb", f"{cap:g}", *(view if as_view else [])]})
        more = settings.threads * 2
        configs.append({"name": f"threads {more}", "threads": more, "args": ["--threads", str(more)]})
    return configs + PROBES


def horovod_sweep(settings: Settings) -> list[dict]:
    """Horovod's configurations, one process each (Horovod reads them once, at hvd.init()), in three
    dimensions whose winners combine: cycle time, fusion threshold, and Open MPI's idle polling."""
    if not settings.full_sweep:
        return [DEFAULT]
    return [DEFAULT,
            *[{"name": f"cycle {c:g} ms", "dimension": "cycle", "cycle_time_ms": c,
               "args": ["--cycle-time-ms", f"{c:g}"]} for c in (0.25, 0.5, 2.0)],
            # fusion off; with the gradients under the default 128 MB, any threshold above them is the default
            {"name": "fusion 0 MB", "dimension": "fusion", "fusion_threshold_mb": 0.0,
             "args": ["--fusion-threshold-mb", "0"]},
            # Open MPI busy-polls while it waits; with 2 ranks' compute and Horovod threads on 2 cores, yielding
            # instead leaves the core to the computing thread (a launcher setting, not one of the project's)
            {"name": "OMPI_MCA_mpi_yield_when_idle=1", "dimension": "mpi", "args": [],
             "env": {"OMPI_MCA_mpi_yield_when_idle": "1"}}]


def _cap(mb: float) -> float:
    return float(f"{mb:.2g}")


def run_sweeps(bench: Bench, gradient_mb: float) -> dict[str, dict]:
    settings, results = bench.settings, {}
    sweep_args = {"steps": settings.sweep_steps, "rounds": settings.sweep_rounds, "block_warmup": 2,
                  "dataset_size": None}
    out = bench.out / "runs" / "sweep-ddp"
    args = bare_args(settings, out / "result.json", configs=ddp_sweep(settings, gradient_mb), **sweep_args)
    outcome, _ = bench.run(benchmark_launch("sweep ddp np2", "benchmarks.bare_ddp", args, 2, "torchrun", out,
                                         settings.threads))
    result = bench.read_json(outcome, out / "result.json")
    if result:
        results["ddp"] = summarize_sweep(result)
    launches: list[dict] = []
    configs = horovod_sweep(settings)
    for r in range(settings.horovod_rounds):
        for index, config in enumerate(configs if r % 2 == 0 else configs[::-1]):
            out = bench.out / "runs" / f"sweep-horovod-{r}-{index}"
            with_probes = [config] + (PROBES if config["name"] == "default" else [])
            args = bare_args(settings, out / "result.json", configs=with_probes, **sweep_args)
            launch = benchmark_launch(f"sweep horovod {config['name']} np2", "benchmarks.bare_horovod", args, 2,
                                   "horovodrun-mpi", out, settings.threads)
            outcome, _ = bench.run(replace(launch, env={**launch.env, **config.get("env", {})}))
            result = bench.read_json(outcome, out / "result.json")
            if result:
                launches.append(result)
    if launches:
        results["horovod"] = summarize_sweep(merge_launches(launches))
    return results


def schedule(settings: Settings, tuned: dict[str, dict]) -> list[tuple[str, str, int]]:
    """(variant, framework, world size) of one round. horovod-gloo: for horovodrun --gloo's start-up."""
    items = []
    for n in settings.world_sizes:
        for framework in ("ddp", "horovod"):
            items += [("bare", framework, n), ("project", framework, n)]
            if n == 2 and settings.confirm_tuned and (tuned[framework]["args"] or tuned[framework]["env"]):
                items.append(("tuned", framework, n))
    items.append(("project", "horovod-gloo", max(settings.world_sizes)))
    return items


def run_overhead(bench: Bench, tuned: dict[str, dict]) -> list[dict]:
    settings, entries = bench.settings, []
    items = schedule(settings, tuned)
    for r in range(settings.rounds):
        for variant, framework, n in items if r % 2 == 0 else items[::-1]:
            out = bench.out / "runs" / f"round-{r}" / f"{variant}-{framework}-np{n}"
            entry = {"variant": variant, "framework": framework, "world_size": n, "round": r}
            if variant == "bare":
                entry.update(run_bare(bench, framework, n, out))
            else:
                entry.update(run_project(bench, framework, n, out, tuned[framework] if variant == "tuned" else None))
            entries.append(entry)
    return entries


def run_bare(bench: Bench, framework: str, n: int, out: Path) -> dict:
    """The bare loop through the same launcher, in blocks interleaved with blocks of the project's own step
    (Trainer._train_step on the implementation's backend) in the same process."""
    settings = bench.settings
    launcher = "torchrun" if framework == "ddp" else "horovodrun-mpi"
    module = "benchmarks.bare_ddp" if framework == "ddp" else "benchmarks.bare_horovod"
    configs = [{"name": "default"}, {"name": "project step", "mode": "project"}]
    args = bare_args(settings, out / "result.json", steps=-(-settings.steps // settings.block_rounds),
                     rounds=settings.block_rounds, block_warmup=2, configs=configs,
                     dataset_size=overhead_dataset_size(settings))
    outcome, timing = bench.run(benchmark_launch(f"bare {framework} np{n}", module, args, n, launcher, out,
                                              settings.threads))
    result = bench.read_json(outcome, out / "result.json")
    if not result:
        return {"ok": False, "launcher": LAUNCHER_LABELS[launcher]}
    bare, project = ([t for block in c["blocks"] for t in block] for c in result["configs"])
    pairs = zip(result["configs"][0]["blocks"], result["configs"][1]["blocks"], strict=True)
    return {"ok": True, "launcher": LAUNCHER_LABELS[launcher], "step_times": bare, "in_process_project": project,
            "in_process_per_block": [float(np.median(p) / np.median(b)) for b, p in pairs],
            "first_step_s": result["first_step_unix"] - timing["launched_unix"], "total_s": timing["total_s"],
            "train_s": result["loop_s"], "whole_run_per_step_s": float(np.mean(bare))}


def run_project(bench: Bench, framework: str, n: int, out: Path, tuned: dict | None) -> dict:
    """The implementation through its launcher, at its defaults or with `tuned` options and environment."""
    settings = bench.settings
    controller = "gloo" if framework == "horovod-gloo" else "mpi"
    name = "ddp" if framework == "ddp" else "horovod"
    launcher = "torchrun" if name == "ddp" else f"horovodrun-{controller}"
    extra = tuned or {"args": [], "env": {}}
    options = project_options(settings, out, extra["args"])
    label = f"{'tuned' if tuned else 'project'} {framework} np{n}"
    launch = build_launch(name, n, options, out, horovod_controller=controller)
    launch = replace(launch, framework=label, env={**launch.env, **extra["env"]})
    outcome, timing = bench.run(launch, watch=out / RUN_JSON)
    if not outcome.ok:
        return {"ok": False, "launcher": LAUNCHER_LABELS[launcher]}
    try:
        record = load_run(out)
    except RecordError as exc:
        bench.failures.append({"launch": label, "error": str(exc)})
        return {"ok": False, "launcher": LAUNCHER_LABELS[launcher]}
    duration = float(record.meta.get("duration_s") or 0.0)
    steps = len(record.steps) or 1
    return {"ok": True, "launcher": LAUNCHER_LABELS[launcher], "tuned": extra,
            "step_times": measured(record.step_times, settings.warmup).tolist(),
            "phases": breakdown([record], settings.warmup), "first_step_s": timing["first_step_s"],
            "total_s": timing["total_s"], "train_s": duration, "whole_run_per_step_s": duration / steps}


def run_costs(bench: Bench) -> dict | None:
    settings = bench.settings
    out = bench.out / "runs" / "loop-costs"
    args = ["--workload", settings.workload, "--batch-size", str(settings.batch_size), "--threads",
            str(settings.threads), "--steps", str(settings.cost_steps), "--rounds", str(settings.cost_rounds),
            "--out", str(out / "result.json")]
    outcome, _ = bench.run(benchmark_launch("loop costs np1", "benchmarks.loop_costs", args, 1, "python", out,
                                         settings.threads))
    return bench.read_json(outcome, out / "result.json")


def run_e2e(bench: Bench) -> dict:
    out = bench.out / "runs" / "e2e"
    command = [sys.executable, "-m", "compare", "run", "--out", str(out / "comparison")]
    launch = Launch("compare run (defaults)", 0, (), command, {"PYTHONUNBUFFERED": "1"}, out, out / LAUNCH_LOG)
    outcome, timing = bench.run(launch, timeout=max(bench.settings.timeout, 900.0))
    return {"command": shlex.join(["python", "-m", "compare", "run"]), "wall_s": round(timing["total_s"], 1),
            "exit_status": outcome.returncode, "timed_out": outcome.timed_out, "log": str(launch.log_path)}


# --- the command ------------------------------------------------------------------------------------------

def settings_from(ns: argparse.Namespace) -> Settings:
    unknown = [p for p in ns.skip if p not in PARTS]
    if unknown:
        raise UsageError(f"--skip: unknown part(s) {', '.join(unknown)}; parts are {', '.join(PARTS)}")
    base = QUICK if ns.quick else Settings()
    load_workload(ns.workload)  # a plug-in that cannot be loaded is one line, before any launch
    settings = replace(base, workload=ns.workload, batch_size=ns.batch_size, threads=ns.threads,
                       timeout=ns.timeout, parts=tuple(p for p in base.parts if p not in ns.skip))
    for name, given in (("steps", "overhead_steps"), ("rounds", "rounds"), ("sweep_rounds", "sweep_rounds")):
        if getattr(ns, given, None) is not None:
            settings = replace(settings, **{name: getattr(ns, given)})
    for flag, value in (("--batch-size", settings.batch_size), ("--threads", settings.threads),
                        ("--rounds", settings.rounds), ("--sweep-rounds", settings.sweep_rounds),
                        ("--timeout", settings.timeout)):
        if value <= 0:
            raise UsageError(f"{flag} must be positive, got {value}")
    if settings.steps <= settings.warmup:
        raise UsageError(f"--overhead-steps must exceed the {settings.warmup} warm-up steps, got {settings.steps}")
    return settings


def run_bench(ns: argparse.Namespace) -> int:
    settings = settings_from(ns)
    check_writable(ns.out)
    started = time.monotonic()
    bench = Bench(settings, ns.out)
    argv = sys.argv[1:] if sys.argv and sys.argv[0].endswith(("compare", "__main__.py")) else ["bench"]
    result: dict = {"schema_version": BENCH_SCHEMA_VERSION, "command": shlex.join(["python", "-m", "compare", *argv]),
                    "settings": asdict(settings), "machine": record_format.host_info(),
                    "versions": record_format.versions(), "load_average_at_start": os.getloadavg()}
    gradient_mb = gradient_megabytes(settings.workload)
    result["gradient_mb"] = gradient_mb
    if "allreduce" in settings.parts:
        result["allreduce"] = run_allreduce(bench)
        result["allreduce_table"] = allreduce_table(result["allreduce"])
    sweeps: dict[str, dict] = run_sweeps(bench, gradient_mb) if "sweep" in settings.parts else {}
    result["sweeps"] = sweeps
    tuned = tuned_settings(sweeps)
    entries = run_overhead(bench, tuned) if "overhead" in settings.parts else []
    result["overhead_launches"] = entries
    if "costs" in settings.parts:
        result["loop_costs"] = run_costs(bench)
    result["overhead"] = overhead_rows(entries, settings.world_sizes)
    result["tuned_effect"] = tuned_rows(entries, sweeps, tuned) if sweeps else []
    if sweeps:
        confirmation_ran = settings.confirm_tuned and "overhead" in settings.parts
        kept = confirmed_settings(tuned, result["tuned_effect"], confirmation_ran)
        result["tuned"] = tuned_file(kept, workload=settings.workload, batch_size=settings.batch_size,
                                     threads=settings.threads, confirmed=kept is not tuned)
        write_json_atomic(ns.out / "tuned.json", result["tuned"])
    elif (ns.out / "tuned.json").exists():  # an earlier bench's: it must not pass for this one's
        (ns.out / "tuned.json").replace(ns.out / "tuned.stale.json")
        print(f"bench: no sweep this time; the earlier {ns.out / 'tuned.json'} is now tuned.stale.json",
              file=sys.stderr)
    result["scaling"] = scaling_rows(entries)
    result["startup"] = startup_rows(entries)
    result["decomposition"] = decomposition(sweeps, entries)
    if "e2e" in settings.parts:
        result["e2e"] = run_e2e(bench)
    result.update(wall_s=time.monotonic() - started, load_average_at_end=os.getloadavg(), launches=bench.launches,
                  failures=bench.failures)
    result = jsonable(result)
    write_json_atomic(ns.out / "bench.json", result)
    text = markdown(result)
    write_atomic(ns.out / "bench.md", text)
    print("\n".join(terminal_summary(result)))
    print(f"bench: {ns.out / 'bench.md'}  (also bench.json{', tuned.json' if sweeps else ''})")
    return Exit.RUN_FAILED if bench.failures else Exit.OK
