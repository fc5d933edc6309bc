"""Printed loss lines as launchers and scripts really write them: one rank's training and evaluation lines
out of a log that several ranks and a launcher wrote at once. Pure: text in, a `LossLog` out. Every reader of
printed losses uses it (`compare import text`, `compare migrate --verify`); docs/own-job.md explains the rules.

- **Rank prefixes.** horovodrun and mpirun write "[1,0]<stdout>:" (MPI) or "[0]<stdout>:" (Gloo) before each
  worker's line, `srun --label` "0: ", torchrun `--tee` "[default0]:" (or "[rank0]:" with its prefix
  template), and `compare migrate --verify` its own "[verify rank=0 size=2]:". Launcher prefixes come first,
  the verify tag after them; the innermost prefix that names a rank decides.
- **Glued lines.** Ranks that share one pipe without prefixes sometimes write into each other's lines; a line
  is cut wherever a prefix or a new match of the patterns begins, so that no loss is read across two writers.
- **One rank.** Only rank 0's lines count (`rank=` another). In a log without prefixes every line is taken,
  and a step printed with two different losses is refused: several ranks printed, and their lines cannot be
  told apart (never mixed silently).
- **Formats.** FORMATS below: each kind of line the reader knows, written against a log captured from the
  tool itself (examples/logs/corpus/, beside the script that printed it). The training loss is a `loss`
  token with a left boundary and no qualifier (never val_loss, avg_loss, "best ... loss"); evaluation tokens
  (val_loss, eval_accuracy...) anywhere are evaluations; NaN and Inf in any case are non-finite values.
- **Steps as users count them.** A `step` group as printed ("1,000" too); with an `epoch` group too (a
  counter that restarts each epoch) the step is the line's place on a grid of batches from the first epoch's
  start (see _numbering), so that logs printed at different intervals pair the same batches.
  `step_from="order"` numbers the rank's matching lines 1, 2, 3... A progress bar's repaints of a counter
  keep the last. A step that comes back with another value on a line of the same shape (a restarted run)
  keeps the last value and is reported in `repeated`; on a line of another shape it is left out (a note).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce

NUMBER = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?)\b)"  # any case of NaN and Inf
STEP = r"\d{1,3}(?:,\d{3})+(?![\d.])|\d+"  # "1,000" as well as "1000"
# A loss token with a left boundary and no qualifier before it: "loss", "train_loss", "train/loss", "Loss"; never
# "val_loss", "eval_loss", "avg_loss", "val loss", "best loss" (the lookbehinds are fixed-width, one per word).
QUALIFIERS = ("val", "eval", "test", "valid", "avg", "best", "mean", "average", "validation", "running")
LOSS = ("".join(f"(?<!{word} )" for word in QUALIFIERS) + r"(?<![\w/.-])(?:train(?:ing)?[_/])?loss\b")
NOT_QUALIFIED = "".join(f"(?<!{word} )" for word in QUALIFIERS)  # "(best step 5 loss 0.4)" is no training line
# "step 10 loss 0.52", "Step: 10, Loss: 0.52", "[step=10] train_loss=0.52", "step 1,000 val_loss 0.9 loss 0.5"
GENERIC_TRAIN = (rf"(?i){NOT_QUALIFIED}(?<![a-z])step\b\D{{0,3}}(?P<step>{STEP})\b.*?{LOSS}\s*[:=]?\s*"
                 rf"(?P<loss>{NUMBER})")
# PyTorch's and Horovod's MNIST examples: "Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.312345"
EPOCH_TRAIN = (r"(?i)Train Epoch:\s*(?P<epoch>\d+)\s*\[(?P<step>\d+)/(?P<total>\d+)(?:\s*\((?P<percent>[\d.]+)%\))?\]"
               rf"\s*Loss:\s*(?P<loss>{NUMBER})")
# "Test set: Average loss: 0.0331, Accuracy: 9890/10000 (99%)" (PyTorch) or "..., Accuracy: 98.90%" (Horovod)
DEFAULT_EVAL = (rf"Test set: Average loss:\s*(?P<eval_loss>{NUMBER}),\s*Accuracy:\s*"
                rf"(?:(?P<correct>\d+)/(?P<count>\d+)\s*\()?(?P<eval_accuracy_percent>{NUMBER})%")
# Evaluation tokens on any line: "val_loss 0.9", "val_acc=0.8", "val_accuracy: 0.89", "eval_loss: 0.5", "val loss 2.2"
EVAL_TOKEN = re.compile(rf"(?i)(?<![\w/])(?P<family>val|valid|validation|eval|test)[_/ ](?P<metric>loss|acc|accuracy)"
                        rf"\b['\"]?\s*[:=]?\s*(?P<value>{NUMBER})(?P<percent>%)?")
LOOKS_LIKE_EVAL = re.compile(r"(?i)(?<![a-z])(?:val|valid|validation|eval|evaluation|test)[\W_]{0,3}"
                             r"(?:loss|acc|accuracy|set|top1|error|ppl|perplexity)")
STEP_FROM = ("log", "order")
EVAL_GROUPS = ("eval_loss", "eval_accuracy", "eval_accuracy_percent")
STEP_KEYS = ("step", "global_step", "iter", "iteration", "iter_num")
LOSS_KEYS = ("loss", "train_loss", "train/loss")
CORPUS = "examples/logs/corpus"  # where each format's sample lives, with the script that printed it


@dataclass(frozen=True)
class Format:
    """A kind of printed line the reader knows, written against a captured sample (CORPUS/sample).

    `train` finds a training line (its groups: step, loss; epoch, total where printed); `parse`, for structured
    lines (JSON, Python dicts), turns a line into (training values or None, evaluation values or None) and the
    regex only marks candidates. `steps` says how the step is numbered:
      "as printed" - the step group; "epoch grid" - a counter from the epoch's start on a grid (see _numbering);
      "order" - the lines numbered 1, 2, 3...; "key" - a step key of the structured line, else the order.
    `context` is a line that sets the epoch of the following ones (Keras' "Epoch 1/3"); `evals` its own
    evaluation lines, tried before the Test set line and the evaluation tokens (val_loss, eval_accuracy...)."""

    name: str
    train: str
    steps: str
    sample: str
    evals: tuple[str, ...] = ()
    parse: Callable[[str], tuple[dict | None, dict | None]] | None = None
    context: str | None = None
    bar: bool = False  # a progress bar: a counter of 0 has trained nothing yet, its postfix is stale


def _json_line(text: str) -> tuple[dict | None, dict | None]:
    """A JSON object printed on stdout ({"step": 10, "loss": 0.52}); Python's json writes NaN and Infinity."""
    start = text.find("{")
    try:
        entry = json.loads(text[start:])
    except ValueError:
        return None, None
    return _structured(entry) if isinstance(entry, dict) else (None, None)


def _python_dict(text: str) -> tuple[dict | None, dict | None]:
    """Hugging Face Trainer's print of its logs: {'loss': 0.52, 'learning_rate': 4e-05, 'epoch': 0.1}."""
    start = text.find("{")
    quoted = re.sub(r"(?<=[:\[,(]\s)(-?(?:nan|inf))\b", r"'\1'", text[start:])  # repr's nan/inf as strings
    try:
        entry = ast.literal_eval(quoted)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None, None
    return _structured(entry) if isinstance(entry, dict) else (None, None)


def _mllog(text: str) -> tuple[dict | None, dict | None]:
    """MLPerf's ':::MLLOG {"key": "train_loss", "value": 0.5, "metadata": {"step": 10, "epoch_num": 1}}'."""
    try:
        entry = json.loads(text[text.index(":::MLLOG") + len(":::MLLOG"):])
    except ValueError:
        return None, None
    if not isinstance(entry, dict):
        return None, None
    key, value, meta = entry.get("key"), entry.get("value"), entry.get("metadata") or {}
    if key in LOSS_KEYS and _numeric(value):
        return {"loss": float(value), **({"step": meta["step"]} if _numeric(meta.get("step")) else {})}, None
    if key in ("eval_accuracy", "eval_loss") and _numeric(value):
        return None, {key: float(value)}
    return None, None


def _numeric(value: object) -> bool:
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _structured(entry: dict) -> tuple[dict | None, dict | None]:
    """A structured line's training values (loss, lr, step) and evaluation values, by their usual keys."""
    train = None
    summary = any(str(key).startswith("train_runtime") for key in entry)  # the run's mean loss, not a step's
    loss = None if summary else next((entry[k] for k in LOSS_KEYS if _numeric(entry.get(k))), None)
    if loss is not None:
        train = {"loss": float(loss)}
        if _numeric(lr := entry.get("lr", entry.get("learning_rate"))):
            train["lr"] = float(lr)
        if (step := next((entry[k] for k in STEP_KEYS if _numeric(entry.get(k))), None)) is not None:
            train["step"] = step
    evals = {}
    for key, value in entry.items():
        found = re.fullmatch(r"(?i)(?:val|valid|eval|test)[_/](loss|acc|accuracy)", str(key))
        if found and _numeric(value):
            evals["eval_loss" if found[1].lower() == "loss" else "eval_accuracy"] = float(value)
    return train, evals or None


FORMATS: tuple[Format, ...] = (
    Format("mnist", EPOCH_TRAIN, "epoch grid", "horovodrun_mpi.log"),
    # the PyTorch tutorials' "Epoch [1/2], Step [100/600], Loss: 0.2153": a batch counter with its total
    Format("epoch-step", rf"(?i)Epoch \[(?P<epoch>\d+)/\d+\],?\s*Step \[(?P<step>\d+)/(?P<total>\d+)\],?\s*"
                         rf"Loss:\s*(?P<loss>{NUMBER})", "epoch grid", "epoch_step_every5.log"),
    # tqdm's bar with a loss postfix, Lightning's TQDMProgressBar: "Epoch 0:  45%|####5  | 9/20 [..., train_loss=0.7]"
    Format("progress-bar", rf"(?i)(?:epoch\s*(?P<epoch>\d+)\s*:\s*)?\d+%\|[^|]*\|\s*(?P<step>\d+)/(?P<total>\d+)\s*"
                           rf"\[[^\]]*?{LOSS}=(?P<loss>{NUMBER})", "epoch grid", "tqdm_bar.log", bar=True),
    # Keras: "Epoch 1/3" then "20/20 - 1s - 51ms/step - accuracy: 0.68 - loss: 0.8830 - val_loss: 0.49"
    Format("keras", rf"^\s*(?P<step>\d+)/(?P<total>\d+)\s.*?{LOSS}:\s*(?P<loss>{NUMBER})", "epoch grid",
           "keras_fit_v2.log", context=r"^\s*Epoch (?P<epoch>\d+)/\d+\s*$", bar=True),
    # nanoGPT: "iter 10: loss 3.2345, time 123.45ms, mfu 1.23%"; "step 250: train loss 2.1, val loss 2.2"
    Format("nanogpt", rf"^\s*iter (?P<step>{STEP}): loss (?P<loss>{NUMBER})", "as printed", "nanogpt.log",
           evals=(rf"^\s*step (?P<step>\d+): train loss {NUMBER}, val loss (?P<eval_loss>{NUMBER})",)),
    Format("mlperf", r':::MLLOG\s*\{.*"key":\s*"(?:loss|train_loss)"', "key", "mllog.log", parse=_mllog,
           evals=(r':::MLLOG\s*\{.*"key":\s*"eval_(?:accuracy|loss)"',)),
    Format("json-lines", r'^\s*\{.*"(?:loss|train_loss|train/loss)"\s*:', "key", "jsonl_stdout.log",
           parse=_json_line, evals=(r'^\s*\{.*"(?:val|eval|test)_\w+"\s*:',)),
    Format("hugging-face", r"^\s*\{'loss':", "key", "hf_trainer.log", parse=_python_dict,
           evals=(r"^\s*\{'eval_\w+':",)),
    Format("step-loss", GENERIC_TRAIN, "as printed", "logging_timestamps.log"),
)
DEFAULT_TRAIN = tuple(f.train for f in FORMATS)  # the first that matches a line of the rank is used

# Anywhere in a line: "[1,0]<stdout>:", "[0]<stderr>:", "[rank0]:", "[default0]:", "[verify rank=0 size=2]:".
VERIFY_TAG = r"\[verify rank=(?P<tag>\d+) size=(?P<size>\d+)\]:"  # compare/migrate/rank_tag writes it
BRACKETED = re.compile(r"\[(?:\d+,)?(?P<hvd>\d+)\]<std(?:out|err)>:|\[(?:rank|default)(?P<torch>\d+)\]:|"
                       + VERIFY_TAG)
SRUN_LABEL = re.compile(r"^\s*(?P<rank>\d+): ")
MPICH_LABEL = re.compile(r"^\[(?P<rank>\d+)\] ")  # Intel MPI and MPICH `mpiexec -prepend-rank`
TERMINAL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x08]")  # colours, cursor moves and backspaces of a progress bar


class LossLogError(ValueError):
    """The lines cannot be read as one rank's losses; the message is one line that says why and what to do."""


@dataclass(frozen=True)
class Piece:
    """One writer's line: the text after its prefixes, and what the prefixes said."""

    text: str
    line: int                  # the physical line it came from, from 1
    rank: int | None = None    # None: no prefix named a rank
    size: int | None = None    # the world size, from the verify tag
    repaint: int = 0           # which repaint of the line ("\r"-separated), from 0


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


def split_pieces(text: str) -> list[Piece]:
    """Each physical line cut at every prefix, each piece with the rank (and size) its prefixes name. A progress
    bar's repaints ("\r") are pieces of their line, with the rank of the line's prefix; terminal codes go."""
    lines = text.split("\n")
    labelled = [line for line in lines if line.strip()]
    labels = [label for label in (SRUN_LABEL, MPICH_LABEL)
              if labelled and sum(bool(label.match(line)) for line in labelled) * 2 > len(labelled)]
    pieces = []
    for number, line in enumerate(lines, start=1):
        line = TERMINAL.sub("", line)
        rank = None
        for label in labels:
            if found := label.match(line):
                rank, line = int(found["rank"]), line[found.end():]
                break
        starts = [match for match in BRACKETED.finditer(line)]
        if not starts:
            pieces += [Piece(part, number, rank, None, i) for i, part in _repaints(line)]
            continue
        if starts[0].start() > 0:  # a cut line before the first prefix
            pieces += [Piece(part, number, rank, None, i) for i, part in _repaints(line[:starts[0].start()])]
        size = None
        for match, following in zip(starts, [*starts[1:], None], strict=True):
            end = following.start() if following else len(line)
            piece_rank, size = _prefix_rank(match, size)
            body = line[match.end():end]
            if body or following is None:
                # prefixes nest ("[1,0]<stdout>:[verify rank=0 size=2]:..."): the innermost one decides
                pieces += [Piece(part, number, piece_rank, size, i) for i, part in _repaints(body)]
                size = None
    return pieces


def _repaints(text: str) -> list[tuple[int, str]]:
    parts = [(i, part) for i, part in enumerate(text.split("\r")) if part.strip()]
    return parts or [(0, text)]


def _prefix_rank(match: re.Match, size: int | None) -> tuple[int, int | None]:
    if match["tag"] is not None:
        return int(match["tag"]), int(match["size"])
    return int(match["hvd"] if match["hvd"] is not None else match["torch"]), size


def _unglued(piece: Piece, patterns: list[re.Pattern]) -> list[Piece]:
    """A piece cut wherever one of the patterns starts a match, so that a match never spans two writers. A start
    inside a value that an earlier match reads (a named group: "123" of a step group not anchored on the left
    also matches as "23" and "3") is no new writer."""
    starts: set[int] = set()
    read: list[tuple[int, int]] = []  # spans of the named groups of the matches found
    kept: list[re.Match] = []
    for regex in patterns:
        position = 0
        while (found := regex.search(piece.text, position)) is not None:
            groups = {name: found.span(name) for name in regex.groupindex if found[name] is not None}
            # a later start of the same reading (a pattern with an optional head: "Epoch 1: 5%|..." and "5%|...")
            same = any(m.re is regex and m.start() < found.start() < m.end() and
                       all(m.span(name) == span for name, span in groups.items()) for m in kept)
            if not same and not any(a <= found.start() < b for a, b in read):
                starts.add(found.start())
                read += groups.values()
                kept.append(found)
            position = found.start() + 1
    if len(starts) <= 1:
        return [piece]
    bounds = sorted(starts)
    return [Piece(piece.text[a:b], piece.line, piece.rank, piece.size, piece.repaint)
            for a, b in zip(bounds, [*bounds[1:], len(piece.text)], strict=True)]


def _number(text: str, where: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise LossLogError(f"{where}: {what} {text!r} is not a number") from None


def _integer(text: object, where: str, what: str = "step") -> int:
    """A printed step or counter ("1,000" too); anything else is one line naming --step-from order."""
    try:
        value = float(str(text).replace(",", "")) if not isinstance(text, (int, float)) else float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value != int(value) or value < 0:
        raise LossLogError(f"{where}: the {what} {text!r} is not a whole number >= 0; to number the training "
                           "lines 1, 2, 3... in the order printed, give --step-from order")
    return int(value)


def _rank_pieces(pieces: list[Piece], matching: dict[int, set[int]], rank: int,
                 where: str) -> tuple[list[Piece], bool]:
    """Rank `rank`'s pieces, and whether the log's training lines carry rank prefixes."""
    printing = sorted({p.rank for p in pieces if p.rank is not None and matching[id(p)]})
    if not printing:
        if rank != 0:
            raise LossLogError(f"{where}: its lines carry no rank prefix, so rank {rank}'s cannot be told apart "
                               "(--rank needs a prefixed log)")
        return pieces, False
    if rank not in printing:
        raise LossLogError(f"{where}: no training loss line of rank {rank} (ranks that printed one: "
                           f"{', '.join(map(str, printing))}); choose one with --rank")
    return [piece for piece in pieces if piece.rank == rank], True


@dataclass(frozen=True)
class Event:
    kind: str              # "train" or "eval"
    values: dict
    spot: str              # file:line, for messages
    line: tuple[int, int]  # (physical line, repaint): a bar's repaints share the line, not the repaint
    key: tuple = ()        # training: (epoch, counter, total) as printed; evaluation: (step,) when printed
    shape: str = ""        # the line with its numbers blanked: another kind of line has another shape


def _shape(text: str) -> str:
    return " ".join(re.sub(NUMBER, "#", text).split())


def _events(mine: list[Piece], fmt: Format, regex: re.Pattern, evals: re.Pattern | None, step_from: str,
            where: str) -> tuple[list[Event], list[str]]:
    """The rank's training and evaluation events in the order printed, and the evaluation-looking lines that
    nothing read (for a note)."""
    events: list[Event] = []
    unread: list[str] = []
    epoch = None  # from a context line (Keras' "Epoch 1/3")
    own_evals = [re.compile(text) for text in fmt.evals] if evals is None else []
    context = re.compile(fmt.context) if fmt.context else None
    for piece in mine:
        spot, text = f"{where}:{piece.line}", piece.text
        if context and (found := context.search(text)):
            epoch = int(found["epoch"])
            continue
        train, evaluation = None, None
        if (found := regex.search(text)) is not None:
            if fmt.parse:
                train, evaluation = fmt.parse(text)
                if train is not None:  # a structured line's step key, when it has one; else its place
                    step = train.pop("step", None)
                    counter = _integer(step, spot) if step is not None and step_from == "log" else None
                    train["key"] = (None, counter, None, None)
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
            events.append(Event("eval", evaluation, spot, (piece.line, piece.repaint), () if step is None else (step,)))
        elif train is None and LOOKS_LIKE_EVAL.search(text):
            unread.append(f"{spot} {text.strip()[:60]!r}")
    return events, unread


def _train_values(found: re.Match, regex: re.Pattern, fmt: Format, epoch: int | None, step_from: str,
                  spot: str) -> dict:
    values: dict = {"loss": _number(found["loss"], spot, "loss")}
    if "lr" in regex.groupindex and found["lr"] is not None:
        values["lr"] = _number(found["lr"], spot, "lr")
    groups = found.groupdict()
    if groups.get("epoch") is not None:
        epoch = int(groups["epoch"])
    counter = None if step_from == "order" or groups.get("step") is None else _integer(groups["step"], spot)
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
            if fmt.parse:
                return fmt.parse(text)[1]
            values = _eval_values(found, spot)
            if "step" in regex.groupindex:
                values["step"] = _integer(found["step"], spot)
            return values
    if found := re.search(DEFAULT_EVAL, text):
        return _eval_values(found, spot)
    values = {}
    for token in EVAL_TOKEN.finditer(text):
        name = "eval_loss" if token["metric"].lower() == "loss" else "eval_accuracy"
        value = _number(token["value"], spot, name)
        values.setdefault(name, value / 100 if token["percent"] else value)
    return values or None


def _record_events(log: LossLog, events: list[Event], step_from: str, batch: int | None, where: str,
                   bar: bool = False) -> None:
    """The events into log.steps and log.evals, numbered by `step_from`; a step printed twice with other
    values is several writers (an error without rank prefixes, log.repeated with them). A bar's repaints of one
    counter keep the last; a step that comes back on another kind of line keeps the training value."""
    events = _last_repaints(events, bar)
    trains = [event for event in events if event.kind == "train"]
    numbering = _numbering([event.key for event in trains], step_from, batch, where)
    log.step_rule = numbering.rule
    log.notes += numbering.notes
    first: dict[tuple, Event] = {}
    last_step = None
    trained = 0  # training lines so far
    others = []
    for event in events:
        if event.kind == "eval":
            step = event.key[0] if event.key and numbering.as_printed else last_step
            if step is None:
                log.notes.append(f"{event.spot}: an evaluation printed before any training line is left out")
                continue
            earlier = log.evals.get(step)
            if earlier and not log.prefixed and not event.key and any(
                    k in earlier and not (earlier[k] == v or _same(earlier[k], v)) for k, v in event.values.items()):
                raise LossLogError(_several_writers(event.spot, f"the evaluation after step {step}", earlier,
                                                    event.values))
            log.evals[step] = {**(earlier or {}), **event.values}
            continue
        trained += 1
        key = event.key
        step = trained if step_from == "order" or key in numbering.order else numbering.steps[key]
        values = {k: v for k, v in event.values.items() if k != "step"}
        if step_from == "log" and key in first and key not in numbering.order:
            before = first[key]
            if before.shape != event.shape:  # "(best step 5 loss 0.4)", "val step 10 ...": not a training line
                others.append(f"{event.spot}, step {_shown(key)}")
                continue
            if before.values["loss"] != values["loss"] and not _same(before.values["loss"], values["loss"]):
                if not log.prefixed:
                    raise LossLogError(_several_writers(event.spot, f"step {_shown(key)}",
                                                        {"loss": before.values["loss"]}, values))
                log.repeated.append((_shown(key), before.values["loss"], values["loss"]))
        first.setdefault(key, event)
        log.steps[step] = values
        last_step = step
    if others:
        log.notes.append(f"{len(others)} line(s) printed a step again in another shape (first: {others[0]}): "
                         "kept the training line's value")


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


def read_loss_log(text: str, *, train: str | None = None, evaluation: str | None = None, rank: int = 0,
                  step_from: str = "log", where: str = "the log", batch: int | None = None) -> LossLog:
    """Rank `rank`'s training losses (and evaluations) from a log. Raises LossLogError with one line.

    `batch`: the samples one rank's batch has, to put a counter of samples (the MNIST examples' [N/M]) on the
    optimizer steps; without it such a counter is put on its own logging interval."""
    if step_from not in STEP_FROM:
        raise LossLogError(f"--step-from {step_from!r}: one of {', '.join(STEP_FROM)}")
    if rank < 0:
        raise LossLogError(f"--rank {rank}: ranks count from 0")
    trains, evals = compile_patterns(train, evaluation, step_from)
    formats = [Format("--regex", train, "as printed", "")] if train else list(FORMATS)
    pieces = split_pieces(text)
    # which training patterns each piece matches, computed once: a log can have a million lines
    matching = {id(piece): {i for i, r in enumerate(trains) if r.search(piece.text)} for piece in pieces}
    named = sorted({piece.rank for piece in pieces if piece.rank is not None})
    sizes = {piece.size for piece in pieces if piece.size is not None}
    world = max(sizes) if sizes else None
    if world is not None and rank >= world:
        raise LossLogError(f"{where}: --rank {rank} is beyond the world size {world}")
    mine, prefixed = _rank_pieces(pieces, matching, rank, where)
    chosen = next((i for i in range(len(trains)) if any(i in matching[id(piece)] for piece in mine)), None)
    if chosen is None:
        raise LossLogError(f"{where}: no training loss found (no line matches " + (
            "--regex)" if train else f"a known format: {', '.join(f.name for f in FORMATS)}, in docs/own-job.md, "
            "'Text logs'); give --regex"))
    regex, fmt = trains[chosen], formats[chosen]
    if not fmt.parse:  # structured lines are not cut: a glued JSON line fails to parse and is left out
        mine = [part for piece in mine for part in _unglued(piece, [regex, evals if evaluation else
                                                                    re.compile(DEFAULT_EVAL)])]
    log = LossLog(pattern=regex.pattern, prefixed=prefixed, ranks=tuple(named), world_size=world, format=fmt.name)
    events, unread = _events(mine, fmt, regex, evals if evaluation else None, step_from, where)
    _record_events(log, events, step_from, batch, where, fmt.bar)
    if unread:
        log.notes.append(f"{len(unread)} line(s) look like evaluations but match no evaluation pattern, left out "
                         f"(first: {unread[0]}); give --eval-regex to read them")
    return log


def _eval_values(found: re.Match, spot: str) -> dict:
    groups = found.groupdict()
    values = {}
    if groups.get("eval_loss") is not None:
        values["eval_loss"] = _number(groups["eval_loss"], spot, "eval_loss")
    if groups.get("correct") is not None and groups.get("count"):
        values["eval_accuracy"] = int(groups["correct"]) / int(groups["count"])
    elif groups.get("eval_accuracy_percent") is not None:
        values["eval_accuracy"] = _number(groups["eval_accuracy_percent"], spot, "eval_accuracy") / 100
    elif groups.get("eval_accuracy") is not None:
        values["eval_accuracy"] = _number(groups["eval_accuracy"], spot, "eval_accuracy")
    return values


def _shown(key: tuple) -> str:
    epoch, counter = key[0], key[1]
    return str(counter) if epoch is None else f"{counter} of epoch {epoch}"


def _several_writers(spot: str, what: str, first: dict, then: dict) -> str:
    a, b = (", ".join(f"{v:.6g}" for v in d.values()) for d in (first, then))
    return (f"{spot}: {what} was printed twice with different values ({a}, then {b}) in a log whose lines name "
            "no rank: several ranks print, and their lines cannot be told apart. Print on rank 0 only, or "
            "launch with rank prefixes (horovodrun, srun --label, torchrun --tee 3); for a counter that "
            "restarts each epoch, give the regex an epoch group or use --step-from order")


@dataclass(frozen=True)
class Numbering:
    steps: dict            # (epoch, counter, total, percent) -> step
    rule: str
    order: frozenset = frozenset()  # keys without a counter: numbered by their place
    notes: tuple[str, ...] = ()
    as_printed: bool = False        # steps are the printed numbers (an evaluation's own step can be used)


def _numbering(keys: list[tuple], step_from: str, batch: int | None, where: str) -> Numbering:
    """How the training lines' (epoch, counter, total, percent) become steps.

    Without an epoch the counter is the step. With one, the counter restarts each epoch, and the step is the
    line's place on a grid of batches from the first epoch's start, so that two logs printed at different
    intervals put the same batch at the same step: a batch counter with its total printed ("Step [i/N]",
    a bar's "9/20") is exact; a counter of samples ([N/M]) needs the batch (`batch`, from --global-batch and
    --world-size) and is otherwise put on its own logging interval, which the step rule and a note say."""
    unnumbered = frozenset(key for key in keys if key[1] is None)
    if step_from == "order" or not keys:
        return Numbering({}, "rank's matching lines numbered in order from 1", unnumbered)
    if unnumbered:
        return Numbering({}, "the lines have no step: numbered in order from 1", unnumbered)
    if any(key[0] is None for key in keys):
        return Numbering({key: key[1] for key in keys}, "as printed", as_printed=True)
    first = min(key[0] for key in keys)
    totals = {key[2] for key in keys}
    if None not in totals and not _counts_samples(keys):
        if len(totals) > 1:
            raise LossLogError(f"{where}: the epochs have different totals ({', '.join(map(str, sorted(totals)))} "
                               "batches): give --step-from order")
        total = totals.pop()
        base = 0 if any(key[1] == 0 for key in keys) else 1  # a counter from 0 counts batches before this one
        return Numbering({key: (key[0] - first) * total + key[1] + (1 - base) for key in keys},
                         f"epoch and batch counter on a grid of {total} batches per epoch, from 1")
    if batch is not None:
        return _sample_grid(keys, first, batch, where)
    counters = [key[1] for key in keys if key[1] > 0]
    stride = reduce(math.gcd, counters) if counters else 1
    length = max(key[1] // stride for key in keys) + 1
    note = (f"the counter restarts each epoch and has no batch size: a step is one logging interval ({stride} as "
            "counted), so a log printed at another interval pairs other batches; give --global-batch and "
            "--world-size to number optimizer steps")
    return Numbering({key: (key[0] - first) * length + key[1] // stride + 1 for key in keys},
                     f"epoch and counter on a grid: counter / {stride} (its stride), {length} per epoch, from 1",
                     notes=(note,))


def _counts_samples(keys: list[tuple]) -> bool:
    """Whether [N/M] counts samples (the MNIST examples: the total is the dataset) rather than batches."""
    return any(key[3] is not None for key in keys)  # a printed percentage: the MNIST examples' shape


def _sample_grid(keys: list[tuple], first: int, batch: int, where: str) -> Numbering:
    """A sample counter ([N/M (P%)], N = batch index x batch) on the optimizer steps, the epoch's batches
    checked against the printed percentage (100 x batch index / batches per epoch)."""
    bad = next((key for key in keys if key[1] % batch), None)
    if bad is not None:
        raise LossLogError(f"{where}: the counter {bad[1]} is not a multiple of the per-rank batch {batch} "
                           "(--global-batch / --world-size): give the batch the counter counts in")
    candidates = sorted({math.ceil(key[2] / batch) for key in keys})
    fits = [n for n in candidates if all(key[3] is None or abs(100 * key[1] / batch / n - key[3]) <= 0.51
                                         for key in keys)]
    if len(fits) != 1:
        raise LossLogError(f"{where}: the printed percentages do not fit {batch} samples per rank's batch: check "
                           "--global-batch and --world-size")
    per_epoch = fits[0]
    return Numbering({key: (key[0] - first) * per_epoch + key[1] // batch + 1 for key in keys},
                     f"epoch and sample counter on the optimizer steps: counter / {batch} (the batch), "
                     f"{per_epoch} batches per epoch, from 1")
