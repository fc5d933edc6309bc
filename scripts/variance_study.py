#!/usr/bin/env python
"""Where the launch-to-launch noise of a speed verdict comes from, and what cuts it (docs/benchmarks.md).

Every set-up ("variant") is launched in the same interleaved rounds, so that whatever the machine does over
the minutes reaches all of them alike: in each round, the variants in an order that rotates, each one
Horovod then DDP (reversed every other round) at every world size, through compare's own launch code
(LocalScheduler, the launcher lines of `compare run`). Then, per variant and world size:

- within a launch: the standard error of its median step time (log scale), from its own steps;
- across launches: the spread of the launches' medians (log scale), per framework;
- the Horovod/DDP ratio's 95% interval as `compare run` computes it (rounds' log ratios, t interval), and the
  half-width it would have over the default 4 rounds.

    .venv/bin/python scripts/variance_study.py --rounds 6 --out results/variance
    .venv/bin/python scripts/variance_study.py --windows 0.5 2 5 --rounds 6 --out results/windows

--windows: instead of the set-ups below, one seed timed for about that many seconds of steady state per
launch, as `compare run --timed-seconds` plans its speed launches (the steps from a probe launch's step
time, the same steps for both sides; compare/analysis/timing.py window_steps).

Writes OUT/variance.json and OUT/variance.md (also printed); the launches stay in OUT/runs/.
Exit status: 0 done, 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from compare.analysis.records import find_runs  # noqa: E402
from compare.analysis.timing import launch_median, settled_warmup, window_steps  # noqa: E402
from compare.launch.scheduling import LocalScheduler  # noqa: E402
from workload.files import write_atomic, write_json_atomic  # noqa: E402
from workload.options import Options  # noqa: E402
from workload.step_plan import steps_per_epoch  # noqa: E402
from workload.workloads import WORKLOADS  # noqa: E402

# name -> what differs from the default job of `compare run`: options, environment, a prefix to the launch line
# (setarch -R: no address-space randomisation, inherited by every process of the launch), np 1 only.
Variant = tuple[dict, dict, list[str], bool]
FIXED_LAYOUT: tuple[dict, list[str]] = ({"PYTHONHASHSEED": "0"}, ["setarch", platform.machine(), "-R"])
VARIANTS: dict[str, Variant] = {
    "default": ({}, {}, [], False),
    "pinned": ({"pin_cores": True}, {}, [], False),
    "4x steps": ({"epochs": 4}, {}, [], False),
    "pinned, 4x steps": ({"pin_cores": True, "epochs": 4}, {}, [], False),
    "2 threads": ({"threads": 2}, {}, [], True),
    "fixed layout": ({}, *FIXED_LAYOUT, False),
    "fixed layout, pinned, 4x steps": ({"pin_cores": True, "epochs": 4}, *FIXED_LAYOUT, False),
}
FIXED_WARMUP = 5


def window_variants(out: Path, windows: list[float], world_sizes: list[int]) -> list[str]:
    """One variant per window (seconds), np-specific steps from a probe launch of each side at each world
    size (the geometric mean of their median step times), added to VARIANTS; their names."""
    scheduler, options = LocalScheduler(), Options()
    train = len(WORKLOADS[options.workload].make_data(options.dataset_size, options.text_dir).train)
    step_s = {}
    for world_size in world_sizes:
        medians = []
        for framework in ("horovod", "ddp"):
            root = out / "probe" / f"{framework}-np{world_size}"
            probe = dataclasses.replace(options, seeds=(0,), epochs=4, out=root)
            print(f"probe: {scheduler.run(scheduler.make(framework, world_size, probe, root), 600).describe()}",
                  flush=True)
            medians.append(launch_median([r for r in find_runs(root) if r.ok], FIXED_WARMUP))
        step_s[world_size] = float(np.exp(np.mean(np.log(medians))))
    names = []
    for seconds in windows:
        name = f"window {seconds:g} s"
        for world_size in world_sizes:
            steps = window_steps(seconds, step_s[world_size], FIXED_WARMUP)
            per_epoch = steps_per_epoch(options, train, world_size)
            changes = {"seeds": (0,), "steps": steps, "epochs": -(-steps // per_epoch)}
            VARIANTS[f"{name} np{world_size}"] = (changes, {}, [], False)
            print(f"{name} at np {world_size}: {steps} steps ({step_s[world_size] * 1e3:.2f} ms a step)", flush=True)
        names.append(name)
    return names


def launch_all(out: Path, rounds: int, world_sizes: list[int], names: list[str]) -> None:
    scheduler = LocalScheduler()
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        frameworks = ("horovod", "ddp") if r % 2 == 0 else ("ddp", "horovod")
        for name in order:
            for world_size in world_sizes:
                changes, env, prefix, np1_only = VARIANTS.get(f"{name} np{world_size}") or VARIANTS[name]
                if np1_only and world_size != 1:
                    continue
                for framework in frameworks:
                    run_root = out / "runs" / slug(name) / f"{framework}-np{world_size}-round{r + 1}"
                    options = dataclasses.replace(Options(), **changes, out=run_root)
                    launch = scheduler.make(framework, world_size, options, run_root, extra_env=env)
                    launch = dataclasses.replace(launch, command=[*prefix, *launch.command])
                    outcome = scheduler.run(launch, 600)
                    print(f"round {r + 1}/{rounds} {name}: {outcome.describe()}", flush=True)


def slug(name: str) -> str:
    return name.replace(", ", "-").replace(" ", "-")


def log_medians(times: list[np.ndarray], warmup: int | None) -> tuple[np.ndarray, float]:
    """Each launch's log median step time after the warm-up (None: settled from its own data), and the mean
    standard error of those medians from within the launches (1.2533 sigma / sqrt(n) of the log times)."""
    kept = [t[(settled_warmup(t) if warmup is None else warmup):] for t in times]
    logs = np.array([np.log(np.median(t)) for t in kept])
    within = float(np.mean([1.2533 * np.std(np.log(t)) / np.sqrt(len(t)) for t in kept]))
    return logs, within


def summarise(out: Path, world_sizes: list[int], names: list[str]) -> list[dict]:
    rows = []
    for name in names:
        if not (out / "runs" / slug(name)).is_dir():  # not launched in this study
            continue
        runs = [run for run in find_runs(out / "runs" / slug(name)) if run.status == "ok"]  # read once
        for world_size in world_sizes:
            times: dict[str, dict[int, np.ndarray]] = {"horovod": {}, "ddp": {}}
            for run in runs:
                if run.world_size == world_size:
                    where = next(part for part in reversed(run.path.parts) if "-round" in part)
                    times[run.framework][int(where.rsplit("round", 1)[1])] = run.step_times
            for warmup in (FIXED_WARMUP, None):
                common = sorted(set(times["horovod"]) & set(times["ddp"]))
                if len(common) < 2:
                    continue
                row = {"variant": name, "np": world_size, "warmup": "settled" if warmup is None else warmup,
                       "rounds": len(common), "steps": int(np.median([len(times["ddp"][r]) for r in common]))}
                logs = {}
                for framework in ("horovod", "ddp"):
                    logs[framework], within = log_medians([times[framework][r] for r in common], warmup)
                    row[f"{framework}_across"] = float(np.std(logs[framework], ddof=1))
                    row[f"{framework}_within"] = within
                ratio = logs["horovod"] - logs["ddp"]
                spread = float(np.std(ratio, ddof=1))
                row["ratio"] = float(np.exp(ratio.mean()))
                row["half_width"] = float(np.expm1(stats.t.ppf(0.975, len(ratio) - 1) * spread / np.sqrt(len(ratio))))
                row["half_width_4_rounds"] = float(np.expm1(stats.t.ppf(0.975, 3) * spread / 2))
                rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| variant | np | warm-up | rounds | steps | across Hvd / DDP | within Hvd / DDP | ratio | 95% CI +- "
             "| +- at 4 rounds |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['np']} | {r['warmup']} | {r['rounds']} | {r['steps']} | "
                     f"{r['horovod_across']:.3f} / {r['ddp_across']:.3f} | {r['horovod_within']:.3f} / "
                     f"{r['ddp_within']:.3f} | {r['ratio']:.2f} | {r['half_width']:.1%} | "
                     f"{r['half_width_4_rounds']:.1%} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--np", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=Path("results/variance"))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                        help="which set-ups to launch side by side (default: all)")
    parser.add_argument("--windows", type=float, nargs="+", metavar="SECONDS",
                        help="study timed windows of these lengths instead of the set-ups")
    parser.add_argument("--analyse-only", action="store_true", help="summarise the launches already in OUT")
    ns = parser.parse_args(argv)
    if ns.rounds < 2:
        parser.error("--rounds must be at least 2: an interval needs two rounds")
    try:
        if ns.windows:
            if any(w <= 0 for w in ns.windows):
                parser.error("--windows must be positive numbers of seconds")
            ns.variants = ([f"window {w:g} s" for w in ns.windows] if ns.analyse_only
                           else window_variants(ns.out, ns.windows, ns.np))
        if not ns.analyse_only:
            launch_all(ns.out, ns.rounds, ns.np, ns.variants)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    rows = summarise(ns.out, ns.np, ns.variants)
    write_json_atomic(ns.out / "variance.json", rows)
    text = markdown(rows)
    write_atomic(ns.out / "variance.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
