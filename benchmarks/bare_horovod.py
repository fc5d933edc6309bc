"""A bare Horovod loop, as Horovod's pytorch_synthetic_benchmark.py writes it: the reference hvd_impl is
timed against.

    horovodrun -np 2 --mpi python -m benchmarks.bare_horovod --out hvd.json [--configs JSON]

Horovod reads its fusion threshold and cycle time once, in hvd.init(), so every configuration of one
process shares them (they may differ in threads and in the modes of benchmarks/common.py). Sweeping the
knobs takes one process per setting: restarting Horovod in-process (hvd.shutdown(), hvd.init() on an
MPI that mpi4py keeps up) does not work in 0.28.1. The ParameterManager keeps its state across restarts:
the second hvd.init() segfaults once both variables have been set, and a cycle time set again after a
restart is not the one Horovod then runs at (an allreduce of one number took 8-16 ms at a 1 ms cycle).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import horovod.torch as hvd
import torch

from benchmarks.common import (
    batch_stream,
    collective_steps,
    fresh_copy,
    gradient_numel,
    make_model,
    parse_args,
    phase_steps,
    project_options,
    project_steps,
    run_blocks,
    synced_steps,
    train_steps,
    write_result,
)

KNOBS = {"fusion_threshold_mb": "HOROVOD_FUSION_THRESHOLD", "cycle_time_ms": "HOROVOD_CYCLE_TIME"}


def horovod_env(configs: list[dict]) -> dict[str, str]:
    """The knobs' variables, as hvd_impl sets them from its options; the same for every configuration."""
    settings = {tuple((k, c.get(k)) for k in KNOBS) for c in configs}
    if len(settings) > 1:
        raise SystemExit("bare_horovod: configurations of one process must share fusion threshold and cycle time")
    env = {}
    for knob, value in settings.pop():
        if value is not None:
            env[KNOBS[knob]] = str(int(value * 2**20)) if knob == "fusion_threshold_mb" else str(value)
    return env


def make_runner(config: dict, model: torch.nn.Module, lr: float, batches: Iterator,
                phases: list[list[float]], project: Callable[[], Callable[[int], list[float]]],
                ) -> Callable[[int], list[float]]:
    mode = config.get("mode", "train")
    if mode == "project":
        return project()
    if mode == "allreduce":
        flat = torch.zeros(config.get("elements") or gradient_numel(model))
        return lambda steps: collective_steps(lambda: hvd.allreduce(flat, op=hvd.Average, name="flat"), steps)
    copy = fresh_copy(model)
    optimizer = torch.optim.SGD(copy.parameters(), lr=lr, momentum=0.9)
    if mode in ("train", "phases"):
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=copy.named_parameters(), op=hvd.Average)
        hvd.broadcast_parameters(copy.state_dict(), root_rank=0)
    if mode == "synced":
        one = torch.zeros(1)
        return lambda steps: synced_steps(copy, optimizer, batches, steps,
                                          lambda: hvd.allreduce(one, op=hvd.Average, name="one"))
    if mode == "phases":
        # backward() only queues the allreduces; synchronize() is the wait step() would do itself.
        def step() -> None:
            with optimizer.skip_synchronize():
                optimizer.step()

        return lambda steps: phase_steps(copy, optimizer, batches, steps, phases, lambda: None,
                                         optimizer.synchronize, step)
    return lambda steps: train_steps(copy, optimizer, batches, steps)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    os.environ.update(horovod_env(args.configs))
    hvd.init()
    backend = None
    if any(c.get("mode") == "project" for c in args.configs):
        from hvd_impl.backend import HorovodBackend

        backend = HorovodBackend(project_options(args, args.out.parent / "project"))  # hvd.init() again: a no-op
    rank, world_size = hvd.rank(), hvd.size()
    torch.set_num_threads(args.threads)
    model, train, lr = make_model(args)
    batches = batch_stream(train, args.batch_size, world_size, rank, args.seed)
    phases: list[list[list[float]]] = [[] for _ in args.configs]
    runners = [make_runner(c, model, lr, batches, p, lambda: project_steps(backend, args, batches))
               for c, p in zip(args.configs, phases, strict=True)]
    order, block_times, block_phases, first_step_unix, loop_s = run_blocks(args, runners, phases)

    def reduce(t: torch.Tensor, op: str) -> torch.Tensor:
        return hvd.allreduce(t, op=hvd.Max if op == "max" else hvd.Sum, name=f"bench.{op}")

    meta = {"framework": "horovod", "controller": "mpi" if hvd.mpi_enabled() else "gloo",
            "world_size": world_size, "workload": args.workload, "batch_size": args.batch_size,
            "threads": args.threads, "steps": args.steps, "first_step_unix": first_step_unix, "loop_s": loop_s,
            "gradient_numel": gradient_numel(model)}
    write_result(args.out, meta, args.configs, order, block_times, block_phases, reduce, rank, world_size)
    hvd.shutdown()


if __name__ == "__main__":
    main()
