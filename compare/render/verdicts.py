"""Parity verdicts in words and tables: what `compare run`, `check`, `report` and `matrix` print and write.

Takes the judge's verdicts as data (ParityVerdict.to_dict(), as the analysis stores them) and says them.
"""

from __future__ import annotations

from compare.analysis.parity import (
    ATOL,
    GAPS_UNDECIDED,
    ONSET_BURST,
    ONSET_DECADE_STEPS,
    SATURATION,
    STEP_K,
    STEP_RTOL,
    Equivalence,
)
from compare.names import Parity, display
from compare.render.blocks import Block, Bullets, Heading, Para, Table, num
from compare.render.causes import cause_lines

ONSET_WORDS = (f"; at every step, never more than float chaos can grow from the steps before (the onset bound: "
               f"{ONSET_BURST:g}x their running maximum, then tenfold every {ONSET_DECADE_STEPS:g} steps since the "
               "last one")


def band_text(band: dict) -> str:
    """The step-wise tolerance and where it came from."""
    floor = f"relative loss difference <= {band['rtol']:g} (below {ATOL:g} absolute never counts)"
    if band["source"] == "calibrated":
        return (f"{floor}, or {band['safety']:g}x the divergence of a calibration pair of this job where that is "
                f"wider, from step 1 (calibrated: {band['detail']}){ONSET_WORDS}, or the calibration pair's own "
                "growth there)")
    precision = f"; {band['detail']}" if band.get("detail") else ""
    return (f"{floor} over the first {band['k']} steps, then growing tenfold every {band['decade_steps']:g} steps "
            f"(the documented default, docs/parity.md; `compare run` calibrates instead){precision}{ONSET_WORDS})")


def job_lines(comparison: dict) -> list[str]:
    """Every difference between the two records, by kind."""
    lines = []
    for kind, title in (("job", "makes another job"), ("allowed", "another job, allowed by --allow"),
                        ("version", "versions differ (warning)"), ("expected", "expected between the sides")):
        found = [d for d in comparison["job"]["differences"] if d["kind"] == kind]
        if found:
            lines.append(f"{title}: " + ", ".join(f"{d['name']} {d['a']} vs {d['b']}" for d in found))
    return lines


def missing_text(losses: dict, a: str, b: str) -> str:
    """'steps 40-60 missing on the DDP side', for every gap either side has inside the common range."""
    parts = [f"{_ranges(losses[key])} missing on the {display(name)} side"
             for key, name in (("missing_a", a), ("missing_b", b)) if losses.get(key)]
    if not parts:
        return ""
    share = losses["missing_fraction"]
    undecided = (f": more than {GAPS_UNDECIDED:.0%} of the other side's steps are unseen, so the seed is "
                 "undecided" if share > GAPS_UNDECIDED else "")
    return "; " + "; ".join(parts) + undecided


def _ranges(spans: list) -> str:
    text = ", ".join(f"{lo}-{hi}" if lo != hi else f"{lo}" for lo, hi in spans)
    return ("steps " if len(spans) > 1 or spans[0][0] != spans[0][1] else "step ") + text


def _spelled(value: str) -> str:
    return {"nan": "NaN", "inf": "+inf", "-inf": "-inf"}.get(value, value)


def nonfinite_text(losses: dict, a: str, b: str) -> str:
    """Which side's loss went non-finite from which step: "both sides' loss is NaN from step 50: both diverged
    there", or "the DDP side's loss is NaN from step 22 (the Horovod side's is finite there)"."""
    found = {name: losses.get(key) for key, name in (("nonfinite_a", a), ("nonfinite_b", b))}
    sides = {name: spot for name, spot in found.items() if spot}
    if not sides:
        return ""
    (first_name, (first_step, first_value)), *rest = sorted(sides.items(), key=lambda item: item[1][0])
    if rest and rest[0][1][0] == first_step:
        other_value = rest[0][1][1]
        values = _spelled(first_value) if first_value == other_value else \
            f"{_spelled(found[a][1])} on the {display(a)} side and {_spelled(found[b][1])} on the {display(b)} side"
        return f"both sides' loss is {values} from step {first_step}: both diverged there"
    later = f"; the {display(rest[0][0])} side's from step {rest[0][1][0]}" if rest else \
        f" (the {display(a if first_name == b else b)} side's stays finite)"
    return f"the {display(first_name)} side's loss is {_spelled(first_value)} from step {first_step}{later}"


def failed_alike_text(losses: dict, a: str, b: str) -> str:
    """'the loss is NaN on both sides (Horovod and DDP) from step 50', with each side's step and value where they
    differ ('+inf on the Horovod side from step 50, NaN on the DDP side from step 51')."""
    (step_a, value_a), (step_b, value_b) = losses["nonfinite_a"], losses["nonfinite_b"]
    first = min(step_a, step_b)
    what = _spelled(value_a) if value_a == value_b else "non-finite"
    text = f"the loss is {what} on both sides ({display(a)} and {display(b)}) from step {first}"
    if (step_a, value_a) != (step_b, value_b):
        text += (f" ({_spelled(value_a)} on the {display(a)} side from step {step_a}, {_spelled(value_b)} on the "
                 f"{display(b)} side from step {step_b})")
    return text


FAILED_ALIKE = ("the runs failed alike: {what}, every step before within the band; they trained alike and failed "
                "alike, but a run that failed cannot show parity")


def rounding_text(losses: dict, a: str, b: str) -> str:
    """'the Horovod side's losses are printed in units of 0.001: half a unit of each side is allowed'."""
    parts = [f"the {display(name)} side's losses are printed in units of {losses[key]:g}"
             for key, name in (("rounding_a", a), ("rounding_b", b)) if losses.get(key)]
    if not parts:
        return ""
    return "; ".join(parts) + ": half a unit in the last printed place of each side is allowed at every step"


ONSET_TEXT = (": more than float chaos can grow from the steps before (the onset bound, docs/parity.md), however wide "
              "the band has grown by this step")


def seed_line(seed: dict, a: str = "a", b: str = "b") -> str:
    losses = seed["losses"]
    span = f"steps {losses['first_step']}-{losses['last_step']} ({losses['n_common']} common of {losses['n_a']} " \
           f"and {losses['n_b']}{missing_text(losses, a, b)})"
    identical = losses.get("identical_through") is not None and losses["identical_through"] == losses["last_step"]
    power = ("" if losses["judged_until"] == losses["last_step"] else
             "; bit-identical at every step" if identical else
             f"; the band passed {SATURATION:g} after step {losses['judged_until']}: later steps left to the "
             "end points")
    printed = rounding_text(losses, a, b)
    span += f"; {printed}" if printed else ""
    if seed.get("failed_alike") is not None:
        return f"seed {seed['seed']}: {FAILED_ALIKE.format(what=failed_alike_text(losses, a, b))}; {span}"
    if losses["first_divergence_step"] is not None:
        gap = losses["first_divergence_gap"]
        at = losses["first_divergence_step"]
        blown = losses.get("nonfinite_step") == at
        size = nonfinite_text(losses, a, b) if blown else \
            f"relative difference {gap:.2e} > tolerance {num(losses['tolerance_at_divergence'], '.2e')}" + \
            (ONSET_TEXT if losses.get("onset_caught") else "")
        return f"seed {seed['seed']}: diverges at step {at} ({size}); {span}"
    bad = next((e for e in seed["evals"] if not e["passed"]), None)
    if bad is not None:
        return (f"seed {seed['seed']}: training losses agree over {span}, but the evaluation at step "
                f"{bad['step']} differs: {bad['metric']} {num(bad['a'], '.6g')} vs {num(bad['b'], '.6g')} "
                f"(gap {num(bad['gap'], '.2e')} > {num(bad['tolerance'], '.2e')})")
    agree = evaluations_text(seed["evals"]) if seed["evals"] else "no evaluations to compare"
    for key, name in (("evals_only_a", a), ("evals_only_b", b)):
        if seed.get(key):
            agree += (f"; evaluation(s) at step {', '.join(map(str, seed[key][:5]))}"
                      f"{' and more' if len(seed[key]) > 5 else ''} on the {display(name)} side only")
    return (f"seed {seed['seed']}: every step within the band, max relative difference "
            f"{num(losses['max_rel_diff'], '.2e')}; {span}; {agree}{power}")


def evaluations_text(evals: list[dict]) -> str:
    """The evaluations counted as events (one per step evaluated, whatever it measured): "1 evaluation,
    2 metrics, agrees", "3 evaluations, 2 metrics, 1 differs" (at step 30)."""
    steps = sorted({e["step"] for e in evals})
    metrics = {e["metric"] for e in evals}
    differ = sorted({e["step"] for e in evals if not e["passed"]})
    count = (f"{len(steps)} evaluation{'s' * (len(steps) != 1)}, {len(metrics)} metric{'s' * (len(metrics) != 1)}")
    if not differ:
        return f"{count}, {'agrees' if len(steps) == 1 else 'agree'}"
    at = ", ".join(map(str, differ[:5])) + (" and more" if len(differ) > 5 else "")
    return f"{count}, {len(differ)} differ{'s' * (len(differ) == 1)} (step {at})"


def end_point_line(name: str, r: dict) -> str:
    if r["method"].startswith("step-wise"):
        return f"{name}: equivalent ({r['method']})"
    margin = f"margin +-{num(r['margin'], '.3g')} ({r['margin_kind']}, {r['margin_source']})"
    if r["ci_low"] is None:
        return f"{name}: {r['outcome']} ({r['reason']})"
    ci = f"{2 * r['confidence'] - 1:.0%} interval of the mean paired difference {r['ci_low']:.3g} to {r['ci_high']:.3g}"
    power = (f"with {r['n_seeds']} seeds the test resolves differences of +-{r['resolution']:.3g} around the "
             "margin")
    reason = f" ({r['reason']})" if r["reason"] else ""
    return f"{name}: {r['outcome']}{reason}: {ci}, {margin}; {power}"


def comparison_summary(comparison: dict) -> str:
    """One phrase: the outcome and its main evidence."""
    outcome = Parity(comparison["outcome"])
    if outcome is Parity.DIFFERENT_JOBS:
        jobs = [d for d in comparison["job"]["differences"] if d["kind"] == "job"]
        return "different jobs: " + ", ".join(f"{d['name']} {d['a']} vs {d['b']}" for d in jobs)
    seeds = comparison["seeds"]
    alike = [s for s in seeds if s.get("failed_alike") is not None]
    if outcome is Parity.UNDECIDED and alike:
        texts: dict[str, list[str]] = {}
        for s in alike:
            text = failed_alike_text(s["losses"], comparison["a"], comparison["b"])
            texts.setdefault(text, []).append(str(s["seed"]))
        what = "; ".join(f"{text} (seed{'s' if len(found) > 1 else ''} {', '.join(found)})"
                         for text, found in texts.items())
        return FAILED_ALIKE.format(what=what)
    if outcome is Parity.FAILS:
        first = comparison["first_divergence"]
        if first is not None:
            seed = next(s for s in comparison["seeds"] if s["seed"] == first["seed"])
            if seed["losses"]["first_divergence_step"] is None:  # the training agrees; an evaluation does not
                return (f"the training losses agree, the evaluation at step {first['step']} differs "
                        f"(seed {first['seed']})")
            blown = nonfinite_text(seed["losses"], comparison["a"], comparison["b"])
            if blown and seed["losses"].get("nonfinite_step") == first["step"]:
                return f"diverges at step {first['step']} (seed {first['seed']}): {blown}"
            return f"diverges at step {first['step']} (seed {first['seed']})"
        bad = [name for name, r in comparison["end_points"].items() if Equivalence(r["outcome"]) is Equivalence.DIFFERS]
        return f"end points differ: {', '.join(bad)}"
    worst = max((s["losses"]["max_rel_diff"] or 0.0 for s in seeds), default=0.0)
    text = f"every common step of {len(seeds)} seed(s) within the band (max relative difference {worst:.2g})"
    gaps = [f"seed {s['seed']}{missing_text(s['losses'], comparison['a'], comparison['b'])}" for s in seeds
            if s["losses"].get("missing_a") or s["losses"].get("missing_b")]
    if gaps:
        text += " (" + "; ".join(gap.replace("; ", ": ", 1) for gap in gaps) + ")"
    printed = {rounding_text(s["losses"], comparison["a"], comparison["b"]) for s in seeds} - {""}
    if printed:
        text += f" ({'; '.join(sorted(printed))})"
    if only := comparison.get("evaluated_only"):
        other = comparison["b"] if only == comparison["a"] else comparison["a"]
        text += (f"; only the {display(only)} side evaluated: the {display(other)} side has no evaluations, so "
                 "evaluations were not compared")
    if outcome is Parity.UNDECIDED:
        open_points = [name + (f" ({r['reason']})" if r.get("reason") and "samples cannot resolve" in r["reason"]
                               else "")
                       for name, r in comparison["end_points"].items()
                       if Equivalence(r["outcome"]) is Equivalence.UNDECIDED]
        gappy = [s["seed"] for s in seeds if s["losses"]["missing_fraction"] > GAPS_UNDECIDED]
        reason = (f"end points undecided: {', '.join(open_points)}" if open_points else
                  f"too many steps missing on one side (seed {', '.join(map(str, gappy))})" if gappy else
                  "the band lost its power before the last step and there are no end points to test")
        return f"{text}; {reason}"
    return text


def parity_line(analysis: dict) -> str:
    """The overall parity verdict in one line, naming each comparison that decided it."""
    outcome = Parity(analysis["verdict"]["parity"])
    parts = []
    for level in analysis["levels"]:
        for comparison in level["comparisons"].values():
            if outcome is Parity.HOLDS and comparison["b"] == "reference":
                continue
            if outcome is not Parity.HOLDS and Parity(comparison["outcome"]) is not outcome:
                continue
            label = f"{display(comparison['a'])} vs {display(comparison['b'])} at np {level['world_size']}"
            parts.append(f"{label}: {comparison_summary(comparison)}")
    evidence = "; ".join(parts) or "nothing to compare: no world size has two implementations' runs that ended well"
    return f"{outcome.words} ({evidence})"


def step_table(comparison: dict) -> Table:
    headers = ["seed", "common steps", "max rel diff", "first divergence", "rel diff there", "tolerance there",
               "judged to step", "evaluations", "verdict"]
    rows = []
    for seed in comparison["seeds"]:
        losses = seed["losses"]
        worst = num(losses["max_rel_diff"], ".2e")
        if losses["max_at_step"] is not None:
            worst += f" (step {losses['max_at_step']})"
        rows.append([
            str(seed["seed"]), f"{losses['first_step']}-{losses['last_step']} ({losses['n_common']}"
                               f"{missing_text(losses, comparison['a'], comparison['b'])})", worst,
            num(losses["first_divergence_step"], "d"), num(losses["first_divergence_gap"], ".2e"),
            num(losses["tolerance_at_divergence"], ".2e"), num(losses["judged_until"], "d"),
            evaluations_text(seed["evals"]) if seed["evals"] else "none",
            "pass" if seed["passed"] else "FAIL",
        ])
    return Table(headers, rows)


def end_point_table(comparison: dict) -> Table:
    a, b = display(comparison["a"]), display(comparison["b"])
    headers = ["end point", "method", "seeds", f"mean {a}", f"mean {b}", "mean diff", "interval", "margin",
               "resolution", "verdict"]
    rows = []
    for name, r in comparison["end_points"].items():
        interval = DASH_PAIR if r["ci_low"] is None else f"{r['ci_low']:.2e} to {r['ci_high']:.2e}"
        margin = "—" if r["margin"] is None else f"{r['margin']:.3g} ({r['margin_source']})"
        rows.append([name, r["method"], str(r["n_seeds"]), num(r["mean_a"], ".5g"), num(r["mean_b"], ".5g"),
                     num(r["mean_diff"], ".2e"), interval, margin, num(r["resolution"], ".2e"),
                     r["outcome"] + (f": {r['reason']}" if r["reason"] else "")])
    return Table(headers, rows)


DASH_PAIR = "—"


def method_text() -> str:
    return (f"How the verdict is reached (docs/parity.md): first the two records must be the same job (options, "
            "data world size, global batch, workload, steps; framework, launcher, backend and tuning knobs may "
            "differ; versions are warned about). Then every common step, paired by step number, must stay within "
            f"the band: {STEP_RTOL:g} for the first {STEP_K} steps, then the growth that a change known not to "
            "change the job shows on this job, and at no step more than float chaos can grow from the steps "
            "before it (a late jump is a divergence at its step); evaluations are paired the same way. Where the "
            "band keeps its power to the last step the end points are judged by it; otherwise by two one-sided "
            "tests over seeds, paired by seed, against a margin fixed beforehand. Undecided is its own outcome "
            "(exit 4): also where both sides' runs failed alike (non-finite from the same step).")


def parity_blocks(analysis: dict) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Parity"), Para(method_text())]
    for level in analysis["levels"]:
        if not level["comparisons"]:
            continue
        blocks.append(Heading(3, f"np {level['world_size']}"))
        for comparison in level["comparisons"].values():
            title = f"{display(comparison['a'])} vs {display(comparison['b'])}"
            blocks.append(Para(f"**{title}: {Parity(comparison['outcome']).words}.** "
                               f"{comparison_summary(comparison)}. Band: {band_text(comparison['band'])}."))
            if lines := job_lines(comparison):
                blocks.append(Bullets(lines))
            blocks.append(step_table(comparison))
            if comparison["end_points"]:
                blocks.append(end_point_table(comparison))
            if comparison["causes"]:
                blocks += [Para("Likely causes:"), Bullets(cause_lines(comparison["causes"]))]
    return blocks
