"""Time to target in words: the verdict sentence per target and world size, the report's section and the
trade-offs table's cells. Reads the dicts of compare/analysis/time_to_target.py's TargetVerdict.to_dict()."""

from __future__ import annotations

from compare.analysis.records import FINAL_LOSS_STEPS
from compare.analysis.time_to_target import METRICS, Basis, Origin, Outcome, Why
from compare.names import FRAMEWORKS, display
from compare.render.blocks import DASH, Block, Heading, Para, Table
from compare.render.speed_up import even, one_direction

ORIGIN_WORDS = {Origin.LAUNCH: "the launch (start-up included)",
                Origin.FIRST_STEP: "its first logged step (no launch start)", Origin.NONE: "no wall times"}


def target_words(target: dict) -> str:
    """eval_accuracy 0.9 -> "90% accuracy"; eval_loss 0.3 -> "eval loss 0.3"; final_loss -> "training loss"."""
    value = target["value"]
    if target["metric"] == "eval_accuracy":
        return f"{value * 100:g}% accuracy"
    return f"{'eval' if target['metric'] == 'eval_loss' else 'training'} loss {value:g}"


def _span(interval: dict | None, unit: str, spec: str) -> str:
    if interval is None:
        return DASH
    text = f"{interval['mean']:{spec}}{unit}"
    if interval["low"] is None:
        return f"{text} (one seed)"
    low, high = f"{interval['low']:{spec}}", f"{interval['high']:{spec}}"
    return f"{text} (every seed)" if low == high else f"{text} ({low}-{high})"


def _steps(side: dict) -> str:
    return _span(side["steps"], "", ".0f")


def _seconds(side: dict) -> str:
    return _span(side["seconds"], " s", ".1f")


def _best(seed: dict) -> str:
    return f", best {seed['value']:.3g}" if seed["value"] is not None else ""


def _missed(side: dict, what: str = "it") -> str:
    """A side that failed to converge in some seed: in how many, within how many steps, the best it got."""
    missed = [s for s in side["seeds"] if not s["reached"]]
    within = max((s["last_step"] or 0 for s in missed), default=0)
    best = _best(missed[0]) if len(missed) == 1 else ""
    count = "" if len(missed) == len(side["seeds"]) == 1 else f" in {len(missed)} of {len(side['seeds'])} seeds"
    return f"{display(side['framework'])} did not reach {what}{count} (within {within} steps{best})"


def _reaches(side: dict, basis: Basis | None, first: bool, target: str) -> str:
    """"DDP reaches 90% accuracy in 41.0 s (38.2-44.1), step 88" or, after the first, "Horovod in ..."."""
    name = display(side["framework"])
    lead = f"{name} reaches {target}" if first else name
    if basis is Basis.STEPS or side["seconds"] is None:
        return f"{lead} at step {_steps(side)}"
    origin = "" if Origin(side["origin"]) is Origin.LAUNCH else f" from {ORIGIN_WORDS[Origin(side['origin'])]}"
    return f"{lead} in {_seconds(side)}{origin}, step {_steps(side)}"


def _ratio(verdict: dict) -> str:
    """The paired figure where no side is named sooner, said from the side that took less (its factor and the
    interval of it), as every speed figure is (compare/render/speed_up.py)."""
    sooner, factor, low, high = one_direction(verdict["ratio"], verdict["low"], verdict["high"])
    seeds = len(verdict["paired_seeds"])
    unit = "sooner" if _basis(verdict) is Basis.SECONDS else "fewer steps"
    figure = "1.00x either way" if even(factor) else f"{display(sooner)} {factor:.2f}x {unit}"
    interval = f", {verdict['confidence']:.0%} interval {low:.2f}-{high:.2f}" if low is not None else ""
    return f"{figure}{interval} over {seeds} paired seed(s)"


def _basis(verdict: dict) -> Basis | None:
    return verdict["basis"] and Basis(verdict["basis"])


def _basis_note(verdict: dict) -> str:
    if _basis(verdict) is not Basis.STEPS:
        return ""
    origins = {name: Origin(side["origin"]) for name, side in verdict["sides"].items()}
    if Origin.NONE in origins.values():
        return " (in steps: a side's record has no wall times)"
    return (" (in steps: seconds count from " + " and ".join(f"{ORIGIN_WORDS[o]} on {display(n)}"
                                                          for n, o in origins.items()) + ")")


def verdict_sentence(verdict: dict) -> str:
    """One target at one world size, e.g. "np 2: DDP reaches 90% accuracy in 41.0 s (38.2-44.1), step 88,
    Horovod in 47.1 s (44.0-51.3), step 88: DDP 1.15x sooner (95% interval 1.05-1.26 over 2 seeds)"."""
    target = target_words(verdict["target"])
    sides = verdict["sides"]
    outcome, basis, why = Outcome(verdict["outcome"]), _basis(verdict), verdict["why"] and Why(verdict["why"])
    head = f"np {verdict['world_size']}: "
    if outcome is Outcome.ONE_SIDE:
        (side,) = sides.values()
        text = _reaches(side, Basis.SECONDS, True, target) if side["converged"] else _missed(side, target)
        return f"{head}only {display(side['framework'])} ran: {text}"
    if outcome is Outcome.NEITHER_REACHED:
        pick = max if METRICS[verdict["target"]["metric"]].higher_is_better else min
        parts = []
        for side in sides.values():
            values = [x["value"] for x in side["seeds"] if x["value"] is not None]
            best = f", best {pick(values):.3g}" if values else ""
            parts.append(f"{display(side['framework'])} within {max(x['last_step'] or 0 for x in side['seeds'])} "
                         f"steps{best}")
        return f"{head}neither side reached {target} ({'; '.join(parts)}): not reached, a failure to converge on both"
    if outcome is Outcome.NOT_REACHED:
        winner, loser = sides[verdict["sooner"]], next(s for n, s in sides.items() if n != verdict["sooner"])
        return (f"{head}{_reaches(winner, Basis.SECONDS, True, target)}; {_missed(loser)}, a failure to converge: "
                f"{display(winner['framework'])} sooner")
    if outcome is Outcome.UNDECIDED and why is Why.BOTH_MISSED:
        return (f"{head}{target}: {_missed(sides['horovod'])}; {_missed(sides['ddp'])}: undecided, each side "
                "failed to converge in some seed")
    order = [verdict["sooner"], *(f for f in FRAMEWORKS if f != verdict["sooner"])] if verdict["sooner"] \
        else list(FRAMEWORKS)
    both = ", ".join(_reaches(sides[f], basis, i == 0, target) for i, f in enumerate(order))
    note = _basis_note(verdict)
    if outcome is Outcome.SOONER:
        unit = "sooner" if basis is Basis.SECONDS else "fewer steps"
        seeds = len(verdict["paired_seeds"])
        return (f"{head}{both}: {display(verdict['sooner'])} {verdict['ratio']:.2f}x {unit} "
                f"({verdict['confidence']:.0%} interval {verdict['low']:.2f}-{verdict['high']:.2f} over {seeds} "
                f"paired seeds){note}")
    if outcome is Outcome.NO_CLEAR_DIFFERENCE:
        return f"{head}{both}: no clear difference ({_ratio(verdict)}){note}"
    if why is Why.CONTENDED:
        return (f"{head}{both}: no reliable verdict, other processes used the cores during a launch "
                f"({_ratio(verdict)}){note}")
    ratio = f" ({_ratio(verdict)})" if verdict["ratio"] is not None else ""
    return f"{head}{both}: undecided, one paired seed gives no interval{ratio}{note}"


def time_to_target_line(analysis: dict) -> str | None:
    """For the terminal: every verdict, joined; None without --target."""
    verdicts = analysis.get("time_to_target")
    return "; ".join(verdict_sentence(v) for v in verdicts) if verdicts else None


def _seed_cell(seed: dict) -> str:
    if not seed["reached"]:
        return f"{seed['seed']}: not reached (within {seed['last_step']} steps{_best(seed)})"
    seconds = f", {seed['seconds']:.1f} s" if seed["seconds"] is not None else ""
    return f"{seed['seed']}: step {seed['step']}{seconds}"


def time_to_target_blocks(analysis: dict) -> list[Block]:
    verdicts = analysis.get("time_to_target")
    if not verdicts:
        return []
    rows = []
    for verdict in verdicts:
        for side in verdict["sides"].values():
            rows.append([target_words(verdict["target"]), display(side["framework"]), str(verdict["world_size"]),
                         f"{side['reached']}/{len(side['seeds'])}", _steps(side), _seconds(side),
                         ORIGIN_WORDS[Origin(side["origin"])], "; ".join(_seed_cell(s) for s in side["seeds"])])
    return [
        Heading(2, "Time to target"),
        Para("Which side reaches the target quality sooner, MLPerf's time-to-target made two-sided: for each seed "
             "of round 1, the first evaluation at the target (accuracy and eval loss are evaluated after each "
             f"epoch; the training loss, as the mean of its last {FINAL_LOSS_STEPS} steps, at every step) and the "
             "wall-clock seconds from the launch to it, start-up and rendezvous included (a later seed of a "
             "launch: the launch's start-up plus its own time from its first step). A seed that never reaches "
             "the target within its steps has failed to converge and gets no time; a side that failed in some "
             "seed loses to one that converged in every seed. Otherwise the seconds are paired by seed (the "
             "geometric mean of the two sides' ratios, t interval on the logarithms), said as the factor by which "
             "one side was sooner, and that side is named sooner when the interval excludes 1; a launch that met "
             "contention withholds it. Steps and seconds: geometric mean "
             "over the seeds that reached it, with the 95% t interval."),
        *[Para(f"**{verdict_sentence(v)}.**") for v in verdicts],
        Table(["target", "framework", "np", "seeds reached", "steps", "seconds", "counted from", "per seed"], rows),
    ]


def tradeoff_headers(analysis: dict) -> list[str]:
    """One trade-offs column per target: the seconds to it."""
    targets = list({str(v["target"]): v["target"] for v in analysis.get("time_to_target") or []}.values())
    return [f"s to {target_words(t)}" for t in targets]


def tradeoff_cells(analysis: dict, framework: str, world_size: int) -> list[str]:
    cells: dict[str, str] = {}
    for verdict in analysis.get("time_to_target") or []:
        key = str(verdict["target"])
        side = verdict["sides"].get(framework) if verdict["world_size"] == world_size else None
        if side is None:
            cells.setdefault(key, DASH)
            continue
        if not side["converged"]:
            cells[key] = f"not reached ({side['reached']}/{len(side['seeds'])})"
        elif side["seconds"] is not None:
            cells[key] = _seconds(side)
        else:
            cells[key] = f"step {_steps(side)}"
    return list(cells.values())
