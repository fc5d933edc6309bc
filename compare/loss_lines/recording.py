"""A rank's training and evaluation events into steps (`LossLog`): numbered (numbering.py), a bar's repaints
merged, a step printed again judged: several writers, a line of another shape, or a resumed run.

A log whose lines name no rank and whose steps go back is read as a run resumed from a checkpoint (a job
restarted prints steps 61-100 again with new values): from the step it went back to, the later values
supersede the earlier ones (`on_restart="keep-first"` keeps the first instead), and `LossLog.restarts` says
where. A resumed run goes back to a step after the one its interrupted run started from; steps that start
over from there are several ranks one after another, or a counter that restarts each epoch, and are refused.
In a log whose lines name ranks, a step printed again keeps its last value (`LossLog.repeated`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from compare.loss_lines.numbering import Numbering, numbering
from compare.loss_lines.tokens import LossLogError


@dataclass(frozen=True)
class Restart:
    step: int       # the step the resumed run went back to (as numbered in LossLog.steps)
    spot: str       # file:line of its first line
    again: int      # the earlier run's steps from there on, printed again
    through: int    # the last of them


@dataclass
class LossLog:
    steps: dict[int, dict] = field(default_factory=dict)    # step -> {"loss": ..., "lr": ...}
    evals: dict[int, dict] = field(default_factory=dict)    # step -> {"eval_loss": ..., "eval_accuracy": ...}
    pattern: str = ""                                        # the training pattern used
    step_rule: str = "as printed"                            # how steps were numbered (for run.json)
    prefixed: bool = False                                   # whether lines named their ranks
    ranks: tuple[int, ...] = ()                              # the ranks that printed (prefixed logs)
    world_size: int | None = None                            # from the verify tag, when present
    repeated: list[tuple[str, float, float]] = field(default_factory=list)  # (step as printed, first, kept)
    format: str = "--regex"                                  # the FORMATS entry used
    notes: list[str] = field(default_factory=list)           # what was read differently or left out, one line each
    restarts: list[Restart] = field(default_factory=list)   # where a run without rank prefixes resumed
    on_restart: str = "keep-last"                            # which values a resumed run's steps keep
    keys: dict[str, str] = field(default_factory=dict)       # the keys read (fields.py): loss, step, eval_loss...


@dataclass(frozen=True)
class Event:
    kind: str              # "train" or "eval"
    values: dict
    spot: str              # file:line, for messages
    line: tuple[int, int]  # (physical line, repaint): a bar's repaints share the line, not the repaint
    key: tuple = ()        # training: (epoch, counter, total) as printed; evaluation: (step,) when printed
    shape: str = ""        # the line with its numbers blanked: another kind of line has another shape
    running: bool = False  # an evaluation's running mean: its later lines refine it (several lines, one value)


def record_events(log: LossLog, events: list[Event], step_from: str, batch: int | None, where: str,
                  bar: bool = False) -> None:
    """The events into log.steps and log.evals, numbered by `step_from`. A bar's repaints of one counter keep
    the last; a step that comes back on another kind of line keeps the training value; a step printed again
    with another value is a resumed run, or several writers (an error without rank prefixes)."""
    events = _last_repaints(events, bar)
    trains = [event for event in events if event.kind == "train"]
    steps_of = numbering([event.key for event in trains], step_from, batch, where)
    log.step_rule = steps_of.rule
    log.notes += steps_of.notes
    placed, conflict = _place(log, events, steps_of, step_from)
    resumed = conflict is not None and not log.prefixed
    if resumed:
        _check_resumes(placed, conflict)
    last_step: int | None = None
    previous: int | None = None   # the step of the training line before, for steps that go back
    ceiling: int | None = None    # keep-first: the last step of the runs before the resumed one
    skipping = False              # keep-first: the line before was left out, and its evaluation goes too
    for event, step in placed:
        if event.kind == "eval":
            own = event.key[0] + steps_of.shift if event.key and steps_of.as_printed else None
            if skipping or (own is not None and ceiling is not None and own <= ceiling):
                continue
            _record_eval(log, event, own if own is not None else last_step)
            continue
        if resumed and previous is not None and step <= previous:
            again = sorted(s for s in log.steps if s >= step)
            log.restarts.append(Restart(step, event.spot, len(again), again[-1] if again else step))
            if log.on_restart == "keep-last":
                log.steps = {s: v for s, v in log.steps.items() if s < step}
                log.evals = {s: v for s, v in log.evals.items() if s < step}
            else:
                ceiling = max(s for s in (ceiling, previous, *log.steps) if s is not None)
        previous = step
        skipping = ceiling is not None and step <= ceiling
        if not skipping:
            log.steps[step] = {k: v for k, v in event.values.items() if k != "step"}
            last_step = step


def _place(log: LossLog, events: list[Event], steps_of: Numbering, step_from: str) -> tuple[list, tuple | None]:
    """Each event with its step (None for evaluations), lines of another shape left out; and the first step
    printed again with another loss (spot, shown step, first values, then values), None when there is none."""
    first: dict[tuple, Event] = {}
    placed: list[tuple[Event, int | None]] = []
    others: list[str] = []
    conflict = None
    trained = 0  # training lines so far
    for event in events:
        if event.kind == "eval":
            placed.append((event, None))
            continue
        trained += 1
        key = event.key
        step = trained if step_from == "order" or key in steps_of.order else steps_of.steps[key]
        if step_from == "log" and key in first and key not in steps_of.order:
            before = first[key]
            if before.shape != event.shape:  # "(best step 5 loss 0.4)", "val step 10 ...": not a training line
                others.append(f"{event.spot}, step {_shown(key)}")
                continue
            loss = event.values["loss"]
            if before.values["loss"] != loss and not _same(before.values["loss"], loss):
                if log.prefixed:
                    log.repeated.append((_shown(key), before.values["loss"], loss))
                elif conflict is None:
                    conflict = (event.spot, f"step {_shown(key)}", {"loss": before.values["loss"]}, {"loss": loss})
        first.setdefault(key, event)
        placed.append((event, step))
    if others:
        log.notes.append(f"{len(others)} line(s) printed a step again in another shape (first: {others[0]}): "
                         "kept the training line's value")
    return placed, conflict


def _check_resumes(placed: list, conflict: tuple) -> None:
    """Every place where the steps go back must resume after the start of the run it interrupts; else the
    lines are several writers (or a counter that restarts), never mixed."""
    start = previous = None
    for _event, step in placed:
        if step is None:
            continue
        if previous is not None and step <= previous:
            if step <= start:
                raise LossLogError(several_writers(*conflict))
            start = step
        start = step if start is None else start
        previous = step


def _record_eval(log: LossLog, event: Event, step: int | None) -> None:
    if step is None:
        log.notes.append(f"{event.spot}: an evaluation printed before any training line is left out")
        return
    earlier = log.evals.get(step)
    if earlier and not log.prefixed and not event.key and not event.running and any(
            k in earlier and not (earlier[k] == v or _same(earlier[k], v)) for k, v in event.values.items()):
        raise LossLogError(several_writers(event.spot, f"the evaluation after step {step}", earlier, event.values))
    log.evals[step] = {**(earlier or {}), **event.values}


def _same(a: float, b: float) -> bool:
    return math.isnan(a) and math.isnan(b)


def _last_repaints(events: list[Event], bar: bool) -> list[Event]:
    """A progress bar repaints a counter several times on one line ("\r"): the last repaint is its value. Its
    evaluation postfix is repainted with every later counter: only a change is a new evaluation."""
    kept: list[Event] = []
    last_eval: dict | None = None
    for event in events:
        if event.kind == "train" and kept and kept[-1].kind == "train" and kept[-1].key == event.key \
                and kept[-1].line[0] == event.line[0] and kept[-1].line[1] != event.line[1]:
            kept[-1] = event
            continue
        if event.kind == "eval":
            if bar and event.values == last_eval and not event.key:
                continue
            last_eval = event.values
        kept.append(event)
    return kept


def _shown(key: tuple) -> str:
    epoch, counter = key[0], key[1]
    return str(counter) if epoch is None else f"{counter} of epoch {epoch}"


def several_writers(spot: str, what: str, first: dict, then: dict) -> str:
    a, b = (", ".join(f"{v:.6g}" for v in d.values()) for d in (first, then))
    return (f"{spot}: {what} was printed twice with different values ({a}, then {b}) in a log whose lines name "
            "no rank: several ranks print, and their lines cannot be told apart. Print on rank 0 only, or "
            "launch with rank prefixes (horovodrun, srun --label, torchrun --tee 3); for a counter that "
            "restarts each epoch, give the regex an epoch group or use --step-from order (a resumed run is read "
            "as one when it goes back to a step after the first of the run it resumes)")


