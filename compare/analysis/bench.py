"""`compare bench`'s figures from its parts' results: the sweeps summarised and their choice, the tuned
settings and what the implementations confirmed, the harness overhead, the step decomposed, scaling,
start-up and the allreduce table.

Pure: takes the benchmarks' results and the overhead launches' entries (dicts, as bench.json keeps them),
returns JSON-serialisable dicts; the command runs the launches, compare/render/bench.py puts these in words.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from compare.analysis.timing import speed_ratio
from compare.names import FRAMEWORKS

OVERHEAD_TARGET = 1.03  # project/bare step, in one process
TUNING_AIM = 1.25  # tuned/default throughput through the implementations

Key = tuple[str, str, int]  # an overhead launch: (variant, framework, world size)


def _median(values: Iterable[float]) -> float | None:
    array = np.asarray(list(values), dtype=np.float64)
    return float(np.median(array)) if array.size else None


# --- the sweeps -------------------------------------------------------------------------------------------

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
    rows = [_sweep_row(config, times, default, result) for config in configs]
    return {"world_size": result["world_size"], "controller": result["controller"],
            "gradient_numel": result["gradient_numel"], "launches": result.get("launches", 1),
            "configs": rows, "chosen": [r["name"] for r in chosen_configs(rows)]}


def _sweep_row(config: dict, times: dict[str, np.ndarray], default: dict, result: dict) -> dict:
    name = config["name"]
    row = {k: v for k, v in config.items() if k not in ("blocks", "phase_blocks", "launch_medians")}
    row.update(median_s=_median(times[name]), mean_s=float(np.mean(times[name])), n=int(times[name].size))
    if config.get("phase_blocks"):
        steps = np.asarray([step for block in config["phase_blocks"] for step in block])
        row["phase_means_s"] = dict(zip(result["phase_names"], np.mean(steps, axis=0).tolist(), strict=True))
    if config.get("mode", "train") == "train":
        ratio = speed_ratio(times["default"], times[name])
        rounds = zip(_round_medians(default), _round_medians(config), strict=False)
        row.update(gain=ratio["step_time_ratio"], gain_ci=[ratio["ci_low"], ratio["ci_high"]],
                   per_round=[d / c for d, c in rounds if d and c])
        if name == "default":
            row.update(gain=1.0, gain_ci=None, per_round=[])
    if config.get("mode") == "project":  # the project's step over the bare step, in the same process
        ratio = speed_ratio(times[name], times["default"])
        rounds = zip(_round_medians(config), _round_medians(default), strict=False)
        row.update(over_default=ratio["step_time_ratio"], over_default_ci=[ratio["ci_low"], ratio["ci_high"]],
                   per_round=[p / d for p, d in rounds if p and d])
    return row


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


# --- the tuned settings -----------------------------------------------------------------------------------

def tuned_settings(sweeps: dict[str, dict]) -> dict[str, dict]:
    """Each framework's chosen options (its implementation's argv) and launch environment."""
    tuned: dict[str, dict] = {"horovod": {"args": [], "env": {}}, "ddp": {"args": [], "env": {}}}
    for framework, sweep in sweeps.items():
        for row in sweep["configs"]:
            if row["name"] in sweep["chosen"]:
                tuned[framework]["args"] += row.get("args", [])
                tuned[framework]["env"].update(row.get("env", {}))
    return tuned


def confirmed_settings(tuned: dict[str, dict], effect: list[dict], confirmation_ran: bool) -> dict[str, dict]:
    """What the real implementations confirmed (faster than their defaults in every round, 95% interval
    above 1); the rest goes back to the defaults. Without confirmation runs (--quick), `tuned` itself: the
    caller tells the two apart by identity."""
    if not confirmation_ran:
        return tuned
    kept = {framework: {"args": [], "env": {}} for framework in tuned}
    for row in effect:
        if row.get("confirmed") and row.get("kind") != "controller":
            kept[row["framework"]] = tuned[row["framework"]]
    return kept


def tuned_file(tuned: dict[str, dict], *, workload: str, batch_size: int, threads: int, confirmed: bool) -> dict:
    """tuned.json: {"horovod": argv, "ddp": argv, "env": {"horovod": {...}, "ddp": {...}}, "tuned_for": ...}."""
    return {"horovod": tuned["horovod"]["args"], "ddp": tuned["ddp"]["args"],
            "env": {name: tuned[name]["env"] for name in FRAMEWORKS},
            "tuned_for": {"workload": workload, "batch_size": batch_size, "threads": threads,
                          "world_size": 2, "horovod_controller": "mpi", "source": "python -m compare bench",
                          "confirmed_by_the_implementations": confirmed}}


# --- the np 2 step, decomposed ------------------------------------------------------------------------------

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
    return [_decomposed(framework, sweeps[framework], overhead) for framework in ("ddp", "horovod")
            if sweeps.get(framework)]


def _decomposed(framework: str, sweep: dict, overhead: list[dict]) -> dict:
    by_name = {r["name"]: r for r in sweep["configs"]}
    step, alone = by_name["default"]["mean_s"], by_name["compute only"]["median_s"]
    phases = by_name["step, phases timed"]["phase_means_s"]
    sync = by_name["compute + sync"]["median_s"] - alone
    wire = max(by_name["allreduce of the gradients"]["median_s"] - by_name["allreduce of 1 number"]["median_s"], 0.0)
    np1 = _median(_pooled(overhead, "bare", framework, 1))
    total = sum(phases.values())
    probe = by_name["step, phases timed"]["mean_s"]
    return {"framework": framework, "controller": sweep["controller"], "step_mean_s": step,
            "step_median_s": by_name["default"]["median_s"], **phases,
            "rest_s": phases["data_s"] + phases["optimizer_s"], "unaccounted_s": probe - total,
            "accounted": min(total, probe) / max(total, probe),
            "accounted_vs_default_blocks": min(total, step) / max(total, step),
            "probe_over_default": by_name["step, phases timed"]["median_s"] / by_name["default"]["median_s"],
            "probe_step_mean_s": probe, "no_comm_step_s": alone,
            "np1_step_s": np1, "sync_s": sync, "wire_s": wire,
            "floors_explain": (alone + sync + wire) / by_name["default"]["median_s"],
            # the most a bucket or fusion setting could win: all the bytes hidden behind compute
            "overlap_bound": step / (step - min(wire, phases["compute_s"]))}


# --- the overhead launches ----------------------------------------------------------------------------------

def _pooled(entries: list[dict], variant: str, framework: str, n: int) -> list[float]:
    return [t for e in entries if (e["variant"], e["framework"], e["world_size"]) == (variant, framework, n)
            and e["ok"] for t in e["step_times"]]


def _per_round(entries: list[dict], key: str, a: Key, b: Key) -> list[float]:
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
            if mine and project:
                rows.append(_overhead_row(entries, framework, n, mine, bare, project))
    return rows


def _overhead_row(entries: list[dict], framework: str, n: int, mine: list[dict], bare: list[float],
                  project: list[float]) -> dict:
    inner = speed_ratio(np.asarray([t for e in mine for t in e["in_process_project"]]), np.asarray(bare))
    launches = speed_ratio(np.asarray(project), np.asarray(bare))
    key_p, key_b = ("project", framework, n), ("bare", framework, n)
    return {"framework": framework, "world_size": n, "bare_median_s": inner["median_b"],
            "project_median_s": inner["median_a"], "ratio": inner["step_time_ratio"],
            "ratio_ci": [inner["ci_low"], inner["ci_high"]],
            "per_block": [r for e in mine for r in e["in_process_per_block"]],
            "meets_target": inner["step_time_ratio"] <= OVERHEAD_TARGET,
            "launch_ratio": launches["step_time_ratio"], "launch_ratio_ci": [launches["ci_low"], launches["ci_high"]],
            "launch_per_round": _per_round(entries, "step_times", key_p, key_b),
            "whole_run_ratio": _median(_per_round(entries, "whole_run_per_step_s", key_p, key_b))}


def tuned_rows(entries: list[dict], sweeps: dict[str, dict], tuned: dict[str, dict], n: int = 2) -> list[dict]:
    """Throughput of the tuned configuration against the default, both through the real implementations."""
    rows = [_tuned_row(entries, sweeps, framework, tuned[framework], n) for framework in ("ddp", "horovod")]
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


def _tuned_row(entries: list[dict], sweeps: dict[str, dict], framework: str, settings: dict, n: int) -> dict:
    default, best = _pooled(entries, "project", framework, n), _pooled(entries, "tuned", framework, n)
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
    return row


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


# --- the allreduce ------------------------------------------------------------------------------------------

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
