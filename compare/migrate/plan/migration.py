"""What a migration gives back: the rewritten code, every change and what needs a person."""

from __future__ import annotations

import dataclasses

from compare.migrate.plan.launch_facts import LaunchFacts
from compare.migrate.read.flag_category import Category
from compare.migrate.read.line_map import LineMap


class NotMigratable(Exception):
    """The input is not a Horovod PyTorch script this tool can read (one line)."""


@dataclasses.dataclass
class Change:
    line: int          # in the original
    before: str        # the original code (one line, shortened)
    after: str         # what it became ("" when removed)
    note: str          # why it is equivalent, or in what it is not
    new_line: int | None = None  # in the result; filled in by the report from the migration's line map


@dataclasses.dataclass
class Flag:
    line: int
    category: Category
    code: str
    why: str
    result_line: int | None = None  # where the check of the whole output found it, in the result


@dataclasses.dataclass
class Migration:
    source: str
    code: str
    changes: list[Change]
    flags: list[Flag]
    has_sync_batchnorm: bool = False
    lightning: bool = False  # a Horovod-driven Lightning Trainer: the original cannot run under Lightning 2
    front_end: str | None = None  # what starts the workers instead of torchrun ("Ray Train's TorchTrainer")
    checked: bool = False  # the whole output went through compare.migrate.check.output_check (its findings are flags)
    launch: LaunchFacts = dataclasses.field(default_factory=LaunchFacts)  # how the original is launched
    # the source's lines -> the code's, and back, as the passes placed them
    lines: LineMap = dataclasses.field(default_factory=LineMap)
