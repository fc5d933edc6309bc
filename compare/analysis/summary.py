"""Turn run records into the report's data: parity verdicts, timing and the overall verdict.

Pure: takes records, returns a JSON-serialisable dict; no printing, no files.
"""

from __future__ import annotations

from collections import defaultdict

from compare.analysis.parity import (
    CONFIDENCE,
    MARGIN_SD,
    STEP_K,
    STEP_RTOL,
    likely_causes,
    statistical,
    stepwise,
    tolerance_justification,
)
from compare.analysis.records import RunRecord, jsonable
from compare.analysis.speed import add_scaling, compare_speed, timing_entry
from compare.names import FRAMEWORKS, JUDGED, display

# End points compared over seeds: name -> how to read it from a run.
END_POINTS = {
    "final_loss": lambda r: r.final_loss,
    "eval_loss": lambda r: (r.final_eval or {}).get("eval_loss"),
    "eval_accuracy": lambda r: (r.final_eval or {}).get("eval_accuracy"),
}

Group = dict[int, RunRecord]  # seed -> run


def group_world_size(run: RunRecord) -> int:
    """The world size a run belongs to: a reference run stands for the size it emulates."""
    return run.data_world_size if run.framework == "reference" else run.world_size


def identity(run: RunRecord) -> dict:
    """Which run this is, in every list of runs the analysis returns."""
    return {"framework": run.framework, "world_size": run.world_size, "data_world_size": run.data_world_size,
            "seed": run.seed, "status": run.status, "path": str(run.path)}


def failure(run: RunRecord) -> dict:
    entry = {**identity(run), "error": run.error, "steps_recorded": len(run.steps)}
    if run.meta.get("log_tail"):
        entry["log_tail"] = run.meta["log_tail"]
    return entry


def group_runs(runs: list[RunRecord]) -> tuple[dict[tuple[str, int], Group], list[str]]:
    """(framework, world size) -> seed -> run for the runs that ended well, plus notes on duplicates."""
    groups: dict[tuple[str, int], Group] = defaultdict(dict)
    notes = []
    for run in sorted(runs, key=lambda r: str(r.path)):
        if not run.ok:
            continue
        group = groups[(run.framework, group_world_size(run))]
        if run.seed in group:
            notes.append(f"{run.label} appears twice; using {group[run.seed].path}, ignoring {run.path}")
            continue
        group[run.seed] = run
    return dict(groups), notes


def compare_stepwise(a: Group, b: Group, k: int, rtol: float) -> dict:
    """Step-wise parity for every seed both sides ran; passes when all seeds pass."""
    per_seed = []
    for seed in sorted(set(a) & set(b)):
        result = stepwise(a[seed].losses, b[seed].losses, k=k, rtol=rtol)
        entry = {"seed": seed, **result.to_dict()}
        entry["likely_causes"] = likely_causes(a[seed].meta, b[seed].meta, result)
        per_seed.append(entry)
    failed = [p for p in per_seed if not p["passed"]]
    measured = [p for p in per_seed if p["max_rel_diff"] is not None]
    worst = max(measured, key=lambda p: p["max_rel_diff"], default=None)
    first = min(
        (p for p in failed if p["first_divergence_step"] is not None),
        key=lambda p: p["first_divergence_step"],
        default=None,
    )
    return {
        "passed": (not failed) if per_seed else None,
        "seeds": [p["seed"] for p in per_seed],
        "n_failed": len(failed),
        "k": min((p["k"] for p in per_seed), default=0),
        "rtol": rtol,
        "max_rel_diff": worst["max_rel_diff"] if worst else None,
        "worst_seed": worst["seed"] if worst else None,
        "first_divergence_step": first["first_divergence_step"] if first else None,
        "first_divergence_seed": first["seed"] if first else None,
        "first_divergence_gap": first["first_divergence_gap"] if first else None,
        "per_seed": per_seed,
    }


def compare_end_points(a: Group, b: Group, margin_sd: float) -> dict:
    """Statistical parity of each end point that either side recorded."""
    results = {}
    for name, read in END_POINTS.items():
        a_values = {s: read(r) for s, r in a.items() if read(r) is not None}
        b_values = {s: read(r) for s, r in b.items() if read(r) is not None}
        if a_values or b_values:
            results[name] = statistical(a_values, b_values, margin_sd=margin_sd).to_dict()
    return results


def stepwise_evidence(result: dict) -> str:
    seeds = result["seeds"]
    if result["passed"] is None:
        return "step-wise: no seed ran on both sides"
    if result["passed"]:
        return (
            f"step-wise max rel diff {result['max_rel_diff']:.2g} <= rtol {result['rtol']:g} "
            f"over {result['k']} steps, {len(seeds)}/{len(seeds)} seeds"
        )
    if result["first_divergence_step"] is None:
        return f"step-wise: {result['n_failed']}/{len(seeds)} seeds could not be compared"
    gap = result["first_divergence_gap"]
    gap_text = "non-finite loss" if gap is None else f"rel diff {gap:.2g} > rtol {result['rtol']:g}"
    return (
        f"step-wise: {result['n_failed']}/{len(seeds)} seeds diverge, first at step "
        f"{result['first_divergence_step']} (seed {result['first_divergence_seed']}, {gap_text})"
    )


def end_point_evidence(name: str, result: dict) -> str:
    if result["passed"] is None and result["diff_upper_bound"] is None:
        return f"{name} undecided ({result['reason']})"
    conf = f"{result['confidence']:.0%}"
    margin = f"margin {result['margin']:.2g} ({result['margin_sd']:g} sd), {result['n_seeds']} seeds"
    upper = f"upper {conf} bound of |mean diff| {result['diff_upper_bound']:.2g}"
    if result["passed"]:
        return f"{name} equivalent: {upper} <= {margin}"
    if result["passed"] is False:
        if result["pooled_sd"] == 0:
            return f"{name} differs: mean diff {result['mean_diff']:.2g} with no seed-to-seed spread"
        lower = f"lower {conf} bound of |mean diff| {result['diff_lower_bound']:.2g}"
        return f"{name} differs: {lower} > {margin}"
    return f"{name} undecided: {upper} > {margin} but the difference is not shown to exceed it"


def short_evidence(step_result: dict, end_points: dict, verdict: str) -> str:
    """The evidence for a verdict in a phrase: what failed or is undecided, or a compact 'all agree'."""
    if verdict == "holds":
        parts = [stepwise_evidence(step_result)]
        equivalent = [name for name, r in end_points.items() if r["passed"]]
        if equivalent:
            margin_sd = end_points[equivalent[0]]["margin_sd"]
            parts.append(f"{', '.join(equivalent)} equivalent within {margin_sd:g} sd")
        untested = [r["reason"] for r in end_points.values() if r["passed"] is None]
        if untested:
            parts.append(f"statistical level not tested ({untested[0]})")
        return "; ".join(parts)
    parts = [] if step_result["passed"] else [stepwise_evidence(step_result)]
    parts += [end_point_evidence(name, r) for name, r in end_points.items() if not r["passed"]]
    return "; ".join(parts)


def comparison_verdict(step_result: dict, end_points: dict) -> str:
    # With one seed there is no spread to test against: the step-wise level decides alone.
    decided = [r for r in end_points.values() if r["passed"] is not None or r.get("n_seeds", 0) >= 2]
    passes = [step_result["passed"], *(r["passed"] for r in decided)]
    if False in passes:
        return "fails"
    if None in passes:
        return "undecided"
    return "holds"


def compare_pair(a_name: str, b_name: str, a: Group, b: Group, *, k: int, rtol: float, margin_sd: float,
                 with_end_points: bool) -> dict:
    step_result = compare_stepwise(a, b, k, rtol)
    end_points = compare_end_points(a, b, margin_sd) if with_end_points else {}
    causes: list[str] = []
    for entry in step_result["per_seed"]:
        causes += [c for c in entry["likely_causes"] if c not in causes]
    verdict = comparison_verdict(step_result, end_points)
    evidence = [stepwise_evidence(step_result)]
    evidence += [end_point_evidence(name, r) for name, r in end_points.items()]
    return {
        "a": a_name,
        "b": b_name,
        "verdict": verdict,
        "summary": short_evidence(step_result, end_points, verdict),
        "evidence": "; ".join(evidence),
        "stepwise": step_result,
        "statistical": end_points,
        "likely_causes": causes,
    }


def analyse_level(world_size: int, groups: dict[tuple[str, int], Group], *, warmup: int, k: int,
                  rtol: float, margin_sd: float) -> dict:
    present = {f: groups[(f, world_size)] for f in JUDGED if (f, world_size) in groups}
    options = {"k": k, "rtol": rtol, "margin_sd": margin_sd}
    comparisons = {}
    if "horovod" in present and "ddp" in present:
        comparisons["horovod_vs_ddp"] = compare_pair(
            "horovod", "ddp", present["horovod"], present["ddp"], with_end_points=True, **options
        )
    for framework in FRAMEWORKS:
        if framework in present and "reference" in present:
            comparisons[f"{framework}_vs_reference"] = compare_pair(
                framework, "reference", present[framework], present["reference"], with_end_points=False,
                **options,
            )
    timing = {f: timing_entry(f, world_size, g, warmup) for f, g in present.items()}
    speed = compare_speed(world_size, present, warmup)
    return {
        "world_size": world_size,
        "seeds": {f: sorted(g) for f, g in present.items()},
        "comparisons": comparisons,
        "timing": timing,
        "speed": speed,
    }


def summary_rows(levels: list[dict]) -> list[dict]:
    """One row per (framework, world size): the numbers of the report's summary table."""
    rows = []
    for level in levels:
        comparisons = level["comparisons"]
        for framework, entry in level["timing"].items():
            vs_other = comparisons.get("horovod_vs_ddp") if framework in FRAMEWORKS else None
            vs_reference = comparisons.get(f"{framework}_vs_reference")
            other_diff = vs_other["stepwise"]["max_rel_diff"] if vs_other else None
            reference_diff = vs_reference["stepwise"]["max_rel_diff"] if vs_reference else None
            step = entry["step"]
            rows.append({
                "framework": framework,
                "world_size": level["world_size"],
                "seeds": entry["seeds"],
                "median_step_ms": step["median"] * 1e3 if step["median"] is not None else None,
                "p90_step_ms": step["p90"] * 1e3 if step["p90"] is not None else None,
                "samples_per_s": entry["throughput"],
                "scaling_efficiency": entry["scaling_efficiency"],
                "max_rel_diff_vs_other": other_diff,
                "max_rel_diff_vs_reference": reference_diff,
            })
    return rows


def overall_parity(levels: list[dict]) -> tuple[str, str]:
    """("holds" | "fails" | "undecided", one line of evidence)."""
    labelled = [
        (f"{display(c['a'])} vs {display(c['b'])} at np {level['world_size']}", c)
        for level in levels
        for c in level["comparisons"].values()
    ]
    if not labelled:
        return "undecided", "nothing to compare: no world size has two implementations' runs that ended well"
    for verdict in ("fails", "undecided"):
        chosen = [(label, c) for label, c in labelled if c["verdict"] == verdict]
        if chosen:
            return verdict, "; ".join(f"{label}: {c['summary']}" for label, c in chosen)
    main = [(label, c) for label, c in labelled if c["b"] != "reference"] or labelled
    return "holds", "; ".join(f"{label}: {c['summary']}" for label, c in main)


def coverage_notes(groups: dict[tuple[str, int], Group]) -> list[str]:
    notes = []
    for world_size in sorted({ws for _, ws in groups}):
        present = {f for f, ws in groups if ws == world_size}
        for framework in sorted(present - set(JUDGED)):
            notes.append(f"unknown framework {framework!r} at np {world_size}: not compared")
        if len(present & set(FRAMEWORKS)) == 1:
            missing = (set(FRAMEWORKS) - present).pop()
            notes.append(f"no {display(missing)} runs at np {world_size}: Horovod and DDP not compared there")
    return notes


def run_summary(run: RunRecord) -> dict:
    return {**identity(run), "steps": len(run.steps), "final_loss": run.final_loss, "final_eval": run.final_eval}


def analyse(runs: list[RunRecord], *, warmup: int = 5, k: int = STEP_K, rtol: float = STEP_RTOL,
            margin_sd: float = MARGIN_SD) -> dict:
    """The whole report's data. Runs that did not end well are listed under "failures" and not judged."""
    groups, notes = group_runs(runs)
    world_sizes = sorted({ws for f, ws in groups if f in JUDGED})
    levels = [
        analyse_level(ws, groups, warmup=warmup, k=k, rtol=rtol, margin_sd=margin_sd) for ws in world_sizes
    ]
    add_scaling(levels)
    parity, evidence = overall_parity(levels)
    speeds = [level["speed"]["sentence"] for level in levels if level["speed"]]
    speed = "; ".join(speeds) if speeds else "no world size has both Horovod and DDP runs to compare speed"
    failures = [failure(r) for r in sorted(runs, key=lambda r: str(r.path)) if not r.ok]
    return jsonable({
        "settings": {
            "warmup": warmup, "k": k, "rtol": rtol, "margin_sd": margin_sd, "confidence": CONFIDENCE
        },
        "tolerance": {
            "stepwise_rtol": rtol,
            "stepwise_k": k,
            "margin_sd": margin_sd,
            "confidence": CONFIDENCE,
            "justification": tolerance_justification(rtol, k, margin_sd, CONFIDENCE),
        },
        "verdict": {"parity": parity, "parity_evidence": evidence, "speed": speed},
        "world_sizes": world_sizes,
        "levels": levels,
        "summary": summary_rows(levels),
        "failures": failures,
        "runs": [run_summary(r) for r in sorted(runs, key=lambda r: str(r.path))],
        "notes": notes + coverage_notes(groups),
    })

