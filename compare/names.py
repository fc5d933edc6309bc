"""The names and numbers every part of `compare/` shares: the exit status and the parity outcome (each an enum
with its words), what starts a migrated script's workers, the frameworks and their display names."""

from __future__ import annotations

from enum import IntEnum, StrEnum

from workload import errors
from workload.optionspec import FRAMEWORK_NAMES


class Exit(IntEnum):
    """The exit status of every `python -m compare` command; `words` says what it means (`--help` lists them)."""

    OK = 0
    PARITY_FAILS = 1
    USAGE = errors.EXIT_USAGE  # the implementations exit 2 on bad input too (workload/errors.py)
    RUN_FAILED = 3
    UNDECIDED = 4
    DIFFERENT_JOBS = 5
    NEEDS_A_PERSON = 6
    INTERRUPTED = 130  # the shell's convention for Ctrl-C (128 + SIGINT)
    PIPE_CLOSED = 141  # the shell's convention for a reader that went away (128 + SIGPIPE): `| head`

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
    Exit.PIPE_CLOSED: "the reader of the output went away (piped into head): stopped quietly",
}


class Parity(StrEnum):
    """The parity outcome of compare/analysis/judge.py (ParityVerdict.outcome). A StrEnum: report.json holds its
    value ("holds"), which Parity(text) reads back."""

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


class LaunchedBy(StrEnum):
    """What starts a Horovod script's workers, as its users run it (compare/verify/launch_mode.py decides), and so
    what starts its migration's: the value is the word `compare migrate --launch-mode` takes."""

    CLI = "cli"  # horovodrun, and torchrun for the migration
    API = "api"  # the script itself: horovod.run (torch.multiprocessing.spawn), Ray, Spark


FRAMEWORKS = tuple(FRAMEWORK_NAMES)  # the two sides of every comparison: ("horovod", "ddp")
JUDGED = (*FRAMEWORKS, "reference")  # everything a comparison may hold records of
DISPLAY = {**FRAMEWORK_NAMES, "reference": "reference"}
MODULES = {"horovod": "hvd_impl", "ddp": "native_impl", "reference": "workload.reference"}


def display(framework: str) -> str:
    return DISPLAY.get(framework, framework)
