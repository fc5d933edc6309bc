"""Reading run records: one run directory = run.json + metrics.jsonl (the format: workload/record_format.py).

Every problem with a record is a `RecordError` whose message is one line naming the file (and the line
for metrics.jsonl), so that a command line tool can print it as is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workload.record_format import (
    METRICS,
    METRICS_PART,
    REQUIRED_RUN_KEYS,
    REQUIRED_STEP_KEYS,
    RUN_JSON,
    SCHEMA_VERSION,
    loads,
)

FINAL_LOSS_STEPS = 5


class RecordError(ValueError):
    """A run record that cannot be read; the message is one line naming the file (and line)."""


@dataclass(frozen=True)
class RunRecord:
    path: Path
    meta: dict
    steps: list[dict]
    evals: list[dict]
    # False when the metrics came from metrics.jsonl.part (or none exist): the run did not end well.
    complete: bool = True

    @property
    def framework(self) -> str:
        return str(self.meta["framework"])

    @property
    def world_size(self) -> int:
        return int(self.meta["world_size"])

    @property
    def data_world_size(self) -> int:
        """The world size whose global batch this run trains on (a reference run emulates one)."""
        return int(self.meta.get("data_world_size") or self.world_size)

    @property
    def seed(self) -> int:
        return int(self.meta["seed"])

    @property
    def status(self) -> str:
        """run.json's status, except that "ok" without a finished metrics.jsonl reads "incomplete"."""
        status = str(self.meta["status"])
        return "incomplete" if status == "ok" and not self.complete else status

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def error(self) -> str | None:
        if self.meta.get("error"):
            return str(self.meta["error"])
        if self.status == "incomplete":
            return "run.json says ok but metrics.jsonl is missing (the run did not finish)"
        if not self.ok:
            return f"status {self.status}"
        return None

    @property
    def losses(self) -> np.ndarray:
        """In file order; a non-finite loss (null in the file, with "nonfinite" saying which) is that value."""
        return np.array([math.nan if s["loss"] is None else s["loss"] for s in self.steps], dtype=np.float64)

    @property
    def loss_by_step(self) -> dict[int, float]:
        return {int(s["step"]): math.nan if s["loss"] is None else float(s["loss"]) for s in self.steps}

    @property
    def last_step(self) -> int | None:
        return int(self.steps[-1]["step"]) if self.steps else None

    @property
    def epoch_starts(self) -> set[int]:
        """The steps that begin an epoch (after the first): where a missing set_epoch shows."""
        return {int(s["step"]) for prev, s in zip(self.steps, self.steps[1:], strict=False)
                if s.get("epoch") is not None and s.get("epoch") != prev.get("epoch")}

    @property
    def round(self) -> int:
        """Which repeat of the same launch made this run (compare run --repeats); 1 when not repeated."""
        value = (self.meta.get("options") or {}).get("round")
        try:
            return int(value) if value else 1
        except (TypeError, ValueError):
            return 1

    @property
    def timed_seconds(self) -> float | None:
        """The steady window a speed launch of `compare run --timed-seconds` was planned to time; None for a
        launch of the job's own steps (round 1, the parity launch, is one)."""
        value = (self.meta.get("options") or {}).get("window_seconds")
        return float(value) if isinstance(value, (int, float)) and value > 0 else None

    @property
    def is_twin(self) -> bool:
        """An A/A twin (compare run --aa): a second launch of the same framework in the same round, judged
        against the first and never in the Horovod/DDP comparison."""
        return bool((self.meta.get("options") or {}).get("aa_twin"))

    @property
    def is_calibration(self) -> bool:
        """A calibration run of the parity judge: the same job with its initial weights nudged by an ulp
        (--perturb-init-ulps), not one of the compared or timed launches."""
        return bool((self.meta.get("options") or {}).get("perturb_init_ulps"))

    @property
    def imported(self) -> dict | None:
        """Where an imported run came from (`compare import`): its log, format and hash; None for a run
        this project recorded."""
        return self.meta.get("imported") or None

    @property
    def step_times(self) -> np.ndarray:
        return np.array([s["step_time_s"] for s in self.steps], dtype=np.float64)

    @property
    def global_batch(self) -> int | None:
        value = self.meta.get("samples_per_step")
        return int(value) if value is not None else None

    @property
    def final_loss(self) -> float | None:
        """Mean training loss of the last (up to) 5 steps.

        One step's loss depends on which batch it saw; averaging a few steps gives a less noisy end
        point to compare across seeds and frameworks.
        """
        if not self.steps:
            return None
        return float(np.mean(self.losses[-FINAL_LOSS_STEPS:]))  # NaN when any of them is non-finite

    @property
    def final_eval(self) -> dict | None:
        return self.evals[-1] if self.evals else None

    @property
    def label(self) -> str:
        return f"{self.framework} np{self.world_size} seed {self.seed}"


def _read_meta(path: Path) -> dict:
    try:
        meta = loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:  # NaN or Infinity: not strict JSON
        raise RecordError(f"{path}: {exc}") from None
    if not isinstance(meta, dict):
        raise RecordError(f"{path}: not a JSON object")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(f"{path}: unsupported schema_version {version} (this tool reads {SCHEMA_VERSION})")
    missing = [key for key in REQUIRED_RUN_KEYS if key not in meta]
    if missing:
        raise RecordError(f"{path}: missing key(s) {', '.join(missing)}")
    return meta


def _read_metrics(path: Path, *, partial: bool) -> tuple[list[dict], list[dict]]:
    """Step and eval lines in file order.

    In a .part file the writer may have been killed mid-line, so an unterminated last line is
    dropped there; anywhere else a line that is not a JSON object is an error.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path}: cannot read ({exc})") from None
    lines = text.split("\n")
    steps: list[dict] = []
    evals: list[dict] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        is_unterminated_last = number == len(lines)  # split leaves "" after a final newline
        try:
            entry = _restore_nonfinite(loads_lenient(line))
        except json.JSONDecodeError:
            if partial and is_unterminated_last:
                break
            what = "truncated line" if is_unterminated_last else "not valid JSON"
            raise RecordError(f"{path}:{number}: {what}") from None
        if not isinstance(entry, dict):
            raise RecordError(f"{path}:{number}: not a JSON object")
        kind = entry.get("kind")
        if kind == "step":
            missing = [key for key in REQUIRED_STEP_KEYS if key not in entry]
            if missing:
                raise RecordError(f"{path}:{number}: step line lacks {', '.join(missing)}")
            step, loss = entry["step"], entry["loss"]
            if not isinstance(step, int) or isinstance(step, bool) or step < 0:
                raise RecordError(f"{path}:{number}: step must be a non-negative integer, got {step!r}")
            if steps and step <= steps[-1]["step"]:
                raise RecordError(f"{path}:{number}: step {step} after step {steps[-1]['step']}: steps must increase")
            if loss is not None and (not isinstance(loss, (int, float)) or isinstance(loss, bool)):
                raise RecordError(f"{path}:{number}: loss must be a number (or null when non-finite), got {loss!r}")
            steps.append(entry)
        elif kind == "eval":
            evals.append(entry)
        elif kind is None:
            raise RecordError(f"{path}:{number}: line has no 'kind'")
        # Other kinds come from later schema additions; readers skip them.
    return steps, evals


def loads_lenient(text: str) -> object:
    """JSON as Python's own `json.dumps` writes it by default: NaN, Infinity and -Infinity tokens are read as
    those values (a user's metrics of a run that blew up must be judged, not refused). The project itself
    writes strict JSON (workload/record_format.py)."""
    return json.loads(text)


def _restore_nonfinite(entry: object) -> object:
    """A strict line's null values back to the non-finite values its "nonfinite" entry names, so that +inf and
    -inf, or inf and NaN, stay apart."""
    if not isinstance(entry, dict) or not isinstance(entry.get("nonfinite"), dict):
        return entry
    restored = dict(entry)
    for key, spelled in entry["nonfinite"].items():
        try:
            value = float(str(spelled))  # repr's spelling: "nan", "inf", "-inf"
        except ValueError:
            continue
        if restored.get(key) is None and not math.isfinite(value):
            restored[key] = value
    return restored


def load_run(run_dir: Path | str) -> RunRecord:
    """Read one run directory: run.json, then metrics.jsonl (or metrics.jsonl.part if unfinished)."""
    run_dir = Path(run_dir)
    meta = _read_meta(run_dir / RUN_JSON)
    final, part = run_dir / METRICS, run_dir / METRICS_PART
    if final.exists():
        steps, evals = _read_metrics(final, partial=False)
        complete = True
        if not steps and meta.get("status") == "ok":
            raise RecordError(f"{final}: no step lines in a run that says it ended well")
    elif part.exists():
        steps, evals = _read_metrics(part, partial=True)
        complete = False
    else:
        steps, evals, complete = [], [], False
    return RunRecord(path=run_dir, meta=meta, steps=steps, evals=evals, complete=complete)


def find_runs(root: Path | str) -> list[RunRecord]:
    """Every run directory under root (root included), sorted by path."""
    root = Path(root)
    if not root.is_dir():
        raise RecordError(f"{root}: no such directory")
    dirs = sorted({p.parent for p in root.rglob(RUN_JSON) if p.is_file()})
    return [load_run(d) for d in dirs]


def jsonable(value: Any) -> Any:
    """`value` with numpy scalars/arrays, paths and tuples made plain, and NaN/inf turned into None.

    Strict JSON has no NaN or Infinity; None says "no finite value" in every JSON reader.
    """
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value
