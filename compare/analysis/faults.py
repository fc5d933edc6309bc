"""`compare faults`' verdicts: one injected fault's outcome (recovered? how fast, how many steps lost, the
final loss against an uninterrupted run) from its run records.

Pure: takes run records and what the launch reported, returns a FaultResult; the command injects the faults
(compare/commands/faults.py), compare/render/faults.py tabulates the results.
"""

from __future__ import annotations

from dataclasses import dataclass

from compare.analysis.parity import stepwise
from compare.analysis.records import RunRecord
from compare.defaults import FAULT_STEP, out_default

FAULTS_JSON = "faults.json"  # what `compare faults` writes into its --out, which `compare report` reads
DEFAULT_FAULTS_OUT = out_default("faults")
# Scenarios a framework is known not to recover from (docs/fault-tolerance.md): reported, not a failure.
EXPECTED_NOT_TO_RECOVER = {
    ("horovod", "hang"): "elastic Horovod waits for a stopped worker, which never exits; only the launch's time "
                         "limit ends it (docs/fault-tolerance.md)",
}


@dataclass
class FaultResult:
    framework: str
    scenario: str
    recovered: bool
    launch: str  # what the launcher said
    seconds_to_next_step: float | None = None
    steps_lost: int | None = None
    final_loss: float | None = None
    uninterrupted_final_loss: float | None = None
    final_loss_rel_diff: float | None = None
    curve_after_resume_identical: bool | None = None
    world_sizes: list[int] | None = None
    log: str = ""
    expected_failure: str | None = None  # why this framework is known not to recover here

    @property
    def as_expected(self) -> bool:
        return self.recovered or self.expected_failure is not None


def judge_fault(framework: str, scenario: str, faulty: RunRecord | None, clean: RunRecord, launch_text: str,
                fault_time: float | None, log: str) -> FaultResult:
    """The outcome of one scenario from its records (faulty: None where the run left no readable record)."""
    result = FaultResult(framework, scenario, recovered=False, launch=launch_text, log=log,
                         uninterrupted_final_loss=clean.final_loss,
                         expected_failure=EXPECTED_NOT_TO_RECOVER.get((framework, scenario)))
    if faulty is None or not faulty.ok:
        return result
    steps = faulty.steps
    result.recovered = len(steps) == len(clean.steps)
    result.final_loss = faulty.final_loss
    result.final_loss_rel_diff = abs(faulty.final_loss - clean.final_loss) / abs(clean.final_loss)
    result.world_sizes = faulty.meta.get("elastic_world_sizes")
    if fault_time is not None:
        after = [s for s in steps if s.get("wall_time", 0) > fault_time]
        if after:
            result.seconds_to_next_step = round(after[0]["wall_time"] - fault_time, 2)
            result.steps_lost = FAULT_STEP - (after[0]["step"] - 1)
    resumed = faulty.meta.get("resumed_from_step")
    if resumed is not None:
        tail = stepwise(clean.losses[resumed:], faulty.losses[resumed:], k=len(faulty.losses) - resumed)
        result.curve_after_resume_identical = bool(tail.passed and tail.max_rel_diff == 0)
    return result
