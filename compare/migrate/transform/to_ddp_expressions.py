"""Pass 2, expressions: hvd.rank(), the collectives, DistributedOptimizer(...), the sampler, Trainer(...)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.plan.migration import Change
from compare.migrate.plan.uses_lightning import TrainerPlan
from compare.migrate.read import notes
from compare.migrate.read.horovod_api import INIT_GUARD, LIGHTNING_CALLS, NEEDS_OS, REDUCE_OPS, REDUCTIONS, SIMPLE_CALLS
from compare.migrate.read.syntax import argument, parse_expr, shortened
from compare.migrate.transform.to_ddp_base import RewriteBase


class ExpressionRewrites(RewriteBase):
    """The Horovod calls and names inside statements: each becomes an expression in its place."""

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        uses = self.uses
        if id(original) in uses.trainers:
            return self._trainer(original, updated, uses.trainers[id(original)])
        name = uses.hvd_name(original.func)
        if uses.lightning and name in LIGHTNING_CALLS:
            self.need("os")
            self.note(original, LIGHTNING_CALLS[name], notes.LIGHTNING_RANK)
            return parse_expr(LIGHTNING_CALLS[name])
        if uses.lightning and name == "init":
            return updated  # the statement is removed (leave_SimpleStatementLine)
        if name in SIMPLE_CALLS:
            code, note = SIMPLE_CALLS[name]
            if name in NEEDS_OS:
                self.need("os")
            if name == "size" and self._scales(original):
                note = notes.LR_SCALING
            if name == "local_rank" and m.matches(uses.parents[original],
                                                  m.Arg(value=original)):
                outer = uses.parents[uses.parents[original]]
                if get_full_name_for_node(getattr(outer, "func", None)) == "torch.cuda.set_device":
                    note = notes.SET_DEVICE
            self.note(original, code, note)
            return parse_expr(code)
        if name == "init":
            # A statement of its own becomes `if not dist.is_initialized(): ...` (to_ddp_statements.py).
            whole = self.uses.is_init_statement(original)
            self.note(original, f"{INIT_GUARD} dist.init_process_group()" if whole else "dist.init_process_group()",
                      notes.INIT)
            return parse_expr("dist.init_process_group()")
        if name == "SyncBatchNorm":
            self.need("torch")
            self.note(original, "torch.nn.SyncBatchNorm(...)", notes.SYNC_BATCHNORM)
            return updated.with_changes(func=parse_expr("torch.nn.SyncBatchNorm"))
        if name in ("allreduce", "allreduce_"):
            return self._allreduce(original, updated, name)
        if name in ("allgather", "broadcast", "broadcast_", "allgather_object", "broadcast_object"):
            return self._collective(original, updated, name)
        if name == "DistributedOptimizer" and (self.step_hook or original in uses.step_hook_optimizers):
            return self._step_hook_optimizer(original, updated)
        if name == "DistributedOptimizer" and self.model:  # (without a model it stays, flagged)
            inner = argument(updated, 0, "optimizer")
            return inner if inner is not None else updated
        if get_full_name_for_node(original.func) in {f"{a}.run" for a in uses.horovod}:
            kept = [a for a in updated.args if a.keyword is None or a.keyword.value in ("args", "kwargs", "np")]
            if kept:
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            self.need("torch")
            self.note(original, "run_spawned(...)  # torch.multiprocessing.spawn", notes.HOROVOD_RUN)
            return updated.with_changes(func=cst.Name(self.helper("run_spawned")), args=kept)
        if (get_full_name_for_node(original.func) or "").endswith("DistributedSampler"):
            return self._sampler(original, updated)
        if self.plan is not None and id(original) in self.plan.forwards:
            # the training step's forward: through the wrapper, whose reducer the backward() of its result needs
            self.note(original, f"{self.plan.wrapper}(...)", notes.TRAIN_THROUGH_WRAPPER)
            return updated.with_changes(func=parse_expr(self.plan.wrapper))
        return updated

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if self.plan is not None and id(original) in self.plan.handed:
            self.note(original.value, self.plan.wrapper, notes.WRAPPER_HANDED)
            return updated.with_changes(value=parse_expr(self.plan.wrapper))
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if id(original) in self.passed_on:
            self.note(original, "dist", notes.MODULE_PASSED_ON)
            return updated.with_changes(value="dist")
        return updated

    def _step_hook_optimizer(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        inner = argument(updated, 0, "optimizer")
        if inner is None:
            return updated
        op = argument(original, 99, "op")
        summed = op is not None and self.uses.hvd_name(op) == "Sum"
        code = cst.Module([]).code_for_node(inner)
        # compression=, as rewritten inside the call (fp16 -> fp16_compress_hook, none -> None); a name keeps its
        # binding, which is rewritten where it is bound
        compression = argument(updated, 2, "compression")
        carried = "" if compression is None or m.matches(compression, m.Name("None")) else \
            f", compression={cst.Module([]).code_for_node(compression)}"
        call = f"{self.helper('average_gradients_at_step')}({code}{', average=False' if summed else ''}{carried})"
        self.note(original, call, " ".join([notes.STEP_HOOK_OPTIMIZER, *([notes.STEP_HOOK_COMPRESSION] if carried
                                                                        else [])]))
        return parse_expr(call)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        name = self.uses.hvd_name(original)
        if name == "Compression.fp16":
            self.need("torch.distributed.algorithms.ddp_comm_hooks", "default_hooks")
            self.note(original, "default_hooks.fp16_compress_hook", notes.COMPRESSION)
            return parse_expr("default_hooks.fp16_compress_hook")
        if name == "Compression.none":
            self.note(original, "None", notes.COMPRESSION_NONE)
            return parse_expr("None")
        if name in REDUCTIONS and not self._inside_optimizer(original):
            # A reduction named anywhere else (a wrapper's default, a caller's argument, an allreduce's op=):
            # the value all_reduce_average_or_op resolves at run time, as hvd.allreduce resolved Horovod's.
            parent = self.uses.parents[original]
            if not (isinstance(parent, cst.Arg) and self.uses.hvd_name(self.uses.parents[parent].func) in (  # type: ignore[attr-defined]
                    "allreduce", "allreduce_")):  # (an allreduce's own literal op= is noted with its call)
                self.note(original, REDUCTIONS[name], notes.REDUCTION_NAME)
            return parse_expr(REDUCTIONS[name])
        return updated

    def _inside_optimizer(self, node: cst.CSTNode) -> bool:
        """Inside a DistributedOptimizer(...): its op= is read by its own rewrite (DDP averages)."""
        while not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Module)):
            node = self.uses.parents[node]
            if isinstance(node, cst.Call) and self.uses.hvd_name(node.func) == "DistributedOptimizer":
                return True
        return False

    def _trainer(self, original: cst.Call, updated: cst.Call, plan: TrainerPlan) -> cst.Call:
        """The Horovod arguments -> strategy, accelerator, devices, num_nodes for Lightning 2 under torchrun, in
        the first one's place (one a line where the call has one argument a line)."""
        uses = self.uses
        self.need("os")
        first = next(i for i, a in enumerate(original.args) if id(a) in plan.replaced)
        comma = updated.args[first].comma
        one_a_line = isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
        column = uses.positions[original.args[0]].start.column
        between = comma if one_a_line else cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
            last_line=cst.SimpleWhitespace(" " * column), indent=False))
        equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
        args: list[cst.Arg] = []
        for index, (old, new) in enumerate(zip(original.args, updated.args, strict=True)):
            if index == first:
                made = [cst.Arg(value=parse_expr(code), keyword=cst.Name(key), equal=equal, comma=between)
                        for key, code in plan.new_args]
                args += [*made[:-1], made[-1].with_changes(comma=new.comma)]
            if id(old) in plan.plugins_kept:
                value = new.value
                kept = [e for i, e in enumerate(value.elements) if i in plan.plugins_kept[id(old)]]  # type: ignore[attr-defined]
                if isinstance(value, cst.List):
                    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                args.append(new.with_changes(value=value.with_changes(elements=kept)))
            elif id(old) not in plan.replaced and id(old) not in plan.dropped:
                args.append(new)
        if id(original.args[-1]) in plan.replaced | plan.dropped:
            args[-1] = args[-1].with_changes(comma=updated.args[-1].comma)
        if not one_a_line:  # the call was on one line: now one argument a line, aligned after the parenthesis
            args = [a.with_changes(comma=between) for a in args[:-1]] + args[-1:]
        made_code = dict(plan.new_args)
        for old in original.args:
            before = uses.module.code_for_node(old.with_changes(comma=cst.MaybeSentinel.DEFAULT))
            if id(old) in plan.replaced:
                after = f"strategy={made_code['strategy']}" if old is original.args[first] else ""
                self.changes.append(Change(uses.line(old), shortened(before), after, notes.LIGHTNING_STRATEGY))
            elif id(old) in plan.dropped and old.keyword and old.keyword.value == "gpus":
                self.changes.append(Change(uses.line(old), shortened(before), f"accelerator={made_code['accelerator']}",
                                           notes.LIGHTNING_ACCELERATOR))
            elif id(old) in plan.dropped:
                self.changes.append(Change(uses.line(old), shortened(before), "", notes.LIGHTNING_DROPPED))
        line = uses.line(original.args[first])
        if "accelerator" in made_code and not any(a.keyword and a.keyword.value == "gpus" for a in original.args):
            self.changes.append(Change(line, "(no gpus=: the CPU)", f"accelerator={made_code['accelerator']}",
                                       notes.LIGHTNING_ACCELERATOR))
        self.changes.append(Change(line, "(horovodrun: one process per slot)",
                                   f"devices={made_code['devices']}, num_nodes={made_code['num_nodes']}",
                                   notes.LIGHTNING_DEVICES))
        return updated.with_changes(args=args)

    def _scales(self, call: cst.Call) -> bool:
        parent = self.uses.parents[call]
        return isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Multiply)

    def _allreduce(self, original: cst.Call, updated: cst.Call, name: str) -> cst.BaseExpression:
        """hvd.allreduce(tensor, average=None, name=None, compression=..., op=None, ...): op and average by
        keyword or position. A literal reduction becomes its own helper; one known only at run time (a
        wrapper's `average=average`, `op=op`) the helper that resolves it as Horovod does."""
        tensor = argument(updated, 0, "tensor")
        op, average = argument(original, 4, "op"), argument(original, 1, "average")
        op_name = self.uses.hvd_name(op) if op is not None else None
        if op_name == "Adasum" or tensor is None:
            return updated  # flagged in pass 1
        code = self.uses.module.code_for_node(tensor)
        in_place = name == "allreduce_"
        literal_average = average is None or m.matches(average, m.Name("True") | m.Name("False"))
        if (op is not None and average is not None) or not literal_average or (op is not None and op_name not in (
                "Average", *REDUCE_OPS)):
            given = [f"{key}={self.uses.module.code_for_node(value)}" for key, value in
                     (("average", argument(updated, 1, "average")), ("op", argument(updated, 4, "op")))
                     if value is not None]
            after = f"{self.helper('all_reduce_average_or_op')}({', '.join([code, *given])}"
            after += ", in_place=True)" if in_place else ")"
            self.note(original, after, notes.ALLREDUCE_AT_RUN_TIME)
            return parse_expr(after)
        if op_name in REDUCE_OPS or m.matches(average, m.Name("False")):
            helper = self.helper("all_reduce_" if in_place else "all_reduce")
            after = f"{helper}({code}, dist.ReduceOp.{REDUCE_OPS.get(op_name or 'Sum', 'SUM')})"
            self.note(original, after, notes.ALLREDUCE_OP)
            return parse_expr(after)
        helper = self.helper("all_reduce_mean_" if in_place else "all_reduce_mean")
        self.note(original, f"{helper}({code})", notes.ALLREDUCE_MEAN)
        return parse_expr(f"{helper}({code})")

    def _collective(self, original: cst.Call, updated: cst.Call, name: str) -> cst.BaseExpression:
        value = argument(updated, 0, "obj" if name.endswith("object") else "tensor")
        if value is None:
            return updated
        code = self.uses.module.code_for_node(value)
        root = argument(updated, 1, "root_rank")
        root_code = self.uses.module.code_for_node(root) if root is not None else "0"
        helper, args, note = {
            "allgather": ("all_gather_cat", code, notes.ALLGATHER),
            "broadcast": ("broadcast_copy", f"{code}, {root_code}", notes.BROADCAST),
            "broadcast_": ("broadcast_inplace", f"{code}, {root_code}", notes.BROADCAST),
            "allgather_object": ("all_gather_objects", code, notes.ALLGATHER_OBJECT),
            "broadcast_object": ("broadcast_object", f"{code}, {root_code}", notes.BROADCAST_OBJECT),
        }[name]
        self.note(original, f"{helper}({args})", note)
        return parse_expr(f"{self.helper(helper)}({args})")

    def _sampler(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.uses.lightning:
            if any(self.uses.hvd_name(c.func) in ("rank", "size") for c in m.findall(original, m.Call())):
                self.note(original, cst.Module([]).code_for_node(updated), notes.LIGHTNING_SAMPLER)
            return updated
        dropped = {"num_replicas": "size", "rank": "rank"}
        kept = [a for a, o in zip(updated.args, original.args, strict=True)
                if not (a.keyword and dropped.get(a.keyword.value) == self.uses.hvd_name(o.value.func)
                        if isinstance(o.value, cst.Call) else False)]
        if len(kept) == len(updated.args):
            return updated
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        new = updated.with_changes(args=kept)
        first, last = self.uses.line(original), self.uses.positions[original].end.line
        self.changes = [c for c in self.changes if not (first <= c.line <= last
                                                         and c.note in (notes.RANK, notes.SIZE))]
        self.note(original, cst.Module([]).code_for_node(new), notes.SAMPLER)
        return new
