"""timm 1.0's training loop as its train script (train.py in timm's repository; the script is not part of the
package) runs it, over tiny.py's job: timm's own `setup_default_logging` (INFO lines printed bare), its
`AverageMeter` for the loss, time and data time, its optimizer factory and step scheduler, and train.py's
format strings, read in its `train_one_epoch` and `validate`:
    Train: 0 [   5/20 ( 30%)]  Loss: 1.23 (1.38)  Time: 0.001s, 24000.00/s  (...)  LR: 5.000e-01  Data: ...
    Test: [   3/3]  Time: ...  Loss:  0.912 ( 0.951)  Acc@1:  62.500 ( 60.156)  Acc@5: 100.000 (100.000)
The epoch and the batch counter restart from 0 every epoch; the loss is the batch's, the running mean beside
it in parentheses; the evaluation's running mean at its last line is the evaluation.

Variants (the same job, one seed): `again` is the same run once more; `late` halves the learning rate in the
last epoch (a planted late difference).

Captured with (in examples/logs/corpus; timm installed outside the project's .venv, torchvision with it only
because timm imports it: tiny.declare_torchvision_ops lets its CUDA build import beside a CPU torch):
    PYTHONPATH=/tmp/logtools ../../../.venv/bin/python timm_train.py > timm_train.log 2>&1
    (and with `again`, `late` as the argument, into timm_train_again.log, timm_train_late.log)
Import: python -m compare import text examples/logs/corpus/timm_train.log --out runs/x
"""

import logging
import sys
import time

import torch
from tiny import declare_torchvision_ops, dump, job, printed

declare_torchvision_ops()  # before timm's import: see tiny.py
from timm.optim import create_optimizer_v2  # noqa: E402
from timm.scheduler import create_scheduler_v2  # noqa: E402
from timm.utils import AverageMeter, accuracy, setup_default_logging  # noqa: E402

variant = sys.argv[1] if len(sys.argv) > 1 else ""
name = "timm_train" + (f"_{variant}" if variant else "")
setup_default_logging()
_logger = logging.getLogger("train")
x, y, model, _ = job(seed=0)
optimizer = create_optimizer_v2(model, "momentum", lr=0.1, momentum=0.9, weight_decay=0.0)
scheduler, epochs = create_scheduler_v2(optimizer, sched="step", num_epochs=3, decay_epochs=10, decay_rate=0.5)
loss_fn = torch.nn.CrossEntropyLoss()
batch, log_interval, val_x, val_y = 32, 5, x[:128], y[:128]
updates_per_epoch = len(x) // batch
steps, evals = {}, {}
generator = torch.Generator().manual_seed(0)
for epoch in range(epochs):
    if variant == "late" and epoch == epochs - 1:
        for group in optimizer.param_groups:
            group["lr"] *= 0.5
    order = torch.randperm(len(x), generator=generator)
    losses_m, update_time_m, data_time_m = AverageMeter(), AverageMeter(), AverageMeter()
    data_start = update_start = time.time()
    for update_idx in range(updates_per_epoch):
        index = order[update_idx * batch:(update_idx + 1) * batch]
        inputs, target = x[index], y[index]
        data_time_m.update(time.time() - data_start)
        loss = loss_fn(model(inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses_m.update(loss.item(), inputs.size(0))
        update_time_m.update(time.time() - update_start)
        update_start = time.time()
        last_batch = update_idx == updates_per_epoch - 1
        if update_idx % log_interval == 0 or last_batch:
            lrl = [param_group["lr"] for param_group in optimizer.param_groups]
            lr = sum(lrl) / len(lrl)
            loss_avg, loss_now = losses_m.avg, losses_m.val
            _logger.info(
                f"Train: {epoch} [{update_idx:>4d}/{updates_per_epoch} "
                f"({100. * (update_idx + 1) / updates_per_epoch:>3.0f}%)]  "
                f"Loss: {loss_now:#.3g} ({loss_avg:#.3g})  "
                f"Time: {update_time_m.val:.3f}s, {inputs.size(0) / max(update_time_m.val, 1e-9):>7.2f}/s  "
                f"({update_time_m.avg:.3f}s, {inputs.size(0) / max(update_time_m.avg, 1e-9):>7.2f}/s)  "
                f"LR: {lr:.3e}  "
                f"Data: {data_time_m.val:.3f} ({data_time_m.avg:.3f})"
            )
            steps[epoch * updates_per_epoch + update_idx + 1] = printed(loss_now, "#.3g")
        data_start = time.time()
    # validate(): a line every log_interval batches and the last, each with the running means
    batch_time_m, val_losses_m, top1_m, top5_m = AverageMeter(), AverageMeter(), AverageMeter(), AverageMeter()
    last_idx = len(val_x) // batch - 1
    end = time.time()
    with torch.no_grad():
        for batch_idx in range(last_idx + 1):
            inputs, target = val_x[batch_idx * batch:(batch_idx + 1) * batch], val_y[batch_idx * batch:
                                                                                      (batch_idx + 1) * batch]
            output = model(inputs)
            acc1, acc5 = accuracy(output, target, topk=(1, 4))
            val_losses_m.update(loss_fn(output, target).item(), inputs.size(0))
            top1_m.update(acc1.item(), output.size(0))
            top5_m.update(acc5.item(), output.size(0))
            batch_time_m.update(time.time() - end)
            end = time.time()
            if batch_idx == last_idx or batch_idx % log_interval == 0:
                _logger.info(
                    f"Test: [{batch_idx:>4d}/{last_idx}]  "
                    f"Time: {batch_time_m.val:.3f} ({batch_time_m.avg:.3f})  "
                    f"Loss: {val_losses_m.val:>7.3f} ({val_losses_m.avg:>6.3f})  "
                    f"Acc@1: {top1_m.val:>7.3f} ({top1_m.avg:>7.3f})  "
                    f"Acc@5: {top5_m.val:>7.3f} ({top5_m.avg:>7.3f})"
                )
    evals[(epoch + 1) * updates_per_epoch] = {"eval_loss": printed(val_losses_m.avg, ">6.3f"),
                                              "eval_accuracy": printed(top1_m.avg, ">7.3f")}
    scheduler.step(epoch + 1)
dump(name, steps, evals, flags=[], note="step = epoch x 20 + batch index + 1 (both from 0); the evaluation is "
     "the running mean of its last line, Acc@1 in percent as printed")
