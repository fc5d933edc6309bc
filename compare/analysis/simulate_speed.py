"""Simulated comparisons under the noise this machine shows, to state the speed verdict's error rates honestly.

A simulation that draws the noise the verdict assumes (i.i.d. log-normal launches) only checks arithmetic.
This one draws what the records and docs/benchmarks.md show instead, at the level of step times:
- a launch-level shift with heavy tails (Student t, 3 degrees of freedom): launches of one program differ
  by up to +-30% at np 2 on this machine;
- drift over a run: a random walk from launch to launch plus a linear trend (why rounds alternate A B, B A);
- an order effect: the second launch of a round runs a little slower than the first;
- autocorrelated, heavy-tailed step noise within a launch (AR(1), t innovations);
- bimodal steps, as Horovod on Open MPI showed them: a per-launch share of steps (Beta-distributed, usually
  small, now and then most of the launch) takes 10-30 ms instead of about 2.2 ms (busy-polling losing time
  slices); drawn on both sides, so that the two sides' step times follow one law;
- contention just below the detector's threshold (compare/analysis/contention.py): in a share of launches,
  other processes use 3-9.9% of a core (under OTHERS_MIN_CORES, so the launch counts) and slow it down.

Both sides draw every step from the same law; a planted difference multiplies every Horovod step by
`slower`, so that the true ratio is `slower` whichever statistic reads it (median, mean, total time). With
none (slower 1) any winner named is false. The intervals are computed here, vectorised (tests check they
agree with compare_speed's on simulated run records); the decision on them is compare_speed's own
(speed_outcome). Pure: numbers in, numbers out; a fixed seed per claim.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import signal, stats

from compare.analysis import speed
from compare.analysis.contention import OTHERS_MIN_CORES
from compare.analysis.group_sequential import t_multiplier
from compare.analysis.sequential import MIXTURE_C, SHORT_MIXTURE_C, sequence_bounds
from compare.names import FRAMEWORKS

SIDES = FRAMEWORKS  # axis 2 of every (trials, rounds, sides) array
CHUNK = 200  # trials drawn at once: bounds memory at (CHUNK, rounds, 2, steps) floats


@dataclass(frozen=True)
class Noise:
    """What moves a launch's median step time. Defaults: the default job (mlp, np 1-2) on this 2-core VM."""

    step_s: float = 0.0022  # Horovod's fast step (docs/benchmarks.md: 2.2 ms, two 1 ms cycles)
    warmup: int = 5
    steps: int = 60  # timed steps of a later round's one-seed launch
    launch_sd: float = 0.10  # scale of the launch-level shift (log); t(3) has sd sqrt(3) x this
    launch_df: float = 3.0
    walk_sd: float = 0.03  # drift: random-walk step from one launch to the next (log)
    trend: float = 0.004  # drift: linear, per launch (log): about +20% over a 50-launch run
    order: float = 0.03  # the second launch of a round is 3% slower
    step_sd: float = 0.10  # within-launch step noise (log), AR(1)
    phi: float = 0.9
    step_df: float = 4.0
    slow_a: float = 0.4  # Beta(a, b) share of Horovod's steps in the slow mode: mean 0.07, above a half in ~2%
    slow_b: float = 5.0
    slow_low_s: float = 0.010
    slow_high_s: float = 0.030
    contention_p: float = 0.25  # share of launches with company just under the detector's threshold
    contention_min: float = 0.03  # cores the others use there (below OTHERS_MIN_CORES)
    contention_slowdown: float = 0.10  # the launch's steps at most this much slower (log, uniform from 0)


MEASURED = Noise()


def _student(rng: np.random.Generator, df: float, shape: tuple[int, ...]) -> np.ndarray:
    """Student t draws scaled to unit spread of the normal they replace (sd sqrt(df/(df-2)) > 1: heavier)."""
    return rng.standard_normal(shape) / np.sqrt(rng.chisquare(df, shape) / df)


def _step_logs(rng: np.random.Generator, noise: Noise, shape: tuple[int, ...]) -> np.ndarray:
    """Within-launch log step noise: AR(1) over the last axis with t innovations, stationary from step 1."""
    n = noise.warmup + noise.steps
    innovations = _student(rng, noise.step_df, (*shape, n)) * noise.step_sd * np.sqrt(1 - noise.phi**2)
    innovations[..., 0] /= np.sqrt(1 - noise.phi**2)  # the first step drawn at the stationary spread
    return signal.lfilter([1.0], [1.0, -noise.phi], innovations, axis=-1)


def _bimodal(rng: np.random.Generator, noise: Noise, fast: np.ndarray) -> np.ndarray:
    """Horovod-on-MPI steps: each launch has its own share of steps in the 10-30 ms mode."""
    share = rng.beta(noise.slow_a, noise.slow_b, fast.shape[:-1])[..., None]
    slow = np.exp(rng.uniform(np.log(noise.slow_low_s), np.log(noise.slow_high_s), fast.shape))
    return np.where(rng.random(fast.shape) < share, np.maximum(slow, fast), fast)


def draw_run(rng: np.random.Generator, noise: Noise, trials: int, rounds: int, slower: float = 1.0
             ) -> tuple[np.ndarray, np.ndarray]:
    """Step times (trials, rounds, 2 sides, warmup + steps) of simulated comparisons at one world size, the
    order alternating by round (Horovod first in odd rounds), every Horovod step `slower` times what the
    same law draws for DDP; and the others' CPU use (cores) each launch met, all under the detector's
    threshold."""
    launches = 2 * rounds
    level = _student(rng, noise.launch_df, (trials, launches)) * noise.launch_sd
    walk = np.cumsum(rng.standard_normal((trials, launches)) * noise.walk_sd, axis=1)
    level += walk + noise.trend * np.arange(launches)
    level[:, 1::2] += noise.order  # the second launch of every round
    # launch index of (round, side): Horovod is first in odd rounds (index 0, 2, ...), DDP first in even ones
    first = np.arange(rounds) % 2 == 0
    index = np.stack([np.where(first, 0, 1), np.where(first, 1, 0)], axis=1) + 2 * np.arange(rounds)[:, None]
    level = level[:, index]  # (trials, rounds, 2)
    busy = rng.random(level.shape) < noise.contention_p
    others = np.where(busy, rng.uniform(noise.contention_min, OTHERS_MIN_CORES * 0.999, level.shape), 0.0)
    level += np.where(busy, rng.uniform(0, noise.contention_slowdown, level.shape), 0.0)
    times = _bimodal(rng, noise, noise.step_s * np.exp(level[..., None] + _step_logs(rng, noise, level.shape)))
    times[:, :, 0] *= slower  # the same law on both sides, Horovod's scaled: the true ratio is `slower`
    return times, others


def round_logs(times: np.ndarray, warmup: int) -> np.ndarray:
    """log(Horovod median / DDP median) per round: (trials, rounds)."""
    medians = np.median(times[..., warmup:], axis=-1)
    return np.log(medians[:, :, 0] / medians[:, :, 1])


# ---- the decision rules, as compare_speed applies them ---------------------------------------------------

_SIGN = {speed.SpeedOutcome.DDP_FASTER: 1, speed.SpeedOutcome.HOROVOD_FASTER: -1}


def decide(mean: np.ndarray, low: np.ndarray, high: np.ndarray, consistent: np.ndarray, rounds: np.ndarray | int,
           anytime: bool) -> np.ndarray:
    """compare_speed's own decision (speed.speed_outcome, on a free machine) on vectorised intervals in log:
    +1 DDP faster, -1 Horovod faster, 0 none. Looked up in the module at each call, so that the rule the
    error rates are claimed for is the one the verdict runs."""
    mean, low, high, consistent = np.broadcast_arrays(mean, low, high, consistent)
    rounds = np.broadcast_to(rounds, mean.shape)
    out = np.zeros(mean.shape, dtype=int)
    for i in np.ndindex(mean.shape):
        finite = bool(np.isfinite(low[i]) and np.isfinite(high[i]))
        kept = {"ratio": float(np.exp(mean[i])), "consistent": bool(consistent[i]),
                "ci_low": float(np.exp(low[i])) if finite else None,
                "ci_high": float(np.exp(high[i])) if finite else None}
        outcome, _ = speed.speed_outcome([], kept, int(rounds[i]), anytime=anytime)
        out[i] = _SIGN.get(outcome, 0)
    return out


def fixed_rule(logs: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The default verdict over a fixed number of rounds (last axis): a t interval on the logs, decided by
    compare_speed's rule (a winner only when it excludes 0, every round points the same way, and at least
    MIN_ROUNDS rounds ran). Returns (winner: +1 DDP faster, -1 Horovod faster, 0 none; log low; log high)."""
    n = logs.shape[-1]
    mean = logs.mean(axis=-1)
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * logs.std(axis=-1, ddof=1) / np.sqrt(n)
    low, high = mean - half, mean + half
    same_way = np.all(logs > 0, axis=-1) | np.all(logs < 0, axis=-1)
    return decide(mean, low, high, same_way, n, anytime=False), low, high


def t_bounds(logs: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Mean and half-width of the fixed-sample t interval over the last axis: what --precision must not use."""
    n = logs.shape[-1]
    return logs.mean(axis=-1), stats.t.ppf(0.5 + confidence / 2, n - 1) * logs.std(axis=-1, ddof=1) / np.sqrt(n)


def group_bounds(logs: np.ndarray, looks: list[int], planned: int, final: bool, confidence: float = 0.95
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and half-width of the group-sequential repeated interval at the last of these looks (rounds
    counted at each), over the last axis of `logs`; `final`: the budget ends there, the look spends what is
    left."""
    n = logs.shape[-1]
    multiplier = t_multiplier(tuple(looks), planned, final, alpha=1 - confidence)
    return logs.mean(axis=-1), multiplier * logs.std(axis=-1, ddof=1) / np.sqrt(n)


def sequential_rule(logs: np.ndarray, precision: float, first_look: int, confidence: float = 0.95,
                    c: float = MIXTURE_C, interval: str = "sequence", planned: int | None = None
                    ) -> dict[str, np.ndarray]:
    """--precision: look after round first_look and after every second round from there (whole A B / B A
    pairs), stop at the first look where the interval is within +-precision, or at the last round (the
    budget); a winner when the interval at the stop excludes 0. interval "sequence": the confidence sequence
    (mixture c); "group": the group-sequential design planned to `planned` rounds, the last round drawn
    being the budget's final look (it spends what is left); "t": the fixed-sample t interval read the same
    way, to show what stopping on it costs."""
    trials, rounds = logs.shape
    target = np.log1p(precision)
    stop = np.full(trials, rounds)
    mean_at = np.zeros(trials)
    half_at = np.full(trials, np.inf)
    open_ = np.ones(trials, dtype=bool)
    looks = [*range(first_look, rounds, 2), rounds]
    for k, n in enumerate(looks):
        if interval == "sequence":
            mean, half = sequence_bounds(logs[:, :n], 1 - confidence, c)
        elif interval == "group":
            last = rounds if planned is None else planned
            mean, half = group_bounds(logs[:, :n], looks[:k + 1], last, n == rounds, confidence)
        else:
            mean, half = t_bounds(logs[:, :n], confidence)
        now = open_ & ((half <= target) | (n == rounds))
        stop[now], mean_at[now], half_at[now] = n, mean[now], half[now]
        open_ &= ~now
    low, high = mean_at - half_at, mean_at + half_at
    same_way = np.ones(trials, dtype=bool)  # not read: anytime verdicts drop the every-round-agrees rule
    return {"winner": decide(mean_at, low, high, same_way, stop, anytime=True), "rounds": stop,
            "reached": half_at <= target, "low": low, "high": high}


# ---- scenarios and claims --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Design:
    name: str
    rounds: int  # the default's fixed rounds, or the most --precision may launch (the budget)
    precision: float | None = None
    first_look: int = 4
    interval: str = "sequence"  # "group": the default's group-sequential design; "t": the fixed-sample
    # interval, stopped on (the mistake this avoids)
    c: float = MIXTURE_C  # the confidence sequence's mixture
    planned: int | None = None  # the group-sequential design's last planned look
    trials: int = 2000  # simulated comparisons per claim: more where a rate lies near its bound


DEFAULT = Design("default (4 rounds)", 4)
PRECISION = Design("--precision 5%", 160, precision=0.05)
PRECISION_10 = Design("--precision 10%", 160, precision=0.10)
NAIVE_10 = Design("t interval stopped at +-10%", 160, precision=0.10, interval="t")
# compare run's default: rounds until +-10% (np 1) or +-15% (np 2) within a budget that holds 8 or 12 speed
# rounds, by the group-sequential design (planned to 12 rounds, the budget's last look spending what is left),
# beside the confidence sequence it replaced there (c = 0.5)
GROUP_8 = Design("group-sequential, +-10%, budget 8 rounds", 8, precision=0.10, interval="group", planned=12,
                 trials=5000)
GROUP_12 = Design("group-sequential, +-15%, budget 12 rounds", 12, precision=0.15, interval="group", planned=12,
                 trials=5000)
SEQUENCE_8 = Design("confidence sequence c=0.5, +-10%, budget 8 rounds", 8, precision=0.10, c=SHORT_MIXTURE_C,
                    trials=5000)
SEQUENCE_12 = Design("confidence sequence c=0.5, +-15%, budget 12 rounds", 12, precision=0.15, c=SHORT_MIXTURE_C,
                     trials=5000)


def simulate(design: Design, slower: float, trials: int, seed: int, noise: Noise = MEASURED) -> dict:
    """Outcomes of `trials` simulated comparisons: counts of each winner, of intervals missing the true
    ratio, of precision reached, and the rounds used."""
    rng = np.random.default_rng(seed)
    truth = np.log(slower)
    counts = {"trials": trials, "ddp": 0, "horovod": 0, "missed": 0, "reached": 0, "rounds": []}
    for start in range(0, trials, CHUNK):
        times, _ = draw_run(rng, noise, min(CHUNK, trials - start), design.rounds, slower)
        logs = round_logs(times, noise.warmup)
        if design.precision is None:
            winner, low, high = fixed_rule(logs)
            rounds, reached = np.full(len(winner), design.rounds), np.zeros(len(winner), dtype=bool)
        else:
            out = sequential_rule(logs, design.precision, design.first_look, c=design.c, interval=design.interval,
                                  planned=design.planned)
            winner, low, high, rounds, reached = (out[k] for k in ("winner", "low", "high", "rounds", "reached"))
        counts["ddp"] += int(np.sum(winner == 1))
        counts["horovod"] += int(np.sum(winner == -1))
        counts["missed"] += int(np.sum((low > truth) | (high < truth)))
        counts["reached"] += int(np.sum(reached))
        counts["rounds"] += rounds.tolist()
    rounds_used = np.asarray(counts.pop("rounds"))
    counts["median_rounds"] = float(np.median(rounds_used))
    counts["p90_rounds"] = float(np.quantile(rounds_used, 0.9))
    return counts


def rate_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """The observed rate and its exact (Clopper-Pearson) interval."""
    ci = stats.binomtest(k, n).proportion_ci(confidence, method="exact")
    return k / n, float(ci.low), float(ci.high)


@dataclass(frozen=True)
class Claim:
    """A rate docs/benchmarks.md states. "at most": holds when the upper end of the rate's 95% interval is
    at or below the bound; "at least": when the lower end is at or above it; "shown": a figure, no claim.
    Claims on one scenario share its seed, so one simulation serves them."""

    what: str  # "false winner", "interval misses", "wrong side", "names the slower side"
    design: Design
    slower: float
    bound: float | None = None
    kind: str = "at most"
    headline: bool = False  # checked by the default test suite; the rest by the campaign
    seed: int = 0

    def count(self, outcome: dict) -> int:
        if self.what == "false winner":
            return outcome["ddp"] + outcome["horovod"]
        if self.what == "interval misses":
            return outcome["missed"]
        if self.what == "precision reached":
            return outcome["reached"]
        # the framework that is in truth faster: DDP when Horovod is slowed (slower > 1), else Horovod
        faster, slower_side = ("ddp", "horovod") if self.slower > 1 else ("horovod", "ddp")
        if self.what == "wrong side":
            return outcome[slower_side]  # the slower framework named the faster one
        return outcome[faster]  # names the slower side: the faster framework named

    def judge(self, outcome: dict) -> dict:
        rate, low, high = rate_interval(self.count(outcome), outcome["trials"])
        holds = (high <= self.bound if self.kind == "at most" else
                 low >= self.bound if self.kind == "at least" else True)
        return {"claim": self, "rate": rate, "low": low, "high": high, "holds": bool(holds), "outcome": outcome}


TRIALS = 2000
SEEDS = {(DEFAULT.name, 1.0): 1, (PRECISION.name, 1.0): 2, (DEFAULT.name, 1.1): 3, (DEFAULT.name, 1.2): 4,
         (PRECISION.name, 1.1): 5, (PRECISION.name, 1.2): 6, (PRECISION_10.name, 1.0): 7,
         (PRECISION_10.name, 1.2): 8, (NAIVE_10.name, 1.0): 9, (DEFAULT.name, 1.3): 10,
         (DEFAULT.name, 1 / 1.3): 11, (GROUP_8.name, 1.0): 12, (GROUP_12.name, 1.0): 13,
         (SEQUENCE_8.name, 1.0): 12, (SEQUENCE_12.name, 1.0): 13, (GROUP_8.name, 1.2): 14, (GROUP_12.name, 1.2): 15,
         (SEQUENCE_8.name, 1.2): 14, (SEQUENCE_12.name, 1.2): 15}


def _claim(what: str, design: Design, slower: float, bound: float | None = None, kind: str = "at most",
           headline: bool = False) -> Claim:
    return Claim(what, design, slower, bound, kind if bound is not None else "shown", headline,
                 SEEDS[(design.name, slower)])


POWER_AT_1_3 = 0.25  # the default design's stated power at a true 1.3x (either side slower: MIRROR checks DDP)
MIRROR = _claim("names the slower side", DEFAULT, 1 / 1.3, POWER_AT_1_3, kind="at least")  # not in the table

# What docs/benchmarks.md states, in its table's order (scripts/speed_error_rates.py prints the table).
CLAIMS = (
    _claim("false winner", DEFAULT, 1.0, 0.05, headline=True),
    _claim("interval misses", DEFAULT, 1.0),
    _claim("false winner", PRECISION, 1.0, 0.05, headline=True),
    _claim("interval misses", PRECISION, 1.0, 0.05, headline=True),
    _claim("precision reached", PRECISION, 1.0),
    _claim("false winner", PRECISION_10, 1.0, 0.05),
    _claim("interval misses", PRECISION_10, 1.0, 0.05, headline=True),
    _claim("precision reached", PRECISION_10, 1.0),
    _claim("interval misses", NAIVE_10, 1.0),
    _claim("names the slower side", DEFAULT, 1.1),
    _claim("wrong side", DEFAULT, 1.1, 0.02),
    _claim("names the slower side", DEFAULT, 1.2),
    _claim("wrong side", DEFAULT, 1.2, 0.01),
    _claim("names the slower side", DEFAULT, 1.3, POWER_AT_1_3, kind="at least", headline=True),
    _claim("wrong side", DEFAULT, 1.3, 0.01),
    _claim("names the slower side", PRECISION, 1.1, 0.70, kind="at least", headline=True),
    _claim("wrong side", PRECISION, 1.1, 0.01),
    _claim("names the slower side", PRECISION, 1.2, 0.97, kind="at least"),
    _claim("wrong side", PRECISION, 1.2, 0.01),
    _claim("names the slower side", PRECISION_10, 1.2),
)

# The default design's table (docs/benchmarks.md, "The default rounds: a group-sequential design"): the same
# seeds for the two designs, so each pair of rows reads the same simulated launches.
GROUP_CLAIMS = tuple(
    claim for group, sequence in ((GROUP_8, SEQUENCE_8), (GROUP_12, SEQUENCE_12)) for design in (group, sequence)
    for claim in (_claim("false winner", design, 1.0, 0.05, headline=design is group),
                  _claim("interval misses", design, 1.0, 0.05, headline=design is group),
                  _claim("precision reached", design, 1.0),
                  _claim("interval misses", design, 1.2, 0.05),
                  _claim("names the slower side", design, 1.2)))


def scenario(design: Design, slower: float, seed: int, trials: int | None = None) -> dict:
    """One simulated scenario (the design's trials unless told), kept: several claims (and tests) read it."""
    return _scenario(design, slower, seed, trials or design.trials)


@functools.lru_cache(maxsize=32)
def _scenario(design: Design, slower: float, seed: int, trials: int) -> dict:
    return simulate(design, slower, trials, seed)


def judge_claims(claims: tuple[Claim, ...] = CLAIMS, trials: int | None = None) -> list[dict]:
    return [claim.judge(scenario(claim.design, claim.slower, claim.seed, trials)) for claim in claims]
