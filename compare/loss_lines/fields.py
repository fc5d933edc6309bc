"""Structured lines read by rule rather than by a named format (the last family of formats.py): key-value lines
in their common spellings (`key: value`, `key=value`, `key value`, between spaces, tabs, commas or pipes) and
tables with a header row, read by column name. The corpus has one sample per trainer whose lines these rules
read: timm's train script, MMEngine's logger, Detectron2's event writer, fastai's progress table.

- **Dates and times** are blanked before anything is read (`12/05 10:12:00`, `2024-12-05 10:12:00,123`,
  `eta: 0:01:23`): never a counter.
- **The training loss** is the first of LOSS_KEYS the line has (`loss`, then `total_loss`, `train_loss`, ...),
  never a component (`loss_cls`) or a qualified loss (`val_loss`); of `Loss: 3.41 (4.02)` the value, never the
  running mean in parentheses.
- **The step** is the first of STEP_KEYS with a whole number (`step`, `iter`, `iteration`...), else an
  epoch-relative counter (MMEngine's `Epoch(train) [2][ 50/400]`, timm's `Train: 0 [ 600/1251 ( 48%)]`: batch
  i of N in epoch e, put on the grid of numbering.py), else an `epoch` key. A line without one is no step.
- **Evaluations**: a line whose counter says it evaluates (`Test:`, `Epoch(val)`, `Val`) gives `loss` and the
  accuracy (`accuracy`, `acc`, `top1`, `acc@1`, `accuracy/top1`); of a running mean, the mean (its last line is
  the whole evaluation). A table's validation columns (`valid_loss`, `val_loss`...) are evaluations, and so are
  its metric columns (`accuracy`) when it has one. Keys `val_loss`, `eval_accuracy`... on any line are read by
  the reader's evaluation tokens.
- `FieldNames` (from --loss-field, --step-field, --lr-field, --eval-loss-field, --eval-accuracy-field) names
  the keys or columns instead of the rules."""

from __future__ import annotations

import re
from dataclasses import dataclass

from compare.loss_lines.tokens import NUMBER

LOSS_KEYS = ("loss", "total_loss", "train_loss", "training_loss", "lm loss", "train loss", "training loss",
             "train/loss", "loss/train", "total loss")
STEP_KEYS = ("step", "global_step", "iteration", "iter", "num_updates")
LR_KEYS = ("lr", "learning_rate", "learning rate")
EVAL_LOSS_COLUMNS = ("valid_loss", "val_loss", "validation_loss", "eval_loss", "test_loss")
ACCURACY_KEYS = ("accuracy", "acc", "top1", "acc@1", "accuracy/top1", "acc1")
EVAL_WORDS = ("val", "valid", "validation", "test", "eval", "evaluation")
_LOSS_ALTERNATIVES = "|".join(re.escape(name).replace(r"\ ", " ") for name in sorted(LOSS_KEYS, key=len, reverse=True))
KEY_CHARS = r"[\w./@-]"
# The table's candidate lines: a loss key with a number after it, or a header row that names a loss column.
FIELDS_TRAIN = (rf"(?i)(?<!{KEY_CHARS})(?:{_LOSS_ALTERNATIVES})\s*[:=]?\s*{NUMBER}|"
                rf"^\s*(?:[A-Za-z]{KEY_CHARS}*\s+)*(?:{_LOSS_ALTERNATIVES}|valid_loss)(?:\s+[A-Za-z]{KEY_CHARS}*)*\s*$")
CLOCK = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?)?|"  # 2024-12-05 10:12:00,123
                   r"\d{1,2}/\d{1,2}(?:/\d{2,4})?,?\s+\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?|"  # 12/05 10:12:00
                   r"(?<![\w.:])(?:\d+ days?, )?\d{1,3}(?::\d{2}){1,2}(?:[.,]\d+)?(?![\w.:])")  # 0:01:23, 00:04
# "Epoch(train) [2][ 50/400]", "Train: 0 [ 600/1251 ( 48%)]", "Iter(val) [ 50/100]", "Test: [  7/7]"
COUNTER = re.compile(r"(?:(?P<word>[A-Za-z]+)(?:\((?P<mode>[A-Za-z]+)\))?:?\s*)?"
                     r"(?:\[\s*(?P<bracketed>\d+)\s*\]|(?<![\d.])(?P<epoch>\d+))?\s*"
                     r"\[\s*(?P<step>\d+)\s*/\s*(?P<total>\d+)\s*(?:\(\s*[\d.]+\s*%\s*\))?\s*\]")
# "loss: 2.05", "total_loss=2.0", "iter 19", "Loss: 3.41 (4.02)" (a running mean), "max_mem: 2644M", "lm loss: 2.3"
PAIR = re.compile(rf"(?<!{KEY_CHARS})(?P<key>[A-Za-z]{KEY_CHARS}*?(?: [A-Za-z]{KEY_CHARS}*?)*?)(?:\s*[:=]\s*|\s+)"
                  rf"(?P<value>{NUMBER})(?P<unit>[A-Za-z%]*)(?![\w.])(?:\s*\(\s*(?P<mean>{NUMBER})[^)]*\))?")
HEADER_CELL = re.compile(rf"^[A-Za-z]{KEY_CHARS}*$")
INTEGER = re.compile(r"^\d+$")


@dataclass(frozen=True)
class FieldNames:
    """Keys or columns named on the command line; None: the rule decides."""

    loss: str | None = None
    step: str | None = None
    lr: str | None = None
    eval_loss: str | None = None
    eval_accuracy: str | None = None

    def given(self) -> bool:
        return any(value is not None for value in vars(self).values())


@dataclass(frozen=True)
class Value:
    text: str
    mean: str | None = None  # a running mean printed after it, in parentheses
    unit: str = ""


def _name(key: str) -> str:
    return " ".join(key.lower().split())


def key_values(text: str) -> dict[str, Value]:
    """A line's named values, keys lowercased, the first of a key kept; dates and times blanked first."""
    values: dict[str, Value] = {}
    for found in PAIR.finditer(CLOCK.sub(" ", text)):
        values.setdefault(_name(found["key"]), Value(found["value"], found["mean"], found["unit"]))
    return values


def counter(text: str) -> tuple[dict | None, str]:
    """The line's epoch-relative counter (epoch, step, total) or counter with its total, and the line's mode:
    "eval" when its word or mode says it evaluates, else "train"; the text without the counter."""
    found = COUNTER.search(text)
    if found is None:
        return None, text
    words = {(found["word"] or "").lower(), (found["mode"] or "").lower()}
    epoch = found["bracketed"] or found["epoch"]
    return ({"epoch": int(epoch) if epoch is not None else None, "step": int(found["step"]),
             "total": int(found["total"]), "mode": "eval" if words & set(EVAL_WORDS) else "train",
             "shown": " ".join(found[0].split()), "shape": _counter_shape(found)},
            text[:found.start()] + " " + text[found.end():])


def _counter_shape(found: re.Match) -> str:
    """How the counter is written: [e][i/N] (MMEngine), e [i/N (p%)] (timm), [i/N]."""
    percent = " (p%)" if "%" in found[0] else ""
    if found["bracketed"] is not None:
        return f"[e][i/N{percent}]"
    return f"e [i/N{percent}]" if found["epoch"] is not None else f"[i/N{percent}]"


class FieldLines:
    """Reads a rank's lines one at a time: key-value lines, and tables whose header row it keeps."""

    def __init__(self, names: FieldNames | None = None) -> None:
        self.names = names or FieldNames()
        self.columns: list[str] | None = None

    def __call__(self, text: str) -> tuple[dict | None, dict | None]:
        cells = text.split()
        if self._is_header(cells):
            self.columns = [_name(cell) for cell in cells]
            return None, {}  # read: a header names the columns of the rows after it
        if self.columns is not None and len(cells) == len(self.columns) and INTEGER.match(cells[0]):
            return self._row(cells)
        where, rest = counter(CLOCK.sub(" ", text))
        return self._line(key_values(rest), where)

    def _is_header(self, cells: list[str]) -> bool:
        names = [_name(cell) for cell in cells]
        wanted = (self.names.loss,) if self.names.loss else LOSS_KEYS + EVAL_LOSS_COLUMNS
        return len(cells) >= 2 and all(HEADER_CELL.match(cell) for cell in cells) and any(
            name in wanted for name in names) and any(name in (*STEP_KEYS, "epoch", self.names.step)
                                                      for name in names)

    def _row(self, cells: list[str]) -> tuple[dict | None, dict | None]:
        assert self.columns is not None
        values = {name: Value(cell) for name, cell in zip(self.columns, cells, strict=True) if _numeric(cell)}
        read = self._table_evals()
        evals = {name: float(values[column].text) for name, column in read.items() if column in values}
        train, _ = self._line({k: v for k, v in values.items() if k not in read.values()}, None)
        return train, ({**evals, "keys": read} if evals else None)

    def _table_evals(self) -> dict[str, str]:
        """The table's evaluation columns: its validation loss, and its accuracy when it has a validation loss
        (fastai's metrics are the validation set's); named ones first."""
        columns = self.columns or []
        loss = self.names.eval_loss or next((c for c in EVAL_LOSS_COLUMNS if c in columns), None)
        accuracies = (*ACCURACY_KEYS, *(f"val_{a}" for a in ACCURACY_KEYS))
        accuracy = self.names.eval_accuracy or (next((c for c in accuracies if c in columns), None) if loss else None)
        return {name: column for name, column in (("eval_loss", loss), ("eval_accuracy", accuracy)) if column}

    def _line(self, values: dict[str, Value], where: dict | None) -> tuple[dict | None, dict | None]:
        if where is not None and where["mode"] == "eval":
            return None, self._evaluation(values)
        loss_key = self._pick(values, self.names.loss, LOSS_KEYS)
        if loss_key is None:
            return None, self._named_evals(values)
        step_key = self._pick(values, self.names.step, STEP_KEYS, whole=True)
        train: dict = {"loss": float(values[loss_key].text)}
        if step_key is not None:
            train["step"] = int(values[step_key].text)
            shown = step_key
        elif where is not None:
            train.update(step=where["step"], epoch=where["epoch"], total=where["total"])
            shown = f"the counter {where['shape']} ({where['shown']!r})"
        elif "epoch" in values and INTEGER.match(values["epoch"].text):
            train["step"] = int(values["epoch"].text)
            shown = "epoch"
        else:
            return None, None
        lr_key = self._pick(values, self.names.lr, LR_KEYS)
        if lr_key is not None:
            train["lr"] = float(values[lr_key].text)
        train["keys"] = {"loss": loss_key, "step": shown}
        return train, self._named_evals(values)

    def _evaluation(self, values: dict[str, Value]) -> dict | None:
        """An evaluation line: its loss and accuracy, the running mean when one is printed."""
        evals: dict = {}
        for name, key in (("eval_loss", self._pick(values, self.names.eval_loss, ("loss",))),
                          ("eval_accuracy", self._pick(values, self.names.eval_accuracy, ACCURACY_KEYS))):
            if key is not None:
                value = values[key]
                evals[name] = float(value.mean if value.mean is not None else value.text)
        if evals:
            evals["running"] = True  # the lines of one evaluation refine its value: the last one counts
        return evals or None

    def _named_evals(self, values: dict[str, Value]) -> dict | None:
        evals = {name: float(values[key].text) for name, key in (("eval_loss", self.names.eval_loss),
                                                                 ("eval_accuracy", self.names.eval_accuracy))
                 if key is not None and _name(key) in values}
        return evals or None

    @staticmethod
    def _pick(values: dict[str, Value], named: str | None, rule: tuple[str, ...], whole: bool = False) -> str | None:
        candidates = (_name(named),) if named is not None else rule
        for key in candidates:
            value = values.get(key)
            if value is not None and (not whole or (INTEGER.match(value.text) and not value.unit)):
                return key
        return None


def _numeric(text: str) -> bool:
    return re.fullmatch(NUMBER, text) is not None


def named_pattern(names: FieldNames) -> str:
    """The candidate lines when keys are named: any line that has the named loss key or column."""
    loss = re.escape(names.loss) if names.loss else f"(?:{_LOSS_ALTERNATIVES})"
    return rf"(?i)(?<!{KEY_CHARS}){loss}(?!{KEY_CHARS})"
