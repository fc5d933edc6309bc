"""A bare DDP loop, as PyTorch's DDP tutorial writes it: the reference native_impl is timed against.

    torchrun --standalone --nproc-per-node 2 -m benchmarks.bare_ddp --out ddp.json [--configs JSON]

With several configurations (bucket_cap_mb, gradient_as_bucket_view, threads, and the modes of
benchmarks/common.py), each gets its own copy of the model and they run in interleaved blocks.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

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


def make_runner(config: dict, model: torch.nn.Module, lr: float, batches: Iterator,
                phases: list[list[float]], project: Callable[[], Callable[[int], list[float]]],
                ) -> Callable[[int], list[float]]:
    mode = config.get("mode", "train")
    if mode == "project":
        return project()
    if mode == "allreduce":
        flat = torch.zeros(config.get("elements") or gradient_numel(model))
        return lambda steps: collective_steps(lambda: dist.all_reduce(flat), steps)
    copy = fresh_copy(model)
    if mode in ("train", "phases"):
        copy = DDP(copy, bucket_cap_mb=config.get("bucket_cap_mb"),
                   gradient_as_bucket_view=config.get("gradient_as_bucket_view", False))
    optimizer = torch.optim.SGD(copy.parameters(), lr=lr, momentum=0.9)
    if mode == "synced":
        one = torch.zeros(1)
        return lambda steps: synced_steps(copy, optimizer, batches, steps, lambda: dist.all_reduce(one))
    if mode == "phases":
        # The moment the last gradient is accumulated is when DDP hands its last bucket to gloo; backward()
        # returns once the averaged gradients are back in place.
        ready = [0.0]
        for parameter in copy.parameters():
            parameter.register_post_accumulate_grad_hook(lambda _: ready.__setitem__(0, time.perf_counter()))
        return lambda steps: phase_steps(copy, optimizer, batches, steps, phases, lambda: ready[0],
                                         lambda: None, optimizer.step)
    return lambda steps: train_steps(copy, optimizer, batches, steps)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    os.environ.setdefault("RANK", "0")  # without torchrun: a group of one on loopback
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    backend = None
    if any(c.get("mode") == "project" for c in args.configs):
        from native_impl.backend import DDPBackend

        backend = DDPBackend(project_options(args, args.out.parent / "project"))  # it starts the process group
    else:
        dist.init_process_group("gloo", timeout=timedelta(minutes=5))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(args.threads)
    model, train, lr = make_model(args)
    batches = batch_stream(train, args.batch_size, world_size, rank, args.seed)
    phases: list[list[list[float]]] = [[] for _ in args.configs]
    runners = [make_runner(c, model, lr, batches, p, lambda: project_steps(backend, args, batches))
               for c, p in zip(args.configs, phases, strict=True)]
    order, block_times, block_phases, first_step_unix, loop_s = run_blocks(args, runners, phases)

    def reduce(t: torch.Tensor, op: str) -> torch.Tensor:
        dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
        return t

    meta = {"framework": "ddp", "controller": "gloo", "world_size": world_size, "workload": args.workload,
            "batch_size": args.batch_size, "threads": args.threads, "steps": args.steps,
            "first_step_unix": first_step_unix, "loop_s": loop_s, "gradient_numel": gradient_numel(model)}
    write_result(args.out, meta, args.configs, order, block_times, block_phases, reduce, rank, world_size)
    dist.barrier()
    dist.destroy_process_group()
    # The result is on disk: leave before the interpreter finalizes, where Gloo's thread can abort the
    # process and fail the launch after its work was done (docs/fault-tolerance.md, "Gloo's abort at exit").
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
