"""Pass 2, Ray: apply RayUses' plan. RayExecutor's run() becomes TorchTrainer(...).fit() and the rest of the
executor goes; HorovodTrainer becomes TorchTrainer; in the training function hvd.init() goes (Ray Train makes
the process group), rank and size come from Ray Train's context, and the model is wrapped by
ray.train.torch.prepare_model where the DDP rewrite would wrap it in DDP.

Placed before ExpressionRewrites and StatementRewrites in HorovodToDDP's bases: each method here handles the Ray
case and hands everything else to the DDP rewrite (super()).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.plan.uses_ray import RESULT_KEY
from compare.migrate.read import notes
from compare.migrate.read.horovod_api import RAY_CALLS
from compare.migrate.read.syntax import parse_expr, parse_stmt
from compare.migrate.transform.to_ddp_expressions import ExpressionRewrites
from compare.migrate.transform.to_ddp_statements import StatementRewrites


class RayRewrites(ExpressionRewrites, StatementRewrites):
    """The Ray front-ends and what a Ray script means for the Horovod calls of its training function."""

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        uses = self.uses
        if not uses.ray:
            return super().leave_Call(original, updated)
        for plan in uses.executors:
            if id(original) in plan.runs:
                self.need("ray.train.torch", "TorchTrainer")
                self.need("ray.train.torch", "TorchConfig")
                self.need("ray.train", "ScalingConfig")
                self.helper("train_loop_calling")
                self.note(original, "TorchTrainer(train_loop_calling(fn), ...).fit()", notes.RAY_RUN)
                return parse_expr(plan.runs[id(original)])
        if id(original) in uses.ray_trainers:
            return self._torch_trainer(original, updated)
        name = uses.hvd_name(original.func)
        if name in RAY_CALLS:
            self.need("ray.train")
            self.note(original, RAY_CALLS[name], notes.LR_SCALING if name == "size" and self._scales(original)
                      else notes.RAY_RANK)
            return parse_expr(RAY_CALLS[name])
        if name == "init":
            return updated  # the statement is removed (_replacement)
        result = super().leave_Call(original, updated)
        if result is not updated and (get_full_name_for_node(original.func) or "").endswith("DistributedSampler"):
            # the sampler's num_replicas/rank went, and with them the notes of the rank and size read there
            first, last = uses.line(original), uses.positions[original].end.line
            self.changes = [c for c in self.changes if not (first <= c.line <= last and c.note == notes.RAY_RANK)]
        return result

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        for plan in self.uses.executors:
            if id(original) in plan.results:
                name = self.uses.module.code_for_node(original.value)
                after = f'{name}.metrics["{RESULT_KEY}"]'
                self.note(original, after, notes.RAY_RESULT)
                return parse_expr(after)
        return updated

    def _torch_trainer(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """HorovodTrainer(...) -> TorchTrainer(...), horovod_config=HorovodConfig(...) -> torch_config=TorchConfig()."""
        plan = self.uses.ray_trainers[id(original)]
        self.need("ray.train.torch", "TorchTrainer")
        self.note(original, "TorchTrainer(...)", notes.RAY_TRAINER)
        args = []
        for old, new in zip(original.args, updated.args, strict=True):
            if id(old) == plan.horovod_config:
                self.need("ray.train.torch", "TorchConfig")
                dropped = f" Dropped here: {', '.join(plan.dropped)}." if plan.dropped else ""
                self.note(old, "torch_config=TorchConfig()", notes.RAY_TORCH_CONFIG + dropped)
                new = new.with_changes(keyword=cst.Name("torch_config"), value=parse_expr("TorchConfig()"))
            args.append(new)
        func = cst.Name("TorchTrainer") if isinstance(updated.func, cst.Name) else parse_expr(
            "ray.train.torch.TorchTrainer")
        if not isinstance(func, cst.Name):
            self.need("ray.train.torch")
        # arguments aligned after the parenthesis stay aligned after the new name's
        shift = len(self.uses.module.code_for_node(original.func)) - len(cst.Module([]).code_for_node(func))
        return updated.with_changes(func=func, args=[_shifted(arg, shift) for arg in args])

    def _replacement(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                     ) -> list[cst.BaseStatement] | None:
        uses = self.uses
        if not uses.ray:
            return super()._replacement(original, updated)
        for plan in uses.executors:
            if id(original) in plan.removed:
                note = plan.removed[id(original)]
                if note == notes.RAY_EXECUTOR and plan.dropped:
                    note = f"{note} {notes.RAY_EXECUTOR_DROPPED}"
                self.note(original, "", note)
                return []
        if len(original.body) == 1 and original.body[0] in uses.ray_imports and not uses.ray_imports_kept:
            self.note(original, "", notes.RAY_IMPORT)
            return []
        call = original.body[0].value if m.matches(original, m.SimpleStatementLine(body=[m.Expr(value=m.Call())])) \
            else None  # type: ignore[attr-defined]
        name = uses.hvd_name(call.func) if isinstance(call, cst.Call) else None
        if name == "shutdown" or (name == "init" and original is uses.init_stmt):
            self.note(original, "", notes.RAY_INIT if name == "init" else notes.RAY_HVD_SHUTDOWN)
            return []
        return super()._replacement(original, updated)

    def _wrap_statements(self) -> list[cst.BaseStatement]:
        out = super()._wrap_statements()
        if not self.uses.ray:
            return out
        wrap = f"{self.wrapper} = ray.train.torch.prepare_model({self.plan.wrapped})"  # type: ignore[union-attr]
        self.imports.discard(("torch.nn.parallel", "DistributedDataParallel", "DDP"))
        self.need("ray.train.torch")
        out[0] = parse_stmt(wrap)
        for change in self.changes:
            if change.note.startswith(notes.DDP_WRAP):
                change.after, change.note = wrap, notes.RAY_WRAP
            elif change.note == notes.BROADCAST_PARAMETERS and change.after:
                change.after = wrap
        return out

    def _is_init_block(self, original: cst.CSTNode) -> bool:
        return False if self.uses.ray else super()._is_init_block(original)  # Ray Train destroys its group itself


def _shifted(arg: cst.Arg, shift: int) -> cst.Arg:
    """The argument's comma with the next line's alignment moved `shift` columns to the left."""
    comma = arg.comma
    if not (isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)):
        return arg
    after = comma.whitespace_after
    spaces = after.last_line.value
    if shift <= 0 or len(spaces) < shift or spaces[:shift].strip():
        return arg
    return arg.with_changes(comma=comma.with_changes(whitespace_after=after.with_changes(
        last_line=cst.SimpleWhitespace(spaces[shift:]))))
