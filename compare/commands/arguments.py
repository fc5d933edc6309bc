"""What several commands' parsers share: the parser that turns bad input into one line, list types and the
analysis options."""

from __future__ import annotations

import argparse

from compare.names import FRAMEWORKS
from workload.options import UsageError

DEFAULTS = argparse.ArgumentDefaultsHelpFormatter


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


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


def analysis_arguments(parser: argparse.ArgumentParser) -> None:
    from compare.analysis.parity import MARGIN_SD, STEP_K, STEP_RTOL

    group = parser.add_argument_group("analysis")
    group.add_argument("--warmup", type=int, default=5, help="steps excluded from timing")
    group.add_argument("--k", type=int, default=STEP_K, help="steps compared step by step")
    group.add_argument("--rtol", type=float, default=STEP_RTOL, help="step-wise relative tolerance")
    group.add_argument("--margin-sd", type=float, default=MARGIN_SD,
                       help="equivalence margin in seed-to-seed standard deviations")


def check_analysis(ns: argparse.Namespace) -> None:
    if ns.warmup < 0 or ns.k <= 0 or ns.rtol <= 0 or ns.margin_sd <= 0:
        raise UsageError("--warmup must be >= 0, and --k, --rtol and --margin-sd positive")
