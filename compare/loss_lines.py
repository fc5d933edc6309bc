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
- **Steps as users count them.** A `step` group as printed; with an `epoch` group too (a batch or sample
  counter that restarts each epoch, as in `Train Epoch: 2 [640/3200 (20%)]`), the step is the line's place
  on a grid: the counter divided by its smallest stride (the logging interval), each epoch as long as the
  longest one seen, numbered from 1. `step_from="order"` numbers the rank's matching lines 1, 2, 3...
  A step that comes back with another value (a restarted run, a counter that restarts) keeps the last value
  and is reported in `repeated`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import reduce

NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"
# "step 10 loss 0.52", "Step: 10, Loss: 0.52", "[step=10] train_loss=0.52"
GENERIC_TRAIN = rf"(?i)(?<![a-z])step\b\D{{0,3}}(?P<step>\d+)\b.*?loss\b\s*[:=]?\s*(?P<loss>{NUMBER})"
# PyTorch's and Horovod's MNIST examples: "Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.312345"
EPOCH_TRAIN = (r"Train Epoch:\s*(?P<epoch>\d+)\s*\[(?P<step>\d+)/(?P<total>\d+)(?:\s*\([\d.]+%\))?\]\s*"
               rf"Loss:\s*(?P<loss>{NUMBER})")
# "Test set: Average loss: 0.0331, Accuracy: 9890/10000 (99%)" (PyTorch) or "..., Accuracy: 98.90%" (Horovod)
DEFAULT_EVAL = (rf"Test set: Average loss:\s*(?P<eval_loss>{NUMBER}),\s*Accuracy:\s*"
                rf"(?:(?P<correct>\d+)/(?P<count>\d+)\s*\()?(?P<eval_accuracy_percent>{NUMBER})%")
DEFAULT_TRAIN = (EPOCH_TRAIN, GENERIC_TRAIN)  # the first that matches a line of the rank is used
STEP_FROM = ("log", "order")
EVAL_GROUPS = ("eval_loss", "eval_accuracy", "eval_accuracy_percent")

# Anywhere in a line: "[1,0]<stdout>:", "[0]<stderr>:", "[rank0]:", "[default0]:", "[verify rank=0 size=2]:".
VERIFY_TAG = r"\[verify rank=(?P<tag>\d+) size=(?P<size>\d+)\]:"  # compare/migrate/rank_tag writes it
BRACKETED = re.compile(r"\[(?:\d+,)?(?P<hvd>\d+)\]<std(?:out|err)>:|\[(?:rank|default)(?P<torch>\d+)\]:|"
                       + VERIFY_TAG)
SRUN_LABEL = re.compile(r"^\s*(?P<rank>\d+): ")


class LossLogError(ValueError):
    """The lines cannot be read as one rank's losses; the message is one line that says why and what to do."""


@dataclass(frozen=True)
class Piece:
    """One writer's line: the text after its prefixes, and what the prefixes said."""

    text: str
    line: int                  # the physical line it came from, from 1
    rank: int | None = None    # None: no prefix named a rank
    size: int | None = None    # the world size, from the verify tag


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


def compile_patterns(train: str | None, evaluation: str | None) -> tuple[list[re.Pattern], re.Pattern]:
    """The training patterns to try and the evaluation pattern; a pattern without its groups is refused."""
    trains = [_compile(text, "--regex") for text in ((train,) if train else DEFAULT_TRAIN)]
    for regex in trains:
        missing = [name for name in ("step", "loss") if name not in regex.groupindex]
        if missing:
            raise LossLogError(f"--regex needs the named groups (?P<step>...) and (?P<loss>...); it lacks "
                               f"{' and '.join(missing)}")
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
    """Each physical line cut at every prefix, each piece with the rank (and size) its prefixes name."""
    lines = text.splitlines()
    labelled = [line for line in lines if line.strip()]
    srun = bool(labelled) and sum(bool(SRUN_LABEL.match(line)) for line in labelled) * 2 > len(labelled)
    pieces = []
    for number, line in enumerate(lines, start=1):
        rank = None
        if srun and (label := SRUN_LABEL.match(line)):
            rank, line = int(label["rank"]), line[label.end():]
        starts = [match for match in BRACKETED.finditer(line)]
        if not starts:
            pieces.append(Piece(line, number, rank))
            continue
        if starts[0].start() > 0:  # a cut line before the first prefix
            pieces.append(Piece(line[:starts[0].start()], number, rank))
        size = None
        for match, following in zip(starts, [*starts[1:], None], strict=True):
            end = following.start() if following else len(line)
            piece_rank, size = _prefix_rank(match, size)
            body = line[match.end():end]
            if body or following is None:
                # prefixes nest ("[1,0]<stdout>:[verify rank=0 size=2]:..."): the innermost one decides
                pieces.append(Piece(body, number, piece_rank, size))
                size = None
    return pieces


def _prefix_rank(match: re.Match, size: int | None) -> tuple[int, int | None]:
    if match["tag"] is not None:
        return int(match["tag"]), int(match["size"])
    return int(match["hvd"] if match["hvd"] is not None else match["torch"]), size


def _unglued(piece: Piece, patterns: list[re.Pattern]) -> list[Piece]:
    """A piece cut wherever one of the patterns starts a match, so that a match never spans two writers."""
    starts: set[int] = set()
    for regex in patterns:
        position = 0
        while (found := regex.search(piece.text, position)) is not None:
            starts.add(found.start())
            position = found.start() + 1
    if len(starts) <= 1:
        return [piece]
    bounds = sorted(starts)
    return [Piece(piece.text[a:b], piece.line, piece.rank, piece.size)
            for a, b in zip(bounds, [*bounds[1:], len(piece.text)], strict=True)]


def _number(text: str, where: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise LossLogError(f"{where}: {what} {text!r} is not a number") from None


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


def _events(mine: list[Piece], matching: dict[int, set[int]], chosen: int, regex: re.Pattern, evals: re.Pattern,
            where: str) -> list[tuple]:
    """("train", (epoch, step), values, where) / ("eval", None, values, where), in the order printed."""
    events = []
    for piece in mine:
        spot = f"{where}:{piece.line}"
        if chosen in matching[id(piece)] and (found := regex.search(piece.text)) is not None:
            values = {"loss": _number(found["loss"], spot, "loss")}
            if "lr" in regex.groupindex and found["lr"] is not None:
                values["lr"] = _number(found["lr"], spot, "lr")
            epoch = int(found["epoch"]) if "epoch" in regex.groupindex and found["epoch"] is not None else None
            events.append(("train", (epoch, int(found["step"])), values, spot))
        elif (found := evals.search(piece.text)) is not None:
            events.append(("eval", None, _eval_values(found, spot), spot))
    return events


def _record_events(log: LossLog, events: list[tuple], step_from: str) -> None:
    """The events into log.steps and log.evals, numbered by `step_from`; a step printed twice with other
    values is several writers (an error without rank prefixes, log.repeated with them)."""
    numbering = _numbering([key for kind, key, _, _ in events if kind == "train"], step_from)
    log.step_rule = numbering.rule
    first_value: dict[tuple, float] = {}
    last_step = None
    trained = 0  # training lines so far
    for kind, key, values, spot in events:
        if kind == "eval":
            if last_step is not None:  # an evaluation belongs to the last training step printed before it
                earlier = log.evals.get(last_step)
                if earlier is not None and earlier != values and not log.prefixed:
                    raise LossLogError(_several_writers(spot, f"the evaluation after step {last_step}",
                                                        earlier, values))
                log.evals[last_step] = values
            continue
        trained += 1
        step = trained if step_from == "order" else numbering.steps[key]
        if step_from == "log" and key in first_value and first_value[key] != values["loss"]:
            if not log.prefixed:
                raise LossLogError(_several_writers(spot, f"step {_shown(key)}", {"loss": first_value[key]}, values))
            log.repeated.append((_shown(key), first_value[key], values["loss"]))
        first_value.setdefault(key, values["loss"])
        log.steps[step] = values
        last_step = step


def read_loss_log(text: str, *, train: str | None = None, evaluation: str | None = None, rank: int = 0,
                  step_from: str = "log", where: str = "the log") -> LossLog:
    """Rank `rank`'s training losses (and evaluations) from a log. Raises LossLogError with one line."""
    if step_from not in STEP_FROM:
        raise LossLogError(f"--step-from {step_from!r}: one of {', '.join(STEP_FROM)}")
    if rank < 0:
        raise LossLogError(f"--rank {rank}: ranks count from 0")
    trains, evals = compile_patterns(train, evaluation)
    pieces = [part for piece in split_pieces(text) for part in _unglued(piece, [*trains, evals])]
    named = sorted({piece.rank for piece in pieces if piece.rank is not None})
    sizes = {piece.size for piece in pieces if piece.size is not None}
    world = max(sizes) if sizes else None
    if world is not None and rank >= world:
        raise LossLogError(f"{where}: --rank {rank} is beyond the world size {world}")
    # which training patterns each piece matches, computed once: a log can have a million lines
    matching = {id(piece): {i for i, r in enumerate(trains) if r.search(piece.text)} for piece in pieces}
    mine, prefixed = _rank_pieces(pieces, matching, rank, where)
    chosen = next((i for i in range(len(trains)) if any(i in matching[id(piece)] for piece in mine)), None)
    if chosen is None:
        raise LossLogError(f"{where}: no training loss found (no line matches " + (
            "--regex)" if train else "'step N ... loss X' or 'Train Epoch: E [N/M (P%)] Loss: X'; give --regex)"))
    regex = trains[chosen]
    log = LossLog(pattern=regex.pattern, prefixed=prefixed, ranks=tuple(named), world_size=world)
    _record_events(log, _events(mine, matching, chosen, regex, evals, where), step_from)
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
    epoch, counter = key
    return str(counter) if epoch is None else f"{counter} of epoch {epoch}"


def _several_writers(spot: str, what: str, first: dict, then: dict) -> str:
    a, b = (", ".join(f"{v:.6g}" for v in d.values()) for d in (first, then))
    return (f"{spot}: {what} was printed twice with different values ({a}, then {b}) in a log whose lines name "
            "no rank: several ranks print, and their lines cannot be told apart. Print on rank 0 only, or "
            "launch with rank prefixes (horovodrun, srun --label, torchrun --tee 3); for a counter that "
            "restarts each epoch, give the regex an epoch group or use --step-from order")


@dataclass(frozen=True)
class Numbering:
    steps: dict            # (epoch, counter) -> step (empty for --step-from order: the line's place)
    rule: str


def _numbering(keys: list[tuple], step_from: str) -> Numbering:
    if step_from == "order":
        return Numbering({}, "rank's matching lines numbered in order from 1")
    if not keys or keys[0][0] is None:
        return Numbering({key: key[1] for key in keys}, "as printed")
    counters = [counter for _, counter in keys if counter > 0]
    stride = reduce(math.gcd, counters) if counters else 1
    first = min(epoch for epoch, _ in keys)
    length = max(counter // stride for _, counter in keys) + 1
    steps = {key: (key[0] - first) * length + key[1] // stride + 1 for key in keys}
    return Numbering(steps, f"epoch and counter on a grid: counter / {stride} (its stride), {length} per epoch, "
                            "from 1")
