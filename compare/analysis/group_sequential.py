"""A group-sequential design for the speed rounds: a few planned looks (after --repeats rounds, then after every
pair up to a planned last look), each with its own width, so that the chances to be wrong are spent where the
rounds stop rather than spread over every round as the confidence sequence (sequential.py) spreads them.

The boundary: Lan and DeMets' alpha spending ("Discrete sequential boundaries for clinical trials", Biometrika
70(3), 1983) with O'Brien and Fleming's shape, alpha(t) = 2 - 2 Phi(z_{alpha/2} / sqrt(t)) at information
fraction t = rounds / planned rounds: it spends almost nothing at the early looks and leaves the later ones
(where a short budget ends) nearly as narrow as a fixed-n interval. The look after which the budget has no
room for another pair spends all that is left. Each look's boundary c_k solves
P(|Z_1| < c_1, ..., |Z_k| < c_k) = 1 - alpha(t_k) for the standardised partial sums of the rounds (Z_j and
Z_k correlated sqrt(n_j / n_k)), by the recursive numerical integration of Armitage, McPherson and Rowe (1969).

The intervals: Jennison and Turnbull's repeated confidence intervals ("Interim analyses: the repeated
confidence interval approach", JRSS B 51(3), 1989): at look k, mean +- t_{n_k - 1}(1 - p_k / 2) s / sqrt(n_k),
where p_k = 2 (1 - Phi(c_k)) is the boundary's nominal level and the round spread s is estimated (the
"significance level" way to carry a known-variance boundary over to Student's t). They hold at every look at
once, so the one read where the rounds stop (narrow enough, or the budget spent) holds too; looks are at
planned round counts, never chosen from the data. A contended round leaves the interval, so the information
at a look is the rounds it counts; a look that adds none spends nothing. The noise of this machine (heavy
tails, drift, bimodal steps) is not the Gaussian rounds this assumes: compare/analysis/simulate_speed.py
checks coverage and false winners under it. Pure: numbers in, numbers out.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, stats

METHOD = "group-sequential 95% repeated confidence interval (O'Brien-Fleming-type alpha spending)"
POINTS = 401  # Simpson points per look for the recursive integration: boundaries to about 1e-6


def obrien_fleming_spent(t: float, alpha: float) -> float:
    """Alpha spent by information fraction t (Lan-DeMets, O'Brien-Fleming's shape)."""
    if t <= 0:
        return 0.0
    return float(2.0 - 2.0 * stats.norm.cdf(stats.norm.ppf(1.0 - alpha / 2.0) / math.sqrt(min(t, 1.0))))


def _simpson_weights(points: int, h: float) -> np.ndarray:
    weights = np.ones(points)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return weights * h / 3.0


def _still_inside(previous: tuple[np.ndarray, np.ndarray] | None, n: int, step: int, c: float) -> float:
    """P(no crossing so far and |S_n| < c sqrt(n)), from the sub-density of S at the previous look (values,
    quadrature-weighted) and the step of rounds since it; S is the partial sum of standard normal rounds."""
    edge, sd = c * math.sqrt(n), math.sqrt(step)
    if previous is None:
        return float(2.0 * stats.norm.cdf(edge / sd) - 1.0)
    where, mass = previous
    return float(np.sum(mass * (stats.norm.cdf((edge - where) / sd) - stats.norm.cdf((-edge - where) / sd))))


def _carry(previous: tuple[np.ndarray, np.ndarray] | None, n: int, step: int,
           c: float) -> tuple[np.ndarray, np.ndarray]:
    """The sub-density of S_n on the continuation region (|S_n| < c sqrt(n)), on a Simpson grid."""
    edge, sd = c * math.sqrt(n), math.sqrt(step)
    grid = np.linspace(-edge, edge, POINTS)
    if previous is None:
        density = stats.norm.pdf(grid, scale=sd)
    else:
        where, mass = previous
        density = stats.norm.pdf((grid[:, None] - where[None, :]) / sd) @ mass / sd
    return grid, density * _simpson_weights(POINTS, grid[1] - grid[0])


def _overspent(c: float, previous: tuple[np.ndarray, np.ndarray] | None, n: int, step: int, goal: float) -> float:
    """Alpha spent by a look at boundary c beyond the goal (the root is the look's boundary)."""
    return 1.0 - _still_inside(previous, n, step, c) - goal


@functools.lru_cache(maxsize=256)
def boundaries(counts: tuple[int, ...], planned: int, final: bool, alpha: float = 0.05) -> tuple[float, ...]:
    """The two-sided boundaries c_k (on the standardised mean) at looks counting these rounds (increasing),
    spending alpha(n_k / planned); the last look spends all that is left when `final`."""
    cuts: list[float] = []
    previous, before, spent = None, 0, 0.0
    for k, n in enumerate(counts):
        goal = alpha if final and k == len(counts) - 1 else obrien_fleming_spent(n / planned, alpha)
        goal = max(goal, spent)
        step = n - before
        if goal - spent < 1e-12:  # nothing to spend here: a boundary beyond any value the data may take
            c = 40.0
        else:
            c = float(optimize.brentq(_overspent, 0.05, 40.0, args=(previous, n, step, goal), xtol=1e-10))
        cuts.append(c)
        previous, before, spent = _carry(previous, n, step, c), n, goal
    return tuple(cuts)


def constant_boundary(looks: int, alpha: float = 0.05) -> float:
    """Pocock's constant boundary for equally spaced looks: the check of the integration against his table
    (2.178, 2.289, 2.361, 2.413 for 2-5 looks at 5%)."""
    def crossed(c: float) -> float:
        previous, inside = None, 1.0
        for n in range(1, looks + 1):
            inside = _still_inside(previous, n, 1, c)
            previous = _carry(previous, n, 1, c)
        return 1.0 - inside - alpha
    return float(optimize.brentq(crossed, 1.0, 5.0, xtol=1e-10))


def look_counts(counted_by_look: list[int]) -> tuple[int, ...]:
    """The information at each look: the rounds it counts, looks that added none (or counted under 2)
    dropped, since they spend nothing."""
    counts: list[int] = []
    for n in counted_by_look:
        if n >= 2 and (not counts or n > counts[-1]):
            counts.append(n)
    return tuple(counts)


def t_multiplier(counts: tuple[int, ...], planned: int, final: bool, alpha: float = 0.05) -> float:
    """The multiplier of s / sqrt(n) at the last of these looks: Student's t at the boundary's nominal level."""
    c = boundaries(counts, planned, final, alpha)[-1]
    nominal = 2.0 * (1.0 - stats.norm.cdf(c))
    return float(stats.t.ppf(1.0 - nominal / 2.0, counts[-1] - 1))


def repeated_interval(ratios: list[float], counted_by_look: list[int], planned: int, final: bool,
                      confidence: float = 0.95) -> dict:
    """The a/b ratio over these rounds with its repeated confidence interval at the last look, in the shape
    timing.rounds_ratio gives (ratio, ci_low, ci_high, half_width as a fraction of the ratio, consistent).
    counted_by_look: the rounds counted at each look so far, the last being these ratios'."""
    logs = np.log(np.asarray([r for r in ratios if r and r > 0], dtype=np.float64))
    n = int(logs.size)
    result = {"ratio": None, "ci_low": None, "ci_high": None, "confidence": confidence, "n_rounds": n,
              "log_sd": None, "half_width": None, "consistent": None, "method": METHOD}
    if n == 0:
        return result
    mean = float(logs.mean())
    result.update(ratio=math.exp(mean), consistent=bool(np.all(logs > 0) or np.all(logs < 0)))
    counts = look_counts([*[c for c in counted_by_look if c < n], n])
    if n < 2 or not counts:
        return result
    sd = float(np.std(logs, ddof=1))
    half = t_multiplier(counts, planned, final, 1.0 - confidence) * sd / math.sqrt(n)
    result.update(log_sd=sd, ci_low=math.exp(mean - half), ci_high=math.exp(mean + half),
                  half_width=math.exp(half) - 1.0)
    return result


def looks_at(first_look: int, last: int) -> list[int]:
    """The planned looks: after first_look rounds, then after every pair, up to `last`."""
    return list(range(first_look, last + 1, 2)) if last >= first_look else []


def rounds_for(precision: float, log_sd: float, first_look: int, planned: int) -> int | None:
    """About how many rounds the design needs to reach +-precision when rounds spread by log_sd (s taken at
    its expectation), looking at first_look and every pair up to planned; None if not by then."""
    target = math.log1p(precision)
    looks = looks_at(first_look, planned)
    for k, n in enumerate(looks):
        if t_multiplier(tuple(looks[:k + 1]), planned, False) * log_sd / math.sqrt(n) <= target:
            return n
    return None
