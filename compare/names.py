"""The names and numbers every part of `compare/` shares: exit codes, frameworks and their display names."""

from __future__ import annotations

from workload.errors import EXIT_USAGE as USAGE_EXIT
from workload.optionspec import FRAMEWORK_NAMES

# Exit status of every `python -m compare` command; EXIT_MEANINGS says what each means (and `--help` shows it).
EXIT_OK = 0
EXIT_PARITY_FAILS = 1
EXIT_USAGE = USAGE_EXIT  # the implementations exit 2 on bad input too (workload/errors.py)
EXIT_RUN_FAILED = 3
EXIT_UNDECIDED = 4
EXIT_DIFFERENT_JOBS = 5
EXIT_NEEDS_A_PERSON = 6
EXIT_INTERRUPTED = 130  # the shell's convention for Ctrl-C (128 + SIGINT)
EXIT_MEANINGS = {
    EXIT_OK: "parity holds (and the runs ended well)",
    EXIT_PARITY_FAILS: "parity fails: the two sides do not train the same",
    EXIT_USAGE: "usage or input error: one line on stderr",
    EXIT_RUN_FAILED: "a launch or a recorded run failed",
    EXIT_UNDECIDED: 'undecided: the evidence cannot decide (never read as "holds")',
    EXIT_DIFFERENT_JOBS: "the two sides are not the same job (options, data, world size...)",
    EXIT_NEEDS_A_PERSON: "compare migrate: Horovod uses with no DDP equivalent were flagged",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}

# The parity outcome of compare/analysis/judge.py, as an exit status.
PARITY_EXIT = {"holds": EXIT_OK, "fails": EXIT_PARITY_FAILS, "undecided": EXIT_UNDECIDED,
               "different jobs": EXIT_DIFFERENT_JOBS}

FRAMEWORKS = tuple(FRAMEWORK_NAMES)  # the two sides of every comparison: ("horovod", "ddp")
JUDGED = (*FRAMEWORKS, "reference")  # everything a comparison may hold records of
DISPLAY = {**FRAMEWORK_NAMES, "reference": "reference"}
MODULES = {"horovod": "hvd_impl", "ddp": "native_impl", "reference": "workload.reference"}


def display(framework: str) -> str:
    return DISPLAY.get(framework, framework)
