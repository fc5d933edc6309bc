"""The speed verdict's error rates and power under realistic noise (compare/analysis/simulate_speed.py):
drift, an order effect, heavy tails, bimodal steps, contention under the detector's threshold; both sides'
steps from one law, Horovod's scaled by the planted difference.

A claim holds only if the exact 95% interval of its simulated rate (2,000 trials) is on the stated side of
its bound; docs/benchmarks.md prints the same rows. The simulated rules decide through compare_speed's own
speed_outcome, and drive `compare run`'s own round loop (more_rounds), so a judge that never answers, or
always names DDP, fails here. The default suite checks the headline claims (about 10 s of CPU); `-m
campaign` checks every row (scripts/speed_error_rates.py prints them).
"""

from __future__ import annotations

import json
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from compare import defaults
from compare.analysis import group_sequential
from compare.analysis.contention import judge_contention
from compare.analysis.records import RunRecord
from compare.analysis.sequential import MIXTURE_C, SHORT_MIXTURE_C, log_half_width
from compare.analysis.simulate_speed import (
    CLAIMS,
    DEFAULT,
    GROUP_8,
    GROUP_12,
    GROUP_CLAIMS,
    MEASURED,
    MIRROR,
    POWER_AT_1_3,
    PRECISION,
    SIDES,
    TRIALS,
    Claim,
    draw_run,
    fixed_rule,
    judge_claims,
    rate_interval,
    round_logs,
    scenario,
    sequential_rule,
)
from compare.analysis.speed import SEQUENTIAL_RECORD, compare_speed
from compare.commands import run as run_command
from compare.commands import sequential_rounds
from compare.commands.cli import build_parser
from compare.render.speed import error_rate_markdown, speed_sentence
from workload.record_format import CONTENTION_RECORD, METRICS, RUN_JSON, SCHEMA_VERSION

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADLINE = tuple(claim for claim in CLAIMS if claim.headline)
GROUP_HEADLINE = tuple(claim for claim in GROUP_CLAIMS if claim.headline)


def _label(claim: Claim) -> str:
    return f"{claim.what}, {claim.design.name}, x{claim.slower:g}"


@pytest.mark.parametrize("claim", HEADLINE + GROUP_HEADLINE, ids=_label)
def test_headline_claims_hold_under_realistic_noise(claim):
    entry = claim.judge(scenario(claim.design, claim.slower, claim.seed))
    assert entry["outcome"]["trials"] >= 2000
    assert entry["holds"], (f"{_label(claim)}: {entry['rate']:.2%} ({entry['low']:.2%}-{entry['high']:.2%}), "
                            f"stated {claim.kind} {claim.bound:.0%}")


def _rate(claim: Claim) -> str:
    entry = claim.judge(scenario(claim.design, claim.slower, claim.seed))
    return f"{_label(claim)}: {entry['rate']:.2%} ({entry['low']:.2%}-{entry['high']:.2%})"


def test_the_default_design_has_its_stated_power_at_1_3x():
    """compare run's default (4 rounds, no --precision) names the faster side of a true 1.3x difference, either
    way round, in at least POWER_AT_1_3 of runs (the lower end of the exact 95% interval), and a false winner
    in at most 5% with no difference: a power is only worth its size."""
    assert DEFAULT.rounds == run_command.DEFAULT_ROUNDS and DEFAULT.precision is None
    power = next(c for c in CLAIMS if c.design == DEFAULT and c.slower == 1.3 and c.what == "names the slower side")
    size = next(c for c in CLAIMS if c.design == DEFAULT and c.slower == 1.0 and c.what == "false winner")
    assert power.bound == MIRROR.bound == POWER_AT_1_3 and MIRROR.slower == pytest.approx(1 / 1.3)
    text = DOCS.read_text(encoding="utf-8")
    assert f"power at 1.3x: at least {POWER_AT_1_3:.0%}" in text, "docs/benchmarks.md does not state the power"
    judged = [claim.judge(scenario(claim.design, claim.slower, claim.seed)) for claim in (power, MIRROR, size)]
    for entry in judged:
        claim = entry["claim"]
        assert entry["outcome"]["trials"] >= TRIALS
        assert entry["holds"], f"{_rate(claim)}, stated {claim.kind} {claim.bound:.0%}"
    for entry in judged[:2]:  # the docs' prose gives both directions' rates as computed
        said = f"{100 * entry['rate']:.1f} % ({100 * entry['low']:.1f}-{100 * entry['high']:.1f} %)"
        assert said in text, f"docs/benchmarks.md does not say {said} for {_label(entry['claim'])}"


def test_docs_print_the_headline_rows():
    text = DOCS.read_text(encoding="utf-8")
    for row in error_rate_markdown(judge_claims(HEADLINE + GROUP_HEADLINE)).splitlines()[2:]:
        assert row in text, f"docs/benchmarks.md does not print: {row} (rerun scripts/speed_error_rates.py)"


def test_the_default_design_is_narrower_than_the_sequence_it_replaced_and_as_safe():
    """Beside the confidence sequence (c = 0.5) on the same simulated launches, the group-sequential design
    names a true 1.2x difference the right way far more often at 8 and 12 rounds, and reaches +-15% at 12 far
    more often, while both keep misses and false winners within 5% (the exact interval's upper end): the
    docs' table prints every row."""
    judged = {(e["claim"].design.name, e["claim"].slower, e["claim"].what): e for e in judge_claims(GROUP_CLAIMS)}
    for group in (GROUP_8, GROUP_12):
        sequence = group.name.replace("group-sequential", "confidence sequence c=0.5")
        assert judged[(group.name, 1.2, "names the slower side")]["rate"] > 2 * judged[
            (sequence, 1.2, "names the slower side")]["rate"]
        for slower, what in ((1.0, "false winner"), (1.0, "interval misses"), (1.2, "interval misses")):
            assert judged[(group.name, slower, what)]["high"] <= 0.05, (group.name, slower, what)
    assert judged[(GROUP_12.name, 1.0, "precision reached")]["rate"] > 4 * judged[
        ("confidence sequence c=0.5, +-15%, budget 12 rounds", 1.0, "precision reached")]["rate"]
    assert error_rate_markdown(list(judged.values())) in DOCS.read_text(encoding="utf-8")


def test_the_boundaries_are_the_published_ones():
    """The recursive integration against Pocock's constants (Pocock 1977, two-sided 5%, 2-5 equally spaced
    looks); the Lan-DeMets O'Brien-Fleming-type boundary's first look is z_{0.025} / sqrt(t) exactly, a single
    look at t = 1 is the fixed-sample 1.96, and Gaussian partial sums drawn apart cross its looks as often
    as the spending function says (within 4 binomial sds)."""
    assert [round(group_sequential.constant_boundary(k), 3) for k in (2, 3, 4, 5)] == [2.178, 2.289, 2.361, 2.413]
    counts = (2, 4, 6, 8, 10)
    cuts = np.asarray(group_sequential.boundaries(counts, 10, False))
    assert cuts[0] == pytest.approx(1.959964 / np.sqrt(0.2), abs=1e-5)
    assert group_sequential.boundaries((12,), 12, False)[0] == pytest.approx(1.959964, abs=1e-5)
    draws = 400_000
    sums = np.cumsum(np.random.default_rng(8).standard_normal((draws, 10)), axis=1)[:, np.asarray(counts) - 1]
    crossed = np.cumsum(np.abs(sums / np.sqrt(counts)) >= cuts, axis=1) > 0
    for k, n in enumerate(counts):
        spent = group_sequential.obrien_fleming_spent(n / 10, 0.05)
        assert abs(crossed[:, k].mean() - spent) < 4 * np.sqrt(spent * (1 - spent) / draws) + 1e-5, (n, spent)
    # a final look spends what is left: narrower than the planned look at the same count, wider than fixed
    planned = group_sequential.boundaries((4, 6, 8), 12, False)[-1]
    final = group_sequential.boundaries((4, 6, 8), 12, True)[-1]
    assert 1.96 < final < planned


@pytest.mark.campaign
def test_every_stated_rate_holds_and_the_docs_print_it():
    judged = judge_claims()
    failing = [(_label(e["claim"]), e["rate"], e["high"]) for e in judged if not e["holds"]]
    assert not failing, failing
    assert error_rate_markdown(judged) in DOCS.read_text(encoding="utf-8")


def test_an_unsupported_bound_fails():
    """A rule whose true rate is near its bound cannot be certified at it: the check says so."""
    claim = next(c for c in CLAIMS if c.what == "false winner" and c.design == DEFAULT)
    outcome = scenario(claim.design, claim.slower, claim.seed)
    tight = Claim(claim.what, claim.design, claim.slower, outcome["ddp"] / TRIALS + outcome["horovod"] / TRIALS,
                  seed=claim.seed)
    assert not tight.judge(outcome)["holds"]
    assert rate_interval(20, 2000)[2] < 0.02 and rate_interval(100, 2000)[2] > 0.05


@pytest.mark.parametrize("c", [MIXTURE_C, SHORT_MIXTURE_C])
def test_the_confidence_sequence_holds_when_read_after_every_round(c):
    """Looked at after each of 200 rounds, Gaussian or heavy-tailed, it misses the mean in under 5%: with the
    long budgets' c and with the default's (short budget)."""
    rng = np.random.default_rng(3)
    n = np.arange(1, 201)
    for draws in (rng.standard_normal((TRIALS, 200)), rng.standard_t(3, (TRIALS, 200))):
        total, squares = np.cumsum(draws, axis=1), np.cumsum(draws**2, axis=1)
        mean = total / n
        half = log_half_width(n, squares - n * mean**2, c=c)
        missed = int(np.sum(np.any(np.abs(mean) >= half, axis=1)))
        assert rate_interval(missed, TRIALS)[2] <= 0.05, missed
    assert np.isinf(log_half_width(2, 1.0)) and np.isfinite(log_half_width(10, 9.0))


def test_the_default_design_names_no_false_winner_and_catches_a_large_difference():
    """compare run's default (rounds until +-10% at np 1, the first look after 4, the group-sequential design
    planned to 12 rounds; about 8 speed rounds fit its budget here) under the realistic noise: with no
    difference a winner in at most 5% of runs (the exact 95% interval's upper end), and a 2x difference named
    the right way in most, never the wrong way (the check has power, not only a small size)."""
    rng = np.random.default_rng(12)
    planned = sequential_rounds.planned_rounds(run_command.DEFAULT_BUDGET_S, run_command.DEFAULT_ROUNDS)
    assert planned == GROUP_8.planned == GROUP_12.planned
    trials = GROUP_8.trials  # a rate near 4% needs more than 2,000 trials for its interval to end under 5%
    for slower, wrong in ((1.0, None), (2.0, -1)):
        times, _ = draw_run(rng, MEASURED, trials, 8, slower=slower)
        out = sequential_rule(round_logs(times, MEASURED.warmup), 0.10, first_look=run_command.DEFAULT_ROUNDS,
                              interval="group", planned=planned)
        named = int(np.sum(out["winner"] != 0))
        if wrong is None:
            assert rate_interval(named, trials)[2] <= 0.05, named
        else:
            assert not np.any(out["winner"] == wrong) and named > trials / 2, named


DOCUMENTED_SPREAD = 0.34  # docs/benchmarks.md: the rounds' log-ratio sd under this noise, to 2 digits


def _bootstrap(values: np.ndarray, statistic, seed: int = 0, draws: int = 1000) -> np.ndarray:
    """`statistic` over trials resampled with replacement (trials are independent; rounds within one are not)."""
    rng = np.random.default_rng(seed)
    return np.array([statistic(values[rng.integers(0, len(values), len(values))]) for _ in range(draws)])


def test_the_noise_is_the_documented_one():
    rng = np.random.default_rng(4)
    times, others = draw_run(rng, MEASURED, 2000, 8)
    logs = round_logs(times, MEASURED.warmup)
    # The spread docs/benchmarks.md states, within the 99% bootstrap interval of this estimate (about +-0.01 at
    # 2,000 trials) widened by the rounding to 2 digits.
    low, high = np.quantile(_bootstrap(logs, np.std), [0.005, 0.995])
    assert low - 0.005 <= DOCUMENTED_SPREAD <= high + 0.005, (logs.std(), low, high)
    assert f"Rounds spread by {DOCUMENTED_SPREAD:.2f} in log-ratio" in DOCS.read_text(encoding="utf-8")
    # No planted difference means one law of step time on both sides: the same share of slow steps, and the
    # same total time (what a user pays) as well as the same medians, within 3 bootstrap sds of 0 in log.
    steps = times[..., MEASURED.warmup:]
    slow = (steps >= MEASURED.slow_low_s).mean(axis=(0, 1, 3))
    assert 0.03 < slow[0] < 0.15 and abs(slow[0] - slow[1]) < 0.01, slow
    totals = steps.sum(axis=(1, 3))  # (trials, sides)
    total_log = _bootstrap(totals, lambda t: np.log(t[:, 0].sum() / t[:, 1].sum()))
    assert abs(np.log(totals[:, 0].sum() / totals[:, 1].sum())) < 3 * total_log.std(), total_log.std()
    median_log = _bootstrap(logs, np.mean)
    assert abs(logs.mean()) < 3 * median_log.std(), (logs.mean(), median_log.std())
    busy = others[others > 0]
    assert 0.15 < busy.size / others.size < 0.35
    for cores in (busy.min(), busy.max()):  # the detector lets every one of these launches count
        record = {"wall_s": 10.0, "ranks": 2, "threads_per_rank": 1, "available_cores": 2, "own_cpu_s": 19.0,
                  "others_cores": float(cores), "steal_fraction": 0.0}
        assert not judge_contention(record)["contended"]


# The default design's rounds as measured on this machine: (log-ratio sd over the rounds, rounds), from the 95%
# intervals docs/benchmarks.md and issue 36 print (sd = log half-width x sqrt(n) / t(0.975, n - 1)).
MEASURED_SPREADS = (
    (0.081, 4), (0.248, 4),  # a fresh clone's make compare (issue 36): np 1 1.16-1.50, np 2 1.08-2.38
    (0.2, 4), (0.3, 4),  # an earlier fresh clone's make compare, np 1 and np 2 (docs/benchmarks.md)
    (0.237, 6), (0.925, 6),  # variance study, first run, default np 1 +-28.2%, np 2 +-164.1% (a bimodal launch)
    (0.184, 5), (0.248, 5),  # variance study, second run, default np 1 +-25.6%, np 2 +-36.1%
)


# The timed-window design's (--timed-seconds 2, the default since): the window study's 2 s rows (6 rounds)
# and a fresh clone's make compare (np 1 1.20-1.73, np 2 1.77-2.31), docs/benchmarks.md.
TIMED_SPREADS = ((0.074, 6), (0.266, 6), (0.116, 4), (0.083, 4))


def test_the_timed_windows_are_no_noisier_than_the_noise():
    """The model was set from launches of the job's own steps; the timed windows spread less at np 1 (the
    window study's 0.074 is at its 1st percentile) and as much at np 2: the model's power is, if anything,
    an understatement for the default design, and none of its spreads lies beyond the model's."""
    logs = round_logs(draw_run(np.random.default_rng(12), MEASURED, 4000, 6)[0], MEASURED.warmup)
    ranks = [float(np.mean(logs[:, :n].std(axis=1, ddof=1) < sd)) for sd, n in TIMED_SPREADS]
    assert all(0.005 < rank < 0.995 for rank in ranks), ranks
    assert float(np.median(ranks)) < 0.5, ranks


def test_the_measured_spreads_are_typical_draws_of_the_noise():
    """The noise was set from these figures, not fitted to them: each measured spread lies within the middle
    99% of the sample spreads the model gives over as many rounds, and they centre on its median."""
    logs = round_logs(draw_run(np.random.default_rng(12), MEASURED, 4000, 6)[0], MEASURED.warmup)
    ranks = [float(np.mean(logs[:, :n].std(axis=1, ddof=1) < sd)) for sd, n in MEASURED_SPREADS]
    assert all(0.005 < rank < 0.995 for rank in ranks), ranks
    assert 0.3 < float(np.median(ranks)) < 0.7, ranks


# ---- the vectorised rules are compare_speed's ------------------------------------------------------------

def records(tmp_path: Path, times: np.ndarray, others: np.ndarray) -> list[RunRecord]:
    """One simulated comparison as run records with contention.json beside each launch."""
    runs = []
    for number in range(times.shape[0]):
        for side, framework in enumerate(SIDES):
            directory = tmp_path / f"{framework}-np2-round{number + 1}"
            directory.mkdir(parents=True)
            order = 0 if (side == 0) == (number % 2 == 0) else 1
            (directory / "contention.json").write_text(json.dumps({
                "wall_s": 10.0, "ranks": 2, "threads_per_rank": 1, "available_cores": 2, "own_cpu_s": 19.0,
                "others_cores": float(others[number, side]), "steal_fraction": 0.0, "top_others": [],
                "started_unix": 1000.0 + 20 * number + 10 * order}))
            steps = [{"step": i + 1, "loss": 1.0, "step_time_s": float(t)} for i, t in enumerate(times[number, side])]
            meta = {"framework": framework, "world_size": 2, "seed": 0, "status": "ok",
                    "options": {"round": number + 1}}
            runs.append(RunRecord(directory, meta, steps, []))
    return runs


def test_the_fixed_rule_is_compare_speeds(tmp_path):
    rng = np.random.default_rng(5)
    times, others = draw_run(rng, MEASURED, 40, 4, slower=1.3)
    winner, low, high = fixed_rule(round_logs(times, MEASURED.warmup))
    for trial in range(40):
        speed = compare_speed(2, records(tmp_path / str(trial), times[trial], others[trial]), warmup=MEASURED.warmup)
        assert speed["rounds_used"] == [1, 2, 3, 4]
        assert speed["winner"] == {1: "ddp", -1: "horovod", 0: None}[int(winner[trial])]
        assert speed["ci_low"] == pytest.approx(np.exp(low[trial])) and speed["ci_high"] == pytest.approx(
            np.exp(high[trial]))
    assert {"ddp", None} <= {w for w in ({1: "ddp", 0: None, -1: "horovod"}[int(x)] for x in winner)}


class _Rounds:
    """compare run's Runner for more_rounds, with simulated launches: each writes the run record and the
    contention record of its round's draw, and one round takes round_s seconds of a fake clock."""

    def __init__(self, runs: Path, times: np.ndarray, others: np.ndarray, clock: list[float], timed: bool = False,
                 round_s: float = 1.0):
        self.runs, self.times, self.others, self.clock, self.round_s = runs, times, others, clock, round_s
        self.count, self.reporter, self.rounds = 0, types.SimpleNamespace(total=0), []
        self.offset = 1 if timed else 0  # timed windows: round 1 is the parity launch, round R the R-1th draw

    def write(self, framework: str, number: int) -> None:
        side = SIDES.index(framework)
        draw = number - 1 - self.offset
        parity = draw < 0  # a parity launch: Horovod 3x slower, which must not count
        directory = self.runs / f"{framework}-np2-round{number}"
        directory.mkdir(parents=True)
        order = 0 if (side == 0) == (number % 2 == 1) else 1
        (directory / CONTENTION_RECORD).write_text(json.dumps({
            "wall_s": 10.0, "ranks": 2, "threads_per_rank": 1, "available_cores": 2, "own_cpu_s": 19.0,
            "others_cores": 0.0 if parity else float(self.others[draw, side]), "steal_fraction": 0.0,
            "top_others": [], "started_unix": 1000.0 + 20 * number + 10 * order}))
        window = 2.0 if self.offset and not parity else None
        meta = {"schema_version": SCHEMA_VERSION, "framework": framework, "world_size": 2, "seed": 0,
                "status": "ok", "options": {"round": number, "window_seconds": window}}
        (directory / RUN_JSON).write_text(json.dumps(meta))
        times = self.times[0, side] * (3.0 if side == 0 else 1.0) if parity else self.times[draw, side]
        (directory / METRICS).write_text("".join(
            json.dumps({"kind": "step", "step": i + 1, "loss": 1.0, "step_time_s": float(t)}) + "\n"
            for i, t in enumerate(times)))

    def run(self, batch, planned) -> bool:
        numbers = sorted({launch.options.round for launch in batch})
        assert numbers == list(range(len(self.rounds) + 2, len(self.rounds) + 2 + len(numbers))), numbers
        for launch in batch:
            self.write(launch.framework, launch.options.round)
        self.rounds += numbers
        self.clock[0] += len(numbers) * self.round_s
        return True


WINDOW = {"seconds": 2.0, "steps": 100, "overhead_s": None, "block_log_sd": None, "chosen": False}


class _Scheduler:
    def make(self, framework, world_size, options, run_root, **_):
        return types.SimpleNamespace(framework=framework, world_size=world_size, options=options, run_root=run_root)


# (the design's name, --precision or None for the default, seconds a simulated round takes, rounds the budget
# holds): the group-sequential design stopped by its budget (10 rounds: the final look spends what is left) and
# by its last planned look (the default: 12 rounds before a 30-round budget), and a long budget's confidence
# sequence (over 900 s: c = 4)
LOOP_DESIGNS = {"--precision 20%, budget 10 rounds": (0.20, 1.0, 10), "the default design": (None, 1.0, 30),
                "--precision 20%, an hour's budget": (0.20, 40.0, 30)}


@pytest.mark.parametrize("name", LOOP_DESIGNS)
@pytest.mark.parametrize("timed", [False, True], ids=["own steps", "timed windows"])
def test_the_multi_look_loop_is_the_simulated_rule(tmp_path, monkeypatch, timed, name):
    """compare run's own loop (more_rounds: --repeats rounds, then pairs, a look after each, stop at +-P%, at
    the budget or at the design's last planned look) on simulated launches stops where the simulated rule
    does, with the same interval, and names a side exactly when that interval excludes 1: so the claims for
    the rules (their coverage and error rates above) are claims for the loop. Some trials reach the
    precision, some do not; some name DDP (the faster side), some do not. With timed windows (the default)
    round 1 is the parity launch, not a speed round: the loop counts the speed rounds after it, and the
    parity launch's times (Horovod 3x slower here) never enter the interval. The default design (no
    --precision, no --repeats: +-15% at np 2, its first rounds forced) is the same rule with its own target."""
    chosen, round_s, budget = LOOP_DESIGNS[name]
    trials, drawn = 10, 30
    default = chosen is None
    precision = defaults.DEFAULT_PRECISION_MANY if default else chosen
    assert PRECISION.first_look == defaults.DEFAULT_ROUNDS  # the simulated looks are the loop's
    times, others = draw_run(np.random.default_rng(6), MEASURED, trials, drawn, slower=1.25)
    logs = round_logs(times, MEASURED.warmup)
    clock = [0.0]
    budget_s = (budget + timed) * round_s
    monkeypatch.setattr(sequential_rounds, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(run_command, "DEFAULT_BUDGET_S", budget_s)
    given = ["--time-budget", str(budget_s), "--precision", f"{precision:.0%}"] if not default else []
    seen = []
    for trial in range(trials):
        root = tmp_path / str(trial)
        ns = build_parser(["run"]).parse_args(["run", "--np", "2", "--seeds", "0", "--reference", "off",
                                               "--network", "host", *given, "--out", str(root),
                                               "--timed-seconds", "2" if timed else "0"])
        plan = replace(run_command.plan(ns), scheduler=_Scheduler(), window={2: WINDOW} if timed else None)
        design = run_command.start_design(plan)
        group = design["method"] == group_sequential.METHOD
        assert group == (budget_s <= 900), design
        last = min(budget, design["planned_rounds"]) if group else budget
        out = sequential_rule(logs[:, :last], precision, first_look=run_command.DEFAULT_ROUNDS,
                              c=design.get("mixture_c", MIXTURE_C), interval="group" if group else "sequence",
                              planned=design.get("planned_rounds"))
        rounds = _Rounds(root / "runs", times[trial], others[trial], clock, timed, round_s)
        for framework in SIDES:
            rounds.write(framework, 1)  # round 1, as run_suite launches it before the loop
        clock[0] = round_s  # round 1 took as long as every round will
        run_command.more_rounds(plan, design, rounds, lambda launches: [1] * len(launches), 0.0, round_s, True,
                                lambda numbers, sizes, plan=plan: run_command.later_rounds(plan, numbers, sizes))
        recorded = json.loads((root / "runs" / SEQUENTIAL_RECORD).read_text())
        assert recorded["rounds"] == int(out["rounds"][trial]) == 1 - timed + len(rounds.rounds), (trial, recorded)
        short = "last look" if group and design["planned_rounds"] < budget else "budget"
        assert recorded["stopped"] == ("precision" if out["reached"][trial] else short), (trial, recorded)
        speed = compare_speed(2, run_command.find_runs(root / "runs"), warmup=MEASURED.warmup, design=recorded)
        assert speed["n_rounds"] == recorded["rounds"] and speed["sequential"]["reached"] == bool(out["reached"][trial])
        assert speed["ci_low"] == pytest.approx(np.exp(out["low"][trial]))
        assert speed["ci_high"] == pytest.approx(np.exp(out["high"][trial]))
        # the rule it claims: a side named exactly when the interval excludes 1
        rule = "ddp" if speed["ci_low"] > 1 else "horovod" if speed["ci_high"] < 1 else None
        assert speed["winner"] == rule == {1: "ddp", -1: "horovod", 0: None}[int(out["winner"][trial])], speed
        assert ("group-sequential 95%" if group else "anytime-valid 95% interval") in speed_sentence(speed)
        seen.append((recorded["stopped"], speed["winner"]))
    assert "precision" in {s for s, _ in seen} and {"ddp", None} <= {w for _, w in seen}, seen


class _TwoSizes(_Rounds):
    """Simulated launches at np 1 and np 2: np 1's rounds steady (it reaches its target at the first look),
    np 2's drawn from the realistic noise (it does not); a launch takes half a second of the fake clock."""

    def __init__(self, runs: Path, times: dict[int, np.ndarray], clock: list[float]):
        super().__init__(runs, times[2], np.zeros((times[2].shape[0], 2)), clock, timed=True)
        self.by_size, self.launched = times, []

    def write_at(self, framework: str, number: int, world_size: int) -> None:
        self.times = self.by_size[world_size]
        self.write(framework, number)
        if world_size == 1:  # _Rounds writes np 2's records: move them to np 1's
            source = self.runs / f"{framework}-np2-round{number}"
            meta = json.loads((source / RUN_JSON).read_text())
            (source / RUN_JSON).write_text(json.dumps({**meta, "world_size": 1}))
            source.rename(self.runs / f"{framework}-np1-round{number}")

    def run(self, batch, planned) -> bool:
        for launch in batch:
            self.write_at(launch.framework, launch.options.round, launch.world_size)
            self.launched.append((launch.options.round, launch.world_size))
        self.clock[0] += 0.5 * len(batch)
        return True


def test_the_budget_goes_to_the_size_that_has_not_decided(tmp_path, monkeypatch, capsys):
    """Once np 1 reaches its target, the rounds after launch np 2 alone, so the budget buys np 2 more rounds
    than if both sizes went on; each size's design record says its own looks, stop and rounds, and those are
    the rounds its verdict counts. At the first look, np 2 (short of a target it cannot reach) is told so
    before the rest of the budget is spent."""
    rng = np.random.default_rng(21)
    steady = MEASURED.step_s * np.exp(rng.normal(0, 0.01, (30, 2, MEASURED.warmup + MEASURED.steps)))
    steady[:, 0] *= 1.3  # np 1: Horovod 1.3x slower, every round alike
    noisy, _ = draw_run(rng, MEASURED, 1, 30, slower=1.0)
    clock = [0.0]
    monkeypatch.setattr(sequential_rounds, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    root = tmp_path / "two"
    ns = build_parser(["run"]).parse_args(["run", "--np", "1,2", "--seeds", "0", "--reference", "off",
                                           "--network", "host", "--out", str(root), "--time-budget", "16",
                                           "--precision", "1:10%,2:1%"])
    plan = replace(run_command.plan(ns), scheduler=_Scheduler(), window={1: WINDOW, 2: WINDOW})
    design = run_command.start_design(plan)
    rounds = _TwoSizes(root / "runs", {1: steady, 2: noisy[0]}, clock)
    for world_size in (1, 2):
        for framework in SIDES:
            rounds.write_at(framework, 1, world_size)
    clock[0] = 2.0  # round 1: four launches
    run_command.more_rounds(plan, design, rounds, lambda launches: [1] * len(launches), 0.0, 2.0, True,
                            lambda numbers, sizes, plan=plan: run_command.later_rounds(plan, numbers, sizes))
    recorded = json.loads((root / "runs" / SEQUENTIAL_RECORD).read_text())
    np1, np2 = recorded["world_sizes"]["1"], recorded["world_sizes"]["2"]
    assert np1["stopped"] == "precision" and np1["looks"] == [5] and np1["rounds"] == 4, np1
    assert np2["stopped"] == "budget" and np2["rounds"] > np1["rounds"] + 4, np2
    assert {size for number, size in rounds.launched if number > 5} == {2}, rounds.launched
    # 16 s: 2 for round 1, 8 for rounds 2-5 at both sizes (1 s each), then np 2 alone at 1 s a pair
    assert recorded["rounds"] == np2["rounds"] == 10, recorded
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("rounds: np 2 spreads")]
    assert said == [sequential_rounds.forecast_line([np2["forecast"]], 12)], said
    assert "±1% needs more than the design's last look (12 rounds)" in said[0] and "forecast" not in np1, said
    for world_size, own in ((1, np1), (2, np2)):
        speed = compare_speed(world_size, run_command.find_runs(root / "runs"), warmup=MEASURED.warmup,
                              design=recorded)
        assert speed["n_rounds"] == own["rounds"] and speed["sequential"]["stopped"] == own["stopped"]
