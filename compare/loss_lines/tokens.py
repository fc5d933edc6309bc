"""What every family of loss lines shares: the number and step tokens, the training loss token and its
qualifiers, the evaluation tokens, the `Format` entry of the table (formats.py) and the reader's error."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

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
EVAL_GROUPS = ("eval_loss", "eval_accuracy", "eval_accuracy_percent")
STEP_KEYS = ("step", "global_step", "iter", "iteration", "iter_num", "num_updates")  # num_updates: fairseq
LOSS_KEYS = ("loss", "train_loss", "train/loss")
CORPUS = "examples/logs/corpus"  # where each format's sample lives, with the script that printed it


class LossLogError(ValueError):
    """The lines cannot be read as one rank's losses; the message is one line that says why and what to do."""



@dataclass(frozen=True)
class Format:
    """A kind of printed line the reader knows, written against a captured sample (CORPUS/sample).

    `train` finds a training line (its groups: step, loss; epoch, total where printed); `parse`, for structured
    lines (JSON, Python dicts) and key-value lines, turns a line into (training values or None, evaluation
    values or None) and the regex only marks candidates. `steps` says how the step is numbered:
      "as printed" - the step group; "epoch grid" - a counter from the epoch's start on a grid (numbering.py);
      "order" - the lines numbered 1, 2, 3...; "key" - a step key of the structured line, else the order.
    `stateful`: `parse` is called with the named keys (fields.FieldNames) and returns the line reader.
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
    # `parse` makes a reader of the rank's lines (given the keys named on the command line), which sees every
    # line, not only the regex's candidates: a table's rows follow its header (fields.py)
    stateful: bool = False


def as_number(text: str, where: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise LossLogError(f"{where}: {what} {text!r} is not a number") from None


def as_integer(text: object, where: str, what: str = "step") -> int:
    """A printed step or counter ("1,000" too); anything else is one line naming --step-from order."""
    try:
        value = float(str(text).replace(",", "")) if not isinstance(text, (int, float)) else float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value != int(value) or value < 0:
        raise LossLogError(f"{where}: the {what} {text!r} is not a whole number >= 0; to number the training "
                           "lines 1, 2, 3... in the order printed, give --step-from order")
    return int(value)



def is_numeric(value: object) -> bool:
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool)

