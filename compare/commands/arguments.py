"""The types of `compare`'s options (lists, margins, targets, a precision) and the readers that turn parsed
options into settings; the options themselves are declared in compare/commands/options.py."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from compare.names import FRAMEWORKS
from workload.errors import UsageError


def int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def word_list(text: str) -> list[str]:
    return [word.strip() for word in text.split(",") if word.strip()]


def frameworks(text: str) -> tuple[str, ...]:
    names = tuple(word_list(text))
    unknown = [name for name in names if name not in FRAMEWORKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"frameworks are {' and '.join(FRAMEWORKS)}, got {text!r}")
    return names


def fraction(text: str) -> float:
    """A percentage (5%) or a fraction (0.05), above 0 and below 100%."""
    value = text.strip()
    try:
        number = float(value.rstrip("%")) / (100 if value.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5%, got {text!r}") from None
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the precision must be above 0 and below 100% (e.g. 5%)")
    return number


def precision(text: str) -> dict[int | None, float]:
    """--precision: one target for every world size (10%), or per size (1:10%,2:15%); None keys all sizes."""
    targets: dict[int | None, float] = {}
    for part in text.split(","):
        size, sep, value = part.rpartition(":")
        if not sep:
            targets[None] = fraction(value)
            continue
        if not size.strip().isdigit() or int(size) < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: expected NP:P% with NP a world size, e.g. 2:15%")
        targets[int(size)] = fraction(value)
    return targets


def margin(text: str) -> tuple[str, object]:
    """NAME=VALUE (absolute) or NAME=VALUE% (relative to the end point's mean), e.g. final_loss=1%."""
    from compare.analysis.parity import DEFAULT_MARGINS, Margin

    name, _, value = text.partition("=")
    if name not in DEFAULT_MARGINS or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE or NAME=VALUE% with NAME one of "
                                         f"{', '.join(DEFAULT_MARGINS)}, got {text!r}")
    relative = value.endswith("%")
    try:
        number = float(value.rstrip("%")) / (100 if relative else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {value!r} is not a number") from None
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: the margin must be positive and finite")
    # A margin as wide as the quantity itself calls every pair of jobs equivalent: a verdict nobody should trust.
    if (relative and number >= 1) or (name == "eval_accuracy" and not relative and number >= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: a margin of {'100%' if relative else '1 (all of accuracy)'} or "
                                         "more calls every job equivalent; state the largest difference you would "
                                         "accept (the default is 2% of a loss, 0.01 of accuracy)")
    return name, Margin("relative" if relative else "absolute", number, "user")


@dataclass(frozen=True)
class AnalysisSettings:
    """The analysis options, read once from the command line: what `analyse` is given."""

    warmup: int
    k: int
    rtol: float
    margins: dict  # end point -> compare.analysis.parity.Margin, the user's only
    allowed: frozenset[str]


def analysis_settings(ns: argparse.Namespace) -> AnalysisSettings:
    if ns.warmup < 0 or ns.k <= 0 or not 0 < ns.rtol < 1:
        raise UsageError("--warmup must be >= 0, --k positive and --rtol between 0 and 1")
    return AnalysisSettings(ns.warmup, ns.k, ns.rtol, dict(ns.margin),
                            frozenset(name for names in ns.allow for name in names))


DEFAULT_TARGET = "default"  # `--target` without a value: the workload's own (compare/analysis/time_to_target.py)


def target(text: str) -> object:
    """--target NAME=VALUE: eval_accuracy=0.9 (or 90%), eval_loss=0.3, final_loss=0.2."""
    from compare.analysis.time_to_target import METRICS, Target

    if text == DEFAULT_TARGET:  # argparse passes a bare --target's const through here too
        return DEFAULT_TARGET
    name, _, value = text.partition("=")
    if name.strip() not in METRICS or not value.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with NAME one of {', '.join(METRICS)} "
                                         f"(e.g. eval_accuracy=0.9), got {text!r}")
    name, value = name.strip(), value.strip()
    try:
        number = float(value.rstrip("%")) / (100 if value.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {value!r} is not a number") from None
    if name == "eval_accuracy" and not 0 < number <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: an accuracy target lies above 0 and at most 1 (or 100%)")
    if not 0 < number < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a loss target must be positive and finite")
    return Target(name, number)


def resolve_targets(given: list, workload: str | None) -> tuple:
    """--target values with a bare `--target` replaced by the workload's default; duplicates dropped."""
    from compare.analysis.time_to_target import DEFAULT_TARGETS

    found: list = []
    for value in given:
        if value == DEFAULT_TARGET:
            value = DEFAULT_TARGETS.get(str(workload))
            if value is None:
                known = ", ".join(f"{w}: {t.metric}={t.value:g}" for w, t in DEFAULT_TARGETS.items())
                which = f"workload {workload!r} has" if workload else "the records name no workload, so they have"
                raise UsageError(f"--target without a value: {which} no default target ({known}); name one, e.g. "
                                 "--target eval_accuracy=0.9")
        if value not in found:
            found.append(value)
    return tuple(found)
