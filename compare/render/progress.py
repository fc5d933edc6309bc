"""Progress of a comparison: a live bar on a terminal, plain lines otherwise (CI logs, pipes)."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class ProgressReporter:
    def __init__(self, total_steps: int, live: bool | None = None):
        self.console = Console(stderr=True)
        self.live = sys.stderr.isatty() if live is None else live
        self.total = total_steps
        self.started = time.monotonic()
        self._done_before = 0  # steps of launches already finished
        self._never = 0  # steps that failed launches will never train: not work left
        self._planned: int | None = None  # the running launch's steps, when the caller says
        self._last = False  # the running launch is the last one
        self._progress: Progress | None = None
        if self.live:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("steps"),
                TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=self.console,
                transient=False)
            self._task = self._progress.add_task("starting", total=total_steps)
            self._progress.start()

    def begin(self, label: str, index: int, count: int, planned_steps: int | None = None) -> None:
        self._planned, self._last = planned_steps, index == count
        text = f"[{index}/{count}] {label}"
        if self._progress:
            self._progress.update(self._task, description=text)
        else:
            print(f"{self._clock()} {text}: starting", file=sys.stderr, flush=True)

    def update(self, steps_in_launch: int) -> None:
        if self._progress:
            self._progress.update(self._task, completed=self._done_before + steps_in_launch)

    def end(self, message: str, steps_in_launch: int, ok: bool) -> None:
        self._done_before += steps_in_launch
        if self._last:  # nothing is left, whatever the failed launches did not train
            self._never = self.total - self._done_before
        elif not ok and self._planned is not None:
            self._never += max(0, self._planned - steps_in_launch)
        if self._progress:
            # Steps that will never run leave the bar's total, so that its time left is the work still to do.
            self._progress.update(self._task, completed=self._done_before, total=self.total - self._never)
            self._progress.console.print(("  " if ok else "  [red]FAILED[/red] ") + message)
        else:
            print(f"{self._clock()} {'' if ok else 'FAILED '}{message}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._progress:
            self._progress.stop()

    def _clock(self) -> str:
        elapsed = time.monotonic() - self.started
        done, remaining = self._done_before, self.total - self._done_before - self._never
        left = f", about {elapsed / done * remaining:.0f} s left" if done and remaining > 0 else ""
        skipped = f" ({self._never} not run after failures)" if self._never else ""
        return f"[{elapsed:6.1f} s, {done}/{self.total} steps{skipped}{left}]"
