"""Writing the run record: run.json and metrics.jsonl (the format: workload/record_format.py)."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from workload.record_format import METRICS, METRICS_PART, RUN_JSON, SCHEMA_VERSION, metrics_line, write_run_json


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RunRecorder:
    """Rank 0 writes; other ranks hold a recorder that does nothing, so the loop needs no rank checks.

    run.json says "running" until the end; metrics go to metrics.jsonl.part and are renamed to
    metrics.jsonl only when the run ends well, so an interrupted run never looks complete.
    """

    def __init__(self, out: Path, enabled: bool):
        self.out = out
        self.enabled = enabled
        self.meta: dict = {}
        self._metrics: IO[str] | None = None
        self._started = 0.0
        self._last_loss: float | None = None
        self.nonfinite: tuple[int, str] | None = None  # (step, value): the first non-finite training loss

    @property
    def partial_path(self) -> Path:
        return self.out / METRICS_PART

    def start(self, meta: dict, resume_step: int | None = None) -> None:
        """Begin the record. When resuming in the same directory, the metrics of the steps up to the
        checkpoint are kept, so the record tells the whole run."""
        self._started = time.monotonic()
        self.meta = {"schema_version": SCHEMA_VERSION, "status": "running", "error": None, **meta,
                     **_workload_facts(meta), "start_time": now_iso(), "end_time": None, "duration_s": None}
        if not self.enabled:
            return
        for notice in _notices(self.meta):
            print(notice, file=sys.stderr, flush=True)
        self.out.mkdir(parents=True, exist_ok=True)
        kept = self._earlier_lines(resume_step) if resume_step is not None else []
        (self.out / METRICS).unlink(missing_ok=True)  # a stale complete file must not survive
        write_run_json(self.out, self.meta)
        self._metrics = self.partial_path.open("w")
        self._metrics.writelines(kept)

    def rewind(self, step: int) -> None:
        """Forget the metrics after `step`: an elastic job rolled back to its last commit redoes them."""
        if self._metrics is None:
            return
        self._metrics.close()
        kept = self._earlier_lines(step)
        self._metrics = self.partial_path.open("w")
        self._metrics.writelines(kept)
        self._metrics.flush()

    @contextlib.contextmanager
    def failure_recorded(self, explain: Callable[[BaseException], str | None] | None = None) -> Iterator[None]:
        """Whatever ends the run early, run.json says so (and with what) before it propagates.

        `explain` adds what the framework can tell about the other ranks (which one stopped answering)."""
        try:
            yield
        except BaseException as exc:
            note = None
            if explain is not None and isinstance(exc, Exception):
                try:
                    note = explain(exc)
                except Exception as why:  # the explanation must never hide the failure it explains
                    note = f"could not tell which rank failed: {type(why).__name__}"
            if note:
                exc.add_note(note)
            error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            self.finish("failed", error=f"{error} [{note}]" if note else error)
            raise

    def _earlier_lines(self, resume_step: int) -> list[str]:
        for source in (self.out / METRICS, self.partial_path):
            if source.exists():
                lines = []
                for line in source.read_text().splitlines(keepends=True):
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        break  # a line cut short by the failure that made this resume necessary
                    if entry.get("step", 0) <= resume_step and line.endswith("\n"):
                        lines.append(line)
                return lines
        return []

    def log(self, entry: dict) -> None:
        if entry.get("kind") == "step" and isinstance(entry.get("loss"), float):
            self._last_loss = entry["loss"]
            if not math.isfinite(entry["loss"]) and self.nonfinite is None:
                self.nonfinite = (entry["step"], repr(entry["loss"]))
        if self._metrics is not None:
            self._metrics.write(metrics_line(entry))

    def flush(self) -> None:
        if self._metrics is not None:
            self._metrics.flush()

    def finish(self, status: str, error: str | None = None, **extra: object) -> None:
        self.meta.update(status=status, error=error, end_time=now_iso(),
                         duration_s=round(time.monotonic() - self._started, 3), **extra)
        if not self.enabled:
            return
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
        if status == "ok":
            self.partial_path.replace(self.out / METRICS)
        write_run_json(self.out, self.meta)
        if status == "ok":
            print(self.closing_line(), flush=True)

    def closing_line(self) -> str:
        """One line on success: where the record is and how the run ended."""
        loss = self._last_loss
        final = f"final loss {loss:.4f}" if loss is not None and math.isfinite(loss) else f"final loss {loss}"
        return (f"wrote {self.out / RUN_JSON}: {self.meta.get('steps', '?')} steps, {final}, "
                f"{self.meta.get('duration_s', 0):.1f} s")


def _workload_facts(meta: dict) -> dict:
    """What the record adds from the options: the workload's source (a plug-in's file and hash) and the
    options this framework accepted but did not use."""
    options, framework = meta.get("options"), meta.get("framework")
    if not isinstance(options, dict) or "workload" not in options:
        return {}
    from workload.options import ignored_options
    from workload.workloads import workload_record

    workload = workload_record(options["workload"])
    return {"workload": workload, "workload_source": workload.get("sha256"),
            "ignored_options": ignored_options(options, str(framework))}


def _notices(meta: dict) -> list[str]:
    """Lines for stderr at the start: what the run will not do that the command line seemed to ask."""
    notices = []
    framework = meta.get("framework")
    for flag in meta.get("ignored_options") or []:
        notices.append(f"note: {flag} does not apply to {framework}: ignored (run.json ignored_options)")
    options = meta.get("options") or {}
    planned, asked = meta.get("planned_steps"), options.get("steps")
    if planned is not None and asked is not None and planned < asked:
        epochs = options.get("epochs", 1)
        train = (meta.get("data") or {}).get("train_samples", "?")
        what = "one epoch" if epochs == 1 else f"{epochs} epochs"
        steps = f"{planned} step" + ("s" if planned != 1 else "")
        notices.append(f"note: {steps}, not {asked}: {what} of {train} samples at global batch "
                       f"{meta.get('samples_per_step', '?')}; use --epochs for more")
    return notices
