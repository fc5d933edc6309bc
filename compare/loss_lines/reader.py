"""Printed loss lines as launchers and scripts really write them: one rank's training and evaluation lines
out of a log that several ranks and a launcher wrote at once. Pure: text in, a `LossLog` out. Every reader of
printed losses uses it (`compare import text`, `compare migrate --verify`); docs/own-job.md explains the rules.

- **Rank prefixes** (prefixes.py): horovodrun, mpirun, srun --label, torchrun --tee, mpiexec -prepend-rank and
  `compare migrate --verify`'s own tag; the innermost prefix that names a rank decides.
- **Glued lines.** Ranks that share one pipe without prefixes sometimes write into each other's lines; a line
  is cut wherever a prefix or a new match of the patterns begins, so that no loss is read across two writers.
- **One rank.** Only rank 0's lines count (`rank=` another). In a log without prefixes every line is taken.
- **Formats** (formats.py, one module per family beside it): each kind of line the reader knows, written
  against a log captured from the tool itself (examples/logs/corpus/). The training loss is a `loss` token
  with a left boundary and no qualifier (never val_loss, avg_loss, "best ... loss"); evaluation tokens
  (val_loss, eval_accuracy...) anywhere are evaluations; NaN and Inf in any case are non-finite values.
- **Steps as users count them** (numbering.py), and a step printed again (recording.py): a resumed run in
  a log without prefixes, the last value with prefixes, several writers refused.
"""

from __future__ import annotations

import re

from compare.defaults import ON_RESTART, STEP_FROM
from compare.loss_lines.fields import FieldLines, FieldNames, named_pattern
from compare.loss_lines.formats import DEFAULT_TRAIN, FORMATS
from compare.loss_lines.prefixes import Piece, rank_pieces, split_pieces, unglued
from compare.loss_lines.recording import Event, LossLog, record_events
from compare.loss_lines.tokens import (
    DEFAULT_EVAL,
    EVAL_GROUPS,
    EVAL_TOKEN,
    LOOKS_LIKE_EVAL,
    NUMBER,
    Format,
    LossLogError,
    as_integer,
    as_number,
)


def compile_patterns(train: str | None, evaluation: str | None,
                     step_from: str = "log") -> tuple[list[re.Pattern], re.Pattern]:
    """The training patterns to try and the evaluation pattern; a pattern without its groups is refused."""
    trains = [_compile(text, "--regex") for text in ((train,) if train else DEFAULT_TRAIN)]
    needed = ("loss",) if step_from == "order" else ("step", "loss")
    for regex in trains if train else []:  # the FORMATS' structured lines read their values with `parse`
        missing = [name for name in needed if name not in regex.groupindex]
        if missing:
            raise LossLogError(f"--regex needs the named groups (?P<step>...) and (?P<loss>...) (only loss with "
                               f"--step-from order); it lacks {' and '.join(missing)}")
    evals = _compile(evaluation or DEFAULT_EVAL, "--eval-regex")
    if not set(EVAL_GROUPS) & set(evals.groupindex):
        raise LossLogError("--eval-regex needs a named group eval_loss, eval_accuracy (a fraction) or "
                           "eval_accuracy_percent")
    return trains, evals


def _compile(text: str, flag: str) -> re.Pattern:
    try:
        return re.compile(text)
    except re.error as exc:
        raise LossLogError(f"{flag}: not a valid regular expression ({exc})") from None



def _shape(text: str) -> str:
    return " ".join(re.sub(NUMBER, "#", text).split())


def _events(mine: list[Piece], fmt: Format, regex: re.Pattern, evals: re.Pattern | None, step_from: str,
            where: str, names: FieldNames | None = None) -> tuple[list[Event], list[str], dict[str, str]]:
    """The rank's training and evaluation events in the order printed, the evaluation-looking lines that
    nothing read (for a note), and the keys the first training line and evaluation were read from."""
    events: list[Event] = []
    unread: list[str] = []
    used: dict[str, str] = {}
    epoch = None  # from a context line (Keras' "Epoch 1/3")
    own_evals = [re.compile(text) for text in fmt.evals] if evals is None else []
    context = re.compile(fmt.context) if fmt.context else None
    parse = fmt.parse(names) if fmt.stateful and fmt.parse else fmt.parse
    for piece in mine:
        spot, text = f"{where}:{piece.line}", piece.text
        if context and (found := context.search(text)):
            epoch = int(found["epoch"])
            continue
        train, evaluation = None, None
        if fmt.stateful or (found := regex.search(text)) is not None:
            if parse:
                train, evaluation = parse(text)
                if train is not None:  # a structured line's step key, when it has one; else its place
                    for name, key in train.pop("keys", {}).items():
                        used.setdefault(name, key)
                    step = train.pop("step", None)
                    counter = as_integer(step, spot) if step is not None and step_from == "log" else None
                    line_epoch, total = train.pop("epoch", None), train.pop("total", None)
                    train["key"] = (line_epoch if step_from == "log" else None, counter, total, None)
            else:
                train = _train_values(found, regex, fmt, epoch, step_from, spot)
        if train is not None:
            key = train.pop("key")
            if not (fmt.bar and key[1] == 0):  # a bar at 0 has trained nothing: its postfix is the last epoch's
                events.append(Event("train", train, spot, (piece.line, piece.repaint), key, _shape(text)))
        if evaluation is None:
            evaluation = _evaluation(text, evals, own_evals, fmt, spot)
        if evaluation:
            step = evaluation.pop("step", None)
            for name, key in evaluation.pop("keys", {}).items():
                used.setdefault(name, key)
            running = evaluation.pop("running", False)
            events.append(Event("eval", evaluation, spot, (piece.line, piece.repaint), () if step is None else (step,),
                                running=running))
        elif train is None and evaluation is None and LOOKS_LIKE_EVAL.search(text):  # {}: read, nothing in it
            unread.append(f"{spot} {text.strip()[:60]!r}")
    return events, unread, used


def _train_values(found: re.Match, regex: re.Pattern, fmt: Format, epoch: int | None, step_from: str,
                  spot: str) -> dict:
    values: dict = {"loss": as_number(found["loss"], spot, "loss")}
    if "lr" in regex.groupindex and found["lr"] is not None:
        values["lr"] = as_number(found["lr"], spot, "lr")
    groups = found.groupdict()
    if groups.get("epoch") is not None:
        epoch = int(groups["epoch"])
    counter = None if step_from == "order" or groups.get("step") is None else as_integer(groups["step"], spot)
    total = int(groups["total"]) if groups.get("total") else None
    percent = float(groups["percent"]) if groups.get("percent") else None
    values["key"] = (epoch, counter, total, percent)
    return values


def _evaluation(text: str, evals: re.Pattern | None, own: list[re.Pattern], fmt: Format, spot: str) -> dict | None:
    """A line's evaluation values: the --eval-regex alone when given, else the format's own evaluation lines,
    the Test set line, and evaluation tokens (val_loss, val_acc, eval_accuracy...) anywhere in the line."""
    if evals is not None:
        found = evals.search(text)
        return _eval_values(found, spot) if found else None
    for regex in own:
        if found := regex.search(text):
            if fmt.parse and not fmt.stateful:
                return fmt.parse(text)[1]
            values = _eval_values(found, spot)
            if "step" in regex.groupindex:
                values["step"] = as_integer(found["step"], spot)
            return values
    if found := re.search(DEFAULT_EVAL, text):
        return _eval_values(found, spot)
    values = {}
    for token in EVAL_TOKEN.finditer(text):
        name = "eval_loss" if token["metric"].lower() == "loss" else "eval_accuracy"
        value = as_number(token["value"], spot, name)
        values.setdefault(name, value / 100 if token["percent"] else value)
    return values or None


def read_loss_log(text: str, *, train: str | None = None, evaluation: str | None = None, rank: int = 0,
                  step_from: str = "log", where: str = "the log", batch: int | None = None,
                  on_restart: str = "keep-last", names: FieldNames | None = None) -> LossLog:
    """Rank `rank`'s training losses (and evaluations) from a log. Raises LossLogError with one line.

    `batch`: the samples one rank's batch has, to put a counter of samples (the MNIST examples' [N/M]) on the
    optimizer steps; without it such a counter is put on its own logging interval. `on_restart`: which values
    the steps a resumed run prints again keep, "keep-last" or "keep-first" (recording.py). `names`: the keys
    (or table columns) of the loss, step, lr and evaluations, read by fields.py instead of any format."""
    if step_from not in STEP_FROM:
        raise LossLogError(f"--step-from {step_from!r}: one of {', '.join(STEP_FROM)}")
    if on_restart not in ON_RESTART:
        raise LossLogError(f"--on-restart {on_restart!r}: one of {', '.join(ON_RESTART)}")
    if rank < 0:
        raise LossLogError(f"--rank {rank}: ranks count from 0")
    by_name = names is not None and names.given()
    if by_name and train:
        raise LossLogError("--regex and the --*-field options both say where the loss is: give one of them")
    trains, evals = compile_patterns(train, evaluation, step_from)
    formats = [Format("--regex", train, "as printed", "")] if train else list(FORMATS)
    if by_name:  # the named keys, by the rules of fields.py, in place of the formats
        formats = [Format("fields", named_pattern(names), "key", "", parse=FieldLines, stateful=True)]
        trains = [re.compile(formats[0].train)]
    pieces = split_pieces(text)
    # which training patterns each piece matches, computed once: a log can have a million lines
    matching = {id(piece): {i for i, r in enumerate(trains) if r.search(piece.text)} for piece in pieces}
    named = sorted({piece.rank for piece in pieces if piece.rank is not None})
    sizes = {piece.size for piece in pieces if piece.size is not None}
    world = max(sizes) if sizes else None
    if world is not None and rank >= world:
        raise LossLogError(f"{where}: --rank {rank} is beyond the world size {world}")
    mine, prefixed = rank_pieces(pieces, matching, rank, where)
    chosen = next((i for i in range(len(trains)) if any(i in matching[id(piece)] for piece in mine)), None)
    if chosen is None:
        if by_name:
            raise LossLogError(f"{where}: no line has the key {names.loss or 'loss'!r} (--loss-field) with a step")
        raise LossLogError(f"{where}: no training loss found (no line matches " + (
            "--regex)" if train else f"a known format: {', '.join(f.name for f in FORMATS)}, in docs/own-job.md, "
            "'Text logs'); give --regex, or name the keys with --loss-field and --step-field"))
    regex, fmt = trains[chosen], formats[chosen]
    if not fmt.parse:  # structured lines are not cut: a glued JSON line fails to parse and is left out
        mine = [part for piece in mine for part in unglued(piece, [regex, evals if evaluation else
                                                                    re.compile(DEFAULT_EVAL)])]
    log = LossLog(pattern=regex.pattern, prefixed=prefixed, ranks=tuple(named), world_size=world, format=fmt.name,
                  on_restart=on_restart)
    events, unread, log.keys = _events(mine, fmt, regex, evals if evaluation else None, step_from, where, names)
    if fmt.stateful and not any(event.kind == "train" for event in events):
        first = next(piece for piece in mine if regex.search(piece.text))
        raise LossLogError(f"{where}:{first.line}: a loss but no step on the line ({first.text.strip()[:60]!r}): "
                           "name the step's key with --step-field, or give --regex")
    record_events(log, events, step_from, batch, where, fmt.bar)
    if unread:
        log.notes.append(f"{len(unread)} line(s) look like evaluations but match no evaluation pattern, left out "
                         f"(first: {unread[0]}); give --eval-regex to read them")
    return log


def _eval_values(found: re.Match, spot: str) -> dict:
    groups = found.groupdict()
    values = {}
    if groups.get("eval_loss") is not None:
        values["eval_loss"] = as_number(groups["eval_loss"], spot, "eval_loss")
    if groups.get("correct") is not None and groups.get("count"):
        values["eval_accuracy"] = int(groups["correct"]) / int(groups["count"])
    elif groups.get("eval_accuracy_percent") is not None:
        values["eval_accuracy"] = as_number(groups["eval_accuracy_percent"], spot, "eval_accuracy") / 100
    elif groups.get("eval_accuracy") is not None:
        values["eval_accuracy"] = as_number(groups["eval_accuracy"], spot, "eval_accuracy")
    return values


