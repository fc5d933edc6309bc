"""An MLflow file store (mlruns/<experiment>/<run>/metrics/<NAME>, lines "timestamp value step") written by
mlflow itself: mlflow.log_metric of the training loss and learning rate every step, val_loss and val_acc
every 10 steps. mlflow is no project dependency: it was installed in a throwaway venv only to capture
(`python3 -m venv /tmp/mlflow-venv; /tmp/mlflow-venv/bin/pip install mlflow-skinny`, mlflow 3.18), the
project's torch beside it.

Captured with (from the repository root; the store goes to examples/logs/corpus/mlruns, its run id random):
    PYTHONPATH=/tmp/mlflow-venv/lib/python3.11/site-packages .venv/bin/python examples/logs/corpus/mlflow_store.py
Import: python -m compare import mlflow examples/logs/corpus/mlruns/<experiment>/<run> --out runs/x
"""

import os
import shutil

import mlflow
from tiny import HERE, dump, evaluate, job, train_step

os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3 keeps the file store behind this switch
store = HERE / "mlruns"
shutil.rmtree(store, ignore_errors=True)
mlflow.set_tracking_uri(store.as_uri())
mlflow.set_experiment("tiny")
x, y, model, opt = job(samples=640)
steps, evals = {}, {}
with mlflow.start_run(run_name="tiny-sgd") as run:
    for step in range(1, 41):
        i = (step * 32) % 640
        loss = train_step(model, opt, x[i:i + 32], y[i:i + 32])
        mlflow.log_metric("loss", loss, step=step)
        mlflow.log_metric("lr", opt.param_groups[0]["lr"], step=step)
        steps[step] = loss
        if step % 10 == 0:
            val_loss, val_acc = evaluate(model, x[:128], y[:128])
            mlflow.log_metrics({"val_loss": val_loss, "val_acc": val_acc}, step=step)
            evals[step] = {"eval_loss": val_loss, "eval_accuracy": val_acc}
print(run.info.experiment_id, run.info.run_id)
flags = ["--lr-field", "lr", "--eval-loss-field", "val_loss", "--eval-accuracy-field", "val_acc"]
dump("mlflow_store", steps, evals, flags=flags, run=f"mlruns/{run.info.experiment_id}/{run.info.run_id}")
