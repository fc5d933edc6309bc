"""The check of a migrated file (compare.migrate.output_check): a source read once (its tree, positions,
parents and scopes), and what the check finds in it."""

from __future__ import annotations

import dataclasses

import libcst as cst
from libcst.metadata import GlobalScope, MetadataWrapper, ParentNodeProvider, PositionProvider, Scope, ScopeProvider

from compare.migrate.syntax import shortened


@dataclasses.dataclass(frozen=True)
class Finding:
    line: int       # in the migrated source (0: the file as a whole)
    category: str
    code: str       # the result's line, shortened
    why: str


class Parsed:
    """One source: its tree, positions, parents and scopes (all read once)."""

    def __init__(self, source: str):
        self.wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)  # parsed here alone
        self.module = self.wrapper.module
        self.lines = source.splitlines()
        self.positions = self.wrapper.resolve(PositionProvider)
        self.parents = self.wrapper.resolve(ParentNodeProvider)
        self.scopes = self.wrapper.resolve(ScopeProvider)

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def code(self, line: int) -> str:
        return shortened(self.lines[line - 1]) if 0 < line <= len(self.lines) else ""

    def finding(self, node: cst.CSTNode | int, category: str, why: str) -> Finding:
        line = node if isinstance(node, int) else self.line(node)
        return Finding(line, category, self.code(line), why)

    def all_scopes(self) -> list[Scope]:
        return list({id(s): s for s in self.scopes.values() if s is not None}.values())


def scope_key(scope: Scope) -> str:
    """A scope's path of names ('' for the module, '/train' for a function train): the same in the original and
    the result where the rewrite kept the function."""
    if isinstance(scope, GlobalScope) or scope.parent is scope:
        return ""
    name = getattr(scope, "name", None) or type(getattr(scope, "node", scope)).__name__
    return f"{scope_key(scope.parent)}/{name}"
