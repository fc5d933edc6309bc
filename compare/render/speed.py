"""The report's speed parts: the speed verdict in words, what was compared, the rounds and the contention
each launch met, the timing tables, and the trade-offs table (speed-up, scaling, start-up, exposed
communication, recovery, code)."""

from __future__ import annotations

from compare.analysis import group_sequential
from compare.analysis.speed import MIN_ROUNDS, SpeedOutcome
from compare.analysis.speed_figures import SPEED_ROUNDS
from compare.names import FRAMEWORKS, display
from compare.render.blocks import DASH, Block, Heading, Para, Table, ms, num
from compare.render.speed_up import faster_by, other, speed_up, speed_up_words
from compare.render.time_to_target import tradeoff_cells, tradeoff_headers

BACKEND_NAMES = {"mpi": "MPI", "gloo": "Gloo", "nccl": "NCCL", "none": "no communication"}
YIELD_SETTING = "OMPI_MCA_mpi_yield_when_idle=1"
BUSY_POLL_NOTE = ("Horovod ran on Open MPI with ranks that lacked a free core: Open MPI busy-polls while a rank waits "
                  "for the others, so a waiting rank burns the time slices the others need. "
                  f"{YIELD_SETTING} (mpi_yield_when_idle) in the environment of `compare run` makes waiting ranks "
                  "yield; `--horovod-controller gloo` avoids MPI")
WITHHELD = (SpeedOutcome.OVERSUBSCRIBED, SpeedOutcome.CONTENDED)


# ---- the speed verdict ----------------------------------------------------------------------------------

def contention_words(judged: dict, who: str) -> str:
    """Why a launch does not count: `who` names it ("the Horovod launch of round 2")."""
    if judged["cause"] == "oversubscribed":
        return f"{judged['demand']} ranks x threads on {judged['cores']} cores (oversubscribed)"
    if judged["cause"] == "steal":
        return f"the hypervisor took {judged['steal_fraction']:.0%} of the CPU time (steal) during {who}"
    if judged["cause"] == "others":
        top = judged["top_others"][:1]
        named = f", most of it {top[0]['name']} (pid {top[0]['pid']})" if top else ""
        return f"other processes used {judged['others_cores']:.0%} of a core during {who}{named}"
    return ""


def launch_words(speed: dict, launch: dict) -> str:
    """One launch ({"round", "framework"}) of a speed verdict's rounds, and why it does not count."""
    number, framework = launch["round"], launch["framework"]
    judged = next(row for row in speed["rounds"] if row["round"] == number)["contention"][framework]
    who = f"the {display(framework)} launch" + (f" of round {number}" if speed["n_rounds"] > 1 else "")
    return contention_words(judged, who)


def withheld_sentence(speed: dict) -> str:
    n = speed["n_rounds"]
    count = (f" ({len(speed['contended_rounds'])} of {n} rounds contended)"
             if n > 1 and SpeedOutcome(speed["outcome"]) is SpeedOutcome.CONTENDED else "")
    return f"no reliable speed verdict at np {speed['world_size']}: {launch_words(speed, speed['withheld_by'])}{count}"


def speed_sentence(speed: dict) -> str:
    """The speed verdict at one world size, e.g. "DDP is 1.20x faster than Horovod at np 2 (95% CI 1.15-1.25,
    4 rounds)", from compare_speed's figures."""
    outcome = SpeedOutcome(speed["outcome"])
    if outcome in WITHHELD:
        return withheld_sentence(speed)
    world_size = speed["world_size"]
    used = len(speed["rounds_used"])
    if outcome is SpeedOutcome.TOO_FEW_ROUNDS:
        return (f"no speed verdict at np {world_size}: {used} round{'s' * (used != 1)} of launches, a verdict needs "
                f"{MIN_ROUNDS} (compare run --repeats {MIN_ROUNDS}); {speed_up_words(speed['step_time_ratio'])}")
    over = f"{used} rounds"
    if outcome is SpeedOutcome.NO_INTERVAL_YET:
        return (f"no clear difference at np {world_size}: {speed_up_words(speed['step_time_ratio'])} "
                f"({over}: too few for an {interval_name(speed)})")
    conf = interval_name(speed)
    faster, factor, low, high = speed_up(speed)
    if outcome in (SpeedOutcome.DDP_FASTER, SpeedOutcome.HOROVOD_FASTER):
        sentence = (f"{display(faster)} is {factor:.2f}x faster than {display(other(faster))} at np {world_size} "
                    f"({conf} {low:.2f}-{high:.2f}, {over})")
    else:
        why = ", rounds disagree in direction" if outcome is SpeedOutcome.ROUNDS_DISAGREE else ""
        sentence = (f"no clear difference at np {world_size}: {speed_up_words(speed['step_time_ratio'])} "
                    f"({conf} {low:.2f}-{high:.2f} over {over}{why})")
    if speed["left_out"]:
        sentence += "; left out: " + "; ".join(launch_words(speed, launch) for launch in speed["left_out"])
    return sentence


def interval_name(speed: dict) -> str:
    """What the verdict's interval is: "95% CI" (a fixed number of rounds), "group-sequential 95% interval"
    (the default rounds), "anytime-valid 95% interval" (a long budget's confidence sequence)."""
    confidence = f"{speed['confidence']:.0%}"
    if not speed.get("sequential"):
        return f"{confidence} CI"
    if speed.get("method") == group_sequential.METHOD:
        return f"group-sequential {confidence} interval"
    return f"anytime-valid {confidence} interval"


def aa_sentence(aa: dict, speed: dict | None) -> str:
    """The A/A check at one world size (compare run --aa), e.g. "A/A check at np 1, DDP against DDP: twin/first
    1.01 (95% CI 0.95-1.07, 4 rounds), holds 1; spread 0.05 (Horovod/DDP 0.07)"."""
    outcome, world_size = SpeedOutcome(aa["outcome"]), aa["world_size"]
    name = display(aa["framework"])
    head = f"A/A check at np {world_size}, {name} against {name}"
    if outcome in WITHHELD:
        return f"{head}: withheld: {launch_words(aa, aa['withheld_by'])}"
    used = len(aa["rounds_used"])
    if aa["ci_low"] is None:
        return f"{head}: twin/first {aa['ratio']:.2f} over {used} round{'s' * (used != 1)}, too few for an interval"
    conf = f"anytime-valid {aa['confidence']:.0%} interval" if outcome is SpeedOutcome.NO_INTERVAL_YET else (
        f"{aa['confidence']:.0%} CI")
    found = {"twin": "the twin is slower", "first": "the twin is faster"}.get(aa["slower"] or "", "holds 1"
                                                                               if aa["holds_one"] else "excludes 1")
    spread = f"; spread {aa['log_sd']:.3f}" if aa.get("log_sd") is not None else ""
    if spread and speed and speed.get("log_sd") is not None:
        spread += f" (Horovod/DDP {speed['log_sd']:.3f})"
    return (f"{head}: twin/first {aa['ratio']:.2f} ({conf} {aa['ci_low']:.2f}-{aa['ci_high']:.2f}, {used} rounds), "
            f"{found}{spread}")


def speed_line(analysis: dict) -> str:
    """The speed verdict of the whole comparison: every world size's sentence (and its A/A check), or why
    there is none."""
    speeds = [speed_sentence(level["speed"]) for level in analysis["levels"] if level.get("speed")]
    speeds += [aa_sentence(level["aa"], level.get("speed")) for level in analysis["levels"] if level.get("aa")]
    if speeds:
        return "; ".join(speeds)
    imported = sorted({f"{display(r['framework'])} np {r['world_size']}" for r in analysis.get("imported") or []})
    if imported:
        return (f"no speed verdict: {', '.join(imported)} {'is' if len(imported) == 1 else 'are'} imported, "
                "timed on another machine or not at all")
    if any({"horovod", "ddp"} <= set(level.get("timing") or {}) for level in analysis["levels"]):
        return "no speed rounds were launched (compare run --repeats 0): the timing tables only"
    return "no world size has both Horovod and DDP runs to compare speed"


# ---- the summary's figures ------------------------------------------------------------------------------

def source_cell(row: dict) -> str:
    """Where a summary row's step time and throughput come from, e.g. "4 speed rounds", "parity launch"."""
    if row["source"] == SPEED_ROUNDS:
        rounds = f"{row['rounds']} speed round{'s' * (row['rounds'] != 1)}"
        notes = ["round 1 among them"] if row["parity_launch_counted"] else []
        if row.get("rounds_left_out"):
            notes.append(f"{row['rounds_left_out']} left out: contended")
        return f"{rounds} ({'; '.join(notes)})" if notes else rounds
    return "parity launch"


def figures_note(analysis: dict) -> str | None:
    """What the summary's step times and throughput are, in one line (under the table and the terminal's)."""
    rows = analysis["summary"]
    parts = []
    if any(r["source"] == SPEED_ROUNDS for r in rows):
        parts.append("Horovod's and DDP's are the speed verdict's: each launch's median step, their geometric mean "
                     "over the rounds the verdict counts, so Horovod's over DDP's is the verdict's ratio (the "
                     "parity launch's figures are in the details, under Timing)")
    if any(r["parity_launch_counted"] for r in rows):
        parts.append("with `--timed-seconds 0` or `--repeats 0` the verdict's rounds include round 1, the parity "
                     "launch (its first seed)")
    if any(r["source"] != SPEED_ROUNDS and r["framework"] in FRAMEWORKS for r in rows):
        parts.append("where no speed verdict reads rounds (one framework, imported runs) the parity launch's: "
                     "round 1, every seed, shorter than a speed launch")
    if any(r["framework"] == "reference" for r in rows):
        parts.append("the reference's from its parity launch")
    return "step times and throughput: " + "; ".join(parts) if parts else None


# ---- what was compared ----------------------------------------------------------------------------------

def setup_text(level: dict) -> str:
    """The configurations one world size compared, e.g. "Horovod over MPI (horovodrun) vs DDP over Gloo
    (torchrun), 1 thread per rank, 2 ranks on 2 cores"."""
    found, world_size = level["compared"], level["world_size"]
    text = " vs ".join(f"{display(f)} over {BACKEND_NAMES.get(str(s['backend']), s['backend'])} ({s['launcher']})"
                       for f, s in found["sides"].items())
    threads, cores = found["threads"], found["cores"]
    if threads:
        text += f", {'/'.join(map(str, threads))} thread{'s' * (threads != [1])} per rank"
    if cores:
        text += f", {world_size} rank{'s' * (world_size != 1)} on {cores} core{'s' * (cores != 1)}"
    return text


def speed_summary_blocks(analysis: dict) -> list[Block]:
    """Under the verdict: the setups each world size compared, and Open MPI's busy-polling where it bit."""
    levels = [level for level in analysis["levels"] if level.get("compared")]
    setups = [f"np {level['world_size']}: {text}" for level in levels if (text := setup_text(level))]
    blocks: list[Block] = []
    if setups:
        blocks.append(Para(f"**Setups:** {'; '.join(setups)}."))
    if any(level["compared"]["busy_poll"] for level in levels):
        blocks.append(Para(f"**Note:** {BUSY_POLL_NOTE}."))
    return blocks


SPEED_WORDS = {
    SpeedOutcome.OVERSUBSCRIBED: "withheld (oversubscribed)", SpeedOutcome.CONTENDED: "withheld (contended)",
    SpeedOutcome.TOO_FEW_ROUNDS: "too few rounds", SpeedOutcome.NO_INTERVAL_YET: "too few rounds",
    SpeedOutcome.INTERVAL_HOLDS_ONE: "no clear difference", SpeedOutcome.ROUNDS_DISAGREE: "no clear difference",
    SpeedOutcome.DDP_FASTER: "DDP faster", SpeedOutcome.HOROVOD_FASTER: "Horovod faster",
}


def speed_glance(analysis: dict) -> list[Block]:
    """The speed verdict's figures beside the parity card: at each world size the faster side's speed-up and its
    interval, as the headline says them."""
    rows, confidence = [], None
    for level in analysis["levels"]:
        speed = level.get("speed")
        if not speed:
            continue
        confidence = speed["confidence"]
        faster, factor, low, high = speed_up(speed)
        interval = f"{low:.2f}-{high:.2f}" if low is not None and high is not None else DASH
        rows.append([f"np {level['world_size']}", display(faster), f"{factor:.2f}x", interval,
                     str(len(speed["rounds_used"])), SPEED_WORDS[SpeedOutcome(speed["outcome"])]])
    if confidence is None:
        return []
    # the headline's convention: the faster side's speed-up and its interval, not the Horovod/DDP ratio
    return [Table(["speed", "faster", "speed-up", f"{confidence:.0%} interval", "rounds", "verdict"], rows)]


# ---- rounds and timing ----------------------------------------------------------------------------------

def contention_cell(judged: dict) -> str:
    """One launch's contention in a table cell: others' CPU, own CPU per rank, steal, load before -> after."""
    record = judged.get("record")
    if not record:
        return "not measured"
    parts = [f"others {record['others_cores']:.0%} of a core", f"own {record['own_cpu_per_rank']:.0%}/rank"]
    if record.get("steal_fraction"):
        parts.append(f"steal {record['steal_fraction']:.1%}")
    parts.append(f"load {record['load_before'][0]:.1f}→{record['load_after'][0]:.1f}")
    flag = {"others": "CONTENDED: ", "steal": "CONTENDED: ", "oversubscribed": "OVERSUBSCRIBED: "}.get(
        judged["cause"] or "", "")
    return flag + ", ".join(parts)


def rounds_table(speed: dict) -> Table:
    rows = []
    for row in speed["rounds"]:
        order = " → ".join(display(f) for f in row["order"]) if row["order"] else DASH
        used = "yes" if row["round"] in speed["rounds_used"] else "left out"
        rows.append([str(row["round"]), order, ms(row["horovod_median_s"]), ms(row["ddp_median_s"]),
                     faster_by(row["ratio"]), used, contention_cell(row["contention"]["horovod"]),
                     contention_cell(row["contention"]["ddp"])])
    return Table(["round", "order", "Horovod median ms", "DDP median ms", "faster, by", "counted",
                  "contention, Horovod launch", "contention, DDP launch"], rows)


def _size_words(state: dict) -> str:
    """One world size's sequential state, e.g. "np 2 ±22% (target ±15%) after 8 rounds"."""
    width = f"±{state['half_width']:.1%}" if state.get("half_width") is not None else "no interval yet"
    target = f" (target ±{state['target']:.0%})" if state.get("target") else ""
    rounds = f" after {state['rounds']} rounds" if state.get("rounds") else ""
    return f"np {state['world_size']} {width}{target}{rounds}"


def budget_words(design: dict) -> str:
    """Why the budget stopped the rounds, in figures that agree with the wall time: the rounds stop when the next
    one would overrun the budget, not when it is used up, so "spent" would be untrue beside a shorter wall time."""
    budget, elapsed, next_s = design["time_budget_s"], design.get("elapsed_s"), design.get("next_round_s")
    after = f" after {elapsed:.0f} s" if elapsed is not None else ""
    expected = f" (about {next_s:.0f} s)" if next_s is not None else ""
    return f"the next round{expected} would not fit in the time budget of {budget:g} s{after}"


def stop_line(design: dict, states: list[dict | None]) -> str:
    """Why the sequential rounds stopped (every world size at its target, or short of it and why), in one line,
    from each world size's sequential state (compare_speed's "sequential")."""
    states = [s for s in states if s]
    short = [s for s in states if s.get("stopped") != "precision"]
    if not short and states:
        return "rounds: every world size reached its target: " + ", ".join(_size_words(s) for s in states)
    why = {"failed": "a launch failed",
           "last look": f"the design's last planned look ({design.get('planned_rounds')} rounds) was reached"}.get(
        str(design.get("stopped")), budget_words(design))
    if not any(s.get("target") for s in states):
        return f"rounds: {why} ({', '.join(_size_words(s) for s in states)})"
    more = " (`--time-budget` for more)" if design.get("stopped") in ("budget", "last look") else ""
    reached = [s for s in states if s not in short]
    sizes = ", ".join(f"np {s['world_size']}" for s in short)
    text = f"rounds: stopped short of the target at {sizes}: {why}{more}; " + ", ".join(map(_size_words, short))
    if reached:
        text += "; reached: " + ", ".join(_size_words(s) for s in reached)
    return text


def precision_text(speed: dict) -> str:
    design = speed.get("sequential")
    if design:
        return (f" Rounds were launched until the interval was precise enough (compare run's default; "
                f"`--precision`, `--time-budget`), "
                f"so the interval is an {design['method']} (docs/benchmarks.md), which holds however the rounds "
                f"stopped; {stop_line(design, [design])}.")
    if speed.get("half_width") is None:
        return ""
    n = len(speed["rounds_used"])
    return (f" With {n} rounds the interval reaches ±{speed['half_width']:.0%} around the ratio: smaller "
            "differences read as no clear difference (`--repeats` for more rounds).")


def timing_blocks(analysis: dict) -> list[Block]:
    warmup = analysis["settings"]["warmup"]
    blocks: list[Block] = [
        Heading(2, "Timing"),
        Para(
            "The speed verdict comes from rounds of launches: in each round both frameworks are launched once "
            "at each world size, the order reversed every other round (A B, B A ...) so that drift favours "
            "neither side. A round's ratio is the Horovod/DDP ratio of the two launches' median step times; "
            "the verdict takes their geometric mean with an interval over rounds: when rounds are launched until "
            "it is precise enough (the default), a group-sequential repeated confidence interval (planned looks; "
            "an anytime-valid confidence sequence for budgets over 15 minutes), a t interval (a paired test) for "
            "a fixed number (`--repeats N`). It names a winner only when the interval excludes 1 "
            f"(with a fixed number, every round pointing the same way too) and at least {MIN_ROUNDS} rounds ran "
            "on a free machine. A round during which other processes used the "
            "cores the job needed, or the hypervisor took time (steal), is left out and named; too few clean "
            "rounds, or ranks x threads beyond the cores, withhold the verdict. Each figure is said from the "
            "faster side: its speed-up over the other and that speed-up's interval (a round's, under "
            "\"faster, by\")."
        ),
        Para(
            f"Under each round table, the parity launch's (round 1, every seed), not the speed verdict's "
            f"figures: step times of the slowest rank after {warmup} warm-up steps, pooled over "
            "seeds. `optimizer` includes Horovod's wait for outstanding allreduces; DDP overlaps its allreduce "
            "with `backward`."
        ),
    ]
    for level in analysis["levels"]:
        blocks.append(Heading(3, f"np {level['world_size']}"))
        speed = level.get("speed")
        if speed:
            blocks.append(Para(f"**{speed_sentence(speed)}.**{precision_text(speed)}"))
            blocks.append(rounds_table(speed))
        rows, phases = [], []
        for framework, t in level["timing"].items():
            step = t["step"]
            spread = DASH if step["sd"] is None else f"{ms(step['mean'])} ± {ms(step['sd'])}"
            rows.append([
                display(framework), ",".join(map(str, t["seeds"])), str(step["n"]), ms(step["median"]),
                ms(step["p90"]), spread, num(t["global_batch"], "d"), num(t["throughput"], ".1f"),
                num(t["scaling_efficiency"], ".2f"),
            ])
            b = t["breakdown"]
            keys = ("data_s", "forward_s", "backward_s", "optimizer_s", "unaccounted_s", "step_time_s")
            phases.append([display(framework), *(ms(b.get(k)) for k in keys)])
        if rows:
            blocks.append(Para("The parity launch (round 1):"))
        blocks.append(Table(["framework", "seeds", "steps measured", "median ms", "p90 ms", "mean ± sd ms",
                             "global batch", "samples/s", "scaling eff."], rows))
        blocks.append(Para("Mean time per step by phase (ms), the parity launch:"))
        blocks.append(Table(["framework", "data", "forward", "backward", "optimizer", "unaccounted", "step"],
                            phases))
    return blocks


# ---- trade-offs ----------------------------------------------------------------------------------------

def _recovery_cell(entry: dict | None) -> str:
    if not entry:
        return DASH
    text = f"{entry['recovered']}/{entry['scenarios']} faults"
    if entry["seconds_to_next_step"] is not None:
        text += f", {entry['seconds_to_next_step']:.1f} s to the next step"
    if entry["steps_lost"] is not None:
        text += f", {entry['steps_lost']:g} steps lost"
    return text


def _exposed_cell(seconds: float | None) -> str:
    if seconds is None:
        return DASH
    return ms(seconds) if seconds >= 0 else f"{ms(seconds)} (np 1 was slower: noise)"


def tradeoff_blocks(analysis: dict) -> list[Block]:
    found = analysis.get("tradeoffs")
    if not found or not found["rows"]:
        return []
    rows = [[display(r["framework"]), str(r["world_size"]), num(r["speedup"], ".2f"),
             num(r["scaling_efficiency"], ".2f"), num(r["startup_s"], ".1f"),
             _exposed_cell(r["exposed_comm_s"]),
             _recovery_cell(r["recovery"]) if r["world_size"] > 1 else DASH, num(r["code_lines"], "d"),
             *tradeoff_cells(analysis, r["framework"], r["world_size"])]  # with --target: seconds to each
            for r in found["rows"]]
    faults = (f"recovery from `{found['faults_source']}` (`compare faults`, np 2; Horovod elastic, DDP torchrun "
              "restarts)" if found["faults_source"] else
              "recovery: no `compare faults` results found (run `python -m compare faults`)")
    shared = f"; both build on {found['shared_lines']} shared lines" if found.get("shared_lines") else ""
    return [
        Heading(2, "Trade-offs"),
        Para("What distributing this job buys and costs, per framework, measured here. Speed-up: throughput "
             "against the same framework at np 1 (the per-worker batch is fixed, so ideal is n); start-up: "
             "from the launch to the end of the first step, rendezvous included (median over launches); "
             "exposed communication: backward + optimizer time per step (the phases that hold DDP's bucket "
             "allreduces and Horovod's wait for its allreduces, slowest rank) less the same at np 1; "
             f"{faults}; code: lines of the framework's `backend.py`{shared}."),
        Table(["framework", "np", "speed-up vs 1 worker", "scaling eff.", "start-up s", "exposed comm ms/step",
               "recovery", "framework code lines", *tradeoff_headers(analysis)], rows),
    ]



# ---- simulated error rates (docs/benchmarks.md) -----------------------------------------------------------

def error_rate_markdown(judged: list[dict]) -> str:
    """The simulated rates with their exact 95% intervals, each against the bound docs/benchmarks.md states."""
    lines = ["| design | true Horovod/DDP | outcome | simulated rate (95% interval) | stated | rounds: median, p90 |",
             "|---|---|---|---|---|---|"]
    for entry in judged:
        claim, outcome = entry["claim"], entry["outcome"]
        stated = "shown" if claim.kind == "shown" else f"{claim.kind} {claim.bound:.0%}"
        if claim.kind != "shown" and not entry["holds"]:
            stated += " **NOT SUPPORTED**"
        rounds = f"{outcome['median_rounds']:g}, {outcome['p90_rounds']:g}"
        lines.append(f"| {claim.design.name} | {claim.slower:g} | {claim.what} | {entry['rate']:.2%} "
                     f"({entry['low']:.2%}-{entry['high']:.2%}) of {outcome['trials']} | {stated} | {rounds} |")
    return "\n".join(lines)
