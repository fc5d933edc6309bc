"""Pass 1's shared part: what it records of the script's Horovod uses, and the lookups every part of it uses.

The parts of pass 1 (horovod_uses.py and uses_*.py: compare/migrate/__init__.py's map) are one visitor, one
class each, composed by HorovodUses: each keeps its own records, and all read these. They stay mixins because
their visits run in the one walk of the tree (a visitor of its own each would walk it again, and pass 1 is most
of a migration's time) and read the names the import visits bind as the walk goes. What plans from the records
after the walk is a function that returns a frozen plan instead (accumulation_plan.py, wrap_plan.py).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from compare.migrate.plan.migration import Flag
from compare.migrate.read.flag_category import Category
from compare.migrate.read.parsed import Parsed
from compare.migrate.read.syntax import NoAttributeHooks, dotted_name, shortened


class UsesBase(NoAttributeHooks, cst.CSTVisitor):
    """The script, its Horovod names and the records of its Horovod uses; the flags of what needs a person."""

    def __init__(self, parsed: Parsed):
        super().__init__()
        self.parsed = parsed  # read once: the check of the result reads the original from it too
        self.module = parsed.module
        self.positions = parsed.positions
        self.parents = parsed.parents
        self.hvd: set[str] = set()          # names bound to horovod.torch ("hvd")
        self.horovod: set[str] = set()      # names bound to the horovod package (for horovod.run)
        self.hvd_imports: list[cst.CSTNode] = []
        self.flags: list[Flag] = []
        self.model: str | None = None
        self.optimizers: set[str] = set()   # names bound to a hvd.DistributedOptimizer
        self.loaded_optimizers: set[str] = set()
        self.dist_optimizer_stmt: cst.SimpleStatementLine | None = None
        self.dist_optimizer_call: cst.Call | None = None
        self.step_hook_optimizers: list[cst.Call] = []  # DistributedOptimizer(...) not as `name = ...(...)`
        self.broadcast_parameters_stmts: list[cst.SimpleStatementLine] = []
        self.join_loops: dict[int, cst.CSTNode] = {}   # id(loop) -> the hvd.join() statement that follows it
        self.backward_stmts: list[cst.SimpleStatementLine] = []
        self.step_guards: list[cst.If] = []  # the ifs that call a step() in their body
        self.init_stmt: cst.SimpleStatementLine | None = None
        self.has_shutdown = False
        self.has_sync_batchnorm = False
        self.rank_guards: list[cst.If] = []
        self.commit_calls: list[cst.Call] = []
        self.init_calls: list[cst.Call] = []
        self.amp_initialize_stmts: list[cst.SimpleStatementLine] = []  # apex: DDP goes after these
        self.frozen_models: set[str] = set()  # models some of whose parameters get requires_grad off

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def code(self, node: cst.CSTNode) -> str:
        if hasattr(node, "leading_lines"):
            node = node.with_changes(leading_lines=())
        if isinstance(node, cst.BaseCompoundStatement):  # its first line only
            return shortened(self.module.code_for_node(node).split("\n")[0])
        return shortened(self.module.code_for_node(node))

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode:
        while not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            node = self.parents[node]
        return node

    def is_init_statement(self, call: cst.Call) -> bool:
        """`hvd.init()` alone on its line, outside Lightning (which makes the group itself): it becomes
        `if not dist.is_initialized(): dist.init_process_group()`."""
        statement = self.statement_of(call)
        return not self.lightning and not call.args and isinstance(statement, cst.SimpleStatementLine) and \
            len(statement.body) == 1 and m.matches(statement.body[0], m.Expr(value=m.Call())) and \
            statement.body[0].value is call  # type: ignore[attr-defined]

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The function a node is in (None at module level)."""
        while not isinstance(node, (cst.FunctionDef, cst.Module)):
            node = self.parents[node]
        return node if isinstance(node, cst.FunctionDef) else None

    def hvd_name(self, node: cst.CSTNode) -> str | None:
        """'rank' for hvd.rank, 'Compression.fp16' for hvd.Compression.fp16, else None."""
        name = dotted_name(node)
        for alias in self.hvd:
            if name and name.startswith(alias + "."):
                return name[len(alias) + 1:]
        return None

    def flag(self, node: cst.CSTNode, category: Category, why: str) -> None:
        line = self.line(node)
        if not any(f.line == line and f.category == category for f in self.flags):
            self.flags.append(Flag(line, category, self.code(self.statement_of(node)), why))
