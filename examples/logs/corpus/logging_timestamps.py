"""Python `logging` with timestamps: a thousands separator in the step ("step 1,100"), an `avg_loss` and a
`val_loss` printed before the training loss, evaluation lines (val_loss, val_acc), a "best" line that repeats
an earlier step, and `warnings` on stderr interleaved.

Captured with (from the repository root):
    python examples/logs/corpus/logging_timestamps.py > examples/logs/corpus/logging_timestamps.log 2>&1
Import: python -m compare import text examples/logs/corpus/logging_timestamps.log --out runs/x
"""

import logging
import sys
import warnings

from tiny import dump, evaluate, job, printed, train_step

logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                    format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("train")
x, y, model, opt = job(samples=640)
steps, evals, best = {}, {}, (None, float("inf"))
avg = 0.0
for step in range(1, 1501):
    i = (step * 32) % 640
    loss = train_step(model, opt, x[i:i + 32], y[i:i + 32])
    avg = 0.9 * avg + 0.1 * loss
    if step % 100 == 0:
        steps[step] = printed(loss, ".5f")
        if step % 500 == 0:
            val_loss, val_acc = evaluate(model, x[:128], y[:128])
            log.info(f"epoch {step // 20} step {step:,} val_loss {val_loss:.4f} loss {loss:.5f} lr 0.5")
            log.info(f"step {step:,} val_loss {val_loss:.4f} val_acc {val_acc:.4f}")
            evals[step] = {"eval_loss": printed(val_loss, ".4f"), "eval_accuracy": printed(val_acc, ".4f")}
        else:
            log.info(f"epoch {step // 20} step {step:,} avg_loss {avg:.4f} loss {loss:.5f} lr 0.5")
        if loss < best[1]:
            best = (step, loss)
        if step % 300 == 0:
            warnings.warn(f"step {step}: loss {loss:.3f} is a lovely number", UserWarning, stacklevel=1)
            sys.stderr.flush()
log.info(f"done (best step {best[0]:,} loss {best[1] + 1:.5f})")  # another kind of line: never a training value
dump("logging_timestamps", steps, evals, flags=[])
