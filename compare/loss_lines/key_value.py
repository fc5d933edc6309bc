"""Key-value lines (a family of formats.py): large-model trainers print the loss among other named values,
separated by pipes or commas. Megatron-LM (and Megatron-DeepSpeed) " iteration 10/ 100 | learning rate:
1.0E-04 | lm loss: 2.31E+00 | loss scale: 65536.0 |", its "validation loss at iteration 100 | lm loss value:
..."; fairseq's simple format "epoch 001:  10 / 20 loss=2.31, ..., num_updates=10, lr=0.0001, loss_scale=128"
behind its logging prefix, its "epoch 001 | valid on 'valid' subset | loss 2.1 | ... | num_updates 20".

The loss is the value named `loss`, `lm loss` or `train loss`, never `loss scale`, `loss_scale`, `nll_loss`
or `lm loss PPL`; the step the value named `iteration`, `num_updates`, `step`, `iter` or `global_step`.
fairseq's end-of-epoch line ("epoch 001 | loss 0.79 | ... | num_updates 20") is the epoch's mean, no step's
loss: it is left out, as Hugging Face's closing summary is."""

from __future__ import annotations

import re

from compare.loss_lines.tokens import NUMBER

STEP_NAMES = ("iteration", "num updates", "step", "iter", "global step")
LOSS_NAMES = ("lm loss", "loss", "train loss", "training loss")
LR_NAMES = ("lr", "learning rate")
_STEP_TOKEN = r"(?<![\w.])(?:iteration|iter|step|num_updates|global_step)\s*[:=]?\s*\d"
# A candidate: pipes on the line, a step name with a number, and a loss value that ends its field.
KEY_VALUE_TRAIN = (rf"(?i)^(?=.*\|)(?=.*{_STEP_TOKEN}).*?(?<![\w/.-])(?:lm |train(?:ing)?[ _])?loss\s*[:=]?\s*"
                   rf"{NUMBER}\s*(?:[|,]|$)")
KEY_VALUE_EVAL = r"(?i)validation loss at iteration \d+ \||\| valid on '"
# One named value: "lm loss: 2.3E+00", "loss=2.31", "num_updates 20", "iteration      10/     100" (its total)
PAIR = re.compile(rf"(?<![\w.])(?P<key>[A-Za-z][A-Za-z_]*(?: [A-Za-z_]+)*?)\s*[:=]?\s*(?P<value>{NUMBER})"
                  r"(?:\s*/\s*\d+)?(?![\w.])")
EPOCH_FIELD = re.compile(r"^\s*epoch \d+\s*$")


def key_values(text: str) -> tuple[dict | None, dict | None]:
    """A key-value line's training values (loss, lr, step) or evaluation values (eval_loss, step)."""
    fields = text.split("|")
    values: dict[str, str] = {}
    for field in fields:
        for found in PAIR.finditer(field):
            values.setdefault(" ".join(found["key"].lower().replace("_", " ").split()), found["value"])
    # a step name ends its key: Megatron's "validation loss at iteration 20"
    named = next(((name, value) for name in STEP_NAMES for key, value in values.items()
                  if key == name or key.endswith(" " + name)), None)
    if named is None:
        return None, None
    counter, step = named
    if not step.isdigit():  # "step 5.5": no step of a training line
        return None, None
    if re.search(KEY_VALUE_EVAL, text):
        loss = values.get("lm loss value", values.get("loss value", values.get("loss")))
        return None, ({"eval_loss": float(loss), "step": int(step)} if loss is not None else None)
    if counter == "num updates" and any(EPOCH_FIELD.match(field) for field in fields):  # fairseq's epoch mean
        return None, None
    loss = next((values[name] for name in LOSS_NAMES if name in values), None)
    if loss is None:
        return None, None
    train: dict = {"loss": float(loss), "step": int(step)}
    lr = next((values[name] for name in LR_NAMES if name in values), None)
    if lr is not None:
        train["lr"] = float(lr)
    return train, None
