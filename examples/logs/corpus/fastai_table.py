"""fastai 2.8's `Learner.fit` over tiny.py's job, printed by fastai's own ProgressCallback through fastprogress'
console bar: a header row `epoch     train_loss  valid_loss  accuracy  time` and one row per epoch (epochs
from 0; train_loss the smoothed training loss at the epoch's end, valid_loss and accuracy the validation set's),
between the bars' `\\r` repaints. A Recorder callback dumps what each row printed.

Variants (the same job, one seed): `again` is the same run once more; `late` halves the learning rate in the
last epoch (a planted late difference); `valid` validates on other samples, training alike (a validation
column that differs).

Captured with (in examples/logs/corpus; fastai and its small dependencies installed outside the project's
.venv, fastprogress 1.0.3: later ones import fasthtml):
    PYTHONPATH=/tmp/logtools ../../../.venv/bin/python fastai_table.py > fastai_table.log 2>&1
    (and with `again`, `late`, `valid` as the argument, into fastai_table_again.log, ..._late.log, ..._valid.log)
Import: python -m compare import text examples/logs/corpus/fastai_table.log --out runs/x
"""

import sys
import warnings

import fastai.callback.progress  # noqa: F401  (the ProgressCallback in fastai's defaults, as fastai.basics sets it)
import torch
from fastai.callback.core import Callback
from fastai.data.core import DataLoaders
from fastai.data.load import DataLoader
from fastai.learner import Learner
from fastai.losses import CrossEntropyLossFlat
from fastai.metrics import accuracy
from fastai.optimizer import SGD
from fastai.torch_core import set_seed
from tiny import dump, job, printed

warnings.filterwarnings("ignore")
variant = sys.argv[1] if len(sys.argv) > 1 else ""
name = "fastai_table" + (f"_{variant}" if variant else "")
set_seed(0)
x, y, model, _ = job(seed=0)
valid_x, valid_y = x[:128], y[:128]
if variant == "valid":  # other samples labelled alike (tiny.job's weights), drawn aside from the global generator
    draw = torch.Generator().manual_seed(0)
    torch.randn(len(x), 10, generator=draw)  # tiny.job's first draw, to reach its labelling weights
    weights = torch.randn(10, 4, generator=draw)
    valid_x = torch.randn(128, 10, generator=torch.Generator().manual_seed(1))
    valid_y = (valid_x @ weights).argmax(1)
train = DataLoader(list(zip(x, y, strict=True)), bs=32, shuffle=True, drop_last=True)
valid = DataLoader(list(zip(valid_x, valid_y, strict=True)), bs=32)
steps, evals = {}, {}
EPOCHS = 6


class Truth(Callback):
    order = 90  # after the Recorder: its values are what the row prints

    def before_epoch(self):
        if variant == "late" and self.epoch == EPOCHS - 1:
            self.opt.set_hyper("lr", 0.25)

    def after_epoch(self):
        train_loss, valid_loss, acc = self.recorder.values[-1]
        steps[self.epoch + 1] = printed(train_loss, ".6f")  # the record counts from 1: epoch 0 is step 1
        evals[self.epoch + 1] = {"eval_loss": printed(valid_loss, ".6f"), "eval_accuracy": printed(acc, ".6f")}


learn = Learner(DataLoaders(train, valid), model, loss_func=CrossEntropyLossFlat(), opt_func=SGD, lr=0.5,
                metrics=accuracy, cbs=[Truth()])
learn.fit(EPOCHS, lr=0.5)
dump(name, steps, evals, flags=[], note="one row per epoch: step = epoch + 1; valid_loss and accuracy are the "
     "evaluations")
