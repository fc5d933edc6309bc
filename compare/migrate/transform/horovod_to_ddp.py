"""Pass 2: apply the plan of pass 1 (HorovodUses): the Horovod imports become torch.distributed's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst
from libcst.helpers import get_full_name_for_node

from compare.migrate.read import notes
from compare.migrate.read.syntax import parse_expr
from compare.migrate.transform.to_ddp_expressions import ExpressionRewrites
from compare.migrate.transform.to_ddp_probes import ProbeRewrites
from compare.migrate.transform.to_ddp_ray import RayRewrites
from compare.migrate.transform.to_ddp_spark import SparkRewrites
from compare.migrate.transform.to_ddp_statements import StatementRewrites


class HorovodToDDP(RayRewrites, SparkRewrites, ProbeRewrites, ExpressionRewrites, StatementRewrites):
    """Pass 2: apply the plan of HorovodUses. The imports are rewritten here; the expressions and the
    statements are the parts it is made of."""

    # The Spark front-end's leaves (to_ddp_spark.py) run on what the others returned for the same node.
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        return _then(self.leave_spark_call, original, super().leave_Call(original, updated))

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                                  ) -> cst.BaseStatement | cst.FlattenSentinel | cst.RemovalSentinel:
        return _then(self.leave_runner_statement, original, super().leave_SimpleStatementLine(original, updated))

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        return _then(self.leave_spark_result, original, super().leave_Subscript(original, updated))

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import | cst.RemovalSentinel:
        return _then(self.leave_spark_import, original, self._horovod_import(original, updated))

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom,
                         ) -> cst.ImportFrom | cst.RemovalSentinel:
        return _then(self.leave_spark_import, original, self._horovod_import_from(original, updated))

    def _horovod_import(self, original: cst.Import, updated: cst.Import) -> cst.Import | cst.RemovalSentinel:
        if original not in self.uses.hvd_imports or any(f.line == self.uses.line(original) for f in self.uses.flags):
            return updated
        names = [get_full_name_for_node(a.name) for a in original.names]
        if "horovod.torch" in names:
            if self.keep_hvd_import:
                self.note(original, "import torch.distributed as dist (added; this import kept)", notes.IMPORT_KEPT)
                self.need("torch.distributed", asname="dist")
                return updated
            self.note(original, "import torch.distributed as dist", notes.IMPORT)
            self.dist_import = cst.Import(names=[cst.ImportAlias(name=parse_expr("torch.distributed"),  # type: ignore[arg-type]
                                                                 asname=cst.AsName(name=cst.Name("dist")))])
            return self.dist_import
        if names == ["horovod"] and not self.keep_hvd_import:
            self.note(original, "", notes.IMPORT_HOROVOD)
            return cst.RemoveFromParent()
        return updated

    def _horovod_import_from(self, original: cst.ImportFrom, updated: cst.ImportFrom,
                             ) -> cst.ImportFrom | cst.RemovalSentinel:
        if original in self.uses.hvd_imports and not any(f.line == self.uses.line(original) for f in self.uses.flags):
            if self.keep_hvd_import:
                self.need("torch.distributed", asname="dist")
                return updated
            self.note(original, "import torch.distributed as dist", notes.IMPORT)
            self.dist_import = cst.parse_statement("import torch.distributed as dist").body[0]  # type: ignore[attr-defined]
            return self.dist_import  # type: ignore[return-value]
        if original in self.uses.lightning_imports and isinstance(updated.names, (list, tuple)):
            removable = self.uses.removable_lightning_names
            kept = [a for a in updated.names
                    if get_full_name_for_node(a.asname.name if a.asname else a.name) not in removable]
            if len(kept) < len(updated.names):
                self.note(original, "" if not kept else "(the Horovod class removed from this import)",
                          notes.LIGHTNING_IMPORT_CLASS)
            if not kept:
                return cst.RemoveFromParent()
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(names=kept)
        return updated


def _then(leave: Callable[[Any, Any], Any], original: cst.CSTNode, result: Any) -> Any:
    """leave(original, result) where the first leave kept a node (not a removal or a flattened list)."""
    return leave(original, result) if isinstance(result, cst.CSTNode) else result
