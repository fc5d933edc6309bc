"""Runs a comparison's launches one after the other, with progress shown; rounds may add more as they go."""

from __future__ import annotations

import shutil
import sys

from compare.launch.lines import Launch
from compare.launch.logs import steps_done
from compare.launch.process import Outcome
from compare.launch.scheduling import Scheduler
from compare.render.progress import ProgressReporter


class Runner:
    """Runs launches one after the other with progress shown; more can be added as rounds go on."""

    def __init__(self, scheduler: Scheduler, timeout: float, planned_total: int):
        self.scheduler = scheduler
        self.timeout = timeout
        self.reporter = ProgressReporter(planned_total)
        self.outcomes: list[Outcome] = []
        self.count = 0  # launches known so far, for "[index/count]"

    def run(self, launches: list[Launch], planned: list[int]) -> bool:
        """Run these launches; True when every one ended well."""
        ok = True
        first = len(self.outcomes)
        for index, (launch, steps) in enumerate(zip(launches, planned, strict=True), first + 1):
            shutil.rmtree(launch.run_root, ignore_errors=True)  # this tool's own output: no stale records
            self.reporter.begin(launch.label, index, self.count, planned_steps=steps)
            outcome = self.scheduler.run(launch, self.timeout,
                             on_poll=lambda launch=launch: self.reporter.update(steps_done(launch.run_root,
                                                                                           launch.seeds)))
            self.outcomes.append(outcome)
            self.reporter.end(outcome.describe(), steps_done(launch.run_root, launch.seeds), outcome.ok)
            if not outcome.ok:
                ok = False
                print(f"--- last lines of {outcome.launch.log_path} ---\n{outcome.log_tail}\n---",
                      file=sys.stderr, flush=True)
        return ok
