"""`compare migrate --verify`'s speed: each side's median step time and throughput, their ratio, and with
`--speed-rounds N` a verdict over rounds of launches, reached by the same code as `compare run`'s
(compare/analysis/speed.py: a round's ratio is the Horovod/DDP ratio of its two launches' median step
times, the verdict the geometric mean over rounds with the group-sequential interval of the rounds' design,
compare/verify/speed_design.py, withheld for contention or oversubscription, a faster side named only when
the interval excludes 1), and the loop of those rounds, which stops at the look where the interval is
within the target.

Each launch becomes a RunRecord here, in memory, with the step times of compare/verify/step_times.py and
the round it belongs to; the contention record that compare/launch/process.py writes beside every launch
is read from its directory, as `compare run`'s are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compare.analysis.records import RunRecord
from compare.analysis.speed import MIN_ROUNDS, SpeedOutcome, compare_speed
from compare.names import FRAMEWORKS, display
from compare.render.speed import WITHHELD, speed_sentence
from compare.render.speed_up import speed_up_words
from compare.verify import speed_design
from compare.verify.step_times import (
    STEP_TIMES_SOURCE,
    THROUGHPUT_SOURCE,
    StepTimes,
    Throughput,
    summary,
)


@dataclass(frozen=True)
class Timing:
    """What one launch says about its speed."""

    step_times: StepTimes | None
    throughput: Throughput | None
    global_batch: int | None = None  # from a recorder's run record, where the script gives it

    @property
    def hooked(self) -> bool:
        return self.step_times is not None and len(self.step_times.seconds) >= 1


@dataclass(frozen=True)
class Launched:
    round: int
    framework: str
    run_dir: Path
    timing: Timing


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def rate(value: float) -> str:
    return f"{value:.0f}" if value >= 1000 else f"{value:.4g}"


def side_line(name: str, timing: Timing, warmup: int) -> str:
    """One line under a side's launch: how it was timed and its median step time, or why it cannot be."""
    parts = []
    if timing.step_times is not None and timing.step_times.seconds:
        found = summary(timing.step_times.seconds, warmup)
        parts.append(f"step times from the {STEP_TIMES_SOURCE}: {timing.step_times.describe()}, median "
                     f"{ms(found['median_s'])} over {found['n']} steps after {found['warmup']} warm-up")
    elif timing.step_times is not None:
        parts.append(f"only {timing.step_times.steps} optimizer step per rank: too few to time")
    if timing.throughput is not None:
        parts.append(f"printed throughput: median {rate(timing.throughput.median)} {timing.throughput.unit} over "
                     f"{len(timing.throughput.values)} values of rank 0's lines")
    if not parts:
        return (f"  {name}: cannot be timed: no optimizer step went through torch's step hooks and rank 0 printed "
                "no throughput (img/sec, samples/s, it/s; --throughput-regex)")
    return f"  {name}: " + "; ".join(parts)


def source_of(launches: list[Launched]) -> str | None:
    """Hooks when every launch has step times, else printed throughput when every launch printed it in one
    unit, else None: both sides must be timed the same way to be compared."""
    if launches and all(launch.timing.hooked for launch in launches):
        return STEP_TIMES_SOURCE
    printed = [launch.timing.throughput for launch in launches]
    if launches and all(printed) and len({t.unit for t in printed}) == 1:
        return THROUGHPUT_SOURCE
    return None


def launch_record(launch: Launched, np_: int, source: str) -> RunRecord:
    """One launch as the speed analysis reads a run: its round, framework, world size and step times (for
    printed throughput, seconds per unit: 1 / rate)."""
    if source == STEP_TIMES_SOURCE:
        seconds = launch.timing.step_times.seconds
    else:
        seconds = [1 / value for value in launch.timing.throughput.values]
    meta = {"framework": launch.framework, "world_size": np_, "seed": 0, "status": "ok",
            "options": {"round": launch.round}, "samples_per_step": launch.timing.global_batch}
    steps = [{"step": i + 1, "loss": None, "step_time_s": t} for i, t in enumerate(seconds)]
    return RunRecord(launch.run_dir, meta, steps, [], True)


def cannot_be_timed(launches: list[Launched]) -> str:
    sides = {launch.framework: launch.timing for launch in launches}
    untimed = [display(f) for f in FRAMEWORKS if f in sides and not sides[f].hooked and not sides[f].throughput]
    if untimed:
        return (f"speed: cannot be timed: on the {' and '.join(untimed)} side no optimizer step went through torch's "
                "step hooks and rank 0 printed no throughput (img/sec, samples/s, it/s; give --throughput-regex)")
    return ("speed: cannot be timed: the two sides were not timed the same way (step hooks on one, printed "
            "throughput on the other, or throughputs in other units)")


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def _throughputs(launches: list[Launched], speed: dict, source: str) -> dict[str, tuple[float, str]] | None:
    """Each side's throughput: the printed one where every launch printed it, else the global batch over the
    median step time where the record gives the batch, else steps per second."""
    found = {}
    for framework in FRAMEWORKS:
        mine = [launch for launch in launches if launch.framework == framework]
        printed = [launch.timing.throughput for launch in mine]
        step = _median([row[f"{framework}_median_s"] for row in speed["rounds"]])
        if all(printed) and len({t.unit for t in printed}) == 1:
            found[framework] = (_median([t.median for t in printed]), printed[0].unit)
        elif not step:
            return None
        elif source == STEP_TIMES_SOURCE and mine and all(launch.timing.global_batch for launch in mine):
            found[framework] = (mine[0].timing.global_batch / step, "samples/s")
        elif source == STEP_TIMES_SOURCE:
            found[framework] = (1 / step, "steps/s")
        else:
            return None
    if len({unit for _, unit in found.values()}) != 1:
        return None
    return found


def speed_of(launches: list[Launched], np_: int, warmup: int, design: dict | None = None,
             ) -> tuple[dict | None, str | None, int]:
    """compare_speed over these launches (under the speed rounds' design, if any), how both sides were timed and
    the warm-up steps left out; no speed where the two sides cannot be timed alike."""
    source = source_of(launches)
    if source is None:
        return None, None, 0
    used_warmup = warmup if source == STEP_TIMES_SOURCE else 0  # printed rates follow the script's own warm-up
    if source == STEP_TIMES_SOURCE:
        used_warmup = min(warmup, min(len(launch.timing.step_times.seconds) for launch in launches) - 1)
    runs = [launch_record(launch, np_, source) for launch in launches]
    return compare_speed(np_, runs, used_warmup, design=design), source, used_warmup


def speed_report(launches: list[Launched], np_: int, warmup: int, rounds_asked: int,
                 design: dict | None = None) -> tuple[list[str], bool]:
    """The speed lines of --verify, and whether both sides could be timed. `design`: the speed rounds'
    (compare/verify/speed_design.py), under which the verdict's interval is the group-sequential one."""
    speed, source, used_warmup = speed_of(launches, np_, warmup, design)
    if speed is None:
        return [cannot_be_timed(launches)], False
    medians = {f: _median([row[f"{f}_median_s"] for row in speed["rounds"]]) for f in FRAMEWORKS}
    n = speed["n_rounds"]  # one count of rounds: every round that timed both sides, as the verdict and design count
    over = "one launch each" if n == 1 else f"medians of {n} launches each"
    # The speed-up is said once: by the verdict where it gives one, else on the line of the figures it reads.
    said_by_verdict = SpeedOutcome(speed["outcome"]) not in (*WITHHELD, SpeedOutcome.TOO_FEW_ROUNDS)

    def figure(ratio: float) -> str:
        if said_by_verdict:
            return ""
        return f": {speed_up_words(ratio)} ({over}{': no interval' if n == 1 else ''})"

    if source == STEP_TIMES_SOURCE:
        line = (f"speed: median step time Horovod {ms(medians['horovod'])}, DDP {ms(medians['ddp'])} "
                f"({over + ', ' if said_by_verdict else ''}{STEP_TIMES_SOURCE}, {used_warmup} warm-up steps left "
                f"out){figure(medians['horovod'] / medians['ddp'])}")
    else:
        line = f"speed: timed from {THROUGHPUT_SOURCE} ({over}; no optimizer step went through the step hooks)"
    lines = [line]
    throughputs = _throughputs(launches, speed, source)
    if throughputs:
        (hvd, unit), (ddp, _) = throughputs["horovod"], throughputs["ddp"]
        where = {"steps/s": "1 / the median step time", "samples/s": "the global batch / the median step time"}.get(
            unit, "rank 0's printed values, median")
        line = f"speed: throughput Horovod {rate(hvd)} {unit}, DDP {rate(ddp)} {unit} ({where})"
        if source != STEP_TIMES_SOURCE:  # what the verdict reads
            line += figure(ddp / hvd)
        elif unit not in ("steps/s", "samples/s"):  # printed beside the step times: a measure with its own speed-up
            line += ": " + speed_up_words(ddp / hvd)
        lines.append(line)
    lines.append("speed: " + verdict(speed, rounds_asked))
    if design is not None:  # what a wider interval would need was said at the first look (speed_rounds)
        lines.append(speed_design.stop_line(speed["sequential"], rounds_asked))
    return lines, True


def run_speed_rounds(launch: Callable[[int], list[Launched] | None], design: dict, launches: list[Launched],
                     np_: int, warmup: int) -> list[Launched] | None:
    """The speed rounds after the verify launches (round 1) under the design (compare/verify/speed_design.py):
    `launch(number)` runs round `number`'s two launches (None: one failed), up to each planned look; after a
    look the rounds stop once the interval is within the target, and the first look prints what the target
    needs on this job. Records the looks and the stop in the design; returns every launch, round 1's included
    (None after a failed launch)."""
    found, done, n = list(launches), 1, 1  # done: the rounds launched so far
    for look in speed_design.looks(design):
        for number in range(done + 1, look + 1):
            more = launch(number)
            if more is None:
                return None
            found += more
        done = look
        speed_design.look_after(design, np_, look)
        speed, _, _ = speed_of(found, np_, warmup, design)
        if speed is None:  # the sides cannot be timed alike: more rounds would not change that
            break
        n = speed["n_rounds"]  # one count of rounds: the verdict's (every round that timed both sides)
        if speed["sequential"]["reached"]:
            speed_design.stop(design, np_, "precision", n)
            return found
        if look == design["first_look"] and speed.get("log_sd"):
            print(speed_design.forecast_line(speed_design.forecast(design, np_, speed["log_sd"], n)), flush=True)
        elif look == design["first_look"]:
            print(speed_design.no_forecast_line(np_, n, len(speed["contended_rounds"])), flush=True)
    speed_design.stop(design, np_, "last look", n)
    return found


def verdict(speed: dict, rounds_asked: int) -> str:
    """compare run's sentence, except where too few rounds ran: then what --speed-rounds would give."""
    outcome = SpeedOutcome(speed["outcome"])
    if outcome is SpeedOutcome.TOO_FEW_ROUNDS:
        used = len(speed["rounds_used"])
        more = MIN_ROUNDS - 1  # the verify launches are the first round
        return (f"no verdict from {used} round{'s' * (used != 1)} of launches (a verdict needs {MIN_ROUNDS}: give "
                f"--speed-rounds {max(more, rounds_asked + MIN_ROUNDS - used)} for more launches of each side, "
                "interleaved)")
    return speed_sentence(speed)
