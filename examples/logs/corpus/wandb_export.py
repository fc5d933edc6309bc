"""A Weights & Biases "Download CSV" export of a train/loss line plot, in the export's exact shape: every
field quoted, the columns "Step", "RUN - train/loss", "RUN - train/loss__MIN", "RUN - train/loss__MAX"
(the panel's min and max over the points it merged into a row: equal to the value when no point was merged),
the steps as wandb.log counts them, from 0. wandb is pip-installable but its export is made by its server,
which cannot be reached from here: the script writes the file itself, in that shape, from tiny.py's job.

Captured with (from the repository root):
    .venv/bin/python examples/logs/corpus/wandb_export.py
Import: python -m compare import csv examples/logs/corpus/wandb_export.csv --out runs/x
"""

import csv

from tiny import HERE, dump, job, train_step

run = "tiny-sgd-1"  # W&B's generated run names: adjective-noun-number
x, y, model, opt = job(samples=640)
steps = {}
with (HERE / "wandb_export.csv").open("w", newline="") as file:
    writer = csv.writer(file, quoting=csv.QUOTE_ALL)
    writer.writerow(["Step", f"{run} - train/loss", f"{run} - train/loss__MIN", f"{run} - train/loss__MAX"])
    for step in range(1, 41):  # the batches of mlflow_store.py's run: the two records are the same run
        i = (step * 32) % 640
        loss = train_step(model, opt, x[i:i + 32], y[i:i + 32])
        writer.writerow([step - 1, loss, loss, loss])  # wandb.log() without step= numbers from 0
        steps[step] = loss  # the record counts from 1: import renumbers (step_offset 1)
dump("wandb_export", steps, {}, flags=[])
