"""`compare faults` in words: the results table and faults.md. Takes compare/analysis/faults.py's results;
reads no files."""

from __future__ import annotations

from compare.analysis.faults import FaultResult
from compare.defaults import FAULT_RANK, FAULT_STEP
from compare.render.blocks import Heading, Para, Table, num, render_markdown

FAULT_HEADERS = ["framework", "fault", "recovered", "s from fault to next step", "steps lost",
                 "final loss (uninterrupted)", "rel. diff", "curve after resume identical", "world sizes"]


def fault_table(results: list[FaultResult]) -> Table:
    return Table(FAULT_HEADERS, [
        ["Horovod (elastic)" if r.framework == "horovod" else "DDP (torchrun restarts)", r.scenario,
         "yes" if r.recovered else ("no, as expected: " if r.expected_failure else "no: ") + r.launch,
         num(r.seconds_to_next_step, ""), num(r.steps_lost, ""),
         f"{num(r.final_loss, '.4f')} ({num(r.uninterrupted_final_loss, '.4f')})", num(r.final_loss_rel_diff, ".2g"),
         num(r.curve_after_resume_identical, ""), num(r.world_sizes, "")] for r in results])


def faults_markdown(results: list[FaultResult], *, steps: int, interval: int, collective_timeout: float) -> str:
    """faults.md: how the faults were injected, and the table."""
    blocks = [Heading(1, "Faults: Horovod vs DDP at np 2"),
              Para(f"Rank {FAULT_RANK} fails after step {FAULT_STEP} of {steps} (kill: SIGKILL; exit: exit status "
                   f"13; hang: SIGSTOP); checkpoint/commit every {interval} steps; collective timeout "
                   f"{collective_timeout:g} s. Regenerate with `python -m compare faults`."),
              fault_table(results)]
    return render_markdown(blocks)
