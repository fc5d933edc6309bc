"""MLPerf's `:::MLLOG {...}` lines, written by the mlperf-logging package itself (mllog), with train_loss at
each logged step (metadata step and epoch_num) and eval_accuracy at each epoch's end.

Captured with (from the repository root; mlperf-logging installed only for the capture):
    python examples/logs/corpus/mllog.py > examples/logs/corpus/mllog.log 2>&1
Import: python -m compare import text examples/logs/corpus/mllog.log --out runs/x
"""

from mlperf_logging import mllog
from tiny import dump, evaluate, job, train_step

mllog.config(default_stack_offset=1)  # its own handler prints to stdout
ml = mllog.get_mllogger()
x, y, model, opt = job(samples=640)
steps, evals = {}, {}
ml.event(key=mllog.constants.CACHE_CLEAR, value=True)
ml.start(key=mllog.constants.INIT_START)
ml.event(key=mllog.constants.GLOBAL_BATCH_SIZE, value=32)
ml.end(key=mllog.constants.INIT_STOP)
step = 0
for epoch in range(1, 4):
    ml.start(key=mllog.constants.EPOCH_START, metadata={"epoch_num": epoch})
    for b in range(20):
        step += 1
        loss = train_step(model, opt, x[b * 32:(b + 1) * 32], y[b * 32:(b + 1) * 32])
        if step % 4 == 0:
            ml.event(key="train_loss", value=loss, metadata={"step": step, "epoch_num": epoch})
            steps[step] = loss
    _, accuracy = evaluate(model, x[:128], y[:128])
    ml.event(key=mllog.constants.EVAL_ACCURACY, value=accuracy, metadata={"epoch_num": epoch})
    evals[step] = {"eval_accuracy": accuracy}
    ml.end(key=mllog.constants.EPOCH_STOP, metadata={"epoch_num": epoch})
ml.end(key=mllog.constants.RUN_STOP, metadata={"status": "success"})
dump("mllog", steps, evals, flags=[])
