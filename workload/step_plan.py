"""How many optimizer steps a run takes: pure arithmetic on the options and the training set's size, without torch,
so that compare run's module loads without it (its --help, its own option errors); the size itself comes from the
workload's data, which does import torch."""

from __future__ import annotations

from workload.errors import UsageError
from workload.options import Options


def steps_per_epoch(options: Options, train_samples: int, num_replicas: int) -> int:
    """As DistributedSampler(drop_last=True) and DataLoader(drop_last=True) count them; one optimizer
    step takes accum_steps micro-batches."""
    return train_samples // num_replicas // options.batch_size // options.accum_steps


def planned_steps(options: Options, train_samples: int, num_replicas: int) -> int:
    per_epoch = steps_per_epoch(options, train_samples, num_replicas)
    if per_epoch <= (num_replicas - 1 if options.uneven_inputs else 0):
        micro = f" x {options.accum_steps} micro-batches" if options.accum_steps > 1 else ""
        uneven = " (uneven inputs take one step more from each further rank)" if options.uneven_inputs else ""
        raise UsageError(
            f"workload {options.workload!r} has {train_samples} training samples: {num_replicas} workers "
            f"x batch {options.batch_size}{micro} leaves no full batch per worker{uneven}")
    total = options.epochs * per_epoch
    return min(total, options.steps) if options.steps is not None else total
