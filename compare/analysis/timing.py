"""Step-time statistics, throughput, scaling efficiency and a bootstrap speed ratio."""

from __future__ import annotations

import inspect
from collections.abc import Iterable

import numpy as np
from scipy import stats

from compare.analysis.records import RunRecord

PHASE_KEYS = ("data_s", "forward_s", "backward_s", "optimizer_s")
BOOTSTRAP_RESAMPLES = 2000


MSER_BATCH = 5


def settled_warmup(step_times: np.ndarray, batch: int = MSER_BATCH) -> int:
    """The steps to leave out before the step times settle, read from the data: MSER-5 (White 1997, "An
    effective truncation heuristic for bias reduction in simulation experiments"; White, Cobb and Spratt 2000).
    The log times are averaged in batches of 5; the cut is the number of leading batches d (at most half) that
    minimises the remaining batches' variance over their count, var(z[d:]) / (m - d), the squared standard
    error of what is kept: a cut that removes a transient shrinks it, one that removes settled steps does not."""
    logs = np.log(np.asarray(step_times, dtype=np.float64))
    m = len(logs) // batch
    if m < 4:  # too few batches to tell a transient from noise
        return min(1, len(logs))
    z = logs[: m * batch].reshape(m, batch).mean(axis=1)
    cut = min(range(m // 2 + 1), key=lambda d: float(np.var(z[d:])) / (m - d))
    return cut * batch


def measured(step_times: np.ndarray, warmup: int) -> np.ndarray:
    """Step times after the first `warmup` steps (allocator warm-up, lazy init, first allreduce setup)."""
    return np.asarray(step_times, dtype=np.float64)[max(warmup, 0) :]


def step_stats(step_times: np.ndarray, warmup: int) -> dict:
    """n, median, p90, mean and sd (ddof=1) of the step times after warmup; None where undefined."""
    times = measured(step_times, warmup)
    n = int(times.size)
    if n == 0:
        return {"n": 0, "median": None, "p90": None, "mean": None, "sd": None}
    return {
        "n": n,
        "median": float(np.median(times)),
        "p90": float(np.percentile(times, 90)),
        "mean": float(np.mean(times)),
        "sd": float(np.std(times, ddof=1)) if n > 1 else None,
    }


def pooled_times(records: Iterable[RunRecord], warmup: int) -> np.ndarray:
    """Measured step times of several runs (seeds) in one array."""
    parts = [measured(r.step_times, warmup) for r in records]
    return np.concatenate(parts) if parts else np.empty(0)


def throughput(global_batch: int | None, median_step_s: float | None) -> float | None:
    """Training samples per second of the whole job."""
    if not global_batch or not median_step_s:
        return None
    return global_batch / median_step_s


def scaling_efficiency(throughput_n: float | None, throughput_1: float | None, n: int) -> float | None:
    """throughput at n workers / (n x throughput at 1): 1.0 is perfect (weak) scaling."""
    if not throughput_n or not throughput_1 or n < 1:
        return None
    return throughput_n / (n * throughput_1)


def _median_ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(a, axis=axis) / np.median(b, axis=axis)


def _rng_keyword() -> str:
    # scipy >= 1.15 calls it rng; older releases only know random_state.
    return "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"


def speed_ratio(a_times: np.ndarray, b_times: np.ndarray, confidence: float = 0.95, seed: int = 0) -> dict:
    """median(a) / median(b) with a percentile-bootstrap confidence interval.

    step_time_ratio > 1 means a is slower; it is also how many times faster b is (speedup_of_b).
    The two samples are resampled independently; the fixed seed makes the interval reproducible.
    """
    a = np.asarray(a_times, dtype=np.float64)
    b = np.asarray(b_times, dtype=np.float64)
    result = {
        "step_time_ratio": None, "speedup_of_b": None, "ci_low": None, "ci_high": None,
        "confidence": confidence, "method": "percentile bootstrap of the ratio of medians",
        "n_a": int(a.size), "n_b": int(b.size),
        "median_a": float(np.median(a)) if a.size else None,
        "median_b": float(np.median(b)) if b.size else None,
    }
    if not a.size or not b.size or not result["median_b"]:
        result["reason"] = "no step times on one side"
        return result
    ratio = float(_median_ratio(a, b))
    result.update(step_time_ratio=ratio, speedup_of_b=ratio)
    if a.size < 2 or b.size < 2:
        result["reason"] = "too few step times for a confidence interval"
        return result
    boot = stats.bootstrap(
        (a, b),
        _median_ratio,
        vectorized=True,
        paired=False,
        confidence_level=confidence,
        method="percentile",
        n_resamples=BOOTSTRAP_RESAMPLES,
        batch=200,  # bounds memory: each batch holds 200 resamples of both samples
        **{_rng_keyword(): np.random.default_rng(seed)},
    )
    result.update(ci_low=float(boot.confidence_interval.low), ci_high=float(boot.confidence_interval.high))
    return result


def breakdown(records: Iterable[RunRecord], warmup: int) -> dict:
    """Mean seconds per step of each phase after warmup, and the part of step_time_s they leave out."""
    steps = [s for r in records for s in r.steps[max(warmup, 0) :]]
    means = {}
    for key in (*PHASE_KEYS, "step_time_s"):
        values = [float(s[key]) for s in steps if s.get(key) is not None]
        if values:
            means[key] = float(np.mean(values))
    if "step_time_s" in means:
        phases = sum(means[k] for k in PHASE_KEYS if k in means)
        means["unaccounted_s"] = means["step_time_s"] - phases
    return means


def launch_median(records: Iterable[RunRecord], warmup: int) -> float | None:
    """One launch's figure: the median of its measured step times (seeds of the launch pooled)."""
    times = pooled_times(records, warmup)
    times = times[np.isfinite(times)]  # an imported run may have no step times
    return float(np.median(times)) if times.size else None


MIN_WINDOW_STEPS = 50  # a speed launch times at least this many steps, however slow its steps


def window_steps(seconds: float, step_s: float, warmup: int) -> int:
    """The steps a speed launch trains to time about `seconds` of steady state at `step_s` a step, after
    the `warmup` steps the analysis leaves out (compare run --timed-seconds; docs/benchmarks.md)."""
    if not (seconds > 0 and step_s > 0):
        raise ValueError(f"a timed window needs a positive duration and step time, got {seconds}, {step_s}")
    return warmup + max(MIN_WINDOW_STEPS, int(np.ceil(seconds / step_s)))


# What no window removes: the launch-to-launch spread of the Horovod/DDP log-ratio with long steady windows
# (../shared/notes/speed-noise: 0.065 at 5 s windows, 0.071 at 12 s, paired adjacent launches, this machine).
LAUNCH_LOG_SD = 0.065
# steps per block when measuring how the median of a window settles within a launch: blocks long enough to
# hold the slow drifts and switches of step time that make long windows pay, few enough to count in round 1
BLOCK_STEPS = 50
MOST_OVERHEAD_MULTIPLE = 3.0  # a window at most this many launch overheads: the rest of the budget buys rounds


def block_variance(step_times: Iterable[np.ndarray], warmup: int) -> tuple[float, float] | None:
    """How a launch's median settles with its window: (variance of the log medians of BLOCK_STEPS-step
    blocks, seconds a block takes), pooled over the given launches (seeds); None with under 4 blocks."""
    logs, seconds = [], []
    for times in step_times:
        steady = measured(times, warmup)
        steady = steady[np.isfinite(steady) & (steady > 0)]
        blocks = steady[: steady.size // BLOCK_STEPS * BLOCK_STEPS].reshape(-1, BLOCK_STEPS)
        if len(blocks) >= 2:
            medians = np.log(np.median(blocks, axis=1))
            logs.append(medians - medians.mean())
            seconds.append(float(blocks.sum(axis=1).mean()))
    count = sum(len(part) for part in logs)
    if count - len(logs) < 3:
        return None
    return float(np.sum(np.concatenate(logs) ** 2) / (count - len(logs))), float(np.mean(seconds))


def steady_window_s(overhead_s: float, block_var: float, block_s: float, least_s: float) -> float:
    """The steady window a speed launch times, from its measured launch overhead O (what a launch costs
    besides the window) and the within-launch settling of its median (block variance v over blocks of tau
    seconds): a round's log-ratio varies about a + v tau / T for a window of T seconds (a the launch-to-
    launch spread no window removes, LAUNCH_LOG_SD squared) and costs about O + T, so the time to a given
    precision, (O + T)(a + v tau / T), is least at T = sqrt(O v tau / a). At least `least_s` (--timed-seconds),
    at most MOST_OVERHEAD_MULTIPLE launch overheads."""
    best = float(np.sqrt(max(overhead_s, 0.0) * max(block_var, 0.0) * max(block_s, 0.0)) / LAUNCH_LOG_SD)
    return float(min(max(best, least_s), max(least_s, MOST_OVERHEAD_MULTIPLE * overhead_s)))


def fixed_rounds_for(precision: float, log_sd: float, most: int = 1000) -> int | None:
    """About how many rounds the t interval over rounds needs to reach +-precision when rounds spread by
    log_sd: for telling a user with a fixed number of rounds what a decision would cost."""
    n = np.arange(2, most + 1)
    reached = np.nonzero(stats.t.ppf(0.975, n - 1) * log_sd / np.sqrt(n) <= np.log1p(precision))[0]
    return int(n[reached[0]]) if reached.size else None


def rounds_ratio(ratios: Iterable[float], confidence: float = 0.95) -> dict:
    """The a/b step-time ratio over rounds: the geometric mean of the rounds' ratios, with a t interval
    on their logarithms (a paired test over rounds: each round holds one launch of each side).

    A round is the unit because launches differ by a level shift that steps of one launch cannot show,
    and consecutive steps are correlated; an interval from pooled steps is far too narrow.
    """
    logs = np.log(np.asarray([r for r in ratios if r and r > 0], dtype=np.float64))
    n = int(logs.size)
    result = {"ratio": None, "ci_low": None, "ci_high": None, "confidence": confidence, "n_rounds": n,
              "log_sd": None, "half_width": None, "consistent": None,
              "method": "t interval over rounds of log(median a / median b)"}
    if n == 0:
        return result
    mean = float(np.mean(logs))
    result["ratio"] = float(np.exp(mean))
    result["consistent"] = bool(np.all(logs > 0) or np.all(logs < 0))  # every round points the same way
    if n < 2:
        return result
    sd = float(np.std(logs, ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / np.sqrt(n))
    result.update(ci_low=float(np.exp(mean - half)), ci_high=float(np.exp(mean + half)), log_sd=sd,
                  half_width=float(np.exp(half) - 1))
    return result
