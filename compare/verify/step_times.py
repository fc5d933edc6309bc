"""How fast each side of `compare migrate --verify` trained, with no change to the script.

Two sources, in this order:

1. **The optimizer's step hooks.** The rank tag (compare/verify/rank_tag/sitecustomize.py) times every
   outermost optimizer step() of every worker and writes its ends to STEP_TIMES_DIR/rank-R-PID.json. A
   step's time is the time from the end of the step before it to its own end: the whole iteration (data,
   forward, backward, the gradient all-reduce and the update), as `compare run` times a step from before
   zero_grad() to after step() and the recorder from one step() to the next. The first step has nothing
   before it and is not timed. Per step the slowest rank's time counts, as in every run record.
2. **Printed throughput**, for an optimizer that bypasses the hooks: rank 0's `X img/sec`, `X samples/s`,
   `X it/s` (`X s/it` is read as 1/X it/s), or `--throughput-regex` with a named group `throughput`.

Neither: the side cannot be timed, and the output says so in one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compare.loss_lines import split_pieces

STEP_TIMES_DIR = "step-times"  # in each launch's directory
STEP_TIMES_SOURCE = "optimizer step hooks"
THROUGHPUT_SOURCE = "printed throughput"
DEFINITION = ("from the end of the previous optimizer step() to the end of this one (the whole iteration), the "
              "slowest rank's; the first step is not timed")

# "Iter #3: 812.4 img/sec per CPU" (Horovod's synthetic benchmarks), "1234 samples/s", tqdm's "12.3it/s".
NUMBER = r"(?P<throughput>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)"
UNITS = {"img/sec": "img/sec", "img/s": "img/sec", "images/sec": "img/sec", "images/s": "img/sec",
         "samples/sec": "samples/s", "samples/s": "samples/s", "it/s": "it/s", "s/it": "it/s"}
THROUGHPUT = re.compile(NUMBER + r"\s*(?P<unit>" + "|".join(re.escape(u) for u in sorted(UNITS, key=len,
                                                                                           reverse=True))
                        + r")(?![A-Za-z])")


class ThroughputRegexError(ValueError):
    """A --throughput-regex that cannot be used; the message is one line."""


def compile_throughput(text: str | None) -> re.Pattern:
    if text is None:
        return THROUGHPUT
    try:
        regex = re.compile(text)
    except re.error as exc:
        raise ThroughputRegexError(f"--throughput-regex: not a regular expression ({exc})") from None
    if "throughput" not in regex.groupindex:
        raise ThroughputRegexError("--throughput-regex needs the named group throughput, e.g. "
                                   r"'(?P<throughput>[\d.]+) tokens/s'")
    return regex


@dataclass(frozen=True)
class StepTimes:
    """One launch's step times, the slowest rank's per step (seconds)."""

    seconds: list[float]
    ranks: int            # the ranks that wrote step times
    steps: int            # outermost step() calls per rank (the fewest, where ranks differ)
    uneven: bool = False  # ranks took different numbers of steps (the common ones are compared)
    source: str = STEP_TIMES_SOURCE

    def describe(self) -> str:
        also = ", ranks took different numbers of steps: the common ones" if self.uneven else ""
        return f"{self.steps} optimizer steps on each of {self.ranks} ranks (the slowest rank's per step{also})"


def read_step_times(directory: Path) -> StepTimes | None:
    """The step times the rank tag wrote for one launch; None when no worker stepped through the hooks."""
    by_rank: dict[int, list[float]] = {}
    for path in sorted(directory.glob("rank-*.json")):
        try:
            record = json.loads(path.read_text())
            rank, ends = int(record["rank"]), [float(end) for end in record["ends"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a process whose rank was never known, or a file cut short
        if len(ends) > len(by_rank.get(rank, [])):  # a process restarted under the same rank: its longest run
            by_rank[rank] = ends
    if not by_rank:
        return None
    counts = [len(ends) for ends in by_rank.values()]
    fewest = min(counts)
    if fewest < 2:
        return StepTimes([], len(by_rank), fewest, len(set(counts)) > 1)
    intervals = np.stack([np.diff(np.asarray(ends[:fewest])) for ends in by_rank.values()])
    return StepTimes([round(float(t), 6) for t in intervals.max(axis=0)], len(by_rank), fewest, len(set(counts)) > 1)


def clear_step_times(directory: Path) -> None:
    for path in directory.glob("rank-*.json*"):
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Throughput:
    """The rates rank 0 printed, in the order printed (higher is faster)."""

    values: list[float]
    unit: str
    lines: int
    pattern: str = ""
    units: set[str] = field(default_factory=set)

    @property
    def median(self) -> float:
        return float(np.median(self.values))


def read_throughput(output: str, regex: re.Pattern | None = None) -> Throughput | None:
    """Rank 0's printed throughput (every rank's lines when none names its rank); None when there is none."""
    regex = regex or THROUGHPUT
    pieces = split_pieces(output)
    ranked = [piece for piece in pieces if piece.rank is not None and regex.search(piece.text)]
    mine = [piece for piece in ranked if piece.rank == 0] if ranked else pieces
    values: list[float] = []
    units: set[str] = set()
    lines = 0
    for piece in mine:
        found = list(regex.finditer(piece.text))
        if not found:
            continue
        lines += 1
        for match in found:
            try:
                value = float(match["throughput"])
            except (TypeError, ValueError):
                continue
            unit = match.groupdict().get("unit")
            if regex is THROUGHPUT:
                if unit == "s/it":
                    if value <= 0:
                        continue
                    value = 1 / value
                unit = UNITS[unit]
            if value > 0:
                values.append(value)
                units.add(unit or "per s")
    if not values:
        return None
    unit = sorted(units)[0] if len(units) == 1 else "/".join(sorted(units))
    return Throughput(values, unit, lines, regex.pattern, units)


def summary(times: list[float], warmup: int) -> dict:
    """n and median of the step times after `warmup` of them, and the warm-up actually left out (fewer where
    the launch has too few steps: at least one step stays)."""
    left_out = min(warmup, max(len(times) - 1, 0))
    kept = np.asarray(times[left_out:], dtype=np.float64)
    return {"n": int(kept.size), "median_s": float(np.median(kept)) if kept.size else None, "warmup": left_out}
