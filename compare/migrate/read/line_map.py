"""Which line of a pass's result each line of its input became, and back, as the pass itself knows it: a LibCST
transform is walked with every statement it leaves or replaces recorded (tracked_visit), each statement's place
read in the input and in the output tree, so two identical lines are never taken for each other as a text diff
would. A file's passes compose (`a.then(b)`); the migration carries the composition (Migration.lines).

A line is owned by the node that starts it: a simple statement (all its lines), a compound statement's header
(up to its colon), an else/except/finally/case clause's, a decorator, a blank or comment line. What a pass adds
(helpers, imports, a `pass`) has no original line; what it removes has no new one.

A node the pass left is found in the output as itself, or as a copy with other fields alone changed (a block
that moves the comments of a removed statement onto the next one: the copy holds the same body). A transformer
that puts statements in another's place when it leaves the enclosing block, not the statement itself, says so in
`expand` (id(the node it left) -> (that node, the statements put in its place)); the node's lines go to the first
of those, and each of them comes from the node's lines. A node replaced by what the walk left for another (an `if`
by its `elif`) goes to it, and it comes from its own lines."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

TRACKED = (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler,
           cst.Finally, cst.MatchCase, cst.Decorator, cst.EmptyLine)
HEADED = (cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)

Span = tuple[int, int]  # first and last line, both included


@dataclasses.dataclass(frozen=True)
class _Step:
    """One pass: its input's lines -> its output's, and back. From `same_from` (input line, output line) on, the
    text is the pass's input as it was, shifted (the rest of a file after the block a pass rewrote)."""

    forward: Mapping[int, int | None]
    backward: Mapping[int, int | None]
    same_from: tuple[int, int] | None = None

    def new_line(self, line: int) -> int | None:
        if self.same_from is not None and line >= self.same_from[0]:
            return line + self.same_from[1] - self.same_from[0]
        return self.forward.get(line)

    def old_line(self, line: int) -> int | None:
        if self.same_from is not None and line >= self.same_from[1]:
            return line + self.same_from[0] - self.same_from[1]
        return self.backward.get(line)

    def inverse(self) -> _Step:
        return _Step(self.backward, self.forward, self.same_from[::-1] if self.same_from else None)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class LineMap:
    """A file's lines before some passes -> after them, and back (None: removed, or added). No step: the same
    lines (a pass that changes no line's place: a rename, a quote)."""

    steps: tuple[_Step, ...] = ()

    def new_line(self, line: int) -> int | None:
        """The output's line that the input's `line` became (None: removed)."""
        found: int | None = line
        for step in self.steps:
            if found is None:
                return None
            found = step.new_line(found)
        return found

    def old_line(self, line: int) -> int | None:
        """The input's line that the output's `line` came from (None: added by a pass)."""
        found: int | None = line
        for step in reversed(self.steps):
            if found is None:
                return None
            found = step.old_line(found)
        return found

    def then(self, after: LineMap) -> LineMap:
        """This map, then `after` (a map of this one's output)."""
        return LineMap(self.steps + after.steps)

    def inverse(self) -> LineMap:
        return LineMap(tuple(step.inverse() for step in reversed(self.steps)))

    @classmethod
    def head_then_same(cls, head: LineMap, same_from: tuple[int, int]) -> LineMap:
        """`head` for the lines before `same_from` (input line, output line); from there on, the same text."""
        if len(head.steps) > 1:
            raise ValueError("a head of one step")
        step = head.steps[0] if head.steps else _Step({}, {})
        return cls((_Step(step.forward, step.backward, same_from),))


def _owned(node: cst.CSTNode, positions: Mapping[cst.CSTNode, CodeRange]) -> Span | None:
    """The lines `node` owns (see the module's docstring), or None where it is not in the tree."""
    where = positions.get(node)
    if where is None:
        return None
    start = where.start.line
    if isinstance(node, cst.EmptyLine):
        return start, start
    if isinstance(node, HEADED):
        body = getattr(node, "body", None)
        # what follows the colon: a block's header, a one-line suite; a match statement's cases have no body
        after_colon = body.header if isinstance(body, cst.IndentedBlock) else body if body is not None else getattr(
            node, "whitespace_after_colon", None)
        colon = positions.get(after_colon) if after_colon is not None else None
        return start, colon.start.line if colon is not None else start
    return start, where.end.line


def _content(node: cst.CSTNode) -> int:
    """What a copy of a tracked node made by with_changes of its other fields still holds: its body (a
    statement, a clause), its expression (a decorator), or itself (a blank or comment line)."""
    return id(getattr(node, "body", None) or getattr(node, "decorator", None) or node)


def _within(original: cst.CSTNode, old: Span, result: cst.CSTNode, new: Span,
            ) -> tuple[dict[int, int], dict[int, int]]:
    """Within a simple statement whose length a pass changed (a call given arguments before its own), its lines
    -> the result's and back, as a diff of the two statements alone matches them: a line added or removed goes to
    the line before it. Empty where the lengths are the same (the same offset holds) or for other nodes."""
    if not isinstance(original, cst.SimpleStatementLine) or not isinstance(result, cst.SimpleStatementLine) or \
            old[1] - old[0] == new[1] - new[0]:
        return {}, {}
    a, b = ([line.strip() for line in cst.Module([]).code_for_node(node.with_changes(leading_lines=())).splitlines()]
            for node in (original, result))
    if len(a) != old[1] - old[0] + 1 or len(b) != new[1] - new[0] + 1:
        return {}, {}
    forward: dict[int, int] = {}
    backward: dict[int, int] = {}
    for _, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():  # equal, replace:
        for i in range(i1, i2):  # line by line
            forward[old[0] + i] = new[0] + (j1 + min(i - i1, j2 - j1 - 1) if j2 > j1 else max(j1 - 1, 0))
        for j in range(j1, j2):
            backward[new[0] + j] = old[0] + (i1 + min(j - j1, i2 - i1 - 1) if i2 > i1 else max(i1 - 1, 0))
    return forward, backward


def _step(left: Sequence[tuple[cst.CSTNode, object]], before: Mapping[cst.CSTNode, CodeRange],
          after: Mapping[cst.CSTNode, CodeRange],
          expand: Mapping[int, tuple[cst.CSTNode, Sequence[cst.CSTNode]]]) -> _Step:
    """Each input node's lines -> the lines of what the pass left in its place (a line within a simple statement
    whose length changed: as the two statements' lines match; else the same offset, or the last line), and back.
    A statement put in another's place (a block for a call) comes back whole from that one's lines, but for the
    nodes within it, or itself, that the pass left (a branch's statements in the place of the `if` that held
    them): those come back from their own."""
    # whose result holds each content: a node the walk left first (the walk leaves children first), so that a
    # parent that returns a child's result (an `elif` made the `if`) puts it in its place, not itself
    holder: dict[int, cst.CSTNode] = {}
    for original, result in left:
        if isinstance(result, cst.CSTNode):
            holder.setdefault(_content(result), original)
    copies: dict[int, cst.CSTNode] = {}
    for node in after:
        if isinstance(node, TRACKED):
            copies.setdefault(_content(node), node)

    def found(node: cst.CSTNode) -> cst.CSTNode | None:
        return node if node in after else copies.get(_content(node))

    # the input's lines, the output's, those that come back, whether they come back as put in its place, and the
    # lines within a statement that changed length, matched (input -> output, and back)
    pairs: list[tuple[Span, Span | None, Span | None, bool, tuple[dict[int, int], dict[int, int]]]] = []
    for original, result in left:
        old = _owned(original, before)
        if old is None:
            continue
        if isinstance(result, cst.RemovalSentinel):
            pairs.append((old, None, None, False, ({}, {})))
            continue
        flattened = isinstance(result, cst.FlattenSentinel)
        nodes: list[tuple[cst.CSTNode, bool]] = []  # each, and whether it was put in the original's place
        for node in result.nodes if flattened else [result]:  # type: ignore[attr-defined]
            held, put = expand.get(id(node), (None, ()))
            itself = (node, flattened or type(node) is not type(original)  # (a call -> a loop: put in its place)
                      or holder.get(_content(node), original) is not original)
            nodes += [*((n, True) for n in put), itself] if held is node else [itself]
        for node, put_in_place in nodes:
            if (there := found(node)) is not None and (new := _owned(there, after)) is not None:
                whole = after[there]
                pairs.append((old, new, (whole.start.line, whole.end.line) if put_in_place else new, put_in_place,
                              ({}, {}) if put_in_place else _within(original, old, there, new)))
    forward: dict[int, int | None] = {}
    backward: dict[int, int | None] = {}
    # The larger spans first: a comment line within a statement's brackets is its own. Of the several statements
    # one was replaced by, the first holds its line.
    for old, new, _, _, kept in sorted(pairs, key=lambda p: (p[0][0] - p[0][1], -p[1][0] if p[1] else 0)):
        for line in range(old[0], old[1] + 1):
            forward[line] = None if new is None else kept[0].get(line, new[0] + min(line - old[0], new[1] - new[0]))
    # Back: the larger spans first, and of equal spans what was put in a place before what the pass left itself.
    for old, _, back, _, kept in sorted([p for p in pairs if p[2] is not None],
                                        key=lambda p: (p[2][0] - p[2][1], not p[3])):
        for line in range(back[0], back[1] + 1):  # type: ignore[index]
            backward[line] = kept[1].get(line, old[0] + min(line - back[0], old[1] - old[0]))  # type: ignore[index]
    return _Step(forward, backward)


class _Tracking(cst.CSTTransformer):
    """A transformer's walk, with what it left for each tracked node."""

    def __init__(self, inner: cst.CSTTransformer):
        super().__init__()
        self.inner = inner
        self.left: list[tuple[cst.CSTNode, object]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return self.inner.on_visit(node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.inner.on_visit_attribute(node, attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.inner.on_leave_attribute(original_node, attribute)

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def]
        result = self.inner.on_leave(original_node, updated_node)
        if isinstance(original_node, TRACKED):
            self.left.append((original_node, result))
        return result


def positions_of(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def tracked_visit(tree: cst.Module | MetadataWrapper, transformer: cst.CSTTransformer,
                  positions: Mapping[cst.CSTNode, CodeRange] | None = None) -> tuple[cst.Module, LineMap]:
    """`tree.visit(transformer)` (a MetadataWrapper: with the transformer's metadata resolved on it), and the
    map of its lines. `positions`: the input's, where the caller has read them."""
    tracking = _Tracking(transformer)
    if isinstance(tree, MetadataWrapper):
        with transformer.resolve(tree):
            new = tree.module.visit(tracking)
        before = positions or tree.resolve(PositionProvider)
    else:
        new = tree.visit(tracking)
        before = positions or positions_of(tree)
    return new, LineMap((_step(tracking.left, before, positions_of(new), getattr(transformer, "expand", {})),))
