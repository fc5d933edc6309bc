"""How the training lines' (epoch, counter, total, percent) become steps: as printed, or on a grid of batches
from the first epoch's start (docs/own-job.md, "How steps are numbered")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

from compare.loss_lines.tokens import LossLogError


@dataclass(frozen=True)
class Numbering:
    steps: dict            # (epoch, counter, total, percent) -> step
    rule: str
    order: frozenset = frozenset()  # keys without a counter: numbered by their place
    notes: tuple[str, ...] = ()
    as_printed: bool = False        # steps are the printed numbers (an evaluation's own step can be used)
    shift: int = 0                  # added to a printed step: 1 for a counter that counts from 0 (evaluations too)


def numbering(keys: list[tuple], step_from: str, batch: int | None, where: str) -> Numbering:
    """How the training lines' (epoch, counter, total, percent) become steps.

    Without an epoch the counter is the step. With one, the counter restarts each epoch, and the step is the
    line's place on a grid of batches from the first epoch's start, so that two logs printed at different
    intervals put the same batch at the same step: a batch counter with its total printed ("Step [i/N]",
    a bar's "9/20") is exact; a counter of samples ([N/M]) needs the batch (`batch`, from --global-batch and
    --world-size) and is otherwise put on its own logging interval, which the step rule and a note say."""
    unnumbered = frozenset(key for key in keys if key[1] is None)
    if step_from == "order" or not keys:
        return Numbering({}, "rank's matching lines numbered in order from 1", unnumbered)
    if unnumbered:
        return Numbering({}, "the lines have no step: numbered in order from 1", unnumbered)
    if any(key[0] is None for key in keys):
        interval = _zero_based_interval([key[1] for key in keys])
        if interval:
            return Numbering({key: key[1] + 1 for key in keys}, f"as printed + 1, a counter from 0: every value "
                             f"printed is one less than a multiple of {interval}, the logging interval",
                             as_printed=True, shift=1)
        return Numbering({key: key[1] for key in keys}, "as printed", as_printed=True)
    first = min(key[0] for key in keys)
    totals = {key[2] for key in keys}
    if None not in totals and not _counts_samples(keys):
        if len(totals) > 1:
            raise LossLogError(f"{where}: the epochs have different totals ({', '.join(map(str, sorted(totals)))} "
                               "batches): give --step-from order")
        total = totals.pop()
        base = 0 if any(key[1] == 0 for key in keys) else 1  # a counter from 0 counts batches before this one
        return Numbering({key: (key[0] - first) * total + key[1] + (1 - base) for key in keys},
                         f"epoch and batch counter on a grid of {total} batches per epoch, from 1")
    if batch is not None:
        return _sample_grid(keys, first, batch, where)
    counters = [key[1] for key in keys if key[1] > 0]
    stride = reduce(math.gcd, counters) if counters else 1
    length = max(key[1] // stride for key in keys) + 1
    note = (f"the counter restarts each epoch and has no batch size: a step is one logging interval ({stride} as "
            "counted), so a log printed at another interval pairs other batches; give --global-batch and "
            "--world-size to number optimizer steps")
    return Numbering({key: (key[0] - first) * length + key[1] // stride + 1 for key in keys},
                     f"epoch and counter on a grid: counter / {stride} (its stride), {length} per epoch, from 1",
                     notes=(note,))


def _zero_based_interval(counters: list[int]) -> int | None:
    """The logging interval of a counter from 0 printed after each interval's last iteration (Detectron2's
    "iter: 19", "iter: 39": iterations 0-19 done): every value one less than a multiple of an interval of 5 or
    more, and none 0; None for any other counter."""
    printed = sorted(set(counters))
    if len(printed) < 2 or printed[0] == 0:
        return None
    interval = reduce(math.gcd, (c + 1 for c in printed))
    return interval if interval >= 5 and reduce(math.gcd, printed) < interval else None


def _counts_samples(keys: list[tuple]) -> bool:
    """Whether [N/M] counts samples (the MNIST examples: the total is the dataset) rather than batches."""
    return any(key[3] is not None for key in keys)  # a printed percentage: the MNIST examples' shape


def _sample_grid(keys: list[tuple], first: int, batch: int, where: str) -> Numbering:
    """A sample counter ([N/M (P%)], N = batch index x batch) on the optimizer steps, the epoch's batches
    checked against the printed percentage (100 x batch index / batches per epoch)."""
    bad = next((key for key in keys if key[1] % batch), None)
    if bad is not None:
        raise LossLogError(f"{where}: the counter {bad[1]} is not a multiple of the per-rank batch {batch} "
                           "(--global-batch / --world-size): give the batch the counter counts in")
    candidates = sorted({math.ceil(key[2] / batch) for key in keys})
    fits = [n for n in candidates if all(key[3] is None or abs(100 * key[1] / batch / n - key[3]) <= 0.51
                                         for key in keys)]
    if len(fits) != 1:
        raise LossLogError(f"{where}: the printed percentages do not fit {batch} samples per rank's batch: check "
                           "--global-batch and --world-size")
    per_epoch = fits[0]
    return Numbering({key: (key[0] - first) * per_epoch + key[1] // batch + 1 for key in keys},
                     f"epoch and sample counter on the optimizer steps: counter / {batch} (the batch), "
                     f"{per_epoch} batches per epoch, from 1")
