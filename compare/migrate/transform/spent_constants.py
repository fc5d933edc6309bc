"""A constant that only told a loader which Horovod module to load (`BACKEND_MODULE = "horovod.torch"`) removed
from the result, over its tree, where nothing else names it: the loader is migrated, and the constant would be a
leftover Horovod name. The comments and blank lines above it stay where they were."""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from compare.migrate.read.line_map import LineMap, positions_of, tracked_visit

HOROVOD_MODULE_TEXT = re.compile(r"horovod[\w.]*", re.IGNORECASE)  # a string literal's text: horovod, horovod.torch


def _spent(statement: cst.BaseStatement, names: set[str]) -> str | None:
    """The name a statement `NAME = "horovod..."` binds (alone on its line), if it is one of `names`."""
    if not m.matches(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name())],
                                                                     value=m.SimpleString())])):
        return None
    assign = statement.body[0]  # type: ignore[attr-defined]
    name, value = assign.targets[0].target.value, assign.value
    return name if name in names and value.prefix == "" and value.quote in ('"', "'") and \
        HOROVOD_MODULE_TEXT.fullmatch(value.raw_value) else None


class _Remover(cst.CSTTransformer):
    """The statements given removed; what stood above each joins the next statement (or the block's end)."""

    def __init__(self, statements: list[cst.BaseStatement]):
        super().__init__()
        self.statements = {id(statement) for statement in statements}

    def _body(self, original: tuple[cst.BaseStatement, ...], updated: tuple[cst.BaseStatement, ...],
              ) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
        kept: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for before, statement in zip(original, updated, strict=True):
            if id(before) in self.statements:
                carried += statement.leading_lines  # type: ignore[attr-defined]
                continue
            if carried:
                statement = statement.with_changes(leading_lines=[*carried, *statement.leading_lines])
                carried = []
            kept.append(statement)
        return kept, carried

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body, carried = self._body(original_node.body, updated_node.body)
        return updated_node.with_changes(body=body, footer=[*carried, *updated_node.footer])

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock,
                            ) -> cst.IndentedBlock:
        body, carried = self._body(original_node.body, updated_node.body)
        return updated_node.with_changes(body=body, footer=[*carried, *updated_node.footer])


def without_spent_constants(code: str, spent: set[str]) -> tuple[str, list[tuple[int, str]], LineMap]:
    """The code without the constants of `spent` that are named once (their own binding), each alone on its line
    in a block it does not leave empty; each removed statement's line in `code` and text, in the order they were
    written; the map of its lines."""
    module = cst.parse_module(code)
    once = {name for name in spent if len(m.findall(module, m.Name(name))) == 1}
    if not once:
        return code, [], LineMap()
    # a statement alone in its block stays: the block would be left empty
    shared = {id(statement) for block in [module, *m.findall(module, m.IndentedBlock())]
              if len(block.body) > 1 for statement in block.body}  # type: ignore[attr-defined]
    found = [statement for statement in m.findall(module, m.SimpleStatementLine())  # in the order written
             if id(statement) in shared and _spent(statement, once) is not None]
    if not found:
        return code, [], LineMap()
    empty = cst.Module([])
    positions = positions_of(module)
    new, lines = tracked_visit(module, _Remover(found), positions)
    removed = [(positions[statement].start.line, empty.code_for_node(statement.with_changes(leading_lines=())).strip())
               for statement in found]
    return new.code, removed, lines
