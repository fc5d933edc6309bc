"""Do two implementations train the same model? Step-wise and statistical parity tests.

Two levels, because they catch different things:
- step-wise: with the same seed, data and hyperparameters both sides see the same global batches, so their
  losses must agree step by step up to floating-point summation-order noise;
- statistical: over several seeds, the end points (final training loss, eval loss/accuracy) must be
  equivalent within a margin that is a fraction of the seed-to-seed spread.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from compare.analysis.records import jsonable

STEP_RTOL = 1e-5
"""Relative tolerance on the per-step loss over the first STEP_K steps.

float32 epsilon is 1.19e-7. A different reduction order in the gradient allreduce and batch-size-dependent
matmul blocking give per-step relative loss differences of about 1e-7, which grow through training.
PyTorch's own DDP tests compare parameters after every step with rtol 1.3e-6. 1e-5 over the first 20 steps
leaves room for that growth, while a real difference (another seed, learning rate, data shard or
optimizer state) shows up as 1e-3 or more within a step or two.
"""

STEP_K = 20
"""Steps compared step-wise: long enough to see a wrong update, short enough that chaotic growth of
summation-order noise stays far below STEP_RTOL."""

MARGIN_SD = 0.5
"""Equivalence margin for end points, in units of the seed-to-seed standard deviation: a framework
difference smaller than half of what changing the seed does is practically irrelevant."""

CONFIDENCE = 0.95
"""One-sided confidence of the equivalence bound (the usual 5% error rate of TOST)."""


def tolerance_justification(
    rtol: float = STEP_RTOL, k: int = STEP_K, margin_sd: float = MARGIN_SD, confidence: float = CONFIDENCE
) -> str:
    """Why the tolerances are what they are, as stated in reports (with the values actually used)."""
    return (
        f"Step-wise: the relative loss difference must stay <= {rtol:g} over the first {k} steps. "
        "float32 epsilon is 1.19e-7; a different reduction order in the gradient allreduce and "
        "batch-size-dependent matmul blocking give per-step relative differences of about 1e-7 that grow "
        "through training (PyTorch's own DDP tests use rtol 1.3e-6 on parameters per step). "
        f"The default {STEP_RTOL:g} over {STEP_K} steps leaves room for that growth, while a real difference "
        "(another seed, learning rate, data shard or optimizer state) shows up as >= 1e-3. "
        f"Statistical: over seeds paired by seed, the upper one-sided {confidence:.0%} bound of the mean "
        f"difference of an end point must be within {margin_sd:g} x the seed-to-seed standard deviation "
        "(equivalence); the sides differ when even the lower bound exceeds that margin, and the test is "
        "undecided in between or with fewer than 2 seeds."
    )


TOLERANCE_JUSTIFICATION = tolerance_justification()

# Option keys that say where and how a run was launched, not what it trains.
IGNORED_OPTION_KEYS = frozenset({"out", "seeds", "log_every"})
# Top-level run.json fields that change the numbers when they differ.
COMPARED_META_KEYS = ("seed", "effective_lr", "threads", "data_world_size")


@dataclass(frozen=True)
class StepwiseResult:
    passed: bool
    k: int
    rtol: float
    max_rel_diff: float | None
    max_at_step: int | None
    first_divergence_step: int | None
    first_divergence_gap: float | None
    abs_gap_at_first_divergence: float | None
    n_common: int = 0
    max_rel_diff_all: float | None = None
    rel_diffs: list[float] = field(default_factory=list)
    reason: str | None = None

    def to_dict(self) -> dict:
        return jsonable(dataclasses.asdict(self))


@dataclass(frozen=True)
class StatisticalResult:
    passed: bool | None
    n_seeds: int
    seeds: list[int]
    mean_a: float | None
    mean_b: float | None
    sd_a: float | None
    sd_b: float | None
    pooled_sd: float | None
    mean_diff: float | None
    diff_lower_bound: float | None
    diff_upper_bound: float | None
    margin: float | None
    margin_sd: float
    confidence: float
    welch_p: float | None
    reason: str | None = None

    def to_dict(self) -> dict:
        return jsonable(dataclasses.asdict(self))


def relative_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a-b| / max(|a|, |b|), elementwise; a non-finite value on either side counts as infinitely far."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), np.finfo(np.float64).tiny)
    with np.errstate(invalid="ignore"):
        rel = np.abs(a - b) / scale
    # NaN would compare False against any tolerance and pass silently; make it fail instead.
    return np.where(np.isfinite(a) & np.isfinite(b), rel, np.inf)


def stepwise(
    a_losses: np.ndarray, b_losses: np.ndarray, k: int = STEP_K, rtol: float = STEP_RTOL
) -> StepwiseResult:
    """Compare two loss curves step by step over their first k common steps."""
    a = np.asarray(a_losses, dtype=np.float64)
    b = np.asarray(b_losses, dtype=np.float64)
    n_common = min(len(a), len(b))
    k_used = min(k, n_common)
    if k_used < 1:
        return StepwiseResult(
            passed=False, k=0, rtol=rtol, max_rel_diff=None, max_at_step=None,
            first_divergence_step=None, first_divergence_gap=None, abs_gap_at_first_divergence=None,
            n_common=n_common, reason="no common steps to compare",
        )
    rel = relative_difference(a[:n_common], b[:n_common])
    window = rel[:k_used]
    worst = int(np.argmax(window))
    over = np.flatnonzero(window > rtol)
    first = int(over[0]) if over.size else None
    return StepwiseResult(
        passed=first is None,
        k=k_used,
        rtol=rtol,
        max_rel_diff=float(window[worst]),
        max_at_step=worst + 1,
        first_divergence_step=None if first is None else first + 1,
        first_divergence_gap=None if first is None else float(window[first]),
        abs_gap_at_first_divergence=None if first is None else float(abs(a[first] - b[first])),
        n_common=n_common,
        max_rel_diff_all=float(np.max(rel)),
        rel_diffs=[float(x) for x in rel],
    )


def _undecided(reason: str, seeds: list[int], margin_sd: float, confidence: float) -> StatisticalResult:
    values = dict.fromkeys(
        ("mean_a", "mean_b", "sd_a", "sd_b", "pooled_sd", "mean_diff", "diff_lower_bound",
         "diff_upper_bound", "margin", "welch_p"),
    )
    return StatisticalResult(
        passed=None, n_seeds=len(seeds), seeds=seeds, margin_sd=margin_sd, confidence=confidence,
        reason=reason, **values,
    )


def _welch_p(a: np.ndarray, b: np.ndarray) -> float | None:
    with warnings.catch_warnings():
        # Near-identical samples trigger scipy's precision-loss warning; the p-value is informational.
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return p if math.isfinite(p) else None


def statistical(
    a_finals: dict[int, float],
    b_finals: dict[int, float],
    margin_sd: float = MARGIN_SD,
    confidence: float = CONFIDENCE,
) -> StatisticalResult:
    """Equivalence of end points over seeds, paired by seed.

    passed is True when the upper one-sided `confidence` bound of |mean(a_s - b_s)| is within
    margin_sd x the pooled seed-to-seed sd, False when even the lower bound exceeds it (the sides
    really differ), and None (undecided) when the interval straddles the margin or there are too few
    seeds: failing to show equivalence with few seeds is not evidence of a difference.
    """
    seeds = sorted(set(a_finals) & set(b_finals))
    n = len(seeds)
    if n < 2:
        return _undecided(f"needs at least 2 seeds; got {n}", seeds, margin_sd, confidence)
    a = np.array([a_finals[s] for s in seeds], dtype=np.float64)
    b = np.array([b_finals[s] for s in seeds], dtype=np.float64)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return dataclasses.replace(
            _undecided("non-finite values", seeds, margin_sd, confidence), passed=False
        )
    d = a - b
    sd_a, sd_b = float(np.std(a, ddof=1)), float(np.std(b, ddof=1))
    pooled_sd = math.sqrt((sd_a**2 + sd_b**2) / 2)  # equal group sizes: the pooled variance is the mean
    mean_diff = float(np.mean(d))
    half_width = float(stats.t.ppf(confidence, n - 1) * np.std(d, ddof=1) / math.sqrt(n))
    lower = max(abs(mean_diff) - half_width, 0.0)
    upper = abs(mean_diff) + half_width
    margin = margin_sd * pooled_sd
    reason = None
    if pooled_sd == 0:
        # No seed-to-seed spread: the only meaningful margin is exact agreement.
        passed: bool | None = bool(np.all(d == 0))
        reason = "no seed-to-seed spread; compared exactly"
    elif upper <= margin:
        passed = True
    elif lower > margin:
        passed = False
    else:
        passed = None
        reason = (
            f"bound {upper:.3g} exceeds margin {margin:.3g} but the difference is not shown to; "
            "more seeds would decide"
        )
    return StatisticalResult(
        passed=passed, n_seeds=n, seeds=seeds,
        mean_a=float(np.mean(a)), mean_b=float(np.mean(b)), sd_a=sd_a, sd_b=sd_b, pooled_sd=pooled_sd,
        mean_diff=mean_diff, diff_lower_bound=lower, diff_upper_bound=upper, margin=margin,
        margin_sd=margin_sd, confidence=confidence, welch_p=_welch_p(a, b), reason=reason,
    )


def _flatten(options: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in options.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _differences(a: dict, b: dict, keys: list[str] | None = None) -> list[str]:
    keys = sorted(set(a) | set(b)) if keys is None else keys
    missing = "(unset)"
    return [
        f"{key} {a.get(key, missing)} vs {b.get(key, missing)}"
        for key in keys
        if a.get(key, missing) != b.get(key, missing)
    ]


def _option_differences(meta_a: dict, meta_b: dict) -> list[str]:
    def relevant(meta: dict) -> dict:
        options = _flatten(meta.get("options") or {})
        return {
            k: v for k, v in options.items() if k not in IGNORED_OPTION_KEYS and "timeout" not in k
        }

    return _differences(relevant(meta_a), relevant(meta_b))


# Which interface, timeouts and error handling a launcher uses: these always differ between Horovod and
# DDP (each has its own), and none changes the numbers.
LAUNCHER_ENV = frozenset({"GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME",
                          "TORCH_NCCL_ASYNC_ERROR_HANDLING", "HOROVOD_GLOO_TIMEOUT_SECONDS",
                          "HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"})


def likely_causes(meta_a: dict, meta_b: dict, step: StepwiseResult) -> list[str]:
    """Human sentences on why two runs diverged: differing settings first, then what the step suggests."""
    if step.passed:
        return []
    causes = []
    option_diffs = _option_differences(meta_a, meta_b)
    if option_diffs:
        causes.append("options differ: " + ", ".join(option_diffs))
    reported = {d.split(" ", 1)[0] for d in option_diffs}
    meta_keys = [k for k in COMPARED_META_KEYS if k not in reported]
    meta_diffs = _differences(meta_a, meta_b, meta_keys)
    if meta_diffs:
        causes.append("run settings differ: " + ", ".join(meta_diffs))
    env_a, env_b = ({k: v for k, v in (meta.get("env") or {}).items() if k not in LAUNCHER_ENV}
                    for meta in (meta_a, meta_b))
    env_diffs = _differences(env_a, env_b)
    if env_diffs:
        causes.append("environment differs: " + ", ".join(env_diffs))

    at = step.first_divergence_step
    gap = step.first_divergence_gap
    if at is None:
        causes.append(step.reason or "no step could be compared")
    elif gap is not None and not math.isfinite(gap):
        causes.append(
            f"the loss is NaN or infinite at step {at} on one side: training blew up there (learning rate "
            "too high for this side's effective batch, overflow, bad input data)"
        )
    elif at == 1:
        causes.append(
            "diverged at step 1, whose loss is measured before any update: the initial state or the data "
            "differ (seed, parameter broadcast from rank 0, data shard or sampler seed, dropout seeding)"
        )
    elif at == 2:
        causes.append(
            "diverged at step 2, so the first update differs: learning-rate scaling on one side, the "
            "optimizer-state broadcast (Horovod's broadcast_optimizer_state runs a zero-gradient step on a "
            "fresh optimizer, which moves the parameters under AdamW or momentum with weight decay), or "
            "gradient averaging (sum vs mean)"
        )
    elif gap is not None and gap < 100 * step.rtol:
        causes.append(
            f"diverged at step {at} by a small, slowly growing gap ({gap:.2g}): summation order differs "
            "(Horovod tensor fusion; HOROVOD_FUSION_THRESHOLD=0 makes it deterministic), the thread count "
            "differs, or a world size > 2 changes the allreduce summation order"
        )
    else:
        causes.append(
            f"diverged at step {at} by a sudden jump ({gap:.2g}): something changed mid-run on one side "
            "(learning-rate schedule or warmup, data order at an epoch boundary, a later data shard)"
        )
    return causes
