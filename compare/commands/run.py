"""python -m compare run: launch both frameworks at each world size with their real launchers, then report.

Processes and files live here; the analysis itself is pure (compare/analysis/)."""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from compare.analysis.contention import launch_contention
from compare.analysis.parity import MIN_OVERLAP
from compare.analysis.records import find_runs
from compare.analysis.speed import compare_speed
from compare.analysis.time_to_target import Target
from compare.analysis.timing import block_variance, launch_median, steady_window_s, window_steps
from compare.commands import scheduler
from compare.commands.arguments import AnalysisSettings, analysis_settings, resolve_targets
from compare.commands.report import ReportInputs, publish
from compare.commands.runner import Runner
from compare.commands.sequential_rounds import (
    clear_design,
    launches_per_round,
    more_rounds,
    sequential_design_wanted,
    start_design,
    targets_for,
)
from compare.commands.sweep import run_sweep, sweep_plan
from compare.defaults import DEFAULT_BUDGET_S, DEFAULT_ROUNDS, DEFAULT_SEEDS, DEFAULT_TIMED_S
from compare.launch.lines import Launch, private_network_available
from compare.launch.scheduling import LocalScheduler, Scheduler
from compare.launch.slurm import SlurmScheduler
from compare.launch.tuning import TUNING_RECORD, Tuning, load_tuning, mismatch
from compare.names import FRAMEWORKS, Exit, display
from compare.render.speed import stop_line
from workload.errors import UsageError
from workload.files import write_json_atomic
from workload.options import ONE_SIDED, Options, check_writable, options_from_namespace, validate
from workload.step_plan import planned_steps, steps_per_epoch

STARTUP_GUESS_S = 4.0  # the least a launch takes before its first step (docs/benchmarks.md: 4.2-6.9 s)
STEP_GUESS_S = 0.002  # a fast step of the default job
REFERENCE_AUTO = ("mlp", "digits")  # small enough that one process on the global batch is cheap
# Options the single-process reference cannot emulate: the reference is skipped, and the report says why.
REFERENCE_CANNOT = {"uneven_inputs": "--uneven-inputs needs real ranks (one process cannot run out of batches "
                                     "before another)"}


def reject_one_sided(options: Options, frameworks: tuple[str, ...]) -> None:
    """Features one framework has and the other has not (workload/options.py): `compare run` passes the same
    options to both sides, so it refuses one unless the comparison runs the owner's side alone."""
    for field_name, (flag, owner) in ONE_SIDED.items():
        other = next((f for f in frameworks if f != owner), None)
        if getattr(options, field_name) not in (None, False) and other is not None:
            raise UsageError(f"{flag} has no {display(other)} equivalent (a {display(owner)} feature): "
                             f"see `python -m compare matrix` for how it compares, or run one side with "
                             f"--frameworks {owner}")


@dataclass(frozen=True, kw_only=True)
class ComparisonPlan(ReportInputs):
    """A comparison, read and checked once from the command line: its first round of launches and what the
    later stages (more rounds, the sequential design, the report) need. A ReportInputs, so that `publish`
    takes it as it is."""

    launches: tuple[Launch, ...]  # round 1, in the order they run
    options: Options  # the comparison's, before tuning and --step-delay-for
    train_size: int  # training samples: planned steps follow from it
    frameworks: tuple[str, ...]
    world_sizes: tuple[int, ...]  # distinct, ascending
    tuning: Tuning
    private_network: bool
    out: Path
    timeout: float
    repeats: int
    horovod_controller: str
    launcher: str
    scheduler: Scheduler  # where the launches run: here, or as Slurm jobs
    step_delay_for: str | None  # a framework, or "twin"
    timed_seconds: float  # each speed launch's steady window (the least, when chosen); 0: round 1 is a speed round
    window_chosen: bool = False  # --timed-seconds not given: the window is chosen from round 1 (window_plan)
    aa: str | None  # the framework launched twice in every speed round (A/A), or None
    window: dict[int, int] | None = None  # world size -> steps of a speed launch, from round 1's step times
    precision: dict[int, float] | None  # world size -> the +-fraction the sequential rounds aim at
    time_budget: float | None  # set (a default if need be) exactly when the rounds are sequential
    budget_given: bool = False  # --time-budget on the command line: the default's first rounds are not forced

    @property
    def sequential(self) -> bool:
        return self.time_budget is not None


def plan(ns: argparse.Namespace, analysis: AnalysisSettings | None = None,
         targets: tuple[Target, ...] = ()) -> ComparisonPlan:
    """The whole comparison planned from the command line, its first round of launches made. Refuses bad options
    first, its own before validate()'s. `analysis` defaults to the namespace's (main reads it earlier, for its
    errors' order)."""
    options = options_from_namespace(ns)
    if ns.seeds is None:
        options = replace(options, seeds=DEFAULT_SEEDS if ns.seed == 0 else (ns.seed,))
    # compare run's own options first: validate() loads the workload last, which imports torch (over a second)
    if not ns.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {ns.timeout}")
    if (negative := next((n for n in sorted(set(ns.np)) if n <= 0), None)) is not None:
        raise UsageError(f"--np values must be positive, got {negative}")
    if ns.network == "private" and not private_network_available():
        raise UsageError("--network private needs root, unshare and ip (iproute2): use --network host")
    if (misuse := scheduler.local_misuse(ns)) is not None:
        raise UsageError(misuse)
    cannot = [why for name, why in REFERENCE_CANNOT.items() if getattr(options, name)]
    if cannot and ns.reference == "on":
        raise UsageError(f"--reference on: {cannot[0]}; use --reference off")
    reject_one_sided(options, ns.frameworks)
    validate(options)
    tuning = load_tuning(ns.tuned)
    private = ns.network == "private" or (ns.network == "auto" and private_network_available())
    settings = scheduler.slurm_settings(ns) if ns.scheduler == "slurm" else None
    where: Scheduler = LocalScheduler() if settings is None else SlurmScheduler(settings, ns.timeout)
    private = private and settings is None  # Slurm places the ranks: no network namespace of our own
    framework_options = delayed_side(ns.step_delay_for, {name: tuning.options_for(name, options)
                                                         for name in ns.frameworks})
    framework_options.pop("twin", None)  # twins are launched in the speed rounds only
    reference = ns.reference == "on" or (ns.reference == "auto" and options.workload in REFERENCE_AUTO)
    sequential = sequential_design_wanted(ns)
    world_sizes = tuple(sorted(set(ns.np)))
    from workload.workloads import WORKLOADS  # torch, as validate() loaded it: not for `compare run --help`

    comparison = ComparisonPlan(
        analysis=analysis or analysis_settings(ns), targets=targets, tuning=tuning, private_network=private,
        reference_skipped=cannot[0] if cannot and reference else None, launches=(), options=options,
        train_size=len(WORKLOADS[options.workload].make_data(options.dataset_size, options.text_dir).train),
        frameworks=ns.frameworks, world_sizes=world_sizes, out=ns.out, timeout=ns.timeout,
        repeats=DEFAULT_ROUNDS if ns.repeats is None else ns.repeats, horovod_controller=ns.horovod_controller,
        launcher=ns.launcher,
        scheduler=where, step_delay_for=ns.step_delay_for, aa=ns.aa,
        timed_seconds=DEFAULT_TIMED_S if ns.timed_seconds is None else ns.timed_seconds,
        window_chosen=ns.timed_seconds is None,
        precision=targets_for(ns.precision, world_sizes) if sequential else None,
        time_budget=DEFAULT_BUDGET_S if sequential and ns.time_budget is None else ns.time_budget,
        budget_given=ns.time_budget is not None)
    first = first_round(comparison, framework_options, reference and not cannot)
    return replace(comparison, launches=tuple(first))


def first_round(plan: ComparisonPlan, framework_options: dict[str, Options], reference: bool) -> list[Launch]:
    """Round 1: every framework at every world size with every seed, the reference and the calibration pairs."""
    options, private, out, make = plan.options, plan.private_network, plan.out, plan.scheduler.make
    launches = []
    for world_size in plan.world_sizes:
        steps = planned_steps(options, plan.train_size, world_size)  # fails early: too few samples for this np
        if steps < MIN_OVERLAP:
            raise UsageError(f"np {world_size} trains {steps} step(s); parity needs at least {MIN_OVERLAP} "
                             "(more --epochs or --steps)")
        for framework in plan.frameworks:
            launches.append(make(framework, world_size, framework_options[framework],
                                 out / "runs" / f"{framework}-np{world_size}",
                                 horovod_controller=plan.horovod_controller, launcher=plan.launcher,
                                 extra_env=plan.tuning.env.get(framework), private_network=private))
        if reference and world_size > 1:
            launches.append(make("reference", world_size, options,
                                 out / "runs" / f"reference-np{world_size}", private_network=private))
        # The calibration pairs' second halves (docs/parity.md): DDP, and the reference where it runs, again with
        # the initial weights nudged one ulp; their divergence from the first halves measures float chaos.
        if "ddp" in plan.frameworks:
            calibration = replace(framework_options["ddp"], perturb_init_ulps=1)
            launches.append(make("ddp", world_size, calibration, out / "runs" / f"calibration-np{world_size}",
                                 launcher=plan.launcher, extra_env=plan.tuning.env.get("ddp"),
                                 private_network=private))
        if reference and world_size > 1:
            calibration = replace(options, perturb_init_ulps=1)
            launches.append(make("reference", world_size, calibration,
                                 out / "runs" / f"calibration-reference-np{world_size}", private_network=private))
    return launches


def delayed_side(side: str | None, framework_options: dict[str, Options],
                 aa: str | None = None) -> dict[str, Options]:
    """--step-delay-for FRAMEWORK: --step-delay-ms slows that side only (a known difference, for tests);
    "twin": the A/A twin only. With --aa FRAMEWORK the twin's options are added under "twin"."""
    if aa is not None:
        framework_options = {**framework_options, "twin": replace(framework_options[aa], aa_twin=True)}
    if side is None:
        return framework_options
    return {name: o if name == side else replace(o, step_delay_ms=None) for name, o in framework_options.items()}


def window_plan(plan: ComparisonPlan, runs: list) -> dict[int, dict]:
    """World size -> the steady window each speed launch times: its seconds and the steps that take them at
    round 1's median step time (the geometric mean over the frameworks, so that both sides train the same
    steps), with the launch overhead and step spread it was chosen from. --timed-seconds given: that window;
    else the window timing.steady_window_s chooses from round 1's launches (their wall time less their steps:
    the overhead; how their medians settle over blocks of steps: the spread), at least DEFAULT_TIMED_S. A world
    size whose round 1 gave no step time trains its own steps."""
    window = {}
    for world_size in plan.world_sizes:
        launches = [[r for r in runs if r.ok and r.round == 1 and r.framework == f and r.world_size == world_size
                     and not r.is_calibration] for f in plan.frameworks]
        medians = [m for group in launches if (m := launch_median(group, plan.analysis.warmup))]
        if not medians:
            continue
        step_s = math.exp(sum(math.log(m) for m in medians) / len(medians))
        overheads = [record["wall_s"] - sum(float(np.nansum(r.step_times)) for r in group)
                     for group in launches if group and (record := launch_contention(group[0]))]
        settling = block_variance([r.step_times for group in launches for r in group], plan.analysis.warmup)
        seconds, overhead = plan.timed_seconds, (float(np.median(overheads)) if overheads else None)
        if plan.window_chosen and overhead is not None and settling is not None:
            seconds = steady_window_s(overhead, settling[0], settling[1], plan.timed_seconds)
        seconds = round(seconds, 2)
        window[world_size] = {"seconds": seconds, "steps": window_steps(seconds, step_s, plan.analysis.warmup),
                              "overhead_s": None if overhead is None else round(overhead, 2),
                              "block_log_sd": None if settling is None else round(math.sqrt(settling[0]), 4),
                              "chosen": plan.window_chosen}
    return window


def window_line(window: dict[int, dict]) -> str:
    """The speed launches' windows in one line, e.g. "speed launches: np 1 times 5.2 s (2,305 steps; launch
    overhead 4.1 s, block spread 0.080, chosen)"."""
    parts = []
    for world_size, w in sorted(window.items()):
        why = (f"launch overhead {w['overhead_s']:g} s" if w["overhead_s"] is not None else "no overhead measured")
        if w["block_log_sd"] is not None:
            why += f", block spread {w['block_log_sd']:.3f}"
        parts.append(f"np {world_size} times {w['seconds']:g} s ({w['steps']:,} steps; {why}; "
                     f"{'chosen from round 1' if w['chosen'] else '--timed-seconds'})")
    return "speed launches: " + "; ".join(parts)


def speed_options(plan: ComparisonPlan, options: Options, world_size: int) -> Options:
    """A speed launch's options: the timed window's steps (epochs enough to hold them), recorded."""
    window = (plan.window or {}).get(world_size)
    if not plan.timed_seconds or window is None:
        return options
    steps = window["steps"]
    per_epoch = steps_per_epoch(options, plan.train_size, world_size)
    return replace(options, steps=steps, epochs=-(-steps // per_epoch), window_seconds=window["seconds"])


def later_rounds(plan: ComparisonPlan, numbers: range | None = None,
                 world_sizes: tuple[int, ...] | None = None) -> list[Launch]:
    """The speed rounds (or `numbers`): each framework launched again at each world size, first seed only, the
    order reversed every other round (A B, B A, A B ...) so that drift in the machine favours neither side;
    each in runs/FRAMEWORK-npN-roundR/ with the round in run.json (parity reads round 1 only). With
    --timed-seconds they are rounds 2..--repeats+1, each timing a long window (round 1, the parity launch,
    is not one of them); without, rounds 2..--repeats, round 1 counting as the first. With --aa the twin
    runs next to its framework's launch (runs/FRAMEWORK-npN-roundR-twin/), after it and before it in turn.
    `world_sizes`: the sizes still launching (a sequential design stops each at its own target)."""
    make = plan.scheduler.make
    launches = []
    last = plan.repeats + (1 if plan.timed_seconds else 0)
    for number in numbers or range(2, last + 1):
        again = replace(plan.options, seeds=plan.options.seeds[:1], round=number)
        framework_options = delayed_side(plan.step_delay_for,
                                         {name: plan.tuning.options_for(name, again) for name in plan.frameworks},
                                         plan.aa)
        order = plan.frameworks if number % 2 else tuple(reversed(plan.frameworks))
        if plan.aa:  # the twin beside its framework's launch, after it and before it in turn
            at = order.index(plan.aa) + (number % 2)
            order = (*order[:at], "twin", *order[at:])
        for world_size in world_sizes or plan.world_sizes:
            for slot in order:
                framework = plan.aa if slot == "twin" else slot
                where = f"{framework}-np{world_size}-round{number}" + ("-twin" if slot == "twin" else "")
                launches.append(make(framework, world_size,
                                     speed_options(plan, framework_options[slot], world_size),
                                     plan.out / "runs" / where,
                                     horovod_controller=plan.horovod_controller, launcher=plan.launcher,
                                     extra_env=plan.tuning.env.get(framework), private_network=plan.private_network))
    return launches


def round_estimate_s(launches: list[Launch], planned: list[int]) -> float:
    """What these launches will take at the least: start-up each, and their steps at a fast step's time."""
    return len(launches) * STARTUP_GUESS_S + sum(planned) * STEP_GUESS_S


def run_suite(plan: ComparisonPlan) -> int:
    first_round = list(plan.launches)
    # Sequential: round by round, within the budget. Timed windows: planned from round 1's step times.
    later = [] if plan.sequential or plan.timed_seconds else later_rounds(plan)

    def steps_of(launches: list[Launch]) -> list[int]:
        window = plan.window or {}
        return [window[launch.world_size]["steps"] if "-round" in launch.run_root.name and launch.world_size in window
                else planned_steps(plan.options, plan.train_size, launch.world_size) * len(launch.seeds)
                for launch in launches]

    if plan.sequential and plan.budget_given:
        needed = round_estimate_s(first_round, steps_of(first_round))
        if plan.time_budget < needed:
            raise UsageError(f"--time-budget {plan.time_budget:g} s is below one round's expected time (about "
                             f"{needed:.0f} s: {len(first_round)} launches of at least {STARTUP_GUESS_S:g} s of "
                             "start-up each, and their steps)")
    check_writable(plan.out)
    print(f"comparing {plan.tuning.describe()}", flush=True)
    plan.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(plan.out / TUNING_RECORD, plan.tuning.record())  # for `compare report` to say it again
    if (warning := mismatch(plan.tuning, plan.options, plan.horovod_controller)) is not None:
        print(f"python -m compare: warning: {warning}", file=sys.stderr, flush=True)
    clear_rounds(plan.out)
    design = start_design(plan) if plan.sequential else clear_design(plan.out)
    planned = steps_of(first_round)
    runner = Runner(plan.scheduler, plan.timeout, sum(planned) + sum(steps_of(later)))
    runner.count = len(first_round) + len(later)
    started = time.monotonic()
    try:
        ok = runner.run(first_round, planned[:len(first_round)])
        per_launch = (time.monotonic() - started) / len(first_round)
        if plan.timed_seconds:
            plan = replace(plan, window=window_plan(plan, find_runs(plan.out / "runs")
                                                    if (plan.out / "runs").is_dir() else []))
            if plan.window:
                print(window_line(plan.window), flush=True)
                if design is not None:
                    design["windows"] = {str(ws): w for ws, w in plan.window.items()}
            if design is None:
                later = later_rounds(plan)
                runner.count += len(later)
                runner.reporter.total += sum(steps_of(later))
        ok = runner.run(later, steps_of(later)) and ok
        if design is not None:
            # Until a later round has run, its time is guessed from round 1's, by the launches in each (and
            # each speed launch's timed window).
            longest = max((w["seconds"] for w in (plan.window or {}).values()), default=plan.timed_seconds)
            per_round = (per_launch + longest) * launches_per_round(plan, plan.world_sizes)
            more_rounds(plan, design, runner, steps_of, started, per_round, ok,
                        lambda numbers, sizes: later_rounds(plan, numbers, sizes))
    finally:
        runner.reporter.close()
    wall = time.monotonic() - started
    runs = find_runs(plan.out / "runs") if (plan.out / "runs").is_dir() else []
    if not runs:
        print("python -m compare: no run finished a single seed: nothing to analyse", file=sys.stderr)
        return Exit.RUN_FAILED
    if design is not None:
        speeds = [compare_speed(ws, runs, plan.analysis.warmup, design=design) for ws in plan.world_sizes]
        print(stop_line(design, [s["sequential"] if s else None for s in speeds]), flush=True)
    return publish(plan.out, runs, plan, outcomes=runner.outcomes, wall_s=wall)


def clear_rounds(out: Path) -> None:
    """Remove an earlier comparison's speed rounds: a longer one's rounds (or twins) would be counted."""
    runs = out / "runs"
    for stale in runs.glob("*-round*") if runs.is_dir() else ():
        shutil.rmtree(stale, ignore_errors=True)


def main(ns: argparse.Namespace) -> int:
    analysis = analysis_settings(ns)
    targets = resolve_targets(ns.target, ns.workload)  # before anything launches: a bad one is exit 2
    if targets and ns.sweep_model_size:
        raise UsageError("--target applies to a comparison, not to --sweep-model-size")
    timed = DEFAULT_TIMED_S if ns.timed_seconds is None else ns.timed_seconds
    if ns.repeats is not None and ns.repeats < (0 if timed else 1):
        least = "0 or more (0: no speed rounds)" if timed else "a positive integer"
        raise UsageError(f"--repeats must be {least}, got {ns.repeats}")
    if ns.time_budget is not None and not 0 < ns.time_budget < float("inf"):
        raise UsageError(f"--time-budget must be a positive number of seconds, got {ns.time_budget:g}")
    if ns.sweep_model_size and (ns.precision is not None or ns.time_budget is not None):
        raise UsageError("--precision and --time-budget apply to a comparison, not to --sweep-model-size")
    if (ns.precision is not None or ns.time_budget is not None) and set(ns.frameworks) != set(FRAMEWORKS):
        raise UsageError("--precision and --time-budget need both frameworks: they narrow the Horovod/DDP ratio")
    if not 0 <= timed < float("inf"):
        raise UsageError(f"--timed-seconds must be 0 or a positive number of seconds, got {timed:g}")
    if ns.aa is not None and ns.aa not in ns.frameworks:
        raise UsageError(f"--aa {ns.aa}: not one of --frameworks ({','.join(ns.frameworks)})")
    if ns.aa is not None and not timed:
        raise UsageError("--aa needs timed speed launches: drop --timed-seconds 0")
    if ns.step_delay_for == "twin" and ns.aa is None:
        raise UsageError("--step-delay-for twin needs --aa FRAMEWORK")
    if ns.sweep_model_size:
        return run_sweep(sweep_plan(ns))
    return run_suite(plan(ns, analysis, targets))
