"""`compare migrate --verify --speed-rounds N`'s rounds under compare run's group-sequential design
(compare/analysis/group_sequential.py): N is the budget, in rounds. Round 1 is the verify launches; the design
plans its looks before any launch, after FIRST_LOOK rounds (or MIN_ROUNDS, so that the looks fall in pairs
on the budget's last round) and after every pair up to N + 1 rounds, the last spending what is left. After
each look the rounds stop once the interval is within compare run's target at this np (±10% at np 1, ±15%
above); at the first look the report says how many rounds the target needs on this job, from the first
rounds' spread, and whether --speed-rounds allows them.

Pure: the design is a dict in compare run's shape (compare/commands/sequential_rounds.py), which
compare/analysis/speed.py's compare_speed reads; the loop that launches is compare/verify/verify.py's.
"""

from __future__ import annotations

import math

from compare.analysis import group_sequential
from compare.analysis.parity import CONFIDENCE
from compare.analysis.timing import fixed_rounds_for
from compare.defaults import DEFAULT_PRECISION, DEFAULT_PRECISION_MANY, DEFAULT_ROUNDS, MIN_ROUNDS

MOST_ROUNDS = 100  # the largest budget a forecast names: beyond it, the spread is the thing to cut


def target_for(world_size: int) -> float:
    """compare run's default target at this world size."""
    return DEFAULT_PRECISION.get(world_size, DEFAULT_PRECISION_MANY)


def first_look(planned: int) -> int:
    """compare run's first look (DEFAULT_ROUNDS), or MIN_ROUNDS where the budget's last round would otherwise
    fall between two pairs; a budget under the first look has one look, its last round."""
    if planned <= DEFAULT_ROUNDS:
        return planned
    return DEFAULT_ROUNDS if (planned - DEFAULT_ROUNDS) % 2 == 0 else MIN_ROUNDS


def start_design(speed_rounds: int, world_size: int) -> dict:
    """The design of N more rounds after the verify launches, fixed before any of them."""
    planned = speed_rounds + 1
    first = first_look(planned)
    return {"sequential": True, "method": group_sequential.METHOD, "precision": {str(world_size): target_for(
            world_size)}, "confidence": CONFIDENCE, "first_look": first, "planned_rounds": planned,
            "looks": f"after {first} rounds, then after every pair up to {planned} (--speed-rounds {speed_rounds} "
                     "and the verify launches); the last spends what is left",
            "stopped": None, "rounds": None, "world_sizes": {str(world_size): {"looks": []}}}


def looks(design: dict) -> list[int]:
    """The round numbers after which the design looks."""
    return group_sequential.looks_at(int(design["first_look"]), int(design["planned_rounds"]))


def look_after(design: dict, world_size: int, number: int) -> None:
    """Record a look after round `number` (final at the design's last planned round, known before the data)."""
    own = design["world_sizes"][str(world_size)]
    own["looks"].append(number)
    own["final"] = number >= int(design["planned_rounds"])


def stop(design: dict, world_size: int, why: str, rounds: int) -> None:
    """Why the rounds stopped ("precision", "last look"), after how many rounds (the verdict's count)."""
    own = design["world_sizes"][str(world_size)]
    own.update(stopped=why, rounds=rounds)
    design.update(stopped=why, rounds=rounds)


def budget_for(target: float, log_sd: float, first: int) -> int | None:
    """The fewest planned rounds whose last look reaches ±target when rounds spread by log_sd (its last look
    spends all that is left, about as narrow as a fixed number of rounds), looking first after `first` rounds
    and then every pair; None beyond MOST_ROUNDS."""
    start = max(first, fixed_rounds_for(target, log_sd, MOST_ROUNDS) or MOST_ROUNDS + 1)
    start += (start - first) % 2
    for planned in range(start, MOST_ROUNDS + 1, 2):
        counts = tuple(group_sequential.looks_at(first, planned))
        if group_sequential.t_multiplier(counts, planned, True) * log_sd / math.sqrt(planned) <= math.log1p(target):
            return planned
    return None


def forecast(design: dict, world_size: int, log_sd: float, rounds: int) -> dict:
    """At the first look: about how many rounds the target needs under this design, or (beyond its last look)
    the budget that would reach it."""
    target, first, planned = target_for(world_size), int(design["first_look"]), int(design["planned_rounds"])
    needed = group_sequential.rounds_for(target, log_sd, first, planned)
    wanted = None if needed is not None else budget_for(target, log_sd, first)
    return {"world_size": world_size, "rounds": rounds, "log_sd": log_sd, "target": target, "needed": needed,
            "planned_rounds": planned, "budget_for_target": wanted}


def forecast_line(found: dict) -> str:
    """e.g. "rounds: np 2 spreads 0.180 over its first 4 rounds: ±15% needs about 14, --speed-rounds 5 holds
    6 (--speed-rounds 13 for 14)"."""
    head = (f"rounds: np {found['world_size']} spreads {found['log_sd']:.3f} over its first {found['rounds']} "
            f"rounds: ±{found['target']:.0%} ")
    holds = f"--speed-rounds {found['planned_rounds'] - 1} holds {found['planned_rounds']}"
    if found["needed"] is not None:
        return head + f"needs about {found['needed']}, within {holds}"
    if found["budget_for_target"] is None:
        return head + (f"needs more than {MOST_ROUNDS} rounds: expect no verdict at that precision; cut the "
                       "launch-to-launch spread first (a quieter machine, longer runs)")
    wanted = found["budget_for_target"]
    return head + f"needs about {wanted}, {holds} (--speed-rounds {wanted - 1} for {wanted})"


def no_forecast_line(world_size: int, rounds: int, contended: int) -> str:
    """At the first look, when its clean rounds are too few for a spread (contention left the others out)."""
    return (f"rounds: np {world_size} has no spread to forecast from after its first {rounds} rounds ({contended} "
            "contended, left out): the rounds go on to the design's last look unless the interval narrows")


def stop_line(state: dict, speed_rounds: int) -> str:
    """Why the speed rounds stopped, from compare_speed's sequential state, e.g. "rounds: np 2 ±9.1% (target
    ±15%) after 6 rounds: within the target at a look before the last (--speed-rounds 9)"."""
    width = f"±{state['half_width']:.1%}" if state.get("half_width") is not None else "no interval"
    head = f"rounds: np {state['world_size']} {width} (target ±{state['target']:.0%}) after {state['rounds']} rounds"
    if state.get("stopped") == "precision":
        planned = int(state["planned_rounds"])
        early = f", before the design's last planned look ({planned} rounds)" if state["rounds"] < planned else ""
        return head + f": within the target{early}"
    return head + (f": short of the target at the design's last planned look ({state['planned_rounds']} rounds, "
                   f"--speed-rounds {speed_rounds} and the verify launches)")
