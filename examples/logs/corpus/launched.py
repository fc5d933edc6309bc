"""A script in the style of Horovod's MNIST example run under the real launchers: every rank prints
`Train Epoch: E [N/M (P%)]  Loss: X` (N counts this rank's samples from the epoch's start), rank 0 prints
the `Test set:` line, every rank warns on stderr. No collectives: each rank trains the tiny job on its shard
and only the rank number comes from the launcher's environment. Rank 0 dumps its true values.

Captured with (from the repository root, `.venv/bin` on PATH; --style picks the line format):
    horovodrun -np 2 --mpi  python examples/logs/corpus/launched.py --name horovodrun_mpi > ...horovodrun_mpi.log 2>&1
    horovodrun -np 2 --gloo python examples/logs/corpus/launched.py --name horovodrun_gloo > ...horovodrun_gloo.log 2>&1
    mpirun -np 2 --tag-output python examples/logs/corpus/launched.py --name mpirun_tagged --log-interval 3 > ... 2>&1
    torchrun --standalone --nproc-per-node 2 --tee 3 examples/logs/corpus/launched.py --name torchrun_tee
        --log-interval 3 > ...torchrun_tee.log 2>&1
    python examples/logs/corpus/launched.py --name epoch_step_every5 --style epoch-step --log-interval 5 > ... 2>&1
    python examples/logs/corpus/launched.py --name epoch_step_every2 --style epoch-step --log-interval 2 > ... 2>&1
(the exact lines are in make_corpus.sh).
"""

import argparse
import os
import sys
import warnings

from tiny import dump, evaluate, job, printed, train_step

parser = argparse.ArgumentParser()
parser.add_argument("--name", required=True)
parser.add_argument("--log-interval", type=int, default=2)
parser.add_argument("--style", choices=["mnist", "epoch-step"], default="mnist")
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
rank = int(next((os.environ[k] for k in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK")
                 if k in os.environ), "0"))
size = int(next((os.environ[k] for k in ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE")
                 if k in os.environ), "1"))
x, y, model, opt = job(samples=640)
shard_x, shard_y = x[rank::size], y[rank::size]  # this rank's samples
batch = 16
batches = len(shard_x) // batch
steps, evals = {}, {}
for epoch in range(1, args.epochs + 1):
    for batch_idx in range(batches):
        xb, yb = shard_x[batch_idx * batch:(batch_idx + 1) * batch], shard_y[batch_idx * batch:(batch_idx + 1) * batch]
        loss = train_step(model, opt, xb, yb)
        step = (epoch - 1) * batches + batch_idx + 1  # the optimizer step, from 1
        if args.style == "mnist" and batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(xb)}/{len(shard_x)} "  # Horovod's MNIST example's line
                  f"({100. * batch_idx / batches:.0f}%)]\tLoss: {loss:.6f}", flush=True)
            steps[step] = printed(loss, ".6f")
        elif args.style == "epoch-step" and (batch_idx + 1) % args.log_interval == 0:
            print(f"Epoch [{epoch}/{args.epochs}], Step [{batch_idx + 1}/{batches}], Loss: {loss:.4f}", flush=True)
            steps[step] = printed(loss, ".4f")
    if epoch == 1:
        warnings.warn(f"rank {rank}: epoch {epoch} done, this is a warning on stderr", stacklevel=1)
        sys.stderr.flush()
    test_loss, accuracy = evaluate(model, x[:128], y[:128])
    if rank == 0 and args.style == "mnist":
        print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {100 * accuracy:.2f}%\n", flush=True)
        evals[step if args.log_interval == 1 else max(steps)] = {
            "eval_loss": printed(test_loss, ".4f"), "eval_accuracy": printed(100 * accuracy, ".2f") / 100}
if rank == 0:
    # the optimizer-step numbering needs the per-rank batch: --global-batch batch * world size
    dump(args.name, steps, evals, flags=["--global-batch", str(batch * size), "--world-size", str(size)]
         if args.style == "mnist" else [], batches_per_epoch=batches, log_interval=args.log_interval)
