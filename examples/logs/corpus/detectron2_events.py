"""Detectron2's training log (its `log.txt`), written from Detectron2's own format strings over tiny.py's job:
Detectron2 does not install from PyPI (it is built from its repository against a CUDA toolkit), so this script
prints what its `CommonMetricPrinter.write` (detectron2/utils/events.py, run by `PeriodicWriter` every 20
iterations and at the last) prints through `setup_logger`'s file formatter (detectron2/utils/logger.py:
"[%(asctime)s] %(name)s %(levelname)s: %(message)s", dates "%m/%d %H:%M:%S"), both read in its public code:
    [12/05 10:12:00] detectron2.utils.events INFO:  eta: 0:00:01  iter: 19  total_loss: 1.03  loss_cls: 1.027
      loss_box_reg: 0.002551    time: 0.0012  last_time: 0.0011  data_time: 0.0001  last_data_time: 0.0001
      lr: 0.5
The iteration counts from 0 and is printed after it ran (iter 19: twenty iterations done); each value is the
median over the writer's window of 20 iterations (`HistoryBuffer.median`, as numpy computes it), `{:.4g}`;
`total_loss` is the sum of the model's loss dict, whose components (`loss_cls`, `loss_box_reg`) are printed
beside it. `max_mem` is printed only when CUDA is available, so not here. The trainer's own lines before and
after (detectron2/engine/train_loop.py, hooks.py) are printed too.

Variants (the same job, one seed): `again` is the same run once more; `late` halves the learning rate from
iteration 80 of 100 (a planted late difference).

Captured with (in examples/logs/corpus):
    ../../../.venv/bin/python detectron2_events.py > detectron2_events.log 2>&1
    (and with `again`, `late` as the argument, into detectron2_events_again.log, detectron2_events_late.log)
Import: python -m compare import text examples/logs/corpus/detectron2_events.log --out runs/x
"""

import datetime
import logging
import sys
import time

import numpy as np
import torch
from tiny import dump, job, printed

variant = sys.argv[1] if len(sys.argv) > 1 else ""
name = "detectron2_events" + (f"_{variant}" if variant else "")
handler = logging.StreamHandler(sys.stdout)
handler.setFormatter(logging.Formatter("[%(asctime)s] %(name)s %(levelname)s: %(message)s", datefmt="%m/%d %H:%M:%S"))
for logger_name in ("detectron2.engine.train_loop", "detectron2.utils.events", "detectron2.engine.hooks"):
    logging.getLogger(logger_name).addHandler(handler)
    logging.getLogger(logger_name).setLevel(logging.DEBUG)
x, y, model, opt = job(seed=0)
MAX_ITER, PERIOD, WINDOW, BATCH, WARMUP = 100, 20, 20, 32, 3
history: dict[str, list[float]] = {"data_time": [], "total_loss": [], "loss_cls": [], "loss_box_reg": [], "lr": [],
                                   "time": []}
steps = {}
logging.getLogger("detectron2.engine.train_loop").info("Starting training from iteration 0")
start = time.perf_counter()
generator = torch.Generator().manual_seed(0)
for iteration in range(MAX_ITER):
    if variant == "late" and iteration == 80:
        for group in opt.param_groups:
            group["lr"] *= 0.5
    began = time.perf_counter()
    index = torch.randint(0, len(x), (BATCH,), generator=generator)
    data_time = time.perf_counter() - began
    out = model(x[index])
    losses = {"loss_cls": torch.nn.functional.cross_entropy(out, y[index]),
              "loss_box_reg": 1e-3 * model.weight.pow(2).sum()}
    total = sum(losses.values())
    opt.zero_grad()
    total.backward()
    opt.step()
    # SimpleTrainer._write_metrics, the LRScheduler hook, the IterationTimer hook (after its warm-up)
    history["data_time"].append(data_time)
    history["total_loss"].append(total.item())
    for key, value in losses.items():
        history[key].append(value.item())
    history["lr"].append(opt.param_groups[0]["lr"])
    if iteration >= WARMUP:
        history["time"].append(time.perf_counter() - began)
    if (iteration + 1) % PERIOD == 0 or iteration == MAX_ITER - 1:
        median = {key: float(np.median(values[-WINDOW:])) for key, values in history.items() if values}
        eta = str(datetime.timedelta(seconds=int(float(np.median(history["time"][-1000:])) *
                                                 (MAX_ITER - iteration - 1))))
        avg_time, last_time = sum(history["time"]) / len(history["time"]), history["time"][-1]
        avg_data, last_data = sum(history["data_time"][-20:]) / len(history["data_time"][-20:]), data_time
        logging.getLogger("detectron2.utils.events").info(
            str.format(
                " {eta}iter: {iter}  {losses}  {non_losses}  {avg_time}{last_time}"
                + "{avg_data_time}{last_data_time} lr: {lr}  {memory}",
                eta=f"eta: {eta}  ",
                iter=iteration,
                losses="  ".join(f"{k}: {median[k]:.4g}" for k in history if "loss" in k),
                non_losses="",
                avg_time=f"time: {avg_time:.4f}  ",
                last_time=f"last_time: {last_time:.4f}  ",
                avg_data_time=f"data_time: {avg_data:.4f}  ",
                last_data_time=f"last_data_time: {last_data:.4f}  ",
                lr="{:.5g}".format(history["lr"][-1]),
                memory="",
            )
        )
        steps[iteration + 1] = printed(median["total_loss"], ".4g")  # the record counts from 1: iter 19 is step 20
elapsed = time.perf_counter() - start
hooks = logging.getLogger("detectron2.engine.hooks")
took = str(datetime.timedelta(seconds=int(elapsed)))
hooks.info(f"Overall training speed: {MAX_ITER - WARMUP - 2} iterations in {took} ({elapsed / MAX_ITER:.4f} s / it)")
hooks.info(f"Total training time: {took} ({datetime.timedelta(seconds=0)!s} on hooks)")
dump(name, steps, {}, flags=[], note="iter counts from 0: step = iter + 1; the loss is total_loss, the median "
     "over 20 iterations")
