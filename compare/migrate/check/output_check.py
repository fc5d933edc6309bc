"""The check of a whole migrated file, after the rewrite: what the result does that the original did not, or
what it still does that only Horovod allowed.

`check_output(original, migrated)` is pure (two source texts in, findings out), so a caller that migrates
many files checks each the same way. Each finding is a line of the result and what to look at there:
    unbound name         a name the result reads that nothing binds (and the original bound), in any scope
    shadowed name        a name that now resolves to another binding than in the original (an added import or
                         helper over the script's own name, or the reverse), or is bound twice by imports/defs
    horovod left         an import of horovod, a "horovod..." module name in a string (import_module,
                         __import__), a HOROVOD_* variable: only horovodrun sets those
    model not wrapped    parameters given to an optimizer, of a model never wrapped in DDP, in a script whose
                         Horovod optimizer averaged gradients
    bypasses DDP         a wrapped model trained through a method other than forward, or (where the wrapper has
                         a name of its own) a forward of the model itself whose result is back-propagated: DDP's
                         hooks never run
    wrapper attribute    an attribute of the model read on the DDP wrapper, which has none of them
    DDP before amp       apex's amp.initialize after the DDP wrap of its model (it raises)
    module off the wrap  model.module where the model is wrapped under a condition the use is not under
    rank-only collective a collective (or a function that makes one) under a rank condition: the other ranks
                         never reach it, and the job hangs (an if/else making the same calls is fine)
    CPU tensor on NCCL   a collective of a tensor made on the CPU, where the script asks for NCCL
output_names.py holds the first three, output_ddp.py the rest, read/parsed.py the source they read.
LibCST's ScopeProvider resolves the names; nothing is imported or run. ruff's F821/F811 are the static rules
this follows, without needing ruff at run time.
"""

from __future__ import annotations

import libcst as cst

from compare.migrate.check.output_ddp import check_collectives, check_models
from compare.migrate.check.output_names import check_horovod_left, check_names
from compare.migrate.plan.migration import Flag
from compare.migrate.read.flag_category import Category
from compare.migrate.read.line_map import LineMap
from compare.migrate.read.parsed import Finding, Parsed

__all__ = ["Finding", "check_output", "checked_flags"]


def check_output(original: str, migrated: str, before: Parsed | None = None, after: Parsed | None = None,
                 ) -> list[Finding]:
    """Everything the result does that the original did not, or still does that only Horovod allowed. `before`
    and `after`: the original and the result already read (the rewrite read both), else they are read here."""
    try:
        result = after or Parsed(migrated)
    except cst.ParserSyntaxError as exc:
        return [Finding(exc.raw_line, Category.NOT_PYTHON, "", f"the result does not parse: {exc.message}")]
    if before is None:
        try:
            before = Parsed(original)
        except cst.ParserSyntaxError:
            before = Parsed("")
    try:
        findings = [*check_names(before, result), *check_horovod_left(result), *check_models(before, result),
                    *check_collectives(result)]
    except Exception as exc:  # a shape the check does not know: said, never taken for "nothing found"
        return [Finding(0, Category.CHECK_FAILED,
                        "", f"the check of the whole output could not run ({type(exc).__name__}: "
                                               f"{exc}): review the result by hand")]
    unique = {(f.line, f.category, f.why): f for f in findings}
    return sorted(unique.values(), key=lambda f: (f.line, f.category))


def checked_flags(original: str, migrated: str, flags: list[Flag], lines: LineMap, before: Parsed | None = None,
                  after: Parsed | None = None) -> list[Flag]:
    """The check's findings as flags of the migration, each at its original line where the result's line came
    from one (0 where it is new), beside the flags the rewrite raised. A Horovod import the rewrite kept because
    a flagged use needs it, and what is left on a flagged line, are already told: not told twice. `lines`: the
    original's lines -> the result's, as the rewrite placed them."""
    flagged = {flag.line for flag in flags}
    out = []
    for finding in check_output(original, migrated, before, after):
        line = lines.old_line(finding.line) or 0  # 0: a line the rewrite added
        if finding.category == Category.HOROVOD_LEFT and flags and (line in flagged or finding.code.startswith(
                ("import horovod", "from horovod"))):
            continue
        out.append(Flag(line, finding.category, finding.code, finding.why, result_line=finding.line))
    return out
