"""A source read once (its tree, positions, parents, scopes and nodes by type): what pass 1 of the rewrite reads
(compare.migrate.plan.uses_base), and what the check of a migrated file (compare.migrate.check.output_check) reads
of the original and of the result, and what the check finds in it."""

from __future__ import annotations

import dataclasses
import heapq
from bisect import bisect_left

import libcst as cst
import libcst.matchers as m
from libcst.metadata import GlobalScope, MetadataWrapper, PositionProvider, Scope, ScopeProvider

from compare.migrate.read.flag_category import Category
from compare.migrate.read.syntax import NoAttributeHooks, shortened


@dataclasses.dataclass(frozen=True)
class Finding:
    line: int       # in the migrated source (0: the file as a whole)
    category: Category
    code: str       # the result's line, shortened
    why: str


class NodeIndex(NoAttributeHooks, cst.CSTVisitor):
    """One walk of a tree: each node's parent, and the nodes of each type in the order LibCST visits them (what
    m.findall returns), so that a question about the tree is a lookup instead of another walk of it."""

    def __init__(self, tree: cst.CSTNode):
        super().__init__()
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self._of_type: dict[type, list[tuple[int, cst.CSTNode]]] = {}  # type -> (walk number, node), in order
        self._span: dict[int, tuple[int, int]] = {}  # id(node) -> its number and the one after its last descendant
        self._walked = 0
        self._open: list[cst.CSTNode] = []
        tree.visit(self)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._open:
            self.parents[node] = self._open[-1]
        self._of_type.setdefault(type(node), []).append((self._walked, node))
        self._span[id(node)] = (self._walked, 0)
        self._walked += 1
        self._open.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._open.pop()
        self._span[id(original_node)] = (self._span[id(original_node)][0], self._walked)

    def findall(self, matcher: m.BaseMatcherNode | m.OneOf, within: cst.CSTNode | None = None,
                ) -> list[cst.CSTNode]:
        """m.findall(within or the whole tree, matcher), from the index: `within` is a node of this tree."""
        kinds = matcher.options if isinstance(matcher, m.OneOf) else (matcher,)
        found = [self._numbered(getattr(cst, type(kind).__name__), within) for kind in kinds]
        ordered = found[0] if len(found) == 1 else list(heapq.merge(*found, key=_number))
        return [node for _, node in ordered if m.matches(node, matcher)]

    def _numbered(self, kind: type, within: cst.CSTNode | None) -> list[tuple[int, cst.CSTNode]]:
        numbered = self._of_type.get(kind, [])
        if within is None:
            return numbered
        first, after = self._span[id(within)]  # a node's descendants follow it in the walk, before `after`
        return numbered[bisect_left(numbered, first, key=_number):bisect_left(numbered, after, key=_number)]


def _number(pair: tuple[int, cst.CSTNode]) -> int:
    return pair[0]


class Parsed:
    """One source: its tree, positions, parents, scopes and nodes by type (all read once)."""

    def __init__(self, source: str):
        self.wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)  # parsed here alone
        self.module = self.wrapper.module
        self.lines = source.splitlines()
        self.positions = self.wrapper.resolve(PositionProvider)
        self.scopes = self.wrapper.resolve(ScopeProvider)
        self.index = NodeIndex(self.module)
        self.parents = self.index.parents

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def code(self, line: int) -> str:
        return shortened(self.lines[line - 1]) if 0 < line <= len(self.lines) else ""

    def findall(self, matcher: m.BaseMatcherNode | m.OneOf, within: cst.CSTNode | None = None,
                ) -> list[cst.CSTNode]:
        return self.index.findall(matcher, within)

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        """The nearest ancestor of `node` of type `kind` (a function, a class), or None at module level."""
        while node is not self.module:
            node = self.parents[node]
            if isinstance(node, kind):
                return node
        return None

    def finding(self, node: cst.CSTNode | int, category: Category, why: str) -> Finding:
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
