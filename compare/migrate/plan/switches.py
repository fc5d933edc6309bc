"""A repository that already has a torch.distributed path beside its Horovod one (`--horovod` beside
`--distributed`, an availability probe `try: import horovod.torch as hvd except ImportError: hvd = None`): the
Horovod path is removed rather than rewritten into a second DDP path.

- the probe becomes what it says where Horovod is absent: its `except` block (`hvd = None`, `HAS_HOROVOD =
  False`), so every check the repository makes of it answers "not installed";
- in each branch that a Horovod switch guards (an `if` whose test names horovod: `args.horovod`, `HAS_HOROVOD`,
  `backend == "horovod"`), the statements that use Horovod go; a branch left empty goes, its `elif`/`else` kept;
- the branch that initialised Horovod refuses the switch with a clear message, unless the repository's own
  check (`if not HAS_HOROVOD: raise SystemExit(...)`) already does.

Applied only where every Horovod use of the repository lies inside such branches: otherwise the Horovod code is
the job, and the rewrite migrates it.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.read.horovod_api import is_horovod_module
from compare.migrate.read.line_map import LineMap, tracked_visit

REFUSAL = ("--horovod: this code was migrated from Horovod to torch.distributed (compare migrate); launch it with "
           "torchrun and its torch.distributed option instead")


@dataclasses.dataclass(frozen=True)
class Removed:
    line: int
    before: str
    after: str
    why: str


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in m.findall(node, m.Name())}


def is_switch(test: cst.BaseExpression) -> bool:
    """An `if` test that asks whether Horovod is chosen or present."""
    words = {w.lower() for w in _names(test)} | {
        str(s.evaluated_value).lower() for s in m.findall(test, m.SimpleString())}
    words |= {a.attr.value.lower() for a in m.findall(test, m.Attribute())}
    return any("horovod" in word for word in words)


def probe_aliases_of(statement: cst.CSTNode) -> set[str] | None:
    """The names a `try: import horovod... except ImportError:` binds to Horovod, else None."""
    if not isinstance(statement, cst.Try) or not statement.handlers:
        return None
    imports = [n for n in m.findall(statement.body, m.Import() | m.ImportFrom())]
    bound: set[str] = set()
    for node in imports:
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = get_full_name_for_node(alias.name) or ""
                if is_horovod_module(name):
                    bound.add(get_full_name_for_node(alias.asname.name) if alias.asname else name.split(".")[0])  # type: ignore[arg-type]
        elif not node.relative and is_horovod_module(get_full_name_for_node(node.module)) and isinstance(node.names,
                                                                                                (list, tuple)):
            bound |= {get_full_name_for_node(a.asname.name if a.asname else a.name) or "" for a in node.names}
    caught = {get_full_name_for_node(h.type) for h in statement.handlers if h.type is not None}
    return bound if bound and caught & {"ImportError", "ModuleNotFoundError", "Exception"} else None


def horovod_only_in_switches(module: cst.Module, aliases: set[str]) -> bool:
    """Every use of the Horovod names lies in a probe or in a branch a switch guards."""
    class Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.depth = 0
            self.outside = False

        def visit_Try(self, node: cst.Try) -> bool:
            return probe_aliases_of(node) is None

        def visit_If(self, node: cst.If) -> bool | None:
            if is_switch(node.test):
                node.orelse.visit(self) if node.orelse is not None else None
                return False
            return None

        def visit_Name(self, node: cst.Name) -> None:
            if node.value in aliases:
                self.outside = True

        def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
            return False  # `from dist_utils import hvd` is not a use

        def visit_Assign(self, node: cst.Assign) -> bool:
            # `HAS_HOROVOD = hvd is not None`: the probe's answer, which stays true to it
            return not m.matches(node.value, m.Comparison(left=m.Name(), comparisons=[m.ComparisonTarget(
                operator=m.Is() | m.IsNot(), comparator=m.Name("None"))]))

    finder = Finder()
    module.visit(finder)
    return not finder.outside


class RemoveHorovodPath(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (cst.metadata.PositionProvider,)

    def __init__(self, aliases: set[str], refuse: bool = True):
        super().__init__()
        self.aliases = aliases
        self.refuse = refuse  # False where the Horovod option is routed to the DDP path (switch_routes.py)
        self.removed: list[Removed] = []

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(cst.metadata.PositionProvider, node).start.line

    def _code(self, node: cst.CSTNode) -> str:
        return cst.Module([]).code_for_node(node).strip().split("\n")[0][:100]

    def leave_Try(self, original: cst.Try, updated: cst.Try) -> cst.BaseStatement | cst.FlattenSentinel:
        if probe_aliases_of(original) is None:
            return updated
        handler = updated.handlers[0]
        self.removed.append(Removed(self._line(original), self._code(original), "(its except block)",
                                    "The Horovod probe answers as where Horovod is not installed: the repository's "
                                    "torch.distributed path is the one that runs."))
        body = list(handler.body.body) if isinstance(handler.body, cst.IndentedBlock) else []
        if not body:
            return cst.FlattenSentinel([])  # type: ignore[return-value]
        body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *body[0].leading_lines])
        return cst.FlattenSentinel(body)

    def _uses(self, statement: cst.CSTNode) -> bool:
        return bool(_names(statement) & self.aliases)

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement | cst.RemovalSentinel:
        if not is_switch(original.test) or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        kept = [s for s in updated.body.body if not self._uses(s)]
        if len(kept) == len(updated.body.body):
            return updated
        initialised = any(m.findall(s, m.Call(func=m.Attribute(attr=m.Name("init")))) for s in original.body.body)
        line = self._line(original)
        if initialised and self.refuse and not any(m.findall(s, m.Raise()) for s in kept):
            kept.append(cst.parse_statement(f"raise SystemExit({REFUSAL!r})"))
            self.removed.append(Removed(line, self._code(original), f"raise SystemExit({REFUSAL[:40]}...)",
                                        "The Horovod switch is refused with a clear message: the repository's "
                                        "torch.distributed path does the same job."))
        else:
            self.removed.append(Removed(line, self._code(original), "(its Horovod statements removed)",
                                        "This branch ran only under the Horovod switch; the repository's "
                                        "torch.distributed path does the same job."))
        if kept:
            return updated.with_changes(body=updated.body.with_changes(body=kept))
        if isinstance(updated.orelse, cst.If):  # `elif` becomes the `if`
            return updated.orelse.with_changes(leading_lines=updated.leading_lines)
        if isinstance(updated.orelse, cst.Else) and isinstance(updated.orelse.body, cst.IndentedBlock):
            return cst.FlattenSentinel(list(updated.orelse.body.body))  # type: ignore[return-value]
        return cst.RemoveFromParent()

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom,
                         ) -> cst.ImportFrom | cst.RemovalSentinel:
        """`from dist_utils import HAS_HOROVOD, hvd`: the probe's module binds hvd to None now, and nothing here
        uses it; the name goes from the import."""
        if not isinstance(updated.names, (list, tuple)) or (get_full_name_for_node(updated.module) or "").startswith(
                "horovod"):
            return updated
        kept = [a for a in updated.names if get_full_name_for_node(a.asname.name if a.asname else a.name)
                not in self.aliases]
        if len(kept) == len(updated.names):
            return updated
        if not kept:
            return cst.RemoveFromParent()
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(names=kept)


class HorovodOnlyStatements(cst.CSTTransformer):
    """Inside the Horovod branch of a switch (`if args.horovod:`; the `else` of `if not args.horovod:`), what only
    Horovod's DistributedOptimizer has: `optimizer.synchronize()` goes, `with optimizer.skip_synchronize():` gives
    way to its body. In any file: one that never imports Horovod holds them too (a trainer the switch reaches), and
    there they would be dead, or an AttributeError on the plain optimizer."""

    METADATA_DEPENDENCIES = (cst.metadata.PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.branches: set[int] = set()  # the Horovod branches' blocks (ids of the original nodes)
        self.inside = 0  # how many of them the walk is in
        self.removed: list[Removed] = []

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(cst.metadata.PositionProvider, node).start.line

    def visit_If(self, node: cst.If) -> None:
        if is_switch(node.test):
            negated = m.matches(node.test, m.UnaryOperation(operator=m.Not()))
            if not negated:
                self.branches.add(id(node.body))
            elif isinstance(node.orelse, cst.Else):
                self.branches.add(id(node.orelse.body))

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.inside += id(node) in self.branches

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        self.inside -= id(original) in self.branches
        return updated

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement | cst.RemovalSentinel:
        if id(original.body) not in self.branches and not (
                isinstance(original.orelse, cst.Else) and id(original.orelse.body) in self.branches):
            return updated
        empty_body = isinstance(updated.body, cst.IndentedBlock) and not updated.body.body
        if empty_body and updated.orelse is None:
            return cst.RemoveFromParent()
        if empty_body:
            return updated.with_changes(body=updated.body.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])]))
        if isinstance(updated.orelse, cst.Else) and isinstance(updated.orelse.body, cst.IndentedBlock) and \
                not updated.orelse.body.body:
            return updated.with_changes(orelse=None)
        return updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                                  ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if self.inside and len(original.body) == 1 and m.matches(original.body[0], m.Expr(value=m.Call(
                func=m.Attribute(attr=m.Name("synchronize")), args=[]))):
            self.removed.append(Removed(self._line(original), cst.Module([]).code_for_node(original).strip(), "",
                                        "Only Horovod's DistributedOptimizer has synchronize(): under DDP the "
                                        "gradients are averaged in backward(), and the plain optimizer has none."))
            return cst.RemoveFromParent()
        return updated

    def leave_With(self, original: cst.With, updated: cst.With) -> cst.BaseStatement | cst.FlattenSentinel:
        if self.inside and len(original.items) == 1 and m.matches(original.items[0].item, m.Call(
                func=m.Attribute(attr=m.Name("skip_synchronize")))) and isinstance(updated.body, cst.IndentedBlock):
            self.removed.append(Removed(self._line(original), cst.Module([]).code_for_node(original).strip()
                                        .split("\n")[0], "(its body, one level out)",
                                        "Only Horovod's DistributedOptimizer has skip_synchronize(): there is no "
                                        "separate synchronize() to skip under DDP."))
            body = list(updated.body.body)
            body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *body[0].leading_lines])
            return cst.FlattenSentinel(body)
        return updated


def remove_horovod_only_statements(code: str) -> tuple[str, list[Removed], LineMap]:
    """`code` without the Horovod-only optimizer calls its switches' Horovod branches make (lines of `code`), and
    the map of its lines."""
    if "synchronize" not in code:
        return code, [], LineMap()
    wrapper = cst.metadata.MetadataWrapper(cst.parse_module(code), unsafe_skip_copy=True)
    transform = HorovodOnlyStatements()
    new, lines = tracked_visit(wrapper, transform)
    return new.code, transform.removed, lines


def remove_horovod_path(module: cst.Module, aliases: set[str], *, refuse: bool = True,
                        ) -> tuple[cst.Module, list[Removed], LineMap]:
    wrapper = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    transform = RemoveHorovodPath(aliases, refuse)
    new, lines = tracked_visit(wrapper, transform)
    return new, transform.removed, lines


def probe_aliases(module: cst.Module) -> set[str]:
    """The names the module's probes bind to Horovod."""
    found: set[str] = set()
    for statement in m.findall(module, m.Try()):
        found |= probe_aliases_of(statement) or set()
    return found
