"""nanoGPT's train.py prints, copied from its source (nanoGPT is not a package: this script trains the tiny
job and prints with nanoGPT's own format strings): `iter N: loss X, time Tms, mfu M%` every log_interval,
and `step N: train loss A, val loss B` at each evaluation, before that iteration's training line.

Captured with (from the repository root):
    python examples/logs/corpus/nanogpt.py > examples/logs/corpus/nanogpt.log 2>&1
Import: python -m compare import text examples/logs/corpus/nanogpt.log --out runs/x
"""

import time

from tiny import dump, evaluate, job, printed, train_step

x, y, model, opt = job(samples=640)
steps, evals = {}, {}
running_mfu = -1.0
t0 = time.time()
for iter_num in range(0, 61):
    if iter_num % 20 == 0:
        train_loss, _ = evaluate(model, x[:320], y[:320])
        val_loss, _ = evaluate(model, x[320:], y[320:])
        print(f"step {iter_num}: train loss {train_loss:.4f}, val loss {val_loss:.4f}")
        evals[iter_num + 1] = {"eval_loss": printed(val_loss, ".4f")}  # iter 0 is step 1 (renumbered from 1)
    i = (iter_num * 32) % 640
    lossf = train_step(model, opt, x[i:i + 32], y[i:i + 32])
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    if iter_num % 5 == 0:
        print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms, mfu {running_mfu * 100:.2f}%")
        steps[iter_num + 1] = printed(lossf, ".4f")
dump("nanogpt", steps, evals, flags=[])
