"""The one parity judge: `compare run`, `check`, `report` and `matrix` all decide through `judge`.

Order of judgement:
1. the same job? (compare/analysis/jobs.py) - if not, the verdict is "different jobs";
2. every common step, paired by step number, within the band (compare/analysis/parity.py); evaluations
   paired by step the same way; a non-finite loss on one side fails where it appears; both sides non-finite
   from the same step (within one logging interval), every step and evaluation before it agreeing, is a run
   that failed alike: undecided, never "holds" (nothing after it can be compared) nor "fails" (they agreed);
3. the end points (final loss, eval loss, eval accuracy): judged step by step where the band kept its power
   to the last step and is there no wider than the end point's margin; otherwise by the paired equivalence
   test over seeds, against a margin fixed beforehand.

Outcomes: "holds", "fails", "undecided" (never read as "holds"), "different jobs". Pure: records in, a typed
verdict out; compare/render/verdicts.py says it in words.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from compare.analysis.jobs import JobCheck, check_sides
from compare.analysis.parity import (
    CONFIDENCE,
    MIN_OVERLAP,
    SATURATION,
    Band,
    Equivalence,
    EquivalenceResult,
    Margin,
    StepwiseResult,
    default_margins,
    equivalence,
    precision_floor,
    relative_difference,
    stepwise,
    usual_spacing,
)
from compare.analysis.records import RecordError, RunRecord, jsonable
from compare.analysis.rounding import printed_units
from compare.names import Parity

Group = dict[int, RunRecord]  # seed -> run

END_POINTS = {
    "final_loss": lambda r: r.final_loss,
    "eval_loss": lambda r: (r.final_eval or {}).get("eval_loss"),
    "eval_accuracy": lambda r: (r.final_eval or {}).get("eval_accuracy"),
}
EVAL_METRICS = ("eval_loss", "eval_accuracy")


@dataclass(frozen=True)
class EvalComparison:
    step: int
    metric: str
    a: float | None
    b: float | None
    gap: float  # relative for a loss; absolute for an accuracy
    tolerance: float
    passed: bool


@dataclass(frozen=True)
class SeedVerdict:
    seed: int
    losses: StepwiseResult
    evals: list[EvalComparison] = field(default_factory=list)
    at_epoch_boundary: bool = False  # the first divergence is the first step of an epoch
    evals_only_a: list[int] = field(default_factory=list)  # steps inside the common range evaluated on a only
    evals_only_b: list[int] = field(default_factory=list)
    failed_alike: int | None = None  # both sides non-finite from this step on, all before it agreeing

    @property
    def passed(self) -> bool:
        return self.losses.passed and all(e.passed for e in self.evals)

    @property
    def first_eval_divergence(self) -> EvalComparison | None:
        return next((e for e in self.evals if not e.passed), None)


@dataclass(frozen=True)
class ParityVerdict:
    outcome: Parity
    a: str
    b: str
    job: JobCheck
    band: Band
    seeds: list[SeedVerdict]
    end_points: dict[str, EquivalenceResult]
    reduced_precision: bool = False
    evaluated_only: str | None = None  # the side's name when only one side evaluated at all (the other has none)

    @property
    def first_divergence(self) -> tuple[int, SeedVerdict] | None:
        """(step, seed verdict) of the earliest failing step or evaluation over seeds."""
        found = []
        for seed in self.seeds:
            if seed.failed_alike is not None:
                continue  # not a divergence: both sides failed there
            if seed.losses.first_divergence_step is not None:
                found.append((seed.losses.first_divergence_step, seed))
            elif (bad := seed.first_eval_divergence) is not None:
                found.append((bad.step, seed))
        return min(found, key=lambda item: item[0]) if found else None

    @property
    def full_power(self) -> bool:
        return bool(self.seeds) and all(s.losses.full_power for s in self.seeds)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["job"] = self.job.to_dict()
        data["band"] = self.band.to_dict()
        data["full_power"] = self.full_power
        first = self.first_divergence
        data["first_divergence"] = {"step": first[0], "seed": first[1].seed} if first else None
        for seed, entry in zip(self.seeds, data["seeds"], strict=True):
            entry["passed"] = seed.passed
        return jsonable(data)


def accuracy_allowance(samples: int | None) -> float:
    """How far one evaluation's accuracy may move at any band: one prediction flipping (1.5 / samples, so that
    exactly one flip passes whatever the rounding of the fraction); 0 when the count is not recorded."""
    return 1.5 / samples if samples else 0.0


def _eval_samples(entry: dict, other: dict) -> int | None:
    samples = min(entry.get("eval_samples") or 0, other.get("eval_samples") or 0)
    return samples or None


def _eval_units(run: RunRecord) -> dict[str, dict[int, float]]:
    """Each metric's printed units, step by step (empty where the values look unrounded)."""
    units = {}
    for metric in EVAL_METRICS:
        values = {int(e["step"]): float(e[metric]) for e in run.evals if e.get(metric) is not None}
        units[metric] = printed_units(values) or {}
    return units


def compare_evals(a: RunRecord, b: RunRecord, band: Band) -> list[EvalComparison]:
    """Evaluations paired by step; an accuracy may move by one prediction (1.5 / samples) at any band, and
    either value by half a unit of its printed rounding. A non-finite value never agrees."""
    b_by_step = {int(e["step"]): e for e in b.evals}
    units_a, units_b = _eval_units(a), _eval_units(b)
    found = []
    for entry in a.evals:
        other = b_by_step.get(int(entry["step"]))
        if other is None:
            continue
        step = int(entry["step"])
        tolerance = band.tolerance(step)
        for metric in EVAL_METRICS:
            va, vb = entry.get(metric), other.get(metric)
            if va is None and vb is None:
                continue
            if va is None or vb is None:
                found.append(EvalComparison(step, metric, va, vb, math.inf, tolerance, False))
                continue
            printing = 0.5 * (units_a[metric].get(step, 0.0) + units_b[metric].get(step, 0.0))
            finite = math.isfinite(va) and math.isfinite(vb)
            if metric == "eval_accuracy":
                allowed = max(tolerance * abs(va), accuracy_allowance(_eval_samples(entry, other))) + printing
                gap = abs(va - vb) if finite else math.inf
            else:
                allowed, gap = tolerance, relative_difference(va, vb, printing)
            found.append(EvalComparison(step, metric, va, vb, gap, allowed,
                                        finite and (gap <= allowed or tolerance >= SATURATION)))
    return found


def failed_alike(losses: StepwiseResult, evals: list[EvalComparison]) -> int | None:
    """The step from which both sides' loss is non-finite, where they went so within one logging interval of each
    other and every step and evaluation before agreed; else None (one side only, far apart, or a divergence
    first: that fails)."""
    if losses.nonfinite_a is None or losses.nonfinite_b is None:
        return None
    first, last = sorted((losses.nonfinite_a[0], losses.nonfinite_b[0]))
    if last - first > usual_spacing(losses.steps) or losses.first_divergence_step != first:
        return None
    return first if all(e.passed for e in evals if e.step < first) else None


def judge_seed(seed: int, a: RunRecord, b: RunRecord, band: Band) -> SeedVerdict:
    losses = stepwise(a.loss_by_step, b.loss_by_step, band=band)
    if losses.n_common < MIN_OVERLAP:
        raise RecordError(f"seed {seed}: {a.path} and {b.path} share {losses.n_common} step(s) "
                          f"(steps {_span(a)} vs {_span(b)}); at least {MIN_OVERLAP} are needed to judge")
    at = losses.first_divergence_step
    boundary = at is not None and (at in a.epoch_starts or at in b.epoch_starts)
    evaluated = [{int(e["step"]) for e in run.evals if losses.first_step <= int(e["step"]) <= losses.last_step}
                 for run in (a, b)]
    evals = compare_evals(a, b, band)
    return SeedVerdict(seed, losses, evals, boundary, sorted(evaluated[0] - evaluated[1]),
                       sorted(evaluated[1] - evaluated[0]), failed_alike(losses, evals))


def _span(run: RunRecord) -> str:
    return f"{run.steps[0]['step']}-{run.last_step}" if run.steps else "none"


def stepwise_end_point(name: str, a: Group, b: Group, seeds: list[SeedVerdict]) -> EquivalenceResult:
    """An end point judged by the step-wise level, which had power to the last step of every seed."""
    read = END_POINTS[name]
    values = [(read(a[s.seed]), read(b[s.seed])) for s in seeds]
    values = [(va, vb) for va, vb in values if va is not None and vb is not None]
    mean = (lambda xs: sum(xs) / len(xs)) if values else (lambda xs: None)
    return EquivalenceResult(Equivalence.EQUIVALENT, n_seeds=len(values), seeds=[s.seed for s in seeds],
                             mean_a=mean([va for va, _ in values]), mean_b=mean([vb for _, vb in values]),
                             mean_diff=mean([va - vb for va, vb in values]), confidence=CONFIDENCE,
                             method="step-wise: every step to the last within the band, for every seed")


def band_within_margin(name: str, margin: Margin, seeds: list[SeedVerdict], values: list[float],
                       band: Band) -> bool:
    """Whether what the step-wise level allowed at every seed's last step (or last evaluation) is no wider than
    the end point's margin: only then can it stand in for the equivalence test. A band of 3% at the end (100 x
    a calibration pair at 3e-4, as resnet's) would otherwise pass end points 2.5% apart, beyond the 2% margin
    (docs/parity.md, "Error rates, end to end"). An accuracy's allowance of one sample's flip (1.5 points on
    100 samples) is not taken as what it allows: it would pass accuracies 1.4 points apart against a 1-point
    margin. Its observed gap counts instead, with the band's own width there."""
    level = sum(abs(v) for v in values) / len(values) if values else 0.0
    if name == "final_loss":
        allowed = [0.0 if s.losses.identical else
                   s.losses.tolerances[-1] * level + (s.losses.allowances[-1] if s.losses.allowances else 0.0)
                   for s in seeds if s.losses.tolerances]
    else:
        metric = name
        last = [[e for e in s.evals if e.metric == metric] for s in seeds]
        allowed = [max(found[-1].gap, band.tolerance(found[-1].step) * level) if metric == "eval_accuracy"
                   else found[-1].tolerance * level for found in last if found]
    return max(allowed, default=0.0) <= margin.resolve(level)


def resolvable(name: str, margin: Margin, a: Group, b: Group, seeds: list[int]) -> str | None:
    """Why an accuracy end point cannot be decided equivalent, or None: an evaluation set so small that one
    sample's flip (the per-evaluation allowance) is wider than the margin cannot resolve it."""
    if name != "eval_accuracy" or margin.kind != "absolute":
        return None
    counts = [min((a[s].final_eval or {}).get("eval_samples") or 0, (b[s].final_eval or {}).get("eval_samples") or 0)
              for s in seeds]
    counts = [c for c in counts if c]
    if counts and accuracy_allowance(min(counts)) > margin.value:
        return (f"{min(counts)} evaluation samples cannot resolve a {margin.value * 100:g}-point margin (one "
                f"sample's flip is allowed at each evaluation: {accuracy_allowance(min(counts)) * 100:.2g} points)")
    return None


def reduced_formats(run: RunRecord) -> set[str]:
    """The reduced-precision formats a run trained in: autocast (float16 on CUDA, bfloat16 on CPU, or as
    stated) and fp16 gradient compression."""
    options = run.meta.get("options") or {}
    found = set()
    amp = options.get("amp")
    if amp:
        stated = str(amp).lower()
        found.add("fp16" if stated in ("fp16", "float16", "half") else "bf16" if stated in ("bf16", "bfloat16")
                  else "fp16" if str(run.meta.get("device") or "").startswith("cuda") else "bf16")
    if options.get("compression") not in (None, "none", False):
        found.add("fp16")
    return found


def judge(a: Group, b: Group, *, band: Band, margins: dict[str, Margin] | None = None,
          allow: frozenset[str] = frozenset(), a_name: str = "a", b_name: str = "b",
          with_end_points: bool = True) -> ParityVerdict:
    """Parity of two sides' runs of the same seeds (seed -> run, each side one run per seed)."""
    margins = {**default_margins(), **(margins or {})}
    common = sorted(set(a) & set(b))
    if not common:
        raise RecordError(f"{a_name} and {b_name} share no seed: nothing to compare")
    job = check_sides([a[s] for s in common], [b[s] for s in common], allow)
    formats = {f for r in (a[common[0]], b[common[0]]) for f in reduced_formats(r)}
    reduced = bool(formats)
    if band.source == "default" and (floor := precision_floor(formats)) and floor[0] > band.rtol:
        band = dataclasses.replace(band, rtol=floor[0], detail=floor[1])  # a calibration, when given, decides
    seeds = [judge_seed(s, a[s], b[s], band) for s in common]
    end_points: dict[str, EquivalenceResult] = {}
    evaluated = {name for name, group in ((a_name, a), (b_name, b)) if any(group[s].evals for s in common)}
    if with_end_points:
        judged = [s.seed for s in seeds if s.failed_alike is None]  # a run that failed has no end points to test
        for name, read in END_POINTS.items():
            a_values = {s: read(a[s]) for s in judged if read(a[s]) is not None}
            b_values = {s: read(b[s]) for s in judged if read(b[s]) is not None}
            if not (a_values and b_values):
                continue  # on neither side, or on one side only (named: evaluated_only)
            if all(s.losses.full_power for s in seeds) and all(s.passed for s in seeds) and \
                    band_within_margin(name, margins[name], seeds, [*a_values.values(), *b_values.values()], band):
                end_points[name] = stepwise_end_point(name, a, b, seeds)
                continue
            result = equivalence(a_values, b_values, margins[name])
            why = resolvable(name, margins[name], a, b, sorted(set(a_values) & set(b_values)))
            if why and result.outcome is Equivalence.EQUIVALENT and (result.ci_low, result.ci_high) != (0.0, 0.0):
                result = dataclasses.replace(result, outcome=Equivalence.UNDECIDED, reason=why)
            elif why and result.outcome is Equivalence.UNDECIDED:
                result = dataclasses.replace(result, reason=f"{why}; {result.reason}")
            end_points[name] = result
    only = next(iter(evaluated)) if len(evaluated) == 1 else None
    return ParityVerdict(_outcome(job, seeds, end_points), a_name, b_name, job, band, seeds, end_points, reduced,
                         only)


def _outcome(job: JobCheck, seeds: list[SeedVerdict], end_points: dict[str, EquivalenceResult]) -> Parity:
    if not job.same_job:
        return Parity.DIFFERENT_JOBS
    if not all(s.passed or s.failed_alike is not None for s in seeds) or \
            any(r.outcome is Equivalence.DIFFERS for r in end_points.values()):
        return Parity.FAILS
    if any(s.failed_alike is not None for s in seeds):
        return Parity.UNDECIDED  # they trained alike and failed alike: a failed run cannot show parity
    if any(r.outcome is Equivalence.UNDECIDED for r in end_points.values()) or any(s.losses.too_gappy for s in seeds):
        return Parity.UNDECIDED
    if not end_points and not all(s.losses.full_power for s in seeds):
        return Parity.UNDECIDED  # no end points to test, and the band lost its power before the end
    return Parity.HOLDS


def group_by_seed(runs: list[RunRecord], side: str) -> Group:
    """seed -> run for one side; more than one run for the same (framework, world size, seed) is ambiguous."""
    group: Group = {}
    for run in sorted(runs, key=lambda r: str(r.path)):
        if run.seed in group:
            first = group[run.seed]
            raise RecordError(f"{side}: two runs for {run.framework} np {run.world_size} seed {run.seed}: "
                              f"{first.path} and {run.path}; give one directory per run set")
        group[run.seed] = run
    return group
