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
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from compare.analysis.records import RecordError, jsonable, load_run
from compare.analysis.timing import breakdown, measured, speed_ratio
from compare.launch.commands import Launch, benchmark_launch, build_launch
from compare.launch.process import Outcome, run_launch
from compare.names import EXIT_OK, EXIT_RUN_FAILED, FRAMEWORKS
from compare.render.blocks import DASH, Code, Heading, Para, Table, render_markdown
from workload import record_format
from workload.errors import UsageError
from workload.files import write_atomic, write_json_atomic
from workload.options import Options, check_writable, parse_options
from workload.record_format import LAUNCH_LOG, RUN_JSON
from workload.workloads import WORKLOADS, load_workload

BENCH_SCHEMA_VERSION = 1
ROOT = Path(__file__).resolve().parents[2]
PARTS = ("allreduce", "sweep", "overhead", "costs", "e2e")
OVERHEAD_TARGET = 1.03
TUNING_AIM = 1.25
ACCOUNTED_TARGET = 0.95
LAUNCHER_LABELS = {"torchrun": "torchrun", "horovodrun-mpi": "horovodrun --mpi", "horovodrun-gloo": "horovodrun --gloo"}


@dataclass(frozen=True)
class Settings:
    workload: str = "mlp"
    batch_size: int = 32
    threads: int = 1
    world_sizes: tuple[int, ...] = (1, 2)
    steps: int = 200  # optimizer steps per overhead launch
    warmup: int = 10  # steps dropped from the front of each overhead launch
    rounds: int = 2  # interleaved rounds of the overhead launches
    block_rounds: int = 6  # in a bare overhead launch: bare and project blocks, interleaved
    sweep_steps: int = 40  # timed steps per block in the in-process sweeps
    sweep_rounds: int = 4
    horovod_rounds: int = 2  # interleaved rounds of Horovod's sweep launches (one per configuration)
    sizes: tuple[int, ...] = tuple(4096 * 4**i for i in range(8))  # 4 KiB ... 64 MiB
    allreduce_min_time: float = 0.25
    cost_steps: int = 50
    cost_rounds: int = 16
    full_sweep: bool = True  # False: the defaults and the probes only
    confirm_tuned: bool = True  # run the tuned configurations through the real implementations
    timeout: float = 300.0
    parts: tuple[str, ...] = PARTS


QUICK = Settings(world_sizes=(2,), steps=30, warmup=5, rounds=1, block_rounds=2, sweep_steps=8, sweep_rounds=2,
                 horovod_rounds=1, sizes=(4096, 262144), allreduce_min_time=0.05, cost_steps=10, cost_rounds=2,
                 full_sweep=False, confirm_tuned=False, parts=("allreduce", "sweep", "overhead", "costs"))


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


# --- analysis (pure: from the parts' results) -----------------------------------------------------------

def _median(values: Iterable[float]) -> float | None:
    array = np.asarray(list(values), dtype=np.float64)
    return float(np.median(array)) if array.size else None


def merge_launches(results: list[dict]) -> dict:
    """Several launches' results as one: each configuration's blocks pooled, and the median of each launch
    kept (in launch order, so that the i-th launches of two configurations belong to the same round)."""
    configs: dict[str, dict] = {}
    for result in results:
        for config in result["configs"]:
            entry = configs.setdefault(config["name"], {**config, "blocks": [], "phase_blocks": [],
                                                        "launch_medians": []})
            entry["blocks"] += config["blocks"]
            entry["phase_blocks"] += config.get("phase_blocks", [])
            entry["launch_medians"].append(_median(t for block in config["blocks"] for t in block))
    return {**results[0], "configs": list(configs.values()), "launches": len(results)}


def summarize_sweep(result: dict) -> dict:
    """Per configuration: its median step and its throughput against the default (median default step /
    median step, > 1 is faster) with a bootstrap 95% interval, and the same ratio round by round (by
    block within one process, by launch across processes)."""
    configs = result["configs"]
    times = {c["name"]: np.concatenate([np.asarray(b) for b in c["blocks"]]) for c in configs}
    default = next(c for c in configs if c["name"] == "default")
    rows = []
    for config in configs:
        row = {k: v for k, v in config.items() if k not in ("blocks", "phase_blocks", "launch_medians")}
        row.update(median_s=_median(times[config["name"]]), mean_s=float(np.mean(times[config["name"]])),
                   n=int(times[config["name"]].size))
        if config.get("phase_blocks"):
            steps = np.asarray([step for block in config["phase_blocks"] for step in block])
            row["phase_means_s"] = dict(zip(result["phase_names"], np.mean(steps, axis=0).tolist(), strict=True))
        if config.get("mode", "train") == "train":
            ratio = speed_ratio(times["default"], times[config["name"]])
            rounds = zip(_round_medians(default), _round_medians(config), strict=False)
            row.update(gain=ratio["step_time_ratio"], gain_ci=[ratio["ci_low"], ratio["ci_high"]],
                       per_round=[d / c for d, c in rounds if d and c])
            if config["name"] == "default":
                row.update(gain=1.0, gain_ci=None, per_round=[])
        if config.get("mode") == "project":  # the project's step over the bare step, in the same process
            ratio = speed_ratio(times[config["name"]], times["default"])
            rounds = zip(_round_medians(config), _round_medians(default), strict=False)
            row.update(over_default=ratio["step_time_ratio"], over_default_ci=[ratio["ci_low"], ratio["ci_high"]],
                       per_round=[p / d for p, d in rounds if p and d])
        rows.append(row)
    return {"world_size": result["world_size"], "controller": result["controller"],
            "gradient_numel": result["gradient_numel"], "launches": result.get("launches", 1),
            "configs": rows, "chosen": [r["name"] for r in chosen_configs(rows)]}


def _round_medians(config: dict) -> list[float | None]:
    return config.get("launch_medians") or [_median(block) for block in config["blocks"]]


def chosen_configs(rows: list[dict]) -> list[dict]:
    """In each dimension, the fastest configuration that is clearly faster than the default: its 95%
    interval above 1 and faster in every round. None at all: the defaults are as fast as anything tried."""
    clear = [r for r in rows if r["name"] != "default" and r.get("mode", "train") == "train" and r.get("gain_ci")
             and (r["gain_ci"][0] or 0) > 1.0 and r.get("per_round") and min(r["per_round"]) > 1.0]
    best: dict[str, dict] = {}
    for row in clear:
        dimension = row.get("dimension", "all")
        if dimension not in best or row["gain"] > best[dimension]["gain"]:
            best[dimension] = row
    return list(best.values())


def tuned_settings(sweeps: dict[str, dict]) -> dict[str, dict]:
    """Each framework's chosen options (its implementation's argv) and launch environment."""
    tuned: dict[str, dict] = {"horovod": {"args": [], "env": {}}, "ddp": {"args": [], "env": {}}}
    for framework, sweep in sweeps.items():
        for row in sweep["configs"]:
            if row["name"] in sweep["chosen"]:
                tuned[framework]["args"] += row.get("args", [])
                tuned[framework]["env"].update(row.get("env", {}))
    return tuned


def confirmed_settings(tuned: dict[str, dict], effect: list[dict], settings: Settings) -> dict[str, dict]:
    """What the real implementations confirmed (faster than their defaults in every round, 95% interval
    above 1); the rest goes back to the defaults. Without confirmation runs (--quick), the sweep's choice."""
    if not settings.confirm_tuned or "overhead" not in settings.parts:
        return tuned
    kept = {framework: {"args": [], "env": {}} for framework in tuned}
    for row in effect:
        if row.get("confirmed") and row.get("kind") != "controller":
            kept[row["framework"]] = tuned[row["framework"]]
    return kept


def tuned_file(tuned: dict[str, dict], settings: Settings, confirmed: bool) -> dict:
    """tuned.json: {"horovod": argv, "ddp": argv, "env": {"horovod": {...}, "ddp": {...}}, "tuned_for": ...}."""
    return {"horovod": tuned["horovod"]["args"], "ddp": tuned["ddp"]["args"],
            "env": {name: tuned[name]["env"] for name in FRAMEWORKS},
            "tuned_for": {"workload": settings.workload, "batch_size": settings.batch_size, "threads": settings.threads,
                          "world_size": 2, "horovod_controller": "mpi", "source": "python -m compare bench",
                          "confirmed_by_the_implementations": confirmed}}


def decomposition(sweeps: dict[str, dict], overhead: list[dict]) -> list[dict]:
    """The np 2 step of each framework's bare loop at default settings, measured inside the step by a probe
    interleaved with it in the same process: data, compute (forward and backward until the last gradients
    are handed to communication), exposed communication (the wait from then until the averaged gradients
    are there), optimizer. Means, because means add up: accounted = the phases summed over the mean of the
    same steps as measured around the whole step (the slowest rank's), either way round; the probe's steps
    against the default blocks' (medians) says whether the probed step is the default step, since blocks
    of the same step vary by more than the probe costs. Then each part against its floor (medians): compute
    against the same step with no communication (at np 2, and the bare step at np 1); the exposed wait
    against sync (meeting the other rank once per step, no bytes) plus wire (the gradients' bytes: an
    allreduce of them minus one of one number)."""
    rows = []
    for framework in ("ddp", "horovod"):
        sweep = sweeps.get(framework)
        if not sweep:
            continue
        by_name = {r["name"]: r for r in sweep["configs"]}
        step, alone = by_name["default"]["mean_s"], by_name["compute only"]["median_s"]
        phases = by_name["step, phases timed"]["phase_means_s"]
        sync = by_name["compute + sync"]["median_s"] - alone
        wire = max(by_name["allreduce of the gradients"]["median_s"] - by_name["allreduce of 1 number"]["median_s"],
                   0.0)
        np1 = _median(t for e in overhead if (e["variant"], e["framework"], e["world_size"]) == ("bare", framework, 1)
                      and e["ok"] for t in e["step_times"])
        total = sum(phases.values())
        probe = by_name["step, phases timed"]["mean_s"]
        rows.append({"framework": framework, "controller": sweep["controller"], "step_mean_s": step,
                     "step_median_s": by_name["default"]["median_s"], **phases,
                     "rest_s": phases["data_s"] + phases["optimizer_s"], "unaccounted_s": probe - total,
                     "accounted": min(total, probe) / max(total, probe),
                     "accounted_vs_default_blocks": min(total, step) / max(total, step),
                     "probe_over_default": by_name["step, phases timed"]["median_s"] / by_name["default"]["median_s"],
                     "probe_step_mean_s": probe, "no_comm_step_s": alone,
                     "np1_step_s": np1, "sync_s": sync, "wire_s": wire,
                     "floors_explain": (alone + sync + wire) / by_name["default"]["median_s"],
                     # the most a bucket or fusion setting could win: all the bytes hidden behind compute
                     "overlap_bound": step / (step - min(wire, phases["compute_s"]))})
    return rows


def _pooled(entries: list[dict], variant: str, framework: str, n: int) -> list[float]:
    return [t for e in entries if (e["variant"], e["framework"], e["world_size"]) == (variant, framework, n)
            and e["ok"] for t in e["step_times"]]


def _per_round(entries: list[dict], key: str, a: tuple[str, str, int], b: tuple[str, str, int]) -> list[float]:
    """a/b of one quantity within each round (runs made minutes apart are not side by side)."""
    ratios = []
    for r in sorted({e["round"] for e in entries}):
        found = {(e["variant"], e["framework"], e["world_size"]): e for e in entries if e["round"] == r and e["ok"]}
        if a in found and b in found:
            va, vb = found[a][key], found[b][key]
            va = _median(va) if isinstance(va, list) else va
            vb = _median(vb) if isinstance(vb, list) else vb
            if va and vb:
                ratios.append(va / vb)
    return ratios


def overhead_rows(entries: list[dict], world_sizes: Iterable[int]) -> list[dict]:
    """The project's step over the bare step, two ways. In one process: Trainer._train_step on the
    implementation's backend against the bare step, in interleaved blocks of the bare launches; this is the
    figure held to the target, since launches of one and the same program differ by more than the harness
    costs. Through the launchers: the implementations' own launches against the bare launches,
    interleaved, and whole runs (run.json duration per step, metric gathers and evaluation included)."""
    rows = []
    for framework in ("ddp", "horovod"):
        for n in world_sizes:
            mine = [e for e in entries if e["ok"] and (e["variant"], e["framework"], e["world_size"]) ==
                    ("bare", framework, n)]
            bare, project = _pooled(entries, "bare", framework, n), _pooled(entries, "project", framework, n)
            if not mine or not project:
                continue
            inner = speed_ratio(np.asarray([t for e in mine for t in e["in_process_project"]]), np.asarray(bare))
            launches = speed_ratio(np.asarray(project), np.asarray(bare))
            key_p, key_b = ("project", framework, n), ("bare", framework, n)
            rows.append({"framework": framework, "world_size": n, "bare_median_s": inner["median_b"],
                         "project_median_s": inner["median_a"], "ratio": inner["step_time_ratio"],
                         "ratio_ci": [inner["ci_low"], inner["ci_high"]],
                         "per_block": [r for e in mine for r in e["in_process_per_block"]],
                         "meets_target": inner["step_time_ratio"] <= OVERHEAD_TARGET,
                         "launch_ratio": launches["step_time_ratio"], "launch_ratio_ci": [launches["ci_low"],
                                                                                          launches["ci_high"]],
                         "launch_per_round": _per_round(entries, "step_times", key_p, key_b),
                         "whole_run_ratio": _median(_per_round(entries, "whole_run_per_step_s", key_p, key_b))})
    return rows


def tuned_rows(entries: list[dict], sweeps: dict[str, dict], tuned: dict[str, dict], n: int = 2) -> list[dict]:
    """Throughput of the tuned configuration against the default, both through the real implementations."""
    rows = []
    for framework in ("ddp", "horovod"):
        default, best = _pooled(entries, "project", framework, n), _pooled(entries, "tuned", framework, n)
        settings = tuned[framework]
        row = {"framework": framework, "world_size": n,
               "options": [*settings["args"], *(f"{k}={v}" for k, v in settings["env"].items())]}
        if default and best:
            ratio = speed_ratio(np.asarray(default), np.asarray(best))
            rounds = _per_round(entries, "step_times", ("project", framework, n), ("tuned", framework, n))
            row.update(default_median_s=ratio["median_a"], tuned_median_s=ratio["median_b"],
                       gain=ratio["step_time_ratio"], gain_ci=[ratio["ci_low"], ratio["ci_high"]], per_round=rounds,
                       confirmed=bool(rounds) and (ratio["ci_low"] or 0) > 1.0 and min(rounds) > 1.0)
        # The sweep's own figures for the chosen configurations (bare loops).
        sweep = sweeps.get(framework, {"configs": [], "chosen": []})
        row["sweep_gains"] = {r["name"]: r["gain"] for r in sweep["configs"] if r["name"] in sweep["chosen"]}
        rows.append(row)
    # Not a knob of the implementations but of the launch: Horovod's controller, both at default settings.
    mpi, gloo = _pooled(entries, "project", "horovod", n), _pooled(entries, "project", "horovod-gloo", n)
    if mpi and gloo:
        ratio = speed_ratio(np.asarray(mpi), np.asarray(gloo))
        rows.append({"framework": "horovod", "kind": "controller", "options": ["horovodrun --gloo instead of --mpi"],
                     "world_size": n,
                     "default_median_s": ratio["median_a"], "tuned_median_s": ratio["median_b"],
                     "gain": ratio["step_time_ratio"], "gain_ci": [ratio["ci_low"], ratio["ci_high"]],
                     "per_round": _per_round(entries, "step_times", ("project", "horovod", n),
                                             ("project", "horovod-gloo", n)), "sweep_gains": {}})
    return rows


def scaling_rows(entries: list[dict]) -> list[dict]:
    """Scaling efficiency at np 2 = step time at np 1 / step time at np 2 (the per-worker batch is fixed)."""
    rows = []
    for framework in ("ddp", "horovod"):
        for variant in ("bare", "project", "tuned"):
            one = _median(_pooled(entries, "project" if variant == "tuned" else variant, framework, 1))
            two = _median(_pooled(entries, variant, framework, 2))
            if one and two:
                rows.append({"framework": framework, "variant": variant, "np1_median_s": one, "np2_median_s": two,
                             "efficiency": one / two})
    return rows


def startup_rows(entries: list[dict]) -> list[dict]:
    """Launch to first step, training, and the rest (teardown), medians per launcher and world size."""
    rows = []
    keys = sorted({(e["launcher"], e["world_size"]) for e in entries if e["ok"]})
    for launcher, n in keys:
        mine = [e for e in entries if e["ok"] and (e["launcher"], e["world_size"]) == (launcher, n)]
        project = [e for e in mine if e["variant"] != "bare" and e.get("first_step_s") is not None]
        bare = [e for e in mine if e["variant"] == "bare"]
        if not project:
            continue
        rows.append({"launcher": launcher, "world_size": n, "n": len(project),
                     "first_step_s": _median(e["first_step_s"] for e in project),
                     "train_s": _median(e["train_s"] for e in project),
                     "after_s": _median(e["total_s"] - e["first_step_s"] - e["train_s"] for e in project),
                     "total_s": _median(e["total_s"] for e in project),
                     "bare_first_step_s": _median(e["first_step_s"] for e in bare)})
    return rows


def allreduce_table(rows: list[dict]) -> list[dict]:
    """One row per size: each launcher's bus and algorithm bandwidth, and the best bus bandwidth as a
    fraction of the memory copy measured in the same processes."""
    copy = max((max(r["memory_copy_gbps"].get("numpy_1_thread", 0), r["memory_copy_gbps"].get("torch_copy", 0))
                for r in rows if r.get("memory_copy_gbps")), default=None)
    table = []
    for size in sorted({s["bytes"] for r in rows for s in r["sizes"]}):
        line: dict = {"bytes": size}
        for r in rows:
            match = next((s for s in r["sizes"] if s["bytes"] == size), None)
            if match:
                line[r["launcher"]] = {"busbw_gbps": match["busbw_gbps"], "algbw_gbps": match["algbw_gbps"],
                                       "median_s": match["median_s"]}
        best = max((v["busbw_gbps"] for k, v in line.items() if k != "bytes"), default=None)
        line["best_bus_over_copy"] = best / copy if best and copy else None
        table.append(line)
    return table


# --- the report ------------------------------------------------------------------------------------------

def _ms(seconds: float | None) -> str:
    return DASH if seconds is None else f"{seconds * 1e3:.3f}"


def _x(value: float | None, spec: str = ".3f") -> str:
    return DASH if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _ci(pair: list | None) -> str:
    if not pair or pair[0] is None:
        return DASH
    return f"{pair[0]:.3f}-{pair[1]:.3f}"


def _loads(loads: list[float]) -> str:
    return "/".join(f"{x:.1f}" for x in loads)


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 2**10} KiB"


def markdown(result: dict) -> str:
    s = result["settings"]
    blocks: list = [
        Heading(1, "Benchmarks: each framework against its limits, and the harness's cost"),
        Para(f"Command: `{result['command']}`. Workload `{s['workload']}`, batch {s['batch_size']} per worker, "
             f"{s['threads']} torch thread(s) per worker, {result['machine'].get('cpu_count')} CPU(s) "
             f"({result['machine'].get('cpu_model')}), load average (1, 5, 15 min) "
             f"{_loads(result['load_average_at_start'])} at the start, {_loads(result['load_average_at_end'])} at the "
             f"end. Total wall time {result['wall_s']:.0f} s. Every ratio "
             f"compares runs made side by side in this invocation (interleaved, medians); absolute times on a "
             f"shared machine are noise."),
    ]
    if result.get("overhead"):
        blocks += [Heading(2, f"Harness overhead (target: project/bare <= {OVERHEAD_TARGET})"),
                   Para("In one process (the figure held to the target): median step of the project's own step, "
                        "Trainer._train_step on hvd_impl's / native_impl's backend, over the median bare step "
                        "(benchmarks/bare_*.py: same model, data, batch and threads), in interleaved blocks of "
                        f"the same process under the framework's launcher (horovodrun --mpi, torchrun), "
                        f"{s['block_rounds']} blocks each per launch, {s['rounds']} launch(es). Through the "
                        "launchers: the implementations' own launches (median step_time_s, the first "
                        f"{s['warmup']} steps dropped) over the bare loops' launches, interleaved; separate "
                        "processes, so this carries the launch-to-launch spread of a shared machine. Whole run: "
                        "run.json duration_s per step (metric gathers between steps and one evaluation "
                        "included) over the bare loop's mean step."),
                   Table(["framework", "np", "bare ms", "project ms", "project/bare", "95% CI", "blocks (min-max)",
                          "meets", "launches: project/bare", "per round", "whole run"],
                         [[r["framework"], str(r["world_size"]), _ms(r["bare_median_s"]), _ms(r["project_median_s"]),
                           _x(r["ratio"]), _ci(r["ratio_ci"]),
                           f"{min(r['per_block']):.2f}-{max(r['per_block']):.2f}" if r["per_block"] else DASH,
                           "yes" if r["meets_target"] else "no", _x(r["launch_ratio"]),
                           ", ".join(f"{v:.3f}" for v in r["launch_per_round"]), _x(r["whole_run_ratio"])]
                          for r in result["overhead"]])]
    if result.get("loop_costs"):
        costs = result["loop_costs"]
        blocks += [Heading(3, "What the project's step costs beyond the bare step (one process, no framework)"),
                   Table(["item", "median step ms", "cost us/step", "of the bare step"],
                         [[r["item"], _ms(r["median_s"]), f"{r['cost_s'] * 1e6:.1f}",
                           f"{r['cost_fraction'] * 100:+.1f}%"] for r in costs["items"]])]
    if result.get("allreduce"):
        launchers = [r["launcher"] for r in result["allreduce"]]
        copies = ", ".join(f"{r['launcher']}: {r['memory_copy_gbps'].get('numpy_1_thread', 0):.1f}"
                           for r in result["allreduce"] if r.get("memory_copy_gbps"))
        blocks += [Heading(2, "Allreduce bandwidth at np 2 (GB/s: bus / algorithm)"),
                   Para("bus = algorithm x 2(n-1)/n (nccl-tests); at n = 2 they are equal. Memory copy, one "
                        f"thread, read + write bytes, measured in each process before its sweep (GB/s): {copies}."),
                   Table(["size", *launchers, "best bus / memory copy"],
                         [[_size(line["bytes"]),
                           *[f"{line[k]['busbw_gbps']:.3f} / {line[k]['algbw_gbps']:.3f}" if k in line else DASH
                             for k in launchers], _x(line["best_bus_over_copy"])]
                          for line in result["allreduce_table"]])]
    if result.get("decomposition"):
        blocks += [Heading(2, "The np 2 step, decomposed (bare loops, default settings)"),
                   Para("Measured inside the step by a probe interleaved with it in the same process (means, "
                        "which add up): compute = zero_grad, forward and backward until the last gradients are "
                        "handed to communication; exposed = the wait from then until the averaged gradients are "
                        "there (DDP: the rest of backward(); Horovod: optimizer.synchronize()); rest = data + "
                        "optimizer step. accounted = the phases summed over the mean of the same steps timed "
                        "whole (the slowest rank's), either way round; probed/default = the probe's median step "
                        "over the default blocks' median (is the probed step the default step?). Floors "
                        "(medians of probes in the same process): the same step with no "
                        "communication; sync = (that step + an allreduce of one number) - that step; wire = "
                        "allreduce of the gradients - allreduce of one number. overlap bound = step / (step - "
                        "min(wire, compute)): the most a bucket or fusion setting could win by hiding all the "
                        "bytes behind compute. floors explain = (no-comm step + sync + wire) / median step: how "
                        "much of the step these independent probes predict."),
                   Table(["framework", "probed step ms (mean)", "compute ms", "exposed comm ms", "rest ms",
                          "accounted", "probed/default", "default step ms (median)", "no-comm step ms",
                          "np 1 step ms", "sync floor ms", "wire floor ms",
                          "floors explain", "overlap bound"],
                         [[f"{r['framework']} ({r['controller']})", _ms(r["probe_step_mean_s"]), _ms(r["compute_s"]),
                           _ms(r["exposed_s"]), _ms(r["rest_s"]), _x(r["accounted"]), _x(r["probe_over_default"]),
                           _ms(r["step_median_s"]),
                           _ms(r["no_comm_step_s"]), _ms(r["np1_step_s"]), _ms(r["sync_s"]), _ms(r["wire_s"]),
                           _x(r["floors_explain"]), _x(r["overlap_bound"])] for r in result["decomposition"]])]
    if result.get("sweeps"):
        blocks.append(Heading(2, "Tuning sweep at np 2 (bare loops)"))
        for name, sweep in result["sweeps"].items():
            how = ("all configurations in one process, interleaved in blocks" if sweep["launches"] == 1 else
                   f"one launch per configuration (Horovod reads its knobs once), {sweep['launches']} launches "
                   "interleaved in rounds; per round = each round's launch against that round's default")
            blocks += [Para(f"**{name}** ({sweep['controller']}; {how}): {sweep_choice(sweep['chosen'])}."),
                       Table(["configuration", "median step ms", "throughput vs default", "95% CI", "per round", "n"],
                             [[r["name"], _ms(r["median_s"]), _x(r.get("gain")), _ci(r.get("gain_ci")),
                               ", ".join(f"{v:.2f}" for v in r.get("per_round", [])), str(r["n"])]
                              for r in sweep["configs"]])]
    if result.get("tuned_effect"):
        blocks += [Heading(2, f"Tuned against default, through the real implementations (aim: >= {TUNING_AIM}x)"),
                   Para("Each framework's sweep choice, run through its implementation and launcher against "
                        "the defaults (interleaved launches at np 2). tuned.json keeps a choice only when it is "
                        "confirmed here: faster in every round and its 95% interval above 1."),
                   Table(["framework", "tuned options", "default ms", "tuned ms", "throughput tuned/default",
                          "95% CI", "per round", "confirmed"],
                         [[r["framework"], " ".join(r["options"]) or "(defaults)", _ms(r.get("default_median_s")),
                           _ms(r.get("tuned_median_s")), _x(r.get("gain")), _ci(r.get("gain_ci")),
                           ", ".join(f"{v:.3f}" for v in r.get("per_round", [])),
                           {True: "yes", False: "no"}.get(r.get("confirmed"), DASH)] for r in result["tuned_effect"]])]
    if result.get("scaling"):
        blocks += [Heading(2, "Scaling efficiency at np 2 (step at np 1 / step at np 2)"),
                   Table(["framework", "loop", "np 1 ms", "np 2 ms", "efficiency"],
                         [[r["framework"], r["variant"], _ms(r["np1_median_s"]), _ms(r["np2_median_s"]),
                           _x(r["efficiency"], ".2f")] for r in result["scaling"]])]
    if result.get("startup"):
        blocks += [Heading(2, "Start-up: launch to first step (the project's launches; medians)"),
                   Table(["launcher", "np", "launch to first step s", "training s", "after training s", "total s",
                          "bare loop: launch to first step s", "n"],
                         [[r["launcher"], str(r["world_size"]), _x(r["first_step_s"], ".2f"), _x(r["train_s"], ".2f"),
                           _x(r["after_s"], ".2f"), _x(r["total_s"], ".2f"), _x(r["bare_first_step_s"], ".2f"),
                           str(r["n"])] for r in result["startup"]])]
    if result.get("e2e"):
        e = result["e2e"]
        blocks += [Heading(2, "End to end"),
                   Para(f"`{e['command']}` (defaults: np 1 and 2, both frameworks, 3 seeds, reference): "
                        f"{e['wall_s']:.0f} s wall, exit status {e['exit_status']}.")]
    if result.get("tuned"):
        blocks += [Heading(2, "tuned.json"), Code(json.dumps(result["tuned"], indent=2))]
    if result["failures"]:
        blocks += [Heading(2, "Failures"), Table(["launch", "error", "log"],
                                                 [[f["launch"], f["error"], f.get("log", "")]
                                                  for f in result["failures"]])]
    return render_markdown(blocks)


# --- the command ------------------------------------------------------------------------------------------

def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    bench = commands.add_parser(
        "bench", help="measure each framework against its limits, tune both, and the harness's own cost",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter, description=__doc__.split("\n\n")[0])
    bench.add_argument("--out", type=Path, default=Path("results/bench"), help="where bench.json, bench.md, "
                       "tuned.json and the launches' records go")
    bench.add_argument("--quick", action="store_true",
                       help="np 2 only, defaults and probes only, small sizes, one round, no tuned runs and no "
                            "end-to-end run (a smoke test: about a minute)")
    bench.add_argument("--workload", default="mlp",
                       metavar="{" + ",".join(WORKLOADS) + ",MODULE:FUNCTION,FILE.py:FUNCTION}",
                       help="the workload to measure: a built-in, or your own (docs/own-job.md)")
    bench.add_argument("--batch-size", type=int, default=32, help="samples per worker per step")
    bench.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    # No argparse default for these: --quick has its own (shown in brackets).
    bench.add_argument("--steps", type=int, default=argparse.SUPPRESS,
                       help=f"optimizer steps per overhead launch [{Settings.steps}; --quick {QUICK.steps}]")
    bench.add_argument("--rounds", type=int, default=argparse.SUPPRESS,
                       help=f"interleaved rounds of overhead launches [{Settings.rounds}; --quick {QUICK.rounds}]")
    bench.add_argument("--sweep-rounds", type=int, default=argparse.SUPPRESS,
                       help=f"blocks per sweep configuration [{Settings.sweep_rounds}; --quick {QUICK.sweep_rounds}]")
    bench.add_argument("--skip", type=lambda text: tuple(p.strip() for p in text.split(",") if p.strip()),
                       default=(), help=f"parts to leave out, from: {', '.join(PARTS)}")
    bench.add_argument("--timeout", type=float, default=300, help="seconds allowed for each launch")
    bench.set_defaults(func=run_bench)
    return bench


def settings_from(ns: argparse.Namespace) -> Settings:
    unknown = [p for p in ns.skip if p not in PARTS]
    if unknown:
        raise UsageError(f"--skip: unknown part(s) {', '.join(unknown)}; parts are {', '.join(PARTS)}")
    base = QUICK if ns.quick else Settings()
    load_workload(ns.workload)  # a plug-in that cannot be loaded is one line, before any launch
    settings = replace(base, workload=ns.workload, batch_size=ns.batch_size, threads=ns.threads,
                       timeout=ns.timeout, parts=tuple(p for p in base.parts if p not in ns.skip))
    for name in ("steps", "rounds", "sweep_rounds"):
        if getattr(ns, name, None) is not None:
            settings = replace(settings, **{name: getattr(ns, name)})
    for flag, value in (("--batch-size", settings.batch_size), ("--threads", settings.threads),
                        ("--rounds", settings.rounds), ("--sweep-rounds", settings.sweep_rounds),
                        ("--timeout", settings.timeout)):
        if value <= 0:
            raise UsageError(f"{flag} must be positive, got {value}")
    if settings.steps <= settings.warmup:
        raise UsageError(f"--steps must exceed the {settings.warmup} warm-up steps, got {settings.steps}")
    return settings


CLEARLY_FASTER = "95% interval above 1 and faster in every round"


def sweep_choice(chosen: list[str]) -> str:
    if not chosen:
        return f"the defaults stay: no configuration was clearly faster than them ({CLEARLY_FASTER})"
    names = ", ".join(f"`{c}`" for c in chosen)
    return f"chosen {names}, clearly faster than the defaults ({CLEARLY_FASTER}; the best of each dimension)"


def terminal_summary(result: dict) -> list[str]:
    """A few lines for the terminal; the whole Markdown goes to bench.md."""
    lines = []
    for row in result.get("overhead") or []:
        lines.append(f"harness overhead {row['framework']} np {row['world_size']}: project/bare step "
                     f"{row['ratio']:.2f} (95% CI {row['ratio_ci'][0]:.2f}-{row['ratio_ci'][1]:.2f})")
    for name, sweep in (result.get("sweeps") or {}).items():
        lines.append(f"sweep {name}: {', '.join(sweep['chosen']) or 'the defaults stay'}")
    for row in result.get("tuned_effect") or []:
        verdict = {True: "confirmed", False: "not confirmed"}.get(row.get("confirmed"), "")
        gain = row.get("gain")
        lines.append(f"tuned {row['framework']}: {' '.join(row['options']) or '(defaults)'}"
                     + (f", throughput x{gain:.3f}" if gain is not None else "") + (f", {verdict}" if verdict else ""))
    if result.get("e2e"):
        lines.append(f"end to end: {result['e2e']['wall_s']:.0f} s, exit status {result['e2e']['exit_status']}")
    if result.get("failures"):
        lines.append(f"{len(result['failures'])} launch(es) failed: see the Failures section")
    lines.append(f"wall time: {result['wall_s']:.0f} s")
    return lines


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
        kept = confirmed_settings(tuned, result["tuned_effect"], settings)
        result["tuned"] = tuned_file(kept, settings, confirmed=kept is not tuned)
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
    return EXIT_RUN_FAILED if bench.failures else EXIT_OK
