"""An anytime-valid confidence sequence for the mean of round-level log-ratios: an interval that may be looked
at after every round, and the rounds stopped on what it shows, and still holds its stated confidence.

Why not the t interval: read after every round and stopped when it is narrow (or when it excludes 1), a
fixed-sample interval misses far more often than 5% (the looks are many chances to be wrong). A confidence
sequence is a sequence of intervals that all hold at once with probability 1 - alpha, so the one read at a
data-dependent stop holds too (Howard, Ramdas, McAuliffe, Sekhon 2021, "Time-uniform, nonparametric,
nonasymptotic confidence sequences", Ann. Statist. 49(2): the normal-mixture boundary).

The variance of a round's log-ratio is not known here (it moves with the machine), so the mixture is the
scale-invariant one of Lai (1976, "On confidence sequences", Ann. Statist. 4(2)), written out by Wang and
Ramdas (2023, "Anytime-valid t-tests and confidence sequences for Gaussian means with unknown variance"):
for rounds x_1..x_n with S = sum(x_i - mu) and Q = sum((x_i - mu)^2), under mean mu

    M_n(mu) = sqrt(c / (n + c)) * (1 - S^2 / ((n + c) Q)) ** (-n / 2)

is a nonnegative martingale with M_1 = 1 (a normal mixture over the standardised effect, N(0, 1/c), the
scale integrated out), so by Ville's inequality P(some n has M_n >= 1/alpha) <= alpha. The set
{mu : M_n(mu) < 1/alpha} is, with mean m and V = sum((x_i - m)^2) and k = (1 - r)(n + c),
r = (alpha * sqrt(c / (n + c))) ** (2 / n):

    |m - mu| < sqrt(k V / (n (n - k)))     when n > k, else the whole line.

It assumes Gaussian rounds; compare/analysis/simulate_speed.py checks it under the noise this machine shows
(heavy tails, drift, bimodal step times). Pure: numbers in, numbers out, vectorised over leading axes.
"""

from __future__ import annotations

import numpy as np

# The mixture's precision on the standardised effect: c sets the rounds where the sequence is tightest
# (tens to hundreds for c = 4, where --precision runs end here); any c > 0 keeps the guarantee, but
# it must be fixed before the data are seen.
MIXTURE_C = 4.0
# A short budget (compare run's default: about 4 minutes, 4-12 rounds here) ends where c = 4 is still the whole
# line or wide (2.55 round spreads at 8 rounds); c = 0.5 is tightest there (1.97 at 6 rounds, 1.46 at 8, 1.22
# at 10), and the group-sequential design (group_sequential.py), which such budgets take, is narrower still:
# simulate_speed.py compares the two.
SHORT_MIXTURE_C = 0.5
SHORT_BUDGET_S = 900.0  # budgets up to this take the group-sequential design, longer ones this sequence
METHOD = "anytime-valid 95% confidence sequence over rounds (Lai's t-mixture)"


def log_half_width(n: np.ndarray | int, v: np.ndarray | float, alpha: float = 0.05,
                   c: float = MIXTURE_C) -> np.ndarray:
    """Half-width (in log-ratio) of the confidence sequence after n rounds with sum of squared deviations
    v from their mean; inf where the sequence is still the whole line (n < 3 always is)."""
    n = np.asarray(n, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (alpha * np.sqrt(c / (n + c))) ** (2.0 / n)
        k = (1.0 - r) * (n + c)
        half = np.sqrt(k * v / (n * (n - k)))
    return np.where((n >= 2) & (n > k), half, np.inf)


def sequence_bounds(logs: np.ndarray, alpha: float = 0.05, c: float = MIXTURE_C) -> tuple[np.ndarray, np.ndarray]:
    """Mean and half-width of the confidence sequence over the last axis of `logs` (rounds); NaN rounds
    are not counted, so rows may hold different numbers of rounds."""
    logs = np.asarray(logs, dtype=np.float64)
    kept = np.isfinite(logs)
    n = kept.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(kept, logs, 0.0).sum(axis=-1) / n
        v = np.where(kept, (logs - mean[..., None]) ** 2, 0.0).sum(axis=-1)
    return mean, log_half_width(n, v, alpha, c)


def confidence_sequence(ratios: list[float], confidence: float = 0.95, c: float = MIXTURE_C) -> dict:
    """The a/b ratio over rounds with its anytime-valid interval, in the shape timing.rounds_ratio gives
    (ratio, ci_low, ci_high, half_width as a fraction of the ratio, consistent), plus the method."""
    logs = np.log(np.asarray([r for r in ratios if r and r > 0], dtype=np.float64))
    n = int(logs.size)
    result = {"ratio": None, "ci_low": None, "ci_high": None, "confidence": confidence, "n_rounds": n,
              "log_sd": None, "half_width": None, "consistent": None, "method": METHOD, "mixture_c": c}
    if n == 0:
        return result
    mean, half = (float(x) for x in sequence_bounds(logs, 1 - confidence, c))
    result.update(ratio=float(np.exp(mean)), consistent=bool(np.all(logs > 0) or np.all(logs < 0)))
    if n >= 2:
        result["log_sd"] = float(np.std(logs, ddof=1))
    if np.isfinite(half):
        result.update(ci_low=float(np.exp(mean - half)), ci_high=float(np.exp(mean + half)),
                      half_width=float(np.exp(half) - 1))
    return result


def rounds_for(precision: float, log_sd: float, alpha: float = 0.05, c: float = MIXTURE_C,
               most: int = 10_000) -> int | None:
    """About how many rounds the sequence needs to reach +-precision when rounds spread by log_sd (the
    sum of squares taken at its expectation): for telling the user what a precision costs."""
    target = np.log1p(precision)
    n = np.arange(3, most + 1)
    reached = np.nonzero(log_half_width(n, (n - 1) * log_sd**2, alpha, c) <= target)[0]
    return int(n[reached[0]]) if reached.size else None
