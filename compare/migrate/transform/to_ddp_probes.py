"""Pass 2, probes: `try: import horovod.torch as hvd` / `except ImportError: hvd = None` asked "can this run as a
Horovod job?", and the repository's single-process path (`python train.py cfg.yaml`) is its `except` side. After
the migration the question is "is this a torch.distributed job?" (torchrun sets WORLD_SIZE): an `if` on that, its
body the probe's with each Horovod name bound to torch.distributed, its `else` the probe's fallback. Every test the
repository makes of the name (`hvd is not None`, `if hvd:`, `HAS_HOROVOD`) answers the same way as before.

A probe in a repository that also has a torch.distributed path of its own is removed instead (switches.py).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from compare.migrate.plan.switches import probe_aliases_of
from compare.migrate.read import notes
from compare.migrate.read.syntax import parse_expr, parse_stmt
from compare.migrate.transform.to_ddp_base import RewriteBase

JOB_TEST = 'dist.is_available() and "WORLD_SIZE" in os.environ'


class ProbeRewrites(RewriteBase):
    """A Horovod availability probe -> a test of whether torchrun started this process."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.probe_bound: set[str] = set()  # names a probe now binds to torch.distributed: no Horovod name

    def leave_Try(self, original: cst.Try, updated: cst.Try) -> cst.BaseStatement:
        aliases = probe_aliases_of(original)
        if not aliases or original.orelse is not None or original.finalbody is not None or \
                len(original.handlers) != 1 or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        if len(original.body.body) != len(updated.body.body):  # type: ignore[union-attr]
            return updated  # a statement of it removed (`import horovod`): left as it is, and flagged as a use
        body: list[cst.BaseStatement] = []
        for before, statement in zip(original.body.body, updated.body.body, strict=True):  # type: ignore[union-attr]
            if m.matches(before, m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])):
                bound = [name for name in sorted(aliases) if name in _imported_names(before)]  # type: ignore[arg-type]
                body += [parse_stmt(f"{name} = dist\n").with_changes(leading_lines=statement.leading_lines)
                         for name in bound]
                if not bound:
                    body.append(statement)
            else:
                body.append(statement)
        if not body:
            return updated
        self.probe_bound |= aliases
        self.need("os")
        self.need("torch.distributed", asname="dist")
        self.note(original, f"if {JOB_TEST}: {', '.join(sorted(aliases))} = dist  else: (its except block)",
                  notes.PROBE)
        handler = updated.handlers[0]
        return cst.If(test=parse_expr(JOB_TEST), body=updated.body.with_changes(body=body),
                      orelse=cst.Else(body=handler.body, leading_lines=handler.leading_lines),
                      leading_lines=updated.leading_lines)


def _imported_names(statement: cst.SimpleStatementLine) -> set[str]:
    node = statement.body[0]
    names = node.names if isinstance(node, (cst.Import, cst.ImportFrom)) else ()
    if not isinstance(names, (list, tuple)):
        return set()
    return {(alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name)  # type: ignore[union-attr]
             else cst.Module([]).code_for_node(alias.name).split(".")[0]) for alias in names}

