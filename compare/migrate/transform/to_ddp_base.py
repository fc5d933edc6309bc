"""Pass 2's shared part: the plan it applies, and the bookkeeping of what it changed and what it needs.

The parts of pass 2 (horovod_to_ddp.py and to_ddp_*.py: compare/migrate/__init__.py's map) are one
transformer, one class each, composed by HorovodToDDP: one walk of the tree, so the changes keep the order they
are made in.
"""

from __future__ import annotations

import libcst as cst

from compare.migrate.plan.accumulation_plan import NO_ACCUMULATION, AccumulationPlan
from compare.migrate.plan.added_helpers import HELPER_IMPORTS, HELPERS
from compare.migrate.plan.horovod_uses import HorovodUses
from compare.migrate.plan.migration import Change
from compare.migrate.plan.wrap_plan import WrapPlan
from compare.migrate.read.syntax import NoAttributeHooks, shortened


class RewriteBase(NoAttributeHooks, cst.CSTTransformer):
    """The plan of pass 1, where the model is wrapped, and what the rewrite changed, adds and imports."""

    # Set by the repository's driver (compare/migrate/migrate_tree.py) before the walk:
    helpers_module: str | None = None   # import the helpers from this module of the repository, not inline them
    helper_names: dict[str, str] = {}   # a helper's name where its own would shadow or be shadowed  # noqa: RUF012
    end_of_job = True                   # False for a module that is not the job's entry point: it destroys nothing
    passed_on: set[int] = set()         # Names handing on the Horovod module (compare/migrate/plan/passed_on.py)  # noqa: RUF012

    def __init__(self, uses: HorovodUses, keep_hvd_import: bool, plan: WrapPlan | None = None,
                 accumulation: AccumulationPlan = NO_ACCUMULATION):
        super().__init__()
        self.uses = uses
        self.accumulation = accumulation  # which backward() passes sync (backward_passes_per_step)
        self.keep_hvd_import = keep_hvd_import
        self.changes: list[Change] = []
        self.helpers: list[str] = []
        self.imports: set[tuple[str, str | None, str | None]] = set()
        # id(updated statement) -> (the statement, what replaces it). The statement is held: a dropped one's id
        # would be reused by a node made later, which would then be replaced in its stead.
        # The line map reads it too (read/line_map.py).
        self.expand: dict[int, tuple[cst.BaseStatement, list[cst.BaseStatement]]] = {}
        # The wrap of the model the DistributedOptimizer trained (compare/migrate/plan/wrap_plan.py), made in pass 1.
        # Without one (Lightning's strategy wraps; the model is an argument the caller trains; no training
        # forward found), the broadcasts stay broadcasts and that optimizer averages its gradients at step().
        self.plan = plan
        self.dist_import: cst.CSTNode | None = None  # the `import torch.distributed as dist` made from hvd's
        self.model = plan.model if plan is not None else None
        self.wrapper = plan.wrapper if plan is not None else None
        self.step_hook = uses.dist_optimizer_stmt is not None and not uses.lightning and plan is None
        self.wrap_stmt = plan.wrap_stmt if plan is not None else None
        self.wrap_line = uses.line(self.wrap_stmt) if self.wrap_stmt is not None else None

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
