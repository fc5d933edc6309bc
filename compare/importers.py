"""Turning the logs of runs that already exist into run records (docs/run-record.md): TensorBoard event
files, CSV, JSON lines and plain text. Pure conversion: the reading of one file into a `Series`, and the
`Series` into run.json and metrics.jsonl contents; `compare/commands/import_records.py` does the files.

What a log cannot tell (step times, the global batch, the machine, the software versions) is written as
null and listed in run.json's "imported" entry, never guessed.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from compare.analysis.rounding import coarsest, printed_units
from compare.defaults import IMPORT_FORMATS as FORMATS
from compare.loss_lines import FieldNames, LossLogError, read_loss_log
from workload.record_format import SCHEMA_VERSION

LOSS_NAMES = ("loss", "train_loss", "train/loss", "loss/train", "training_loss", "Loss/train", "train_loss_step")


class LogFormatError(ValueError):
    """The log cannot be converted; the message is one line naming the file (and line)."""


@dataclass
class Series:
    """One run's curves as read from a log: per-step loss (and lr, wall time when logged), evaluations."""

    steps: dict[int, dict] = field(default_factory=dict)  # step -> {"loss": ..., "lr": ..., "wall_time": ...}
    evals: dict[int, dict] = field(default_factory=dict)  # step -> {"eval_loss": ..., "eval_accuracy": ...}
    # steps logged again with another loss (a restarted job, a counter that restarts): (step, first, kept);
    # the last value is kept
    repeated: list[tuple[str, float, float]] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)  # which column / tag / key became which value
    # where a run resumed from a checkpoint printed steps again (text logs without rank prefixes): each
    # {"step", "line", "steps_printed_again", "through"}, the steps as the log numbers them
    restarts: list[dict] = field(default_factory=list)
    on_restart: str = "keep-last"  # which values those steps kept
    notes: list[str] = field(default_factory=list)  # what the reader read differently or left out, for the screen

    def add_step(self, step: int, values: dict) -> None:
        if step in self.steps and self.steps[step].get("loss") != values.get("loss"):
            self.repeated.append((str(step), self.steps[step]["loss"], values["loss"]))
        self.steps[step] = {**self.steps.get(step, {}), **values}

    def add_eval(self, step: int, values: dict) -> None:
        self.evals[step] = {**self.evals.get(step, {}), **values}


@dataclass(frozen=True)
class Fields:
    """Where the values are: column names (CSV), keys (JSON lines, dotted for nesting) or tags (TensorBoard)."""

    step: str = "step"
    loss: str | None = None  # None: the first of LOSS_NAMES present
    lr: str | None = None
    eval_loss: str | None = None
    eval_accuracy: str | None = None
    regex: str | None = None  # text logs: named groups step and loss (and lr, epoch) per line
    eval_regex: str | None = None  # text logs: named groups eval_loss, eval_accuracy(_percent)
    rank: int = 0  # text logs: whose lines count
    step_from: str = "log"  # text logs: "log" (the step and epoch groups) or "order"
    batch: int | None = None  # text logs: one rank's batch (--global-batch / --world-size), for sample counters
    on_restart: str = "keep-last"  # text logs: a resumed run's steps printed again keep the last or first values


def _number(text: object, where: str, what: str) -> float:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    try:
        return float(str(text).strip())
    except ValueError:
        raise LogFormatError(f"{where}: {what} {text!r} is not a number") from None


def _step(text: object, where: str) -> int:
    value = _number(text, where, "step")
    if not math.isfinite(value) or value != int(value) or value < 0:
        raise LogFormatError(f"{where}: step {text!r} is not a whole number >= 0")
    return int(value)


def _pick_loss(available: list[str], fields: Fields, path: Path, kind: str) -> str:
    if fields.loss is not None:
        if fields.loss not in available:
            raise LogFormatError(f"{path}: no {kind} {fields.loss!r}; it has: {', '.join(available) or 'none'}")
        return fields.loss
    found = [name for name in LOSS_NAMES if name in available]
    if not found:
        raise LogFormatError(f"{path}: no {kind} named like a loss ({', '.join(LOSS_NAMES[:4])}...); name it with "
                           f"--loss-field (it has: {', '.join(available) or 'none'})")
    return found[0]


def _optional(name: str | None, available: list[str], path: Path, kind: str) -> str | None:
    if name is not None and name not in available:
        raise LogFormatError(f"{path}: no {kind} {name!r}; it has: {', '.join(available)}")
    return name


def read_csv(text: str, path: Path, fields: Fields) -> Series:
    reader = csv.DictReader(io.StringIO(text))
    columns = list(reader.fieldnames or [])
    if fields.step not in columns and "Step" in columns and any(WANDB_COLUMN.match(c) for c in columns):
        return read_wandb_csv(list(reader), columns, path, fields)
    if fields.step not in columns:
        raise LogFormatError(f"{path}: no column {fields.step!r} for the step (--step-field); "
                           f"columns: {', '.join(columns) or 'none'}")
    loss = _pick_loss(columns, fields, path, "column")
    extra = {key: _optional(getattr(fields, key), columns, path, "column")
             for key in ("lr", "eval_loss", "eval_accuracy")}
    series = Series(fields={"step": fields.step, "loss": loss, **{k: v for k, v in extra.items() if v}})
    for number, row in enumerate(reader, start=2):
        where = f"{path}:{number}"
        if not (row.get(fields.step) or "").strip():
            continue
        step = _step(row[fields.step], where)
        if (row.get(loss) or "").strip():  # loggers that write eval rows leave the training loss empty
            values = {"loss": _number(row[loss], where, "loss")}
            if extra["lr"] and (row.get(extra["lr"]) or "").strip():
                values["lr"] = _number(row[extra["lr"]], where, "lr")
            series.add_step(step, values)
        evals = {key: _number(row[column], where, key) for key in ("eval_loss", "eval_accuracy")
                 if (column := extra[key]) and (row.get(column) or "").strip()}
        if evals:
            series.add_eval(step, evals)
    return series


# Weights & Biases "Download CSV" of a panel: "Step", then per run "RUN - METRIC" and its "__MIN", "__MAX" (the
# panel's bounds over the points it merged into the row; equal to the value when it merged none)
WANDB_COLUMN = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<bound>__MIN|__MAX)?$")


def read_wandb_csv(rows: list[dict], columns: list[str], path: Path, fields: Fields) -> Series:
    """A W&B CSV export: the loss column by its metric name (train/loss, loss...) or --loss-field (the metric or
    the whole column name); an export of several runs needs --loss-field to name one."""
    metrics = {c: m["metric"] for c in columns if (m := WANDB_COLUMN.match(c)) and not m["bound"]}
    values = list(metrics)

    def column(name: str | None, what: str) -> str | None:
        if name is None:
            return None
        found = [c for c in values if name in (c, metrics[c])]
        if len(found) != 1:
            raise LogFormatError(f"{path}: {what} {name!r} names {len(found) or 'no'} column(s) of this W&B export; "
                                 f"its columns: {', '.join(values)}")
        return found[0]

    loss = column(fields.loss, "--loss-field")
    if loss is None:
        found = [c for c in values if metrics[c] in LOSS_NAMES]
        if len(found) != 1:
            raise LogFormatError(f"{path}: a W&B export with {len(found) or 'no'} loss column(s); name one with "
                                 f"--loss-field (its columns: {', '.join(values) or 'none'})")
        loss = found[0]
    extra = {key: column(getattr(fields, key), f"--{key.replace('_', '-')}-field")
             for key in ("lr", "eval_loss", "eval_accuracy")}
    series = Series(fields={"format": "wandb-csv", "step": "Step", "loss": loss,
                            **{k: v for k, v in extra.items() if v}})
    merged = []
    for number, row in enumerate(rows, start=2):
        where = f"{path}:{number}"
        if not (row.get("Step") or "").strip():
            continue
        step = _step(row["Step"], where)
        if (row.get(loss) or "").strip():
            value = _number(row[loss], where, "loss")
            bounds = [_number(row[f"{loss}{b}"], where, "loss") for b in ("__MIN", "__MAX")
                      if (row.get(f"{loss}{b}") or "").strip()]
            if any(b != value and not (math.isnan(b) and math.isnan(value)) for b in bounds):
                merged.append(step)
            entry = {"loss": value}
            if extra["lr"] and (row.get(extra["lr"]) or "").strip():
                entry["lr"] = _number(row[extra["lr"]], where, "lr")
            series.add_step(step, entry)
        evals = {key: _number(row[c], where, key) for key in ("eval_loss", "eval_accuracy")
                 if (c := extra[key]) and (row.get(c) or "").strip()}
        if evals:
            series.add_eval(step, evals)
    if merged:
        series.notes.append(f"{len(merged)} row(s) of the W&B export merge several logged points (their __MIN and "
                            f"__MAX differ from the value; first: step {merged[0]}): the panel sampled the run, so "
                            "those rows are no single step's loss; export the run's full history (more points in "
                            "the panel, or the API's scan_history) to judge every step")
    return series


def read_mlflow(path: Path, fields: Fields) -> Series:
    """An MLflow file store run: `path` is the run directory (mlruns/<experiment>/<run>) or its metrics
    directory; each metric is a file (a name with "/" a subdirectory) of "timestamp value step" lines, in
    the order logged. A resumed run (mlflow.start_run(run_id=...)) appends steps again: from the step it went
    back to, its values supersede (fields.on_restart "keep-first": the first run's stay)."""
    metrics = path / "metrics" if (path / "metrics").is_dir() else path
    if not path.is_dir() or (metrics == path and path.name != "metrics"):
        raise LogFormatError(f"{path}: not an MLflow run directory (mlruns/<experiment>/<run>, with metrics/) or "
                             "its metrics directory")
    names = sorted(str(f.relative_to(metrics)) for f in metrics.rglob("*") if f.is_file())
    loss = _pick_loss(names, fields, path, "metric")
    extra = {key: _optional(getattr(fields, key), names, path, "metric")
             for key in ("lr", "eval_loss", "eval_accuracy")}
    series = Series(fields={"format": "mlflow", "loss": loss, **{k: v for k, v in extra.items() if v}},
                    on_restart=fields.on_restart)
    for name, key in ((loss, "loss"), *((v, k) for k, v in extra.items() if v)):
        points, restarts = _resumed(_mlflow_points(metrics / name), fields.on_restart)
        if key == "loss":
            series.restarts = restarts
        for _, wall, value, step in points:
            if key == "loss":
                series.steps[step] = {"loss": value, "wall_time": wall}
            elif key == "lr":
                if step in series.steps:
                    series.steps[step]["lr"] = value
            else:
                series.add_eval(step, {key: value, "wall_time": wall})
    return series


def _resumed(points: list[tuple[str, float, float, int]], on_restart: str) -> tuple[list, list[dict]]:
    """The points a run resumed from a checkpoint keeps, in the order logged: where the steps go back, the
    later values supersede from that step (keep-last) or the first ones stay (keep-first); and where."""
    kept: dict[int, tuple] = {}
    restarts: list[dict] = []
    previous = ceiling = None
    for point in points:
        step = point[3]
        if previous is not None and step <= previous:
            again = sorted(s for s in kept if s >= step)
            restarts.append({"step": step, "line": point[0], "steps_printed_again": len(again),
                             "through": again[-1] if again else step})
            if on_restart == "keep-last":
                kept = {s: p for s, p in kept.items() if s < step}
            else:
                ceiling = max(s for s in (ceiling, previous) if s is not None)
        previous = step
        if ceiling is None or step > ceiling:
            kept[step] = point
    return sorted(kept.values(), key=lambda p: p[3]), restarts


def _mlflow_points(file: Path) -> list[tuple[str, float, float, int]]:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LogFormatError(f"{file}: cannot read ({exc})") from None
    points = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        parts = line.split()
        if len(parts) not in (2, 3):  # mlflow before 1.0 wrote no step: "timestamp value"
            raise LogFormatError(f"{where}: expected 'timestamp value step', got {line.strip()[:60]!r}")
        step = _step(parts[2], where) if len(parts) == 3 else 0
        points.append((where, round(_number(parts[0], where, "timestamp") / 1000, 3),
                       _number(parts[1], where, "value"), step))
    return points


def _dotted(entry: dict, key: str) -> object:
    value: object = entry
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def read_jsonl(text: str, path: Path, fields: Fields) -> Series:
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LogFormatError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        if not isinstance(entry, dict):
            raise LogFormatError(f"{path}:{number}: not a JSON object")
        entries.append((number, entry))
    keys = sorted({key for _, entry in entries for key in _flat_keys(entry)})
    loss = _pick_loss(keys, fields, path, "key")
    extra = {key: _optional(getattr(fields, key), keys, path, "key") for key in ("lr", "eval_loss", "eval_accuracy")}
    series = Series(fields={"step": fields.step, "loss": loss, **{k: v for k, v in extra.items() if v}})
    for number, entry in entries:
        where = f"{path}:{number}"
        raw_step = _dotted(entry, fields.step)
        if raw_step is None:
            continue
        step = _step(raw_step, where)
        if (value := _dotted(entry, loss)) is not None:
            values = {"loss": _number(value, where, "loss")}
            if extra["lr"] and (lr := _dotted(entry, extra["lr"])) is not None:
                values["lr"] = _number(lr, where, "lr")
            series.add_step(step, values)
        evals = {key: _number(value, where, key) for key in ("eval_loss", "eval_accuracy")
                 if extra[key] and (value := _dotted(entry, extra[key])) is not None}
        if evals:
            series.add_eval(step, evals)
    if not any(_dotted(entry, fields.step) is not None for _, entry in entries):
        raise LogFormatError(f"{path}: no line has the step key {fields.step!r} (--step-field); "
                             f"keys: {', '.join(keys)}")
    return series


def _flat_keys(entry: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in entry.items():
        name = f"{prefix}{key}"
        keys += _flat_keys(value, name + ".") if isinstance(value, dict) else [name]
    return keys


def read_text(text: str, path: Path, fields: Fields) -> Series:
    """One rank's loss lines (compare/loss_lines/: launcher prefixes, glued lines, epoch counters)."""
    # --step-field's default "step" leaves the step to the rules (a step key is the first they try)
    names = FieldNames(loss=fields.loss, step=None if fields.step == "step" else fields.step, lr=fields.lr,
                       eval_loss=fields.eval_loss, eval_accuracy=fields.eval_accuracy)
    try:
        log = read_loss_log(text, train=fields.regex, evaluation=fields.eval_regex, rank=fields.rank,
                            step_from=fields.step_from, where=str(path), batch=fields.batch,
                            on_restart=fields.on_restart, names=names)
    except LossLogError as exc:
        raise LogFormatError(str(exc)) from None
    keys = {f"{name}_key": key for name, key in log.keys.items()}  # fields.py: which key became which value
    series = Series(fields={"format": log.format, "regex": log.pattern, "steps": log.step_rule,
                            "rank": str(fields.rank), **keys}, repeated=log.repeated, notes=log.notes,
                    restarts=[{"step": r.step, "line": r.spot, "steps_printed_again": r.again, "through": r.through}
                              for r in log.restarts], on_restart=log.on_restart)
    series.steps, series.evals = log.steps, log.evals
    return series


def read_tensorboard(path: Path, fields: Fields) -> Series:
    """Scalars from the event files at `path` (a file, or a directory holding them), as written by
    torch.utils.tensorboard.SummaryWriter or tensorboardX."""
    import logging

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # no "TensorFlow not found" notice
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(str(path), size_guidance={event_accumulator.SCALARS: 0})
    try:
        accumulator.Reload()
    except Exception as exc:  # the reader's errors have no common type
        raise LogFormatError(f"{path}: not a readable TensorBoard event file ({type(exc).__name__}: {exc})") from None
    tags = sorted(accumulator.Tags().get("scalars", []))
    loss = _pick_loss(tags, fields, path, "scalar tag")
    extra = {key: _optional(getattr(fields, key), tags, path, "scalar tag")
             for key in ("lr", "eval_loss", "eval_accuracy")}
    series = Series(fields={"loss": loss, **{k: v for k, v in extra.items() if v}})
    for event in accumulator.Scalars(loss):
        series.add_step(int(event.step), {"loss": float(event.value), "wall_time": round(event.wall_time, 3)})
    if extra["lr"]:
        for event in accumulator.Scalars(extra["lr"]):
            if int(event.step) in series.steps:
                series.steps[int(event.step)]["lr"] = float(event.value)
    for key in ("eval_loss", "eval_accuracy"):
        if extra[key]:
            for event in accumulator.Scalars(extra[key]):
                series.add_eval(int(event.step), {key: float(event.value), "wall_time": round(event.wall_time, 3)})
    return series


def read_series(kind: str, path: Path, fields: Fields) -> Series:
    """Read one log of the given kind. Raises LogFormatError with one line."""
    if kind not in FORMATS:
        raise LogFormatError(f"unknown format {kind!r}: one of {', '.join(FORMATS)}")
    if not path.exists():
        raise LogFormatError(f"{path}: no such file or directory")
    if kind == "tensorboard":
        series = read_tensorboard(path, fields)
    elif kind == "mlflow":
        series = read_mlflow(path, fields)
    else:
        if not path.is_file():
            raise LogFormatError(f"{path}: not a file")
        try:
            with path.open(encoding="utf-8", newline="") as file:  # keep "\r": a progress bar's repaints
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise LogFormatError(f"{path}: cannot read ({exc})") from None
        series = {"csv": read_csv, "jsonl": read_jsonl, "text": read_text}[kind](text, path, fields)
    if not series.steps:
        raise LogFormatError(f"{path}: no training loss found" + (
            " (no line matches the --regex)" if kind == "text" else ""))
    return series


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def source_digest(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def build_record(series: Series, *, kind: str, source: Path, digest: str, framework: str,
                 world_size: int | None, seed: int, options: dict, global_batch: int | None,
                 imported_at: str | None = None) -> tuple[dict, list[dict]]:
    """run.json and the metrics lines for an imported run. Steps are renumbered from 1 when the log counted
    from 0 (the schema counts from 1); a log that skips steps keeps its numbers and says so."""
    logged = sorted(series.steps)
    offset = 1 if logged[0] == 0 else 0
    gaps = sorted({b - a for a, b in itertools.pairwise(logged)})
    lines: list[dict] = []
    events = [(step, 0, series.steps[step]) for step in logged] + [(s, 1, series.evals[s]) for s in series.evals]
    for step, order, values in sorted(events, key=lambda e: (e[0], e[1])):
        number = step + offset
        if order == 0:
            lines.append({"kind": "step", "step": number, "loss": _finite(values["loss"]),
                          "lr": values.get("lr"), "samples": number * global_batch if global_batch else None,
                          "step_time_s": None, **({"wall_time": values["wall_time"]} if "wall_time" in values else {})})
        else:
            lines.append({"kind": "eval", "step": number, **{k: _finite(v) for k, v in values.items()}})
    unknown = ["step_time_s (the log has no per-step timing)", "launcher", "backend", "versions", "host"]
    if global_batch is None:
        unknown.append("samples_per_step (the per-step global batch; state it with --global-batch)")
    if world_size is None:
        unknown.append("world_size (recorded as 1; state it with --world-size)")
    if framework == "unknown":
        unknown.append("framework (state it with --framework)")
    walls = [series.steps[s]["wall_time"] for s in logged if "wall_time" in series.steps[s]]
    meta = {
        "schema_version": SCHEMA_VERSION, "status": "ok", "error": None,
        "framework": framework, "launcher": None, "backend": None,
        "world_size": world_size or 1, "data_world_size": world_size or 1, "seed": seed,
        "options": options, "effective_lr": options.get("lr"), "versions": {}, "host": None, "hosts": [], "env": {},
        "start_time": _iso(walls[0]) if walls else None, "end_time": _iso(walls[-1]) if walls else None,
        "duration_s": round(walls[-1] - walls[0], 3) if len(walls) > 1 else None,
        "steps": logged[-1] + offset, "samples_per_step": global_batch,  # the run's length, not the lines logged
        "imported": {
            "format": kind, "source": str(source), "sha256": digest, "fields": series.fields,
            "imported_at": imported_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "step_offset": offset, "steps_logged_every": gaps[0] if len(gaps) == 1 else None if gaps else 1,
            "steps_logged_twice": len(series.repeated), "unknown": unknown,
            # a run resumed from a checkpoint: where, and which values its steps printed again kept
            "restarts": [{**r, "step": r["step"] + offset, "through": r["through"] + offset}
                         for r in series.restarts],
            "on_restart": series.on_restart,
            # the coarsest unit in the last printed place of each value, as the log printed it (None:
            # unrounded); the parity judge allows half of it (docs/parity.md, "Printed rounding")
            "printed_resolution": printed_resolution(series),
        },
    }
    return meta, lines


def printed_resolution(series: Series) -> dict[str, float | None]:
    found = {"loss": coarsest(printed_units({step: v["loss"] for step, v in series.steps.items()
                                             if v.get("loss") is not None}))}
    for metric in ("eval_loss", "eval_accuracy"):
        values = {step: v[metric] for step, v in series.evals.items() if v.get(metric) is not None}
        if values:
            found[metric] = coarsest(printed_units(values))
    return found


def _iso(wall_time: float) -> str:
    return datetime.fromtimestamp(wall_time, timezone.utc).isoformat(timespec="seconds")


def parse_option(text: str) -> tuple[str, object]:
    """key=value from the command line; the value as JSON when it parses (0.05, 32, true), else as text."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise LogFormatError(f"--option {text!r}: expected key=value")
    try:
        parsed: object = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed
