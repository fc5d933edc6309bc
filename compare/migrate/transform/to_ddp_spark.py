"""Pass 2, Spark: horovod.spark.run(...) and HorovodRunner(...) become TorchDistributor, the [0] on a
horovod.spark.run result goes, an np that is an expression is bound once before its statement, and the front-end's
import becomes TorchDistributor's (see uses_spark.py).

HorovodToDDP calls its leaves after its own leave_Call, leave_SimpleStatementLine, leave_Subscript and
leave_Import(From), on what those returned.
"""

from __future__ import annotations

import libcst as cst

from compare.migrate.plan.uses_spark import is_spark_front_end
from compare.migrate.read import notes
from compare.migrate.read.horovod_api import SPARK_DISTRIBUTOR
from compare.migrate.read.syntax import parse_expr, parse_stmt
from compare.migrate.transform.to_ddp_base import RewriteBase


class SparkRewrites(RewriteBase):
    """The Spark front-end's calls and imports."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.distributor_imported = False  # the first removed front-end import became TorchDistributor's

    def leave_spark_call(self, original: cst.Call, updated: cst.BaseExpression) -> cst.BaseExpression:
        plan = self.uses.distributor_plans.get(id(original))
        if plan is None:
            return updated
        module, name = SPARK_DISTRIBUTOR
        self.need(module, name)
        if "SparkSession.active()" in plan.code:
            self.need("pyspark.sql", "SparkSession")
        for after, note in plan.notes:
            self.note(original, after, note)
        return parse_expr(plan.code)

    def leave_runner_statement(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                               ) -> cst.SimpleStatementLine:
        """`runner_np = <np>` goes before the statement that makes the HorovodRunner, with its comments above it
        (held in self.expand, as the statement rewrites hold theirs, until the block is left)."""
        binding = self.uses.runner_bindings.get(id(original))
        if binding is None:
            return updated
        held, out = self.expand.pop(id(updated), (updated, [updated]))
        if held is not updated:
            out = [updated]
        bare = updated.with_changes(leading_lines=())
        first = parse_stmt(binding).with_changes(leading_lines=updated.leading_lines)
        self.expand[id(bare)] = (bare, [first, *(bare if s is updated else s for s in out)])
        return bare

    def leave_spark_result(self, original: cst.Subscript, updated: cst.BaseExpression) -> cst.BaseExpression:
        if id(original) not in self.uses.dropped_subscripts or not isinstance(updated, cst.Subscript):
            return updated
        self.note(original, self.uses.module.code_for_node(original.value), notes.SPARK_RUN_RESULT)
        return updated.value

    def leave_spark_import(self, original: cst.Import | cst.ImportFrom, updated: cst.Import | cst.ImportFrom,
                           ) -> cst.Import | cst.ImportFrom | cst.RemovalSentinel:
        uses = self.uses
        if original not in uses.spark_imports or not self._only_front_end(original):
            return updated
        if any(name in uses.spark_left for name in uses.spark_import_names.get(id(original), [])):
            return updated  # a use of it stays, flagged
        if not uses.distributor_plans:
            self.note(original, "", notes.SPARK_IMPORT_REMOVED)
            return cst.RemoveFromParent()
        module, name = SPARK_DISTRIBUTOR
        if self.distributor_imported:
            self.note(original, "", notes.SPARK_IMPORT_REMOVED)
            return cst.RemoveFromParent()
        self.distributor_imported = True
        self.note(original, f"from {module} import {name}", notes.SPARK_IMPORT)
        return cst.parse_statement(f"from {module} import {name}").body[0]  # type: ignore[attr-defined]

    def _only_front_end(self, node: cst.Import | cst.ImportFrom) -> bool:
        """An import of the front-end alone (`import horovod.spark, horovod.torch as hvd` stays as it is)."""
        if isinstance(node, cst.ImportFrom):
            return True
        return all(is_spark_front_end(self.uses.module.code_for_node(a.name)) for a in node.names)
