"""JSON lines printed to stdout by the script (json.dumps of a dict per step, Python's defaults: a NaN is
written NaN), with evaluation objects and other print()s between them. The learning rate is raised at
step 30 so that the loss diverges (an infinity at step 33, NaN from step 36): the NaN and Infinity
values must be read as non-finite, not dropped.

Captured with (from the repository root):
    python examples/logs/corpus/jsonl_stdout.py > examples/logs/corpus/jsonl_stdout.log 2>&1
Import: python -m compare import text examples/logs/corpus/jsonl_stdout.log --out runs/x
"""

import json
import math

from tiny import dump, evaluate, job, train_step

x, y, model, opt = job(samples=640)
steps, evals = {}, {}
print("starting training")
for step in range(1, 41):
    if step == 30:
        for group in opt.param_groups:
            group["lr"] = 1e30  # diverge
    i = (step * 32) % 640
    loss = train_step(model, opt, x[i:i + 32], y[i:i + 32])
    if step == 33:
        loss = math.inf  # what a float16 overflow prints
    if step == 35:
        model.weight.data[0, 0] = math.nan  # from the next step on the loss is NaN
    print(json.dumps({"step": step, "loss": loss, "lr": opt.param_groups[0]["lr"]}))
    steps[step] = loss
    if step % 20 == 0:
        val_loss, val_acc = evaluate(model, x[:128], y[:128])
        print(json.dumps({"step": step, "val_loss": val_loss, "val_acc": val_acc}))
        evals[step] = {"eval_loss": val_loss, "eval_accuracy": val_acc}
dump("jsonl_stdout", steps, evals, flags=[])
