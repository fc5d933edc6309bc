"""Turn run records into the report's data: parity verdicts (through compare/analysis/judge.py), timing and
the overall verdict.

Pure: takes records, returns a JSON-serialisable dict; no printing, no files.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from compare.analysis.causes import likely_causes
from compare.analysis.judge import judge
from compare.analysis.parity import CONFIDENCE, STEP_K, STEP_RTOL, Band, Margin, calibrated_band, combine_bands
from compare.analysis.records import RecordError, RunRecord, jsonable
from compare.analysis.speed_figures import add_speed
from compare.analysis.time_to_target import Target, time_to_target
from compare.analysis.tradeoffs import TradeoffInputs, tradeoffs
from compare.names import FRAMEWORKS, JUDGED, Parity, display

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


def group_runs(runs: list[RunRecord]) -> dict[tuple[str, int], Group]:
    """(framework, world size) -> seed -> run for the runs that ended well, of the first round (later rounds
    of `compare run --repeats` time the job again), calibration runs apart. Two runs for the same
    (framework, world size, seed) are ambiguous: RecordError."""
    groups: dict[tuple[str, int], Group] = defaultdict(dict)
    for run in sorted(runs, key=lambda r: str(r.path)):
        if not run.ok or run.round != 1 or run.is_calibration:
            continue
        group = groups[(run.framework, group_world_size(run))]
        if run.seed in group:
            raise RecordError(f"two runs for {run.framework} np {group_world_size(run)} seed {run.seed}: "
                              f"{group[run.seed].path} and {run.path}")
        group[run.seed] = run
    return dict(groups)


# Whose calibration stands for a side's own float chaos: Horovod trains DDP's model with DDP's optimizer (its
# gap to DDP stays near DDP's one-ulp pairs, docs/parity.md); the reference, one process on the whole global
# batch, sums in another order at every step and is more chaotic (its one-ulp pair reaches 3e-2 at step 57 of
# digits at np 4) and has its own.
CALIBRATED_BY = {"horovod": "ddp", "ddp": "ddp", "reference": "reference"}


def calibration_bands(runs: list[RunRecord], rtol: float = STEP_RTOL,
                      k: int = STEP_K) -> dict[tuple[str, int], Band]:
    """(framework, world size) -> the band from that framework's calibration pairs: each seed's run and the
    same run with its initial weights nudged by an ulp (the reference stands for the world size it emulates).
    Seeds differ in when their chaos starts (one seed's pair of the digits reference parts at step 9, another's
    not before step 40), so every seed is calibrated and the band is the widest of them, step by step."""
    plain = {(r.framework, group_world_size(r), r.seed): r for r in runs
             if r.ok and r.round == 1 and not r.is_calibration}
    found: dict[tuple[str, int], dict[int, Band]] = {}
    for run in runs:
        key = (run.framework, group_world_size(run), run.seed)
        if run.ok and run.is_calibration and key in plain:
            control = plain[key]
            found.setdefault(key[:2], {})[run.seed] = calibrated_band(
                control.loss_by_step, run.loss_by_step, rtol=rtol, k=k,
                detail=f"{display(run.framework)} at np {key[1]}, seed {run.seed}, against itself with the initial "
                       f"weights moved {run.meta['options']['perturb_init_ulps']} ulp: {control.path} and {run.path}")
    bands = {}
    for (framework, world_size), by_seed in found.items():
        if len(by_seed) == 1:
            bands[(framework, world_size)] = next(iter(by_seed.values()))
            continue
        seeds = ",".join(map(str, sorted(by_seed)))
        bands[(framework, world_size)] = dataclasses.replace(
            combine_bands([by_seed[s] for s in sorted(by_seed)]),
            detail=f"{display(framework)} at np {world_size}, seeds {seeds}, each against itself with the initial "
                   f"weights moved one ulp; the widest of the {len(by_seed)} pairs at every step")
    return bands


def pair_band(a: str, b: str, world_size: int, bands: dict[tuple[str, int], Band], rtol: float, k: int) -> Band:
    """The band for a pair: the wider of the two sides' calibrations (each side's own chaos), or the default."""
    # Horovod is calibrated by DDP's pairs: one calibration may stand for both sides, counted (and said) once.
    keys = dict.fromkeys((CALIBRATED_BY[f], world_size) for f in (a, b))
    found = [bands[key] for key in keys if key in bands]
    if not found:
        return Band("default", rtol=rtol, k=k)
    return combine_bands(found) if len(found) > 1 else found[0]


def compare_pair(a_name: str, b_name: str, a: Group, b: Group, *, band: Band, margins: dict[str, Margin],
                 allow: frozenset[str], with_end_points: bool) -> dict:
    verdict = judge(a, b, band=band, margins=margins, allow=allow, a_name=a_name, b_name=b_name,
                    with_end_points=with_end_points)
    return {**verdict.to_dict(), "causes": [cause.to_dict() for cause in likely_causes(verdict)]}


def analyse_level(world_size: int, groups: dict[tuple[str, int], Group], *, warmup: int,
                  bands: dict[tuple[str, int], Band], rtol: float, k: int, margins: dict[str, Margin],
                  allow: frozenset[str]) -> dict:
    present = {f: groups[(f, world_size)] for f in JUDGED if (f, world_size) in groups}
    options = {"margins": margins, "allow": allow}
    comparisons = {}
    band = pair_band("horovod", "ddp", world_size, bands, rtol, k)
    if "horovod" in present and "ddp" in present:
        comparisons["horovod_vs_ddp"] = compare_pair(
            "horovod", "ddp", present["horovod"], present["ddp"], band=band, with_end_points=True, **options
        )
    for framework in FRAMEWORKS:
        if framework in present and "reference" in present:
            comparisons[f"{framework}_vs_reference"] = compare_pair(
                framework, "reference", present[framework], present["reference"], with_end_points=False,
                band=pair_band(framework, "reference", world_size, bands, rtol, k), **options,
            )
    timing, speed = {}, None  # add_speed fills both in (and "figures"), from every round of launches
    return {
        "world_size": world_size,
        "seeds": {f: sorted(g) for f, g in present.items()},
        "band": band.to_dict(),
        "comparisons": comparisons,
        "timing": timing,
        "speed": speed,
    }


def max_rel_diff(comparison: dict) -> float | None:
    values = [s["losses"]["max_rel_diff"] for s in comparison["seeds"] if s["losses"]["max_rel_diff"] is not None]
    return max(values) if values else None


def summary_rows(levels: list[dict]) -> list[dict]:
    """One row per (framework, world size): the numbers of the report's summary table. Step times,
    throughput and scaling are the level's figures (the speed verdict's rounds where it has some; "source"
    says which)."""
    rows = []
    for level in levels:
        comparisons = level["comparisons"]
        for framework, entry in level["figures"].items():
            vs_other = comparisons.get("horovod_vs_ddp") if framework in FRAMEWORKS else None
            vs_reference = comparisons.get(f"{framework}_vs_reference")
            other_diff = max_rel_diff(vs_other) if vs_other else None
            reference_diff = max_rel_diff(vs_reference) if vs_reference else None
            rows.append({
                "framework": framework,
                "world_size": level["world_size"],
                "seeds": entry["seeds"],
                "step_ms": entry["step_s"] * 1e3 if entry["step_s"] is not None else None,
                "samples_per_s": entry["throughput"],
                "scaling_efficiency": entry["scaling_efficiency"],
                "source": entry["source"],
                "rounds": entry["rounds"],
                "rounds_left_out": entry.get("rounds_left_out", 0),
                "parity_launch_counted": entry["parity_launch_counted"],
                "max_rel_diff_vs_other": other_diff,
                "max_rel_diff_vs_reference": reference_diff,
            })
    return rows


WORST_FIRST = (Parity.DIFFERENT_JOBS, Parity.FAILS, Parity.UNDECIDED, Parity.HOLDS)


def overall_parity(levels: list[dict]) -> Parity:
    """The worst outcome over the Horovod vs DDP
    comparisons. A comparison with the single-process reference supports them: it can make the verdict fail
    (one side does not train what one process trains), but its own chaos running out of power (the
    reference is far more chaotic than either framework) adds no doubt about Horovod vs DDP."""
    comparisons = [c for level in levels for c in level["comparisons"].values()]
    main = [c for c in comparisons if c["b"] != "reference"]
    outcomes = {Parity(c["outcome"]) for c in (main or comparisons)}
    outcomes |= {Parity(c["outcome"]) for c in comparisons if c["b"] == "reference" and main
                 and Parity(c["outcome"]) in (Parity.FAILS, Parity.DIFFERENT_JOBS)}
    if not outcomes:
        return Parity.UNDECIDED
    return next(outcome for outcome in WORST_FIRST if outcome in outcomes)


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


def analyse(runs: list[RunRecord], *, warmup: int = 5, rtol: float = STEP_RTOL, k: int = STEP_K,
            margins: dict[str, Margin] | None = None, allow: frozenset[str] = frozenset(),
            bands: dict[int, Band] | None = None, targets: tuple[Target, ...] = (),
            tradeoff_inputs: TradeoffInputs | None = None) -> dict:
    """The whole report's data. Runs that did not end well are listed under "failures" and not judged.
    The band of each world size is its calibration pair's when the runs hold one (compare run makes it),
    else `bands` (given), else the documented default. With `targets`, "time_to_target" holds a verdict
    per target and world size (compare/analysis/time_to_target.py); without, the key is absent.
    `tradeoff_inputs`: the fault results and code sizes of the trade-offs table (none: its cells stay empty)."""
    groups = group_runs(runs)
    calibrated = {**calibration_bands(runs, rtol, k), **{("ddp", ws): band for ws, band in (bands or {}).items()}}
    world_sizes = sorted({ws for f, ws in groups if f in JUDGED})
    levels = [analyse_level(ws, groups, warmup=warmup, bands=calibrated, rtol=rtol, k=k, margins=margins or {},
                            allow=allow) for ws in world_sizes]
    add_speed(levels, runs, warmup)
    failures = [failure(r) for r in sorted(runs, key=lambda r: str(r.path)) if not r.ok]
    reached = {"time_to_target": [v.to_dict() for v in time_to_target(runs, targets)]} if targets else {}
    return jsonable({
        **reached,
        "settings": {"warmup": warmup, "rtol": rtol, "k": k, "confidence": CONFIDENCE,
                     "margins": {name: vars(m) for name, m in (margins or {}).items()}, "allow": sorted(allow)},
        "verdict": {"parity": overall_parity(levels)},  # the speed verdict is each level's "speed"
        "world_sizes": world_sizes,
        "levels": levels,
        "summary": summary_rows(levels),
        "failures": failures,
        "runs": [run_summary(r) for r in sorted(runs, key=lambda r: str(r.path))],
        "imported": [{**identity(r), **{k: r.imported.get(k) for k in ("format", "source", "sha256", "imported_at")}}
                     for r in sorted(runs, key=lambda r: str(r.path)) if r.imported is not None],
        "notes": coverage_notes(groups),
        "tradeoffs": tradeoffs(levels, runs, tradeoff_inputs or TradeoffInputs()),
    })
