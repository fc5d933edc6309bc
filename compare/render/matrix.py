"""`compare matrix` in words: each judged feature as a row (what matrix.json keeps), the table and matrix.md.
Takes compare/analysis/matrix.py's judgements; reads no files."""

from __future__ import annotations

from dataclasses import dataclass, field

from compare.analysis.matrix import Feature, FeatureJudgement
from compare.analysis.parity import STEP_RTOL
from compare.names import Parity
from compare.render.blocks import Heading, Para, Table, num, render_markdown
from compare.render.speed_up import faster_by
from compare.render.verdicts import comparison_summary
from workload.options import Options

MATRIX_HEADERS = ["feature", "Horovod", "DDP", "verdict", "max rel diff", "faster, by", "notes"]


@dataclass
class Row:
    feature: Feature
    verdict: str  # "parity holds" | "parity fails" | "no equivalent" | "runs" | "CUDA only" | "failed: ..."
    gap: float | None = None  # step-wise max relative loss difference
    speed_ratio: float | None = None  # Horovod / DDP median step time
    effect: dict = field(default_factory=dict)
    detail: str = ""
    outcome: Parity | None = None  # the parity judge's, where it judged the row

    def to_dict(self) -> dict:
        f = self.feature
        return {"feature": f.name, "horovod": f.horovod_form, "ddp": f.ddp_form, "kind": f.kind,
                "verdict": self.verdict, "max_rel_diff": self.gap, "step_time_ratio_hvd_over_ddp": self.speed_ratio,
                "effect": self.effect, "detail": self.detail, "note": f.note}


def feature_row(judged: FeatureJudgement) -> Row:
    """A judgement as its row: the verdict in words and the evidence that matters for its kind."""
    verdict = "no equivalent" if judged.outcome is None else judged.outcome.words
    return Row(judged.feature, verdict, gap=judged.gap, speed_ratio=judged.speed_ratio, effect=judged.effect,
               detail=_detail(judged), outcome=judged.outcome)


def _detail(judged: FeatureJudgement) -> str:
    if judged.outcome is None:
        return f"gap to the other side's plain run: {judged.gap:.2g} (expected: another algorithm)"
    if judged.resumed:
        return "; ".join(f"{direction}: from step {first}, max rel diff {gap:.2g}"
                         for direction, first, gap in judged.resumed)
    effect = judged.effect
    if "horovod_tuned_over_default" in effect:  # the tuning row, measured against the baseline row
        return (f"step time tuned/default: Horovod {effect['horovod_tuned_over_default']:.2f}, "
                f"DDP {effect['ddp_tuned_over_default']:.2f}")
    detail = "" if judged.comparison is None else comparison_summary(judged.comparison)
    if judged.feature.kind == "uneven":
        worst = effect["eval_max_rel_diff"]
        detail = "; ".join(filter(None, [detail, f"{judged.steps_compared} steps and {judged.evaluations_compared} "
                                         f"evaluations compared, eval max rel diff {worst or 0:.2g}"]))
    return detail


def matrix_table(rows: list[Row]) -> Table:
    def fmt(value: float | None, spec: str) -> str:
        return num(None if value is None or value != value else value, spec)

    return Table(MATRIX_HEADERS, [
        [row.feature.name, row.feature.horovod_form, row.feature.ddp_form, row.verdict, fmt(row.gap, ".2g"),
         faster_by(row.speed_ratio), "; ".join(part for part in (row.detail, row.feature.note) if part)]
        for row in rows])


def matrix_markdown(rows: list[Row], base: Options) -> str:
    """matrix.md: what was run, how parity is judged, and the table."""
    blocks = [Heading(1, "Feature matrix: Horovod vs DDP at np 2"),
              Para(f"Workload: {base.workload}, {base.steps} steps, batch 16 per worker, seed {base.seeds[0]}, "
                   "float32 on CPU. "
                   f"Parity is step-wise: relative loss difference <= {STEP_RTOL:g} over the first 20 steps "
                   "(every step for uneven inputs, which run past the join into a second epoch), and the "
                   "evaluation metrics at each epoch's end within the same tolerance. "
                   "Faster, by: the side with the shorter median step time and its speed-up, from one launch "
                   "a side (no interval). Regenerate with `python -m compare matrix`."),
              matrix_table(rows)]
    return render_markdown(blocks)
