"""The names and numbers every part of `compare/` shares: the exit status and the parity outcome (each an enum
with its words), the frameworks and their display names."""

from __future__ import annotations

from enum import IntEnum, StrEnum

from workload.errors import EXIT_USAGE as USAGE_EXIT
from workload.optionspec import FRAMEWORK_NAMES


class Exit(IntEnum):
    """The exit status of every `python -m compare` command; `words` says what it means (`--help` lists them)."""

    OK = 0
    PARITY_FAILS = 1
    USAGE = USAGE_EXIT  # the implementations exit 2 on bad input too (workload/errors.py)
    RUN_FAILED = 3
    UNDECIDED = 4
    DIFFERENT_JOBS = 5
    NEEDS_A_PERSON = 6
    INTERRUPTED = 130  # the shell's convention for Ctrl-C (128 + SIGINT)

    @property
    def words(self) -> str:
        return _EXIT_WORDS[self]


_EXIT_WORDS = {
    Exit.OK: "parity holds (and the runs ended well); migrate: migrated",
    Exit.PARITY_FAILS: "parity fails: the two sides do not train the same",
    Exit.USAGE: "usage or input error: one line on stderr",
    Exit.RUN_FAILED: "a launch or a recorded run failed",
    Exit.UNDECIDED: 'undecided: the evidence cannot decide (never read as "holds")',
    Exit.DIFFERENT_JOBS: "the two sides are not the same job (options, data, world size...)",
    Exit.NEEDS_A_PERSON: "compare migrate: written, but Horovod uses with no DDP equivalent were flagged "
                         "(--allow-partial: 0)",
    Exit.INTERRUPTED: "interrupted (Ctrl-C)",
}

# The module-level names other modules import (plain ints to every caller: an IntEnum compares and exits as one).
EXIT_OK, EXIT_PARITY_FAILS, EXIT_USAGE, EXIT_RUN_FAILED = Exit.OK, Exit.PARITY_FAILS, Exit.USAGE, Exit.RUN_FAILED
EXIT_UNDECIDED, EXIT_DIFFERENT_JOBS, EXIT_NEEDS_A_PERSON = Exit.UNDECIDED, Exit.DIFFERENT_JOBS, Exit.NEEDS_A_PERSON
EXIT_INTERRUPTED = Exit.INTERRUPTED
EXIT_MEANINGS = {code: code.words for code in Exit}


class Parity(StrEnum):
    """The parity outcome of compare/analysis/judge.py. A StrEnum: equal to its value, so records that hold the
    bare string ("holds") and code that compares with it read the same."""

    HOLDS = "holds"
    FAILS = "fails"
    UNDECIDED = "undecided"
    DIFFERENT_JOBS = "different jobs"

    @property
    def words(self) -> str:
        return "different jobs" if self is Parity.DIFFERENT_JOBS else f"parity {self.value}"

    @property
    def exit(self) -> Exit:
        return _PARITY_EXIT[self]


_PARITY_EXIT = {Parity.HOLDS: Exit.OK, Parity.FAILS: Exit.PARITY_FAILS, Parity.UNDECIDED: Exit.UNDECIDED,
                Parity.DIFFERENT_JOBS: Exit.DIFFERENT_JOBS}
PARITY_EXIT = {outcome.value: outcome.exit for outcome in Parity}  # a judged outcome, as text, -> its exit status

FRAMEWORKS = tuple(FRAMEWORK_NAMES)  # the two sides of every comparison: ("horovod", "ddp")
JUDGED = (*FRAMEWORKS, "reference")  # everything a comparison may hold records of
DISPLAY = {**FRAMEWORK_NAMES, "reference": "reference"}
MODULES = {"horovod": "hvd_impl", "ddp": "native_impl", "reference": "workload.reference"}


def display(framework: str) -> str:
    return DISPLAY.get(framework, framework)
