"""MMEngine 0.10's `Runner` training tiny.py's job by epochs, logged by its own LoggerHook and LogProcessor
through MMLogger: `12/05 10:12:00 - mmengine - INFO - Epoch(train) [2][ 5/20]  lr: 5.0000e-01  eta: 0:00:01
time: ...  data_time: ...  memory: ...  loss: 0.4123  loss_cls: 0.4100  loss_reg: 0.0023  acc: 87.5000` every 5
iterations, the batch counter from 1 in each epoch, the loss the sum of the model's `loss_*` values (each also
printed, as a detector's loss_rpn_cls, loss_cls...) averaged over LogProcessor's window of 10 iterations; and
`Epoch(val) [2][4/4]    accuracy/top1: 89.8438  ...` after each epoch's validation (the metric in percent). The
date in front is no counter. A hook after LoggerHook dumps the values it printed from MMEngine's message hub.

Variants (the same job, one seed): `again` is the same run once more; `late` halves the learning rate in the
last epoch (a planted late difference).

Captured with (in examples/logs/corpus; mmengine and its small dependencies installed outside the project's
.venv, torchvision with them: tiny.declare_torchvision_ops lets its CUDA build import beside a CPU torch):
    PYTHONPATH=/tmp/logtools ../../../.venv/bin/python mmengine_train.py > mmengine_train.log 2>&1
    (and with `again`, `late` as the argument, into mmengine_train_again.log, mmengine_train_late.log)
Import: python -m compare import text examples/logs/corpus/mmengine_train.log --out runs/x
"""

import logging
import sys
import tempfile
import warnings

import torch
from tiny import declare_torchvision_ops, dump, job, printed

declare_torchvision_ops()  # before mmengine's import, which imports torchvision: see tiny.py
from mmengine.evaluator import BaseMetric  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402
from mmengine.model import BaseModel  # noqa: E402
from mmengine.runner import Runner  # noqa: E402

warnings.filterwarnings("ignore")
variant = sys.argv[1] if len(sys.argv) > 1 else ""
name = "mmengine_train" + (f"_{variant}" if variant else "")
x, y, linear, _ = job(seed=0)
EPOCHS, BATCH, INTERVAL, WINDOW = 3, 32, 5, 10
PER_EPOCH = len(x) // BATCH
steps, evals = {}, {}


class Tiny(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.linear = linear

    def forward(self, inputs, labels, mode="tensor"):
        out = self.linear(inputs)
        if mode == "loss":
            return {"loss_cls": torch.nn.functional.cross_entropy(out, labels),
                    "loss_reg": 1e-3 * self.linear.weight.pow(2).sum(),
                    "acc": (out.argmax(1) == labels).float().mean() * 100}
        return list(zip(out.argmax(1), labels, strict=True))


class Accuracy(BaseMetric):
    default_prefix = "accuracy"

    def process(self, data_batch, data_samples):
        self.results += [int(p == t) for p, t in data_samples]

    def compute_metrics(self, results):
        return {"top1": 100.0 * sum(results) / len(results)}


class Truth(Hook):
    priority = "VERY_LOW"  # after LoggerHook: the message hub holds what it printed

    def before_train_epoch(self, runner):
        if variant == "late" and runner.epoch == EPOCHS - 1:
            for group in runner.optim_wrapper.optimizer.param_groups:
                group["lr"] *= 0.5

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if (batch_idx + 1) % INTERVAL == 0:
            value = runner.message_hub.get_scalar("train/loss").mean(WINDOW)
            steps[runner.epoch * PER_EPOCH + batch_idx + 1] = printed(value, ".4f")

    def after_val_epoch(self, runner, metrics=None):
        evals[runner.epoch * PER_EPOCH] = {"eval_accuracy": printed(metrics["accuracy/top1"], ".4f")}


data = list(zip(x, y, strict=True))
with tempfile.TemporaryDirectory() as work_dir:
    runner = Runner(
        model=Tiny(), work_dir=work_dir,
        train_dataloader=dict(dataset=data, sampler=dict(type="DefaultSampler", shuffle=True), batch_size=BATCH,
                              collate_fn=dict(type="default_collate")),
        val_dataloader=dict(dataset=data[:128], sampler=dict(type="DefaultSampler", shuffle=False),
                            batch_size=BATCH, collate_fn=dict(type="default_collate")),
        val_evaluator=[Accuracy()], val_cfg=dict(),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.5)),
        train_cfg=dict(by_epoch=True, max_epochs=EPOCHS, val_interval=1),
        default_hooks=dict(logger=dict(type="LoggerHook", interval=INTERVAL), checkpoint=None),
        log_processor=dict(window_size=WINDOW), custom_hooks=[Truth()], randomness=dict(seed=0),
        log_level=logging.INFO)
    runner.train()
dump(name, steps, evals, flags=[], note=f"step = (epoch - 1) x {PER_EPOCH} + the batch counter (from 1); the "
     "evaluation is accuracy/top1 in percent as printed")
