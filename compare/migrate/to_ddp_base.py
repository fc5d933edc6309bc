"""Pass 2's shared part: the plan it applies, and the bookkeeping of what it changed and what it needs.

The parts of pass 2 (horovod_to_ddp.py and to_ddp_*.py: compare/migrate/__init__.py's map) are one
transformer, one class each, composed by HorovodToDDP: one walk of the tree, so the changes keep the order they
are made in.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.added_helpers import HELPER_IMPORTS, HELPERS
from compare.migrate.horovod_uses import HorovodUses
from compare.migrate.migration import Change
from compare.migrate.syntax import NoAttributeHooks, parameter_names, shortened


class RewriteBase(NoAttributeHooks, cst.CSTTransformer):
    """The plan of pass 1, where the model is wrapped, and what the rewrite changed, adds and imports."""

    # Set by the repository's driver (compare/migrate/migrate_tree.py) before the walk:
    helpers_module: str | None = None   # import the helpers from this module of the repository, not inline them
    helper_names: dict[str, str] = {}   # a helper's name where its own would shadow or be shadowed  # noqa: RUF012
    end_of_job = True                   # False for a module that is not the job's entry point: it destroys nothing
    passed_on: set[int] = set()         # Names handing on the Horovod module (compare/migrate/passed_on.py)  # noqa: RUF012

    def __init__(self, uses: HorovodUses, keep_hvd_import: bool):
        super().__init__()
        self.uses = uses
        self.keep_hvd_import = keep_hvd_import
        self.changes: list[Change] = []
        self.helpers: list[str] = []
        self.imports: set[tuple[str, str | None, str | None]] = set()
        # id(updated statement) -> (the statement, what replaces it). The statement is held: a dropped one's id
        # would be reused by a node made later, which would then be replaced in its stead.
        self.expand: dict[int, tuple[cst.BaseStatement, list[cst.BaseStatement]]] = {}
        self.model = None if uses.lightning else uses.model  # Lightning's strategy wraps the model itself
        self.dist_import: cst.CSTNode | None = None  # the `import torch.distributed as dist` made from hvd's
        stmts = [*uses.broadcast_parameters_stmts, *([uses.dist_optimizer_stmt] if uses.dist_optimizer_stmt else [])]
        # No DDP where the caller would never train through it (a function's argument the function does not
        # return): the broadcasts stay broadcasts, and a DistributedOptimizer (or one whose model is not named)
        # averages its gradients at step() instead.
        if self.model and stmts and _argument_not_returned(uses, self.model, max(stmts, key=uses.line)):
            self.model = None
        self.step_hook = uses.dist_optimizer_stmt is not None and not uses.lightning and not self.model
        self.wrap_stmt = max(stmts, key=uses.line) if (stmts and self.model) else None
        self.wrap_line = uses.line(self.wrap_stmt) if self.wrap_stmt else None
        self.wrap_function = uses.enclosing_function(self.wrap_stmt) if self.wrap_stmt is not None else None
        self.function_depth: list[cst.FunctionDef] = []

    # bookkeeping
    def note(self, original: cst.CSTNode, after: str, note: str) -> None:
        self.changes.append(Change(self.uses.line(original), self.uses.code(original), shortened(after), note))

    def need(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        self.imports.add((module, obj, asname))

    def helper(self, name: str) -> str:
        if name not in self.helpers:
            self.helpers.append(name)
            if self.helpers_module is None:  # inlined: what the helper's code reads, bound at module level
                for module in HELPER_IMPORTS.get(name, ()):
                    self.need(module)
                self.need("torch")
                if "dist." in HELPERS[name]:
                    self.need("torch.distributed", asname="dist")
        return self.helper_names.get(name, name)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.function_depth.append(node)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.function_depth.pop()
        return updated


def _argument_not_returned(uses: HorovodUses, model: str, statement: cst.CSTNode) -> bool:
    """The model is a parameter of the function the optimizer is made in, and that function does not return it:
    a DDP made there would be a local name the caller never trains through."""
    function = uses.enclosing_function(statement)
    if function is None or model not in parameter_names(function):
        return False
    returned = {get_full_name_for_node(r.value) for r in m.findall(function.body, m.Return()) if r.value is not None}
    return model not in returned
