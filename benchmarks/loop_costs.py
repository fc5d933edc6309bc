"""What the project's loop does beyond a bare step, item by item: one process, no framework, no launcher.

    python -m benchmarks.loop_costs --out costs.json

Each variant is the bare step of benchmarks/common.py plus one thing workload/trainer.py does; the
variants run in interleaved blocks, and an item's cost is its variant's median step time minus the bare
step's. "project step" is Trainer._train_step itself (on the one-process reference backend), and
"metric buffer" is what the loop does between steps (MetricBuffer.add every step, a drain and a JSON
line per step every --log-every steps), which step_time_s does not contain.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from benchmarks.common import batch_stream, fresh_copy, make_model, round_order
from workload.files import write_json_atomic
from workload.options import parse_options
from workload.reference import ReferenceBackend
from workload.trainer import TIME_KEYS, MetricBuffer, Trainer, make_warmup
from workload.workloads import argmax_correct, cross_entropy

Step = Callable[[Iterator], None]


# scheduler.step(): only with a warm-up or a change of rate (a constant rate has no scheduler); the loss is kept as
# a tensor (loss.detach()) and read at the drain.
PER_STEP = ("loss_and_correct", "loss / accum_steps", "loss.detach()", "scheduler.step()", "timers and contexts")
BETWEEN_STEPS = "metric buffer (between steps)"


def bare_plus(items: frozenset[str], model: torch.nn.Module, lr: float, log: Path) -> Step:
    """The bare step with some of what the trainer does each step added."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scheduler = make_warmup(optimizer, 0, 1) if "scheduler.step()" in items else None
    timed = "timers and contexts" in items
    buffer, backend, sink, count = MetricBuffer(), ReferenceBackend(1), log.open("w"), [0]

    def step(batches: Iterator) -> None:
        if timed:  # _train_step's timers, its dict of phase times, its .to(device) and its two contexts
            t0 = time.perf_counter()
            times = dict.fromkeys(TIME_KEYS, 0.0)
            x, y = (t.to("cpu", non_blocking=True) for t in next(batches))
            t1 = time.perf_counter()
            context: contextlib.AbstractContextManager = contextlib.nullcontext()
        else:
            x, y = next(batches)
            context = contextlib.nullcontext()  # entering one costs ~0.1 us: alike in every variant
        with context:
            optimizer.zero_grad()
            logits = model(x)
            if "loss_and_correct" in items:
                loss, _ = cross_entropy(logits, y), argmax_correct(logits, y)  # what Workload.loss_and_correct does
            else:
                loss = F.cross_entropy(logits.flatten(0, -2), y.flatten())
            if timed:
                t2 = time.perf_counter()
            (loss / 1 if "loss / accum_steps" in items else loss).backward()
        if timed:
            t3 = time.perf_counter()
            times["data_s"] += t1 - t0
            times["forward_s"] += t2 - t1
            times["backward_s"] += t3 - t2
        kept = loss.detach() if "loss.detach()" in items else loss
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if timed:
            times["optimizer_s"] = time.perf_counter() - t3
            times["step_time_s"] = time.perf_counter() - t0
        if BETWEEN_STEPS in items:
            count[0] += 1
            buffer.add([kept], dict.fromkeys(TIME_KEYS, 0.001), {"step": count[0], "epoch": 0, "lr": lr, "samples": 1})
            if count[0] % 10 == 0:
                for entry in buffer.drain(backend):
                    sink.write(json.dumps(entry) + "\n")
                sink.flush()

    return step


def project_step(args: argparse.Namespace, out: Path) -> Step:
    """Trainer._train_step as the implementations run it, on one process."""
    options, _ = parse_options(["--workload", args.workload, "--batch-size", str(args.batch_size),
                                "--threads", str(args.threads), "--out", str(out)], "loop_costs", "")
    trainer = Trainer(options, ReferenceBackend(1), seed=0)
    trainer.setup()
    return lambda batches: trainer._train_step([batches])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100, help="timed steps per block")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.dataset_size, args.seed = None, 0
    torch.set_num_threads(args.threads)
    model, train, lr = make_model(args)
    batches = batch_stream(train, args.batch_size, 1, 0, seed=0)

    variants = {"bare": frozenset(), **{item: frozenset([item]) for item in (*PER_STEP, BETWEEN_STEPS)},
                "all per-step items above": frozenset(PER_STEP)}
    with tempfile.TemporaryDirectory() as scratch:
        steps: dict[str, Step] = {name: bare_plus(items, fresh_copy(model), lr, Path(scratch) / f"{i}.jsonl")
                                  for i, (name, items) in enumerate(variants.items())}
        try:
            steps["project step (Trainer._train_step)"] = project_step(args, Path(scratch) / "run")
        except AttributeError as exc:  # the trainer was refactored: the items above still stand
            print(f"loop_costs: no project step ({exc})")
        names = list(steps)
        times: dict[str, list[float]] = {name: [] for name in names}
        for index in round_order(len(names), args.rounds):
            step = steps[names[index]]
            for _ in range(3):  # untimed: the block's first steps pay for the switch
                step(batches)
            for _ in range(args.steps):
                start = time.perf_counter()
                step(batches)
                times[names[index]].append(time.perf_counter() - start)
    # The bare variant goes through the same outer loop as the others, so that only the item differs.
    bare = float(np.median(times["bare"]))
    rows = [{"item": name, "median_s": float(np.median(t)), "cost_s": float(np.median(t)) - bare,
             "cost_fraction": (float(np.median(t)) - bare) / bare, "n": len(t)} for name, t in times.items()]
    write_json_atomic(args.out, {"workload": args.workload, "batch_size": args.batch_size, "threads": args.threads,
                                 "bare_median_s": bare, "items": rows})


if __name__ == "__main__":
    main()
