"""python -m compare import: a run record from the log of a run that already exists (TensorBoard event
files, CSV, JSON lines, plain text), so that last month's Horovod run can be the baseline of a new DDP run.

    python -m compare import tensorboard runs/tb/ --out runs/imported --framework horovod --world-size 2
    python -m compare check runs/imported runs/new-ddp
"""

from __future__ import annotations

import argparse
import sys

from compare.importers import Fields, LogFormatError, build_record, parse_option, read_series
from compare.importers import source_digest as digest_of
from compare.names import Exit
from workload.errors import UsageError
from workload.options import check_writable
from workload.record_format import write_metrics, write_run_json


def main(ns: argparse.Namespace) -> int:
    for flag, value in (("--world-size", ns.world_size), ("--global-batch", ns.global_batch)):
        if value is not None and value <= 0:
            raise UsageError(f"{flag} must be a positive integer, got {value}")
    if ns.rank < 0 or (ns.world_size is not None and ns.rank >= ns.world_size):
        raise UsageError(f"--rank {ns.rank} is outside the world size {ns.world_size}" if ns.rank >= 0 else
                         f"--rank {ns.rank}: ranks count from 0")
    if ns.format != "text" and (ns.regex, ns.eval_regex, ns.rank, ns.step_from) != (None, None, 0, "log"):
        raise UsageError("--regex, --eval-regex, --rank and --step-from are for text logs")
    if ns.format not in ("text", "mlflow") and ns.on_restart != "keep-last":
        raise UsageError("--on-restart is for text logs and MLflow runs")
    fields = Fields(step=ns.step_field, loss=ns.loss_field, lr=ns.lr_field, eval_loss=ns.eval_loss_field,
                    eval_accuracy=ns.eval_accuracy_field, regex=ns.regex, eval_regex=ns.eval_regex, rank=ns.rank,
                    step_from=ns.step_from, on_restart=ns.on_restart,
                    batch=ns.global_batch // (ns.world_size or 1) if ns.global_batch else None)
    try:
        options = dict(parse_option(text) for text in ns.option)
        series = read_series(ns.format, ns.source, fields)
    except LogFormatError as exc:
        raise UsageError(str(exc)) from None
    meta, lines = build_record(series, kind=ns.format, source=ns.source.resolve(), digest=digest_of(ns.source),
                               framework=ns.framework, world_size=ns.world_size, seed=ns.seed, options=options,
                               global_batch=ns.global_batch)
    check_writable(ns.out)
    # metrics first, run.json last: a reader that sees the new run.json sees the new metrics.
    write_metrics(ns.out, lines)
    write_run_json(ns.out, meta)
    steps = [line for line in lines if line["kind"] == "step"]
    every = meta["imported"]["steps_logged_every"]
    print(f"imported {len(steps)} steps (steps {steps[0]['step']}-{steps[-1]['step']}) and "
          f"{len(lines) - len(steps)} evaluations from {ns.source} into {ns.out}")
    if ns.format == "text":
        print(read_as(series.fields))
    for step, first, kept in series.repeated[:3]:
        print(f"python -m compare: note: step {step} was logged again with another loss ({first:.6g}, then "
              f"{kept:.6g}; the last is kept): a restarted run, or a counter that restarts (give the regex an "
              "epoch group, or --step-from order)", file=sys.stderr)
    for restart in meta["imported"]["restarts"]:
        kept = "the resumed run's values are kept (--on-restart keep-first keeps the first run's)" if (
            series.on_restart == "keep-last") else "the first run's values are kept (--on-restart keep-first)"
        print(f"python -m compare: note: the run resumed at step {restart['step']} ({restart['line']}): steps "
              f"{restart['step']}-{restart['through']} were logged again; {kept}", file=sys.stderr)
    for note in series.notes:
        print(f"python -m compare: note: {note}", file=sys.stderr)
    if len(series.repeated) > 3:
        print(f"python -m compare: note: {len(series.repeated) - 3} more steps were logged again", file=sys.stderr)
    if every != 1:
        print(f"python -m compare: note: the log has a loss every {every or 'irregular number of'} steps; "
              "compare check judges the steps that both sides logged", file=sys.stderr)
    return Exit.OK


def read_as(fields: dict[str, str]) -> str:
    """Which format, key and counter a text log was read by, in one line."""
    if "loss_key" not in fields:
        return f"read as {fields['format']}; steps: {fields['steps']}"
    evals = [f"{name} from {fields[f'{name}_key']!r}" for name in ("eval_loss", "eval_accuracy")
             if f"{name}_key" in fields]
    step = fields.get("step_key", "the order of the lines")
    return (f"read as {fields['format']}: the loss from the key {fields['loss_key']!r}, the step from "
            f"{step if step.startswith('the ') else 'the key ' + repr(step)} ({fields['steps']})"
            + (f"; {', '.join(evals)}" if evals else ""))
