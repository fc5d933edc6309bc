"""Pass 2, statements: those replaced whole, the loops Join() and no_sync() wrap, and the blocks they
expand into.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.plan.added_helpers import helper_code
from compare.migrate.plan.migration import Change
from compare.migrate.plan.zero_step import construction_of, unchanged_words, zero_step_effect
from compare.migrate.read import notes
from compare.migrate.read.horovod_api import INIT_GUARD
from compare.migrate.read.repository import tokenize_names, unique_name
from compare.migrate.read.syntax import argument, keyword_args, parameter_names, parse_expr, parse_stmt, receiver_of
from compare.migrate.transform.to_ddp_base import RewriteBase


class StatementRewrites(RewriteBase):
    """The statements replaced whole (each one's replacement held in self.expand until its block is left),
    the loops, and the blocks that take the replacements."""

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                                  ) -> cst.SimpleStatementLine:
        out = self._replacement(original, updated)
        if original is self.wrap_stmt:
            out = [updated] if out is None else out
            out += self._wrap_statements()
        if out is None:
            return updated
        self.expand[id(updated)] = (updated, out)
        return updated

    def _replacement(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                     ) -> list[cst.BaseStatement] | None:
        """What replaces the statement ([]: nothing), or None where it stays as it is."""
        uses = self.uses
        calls = [s.value for s in original.body if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)]
        call = calls[0] if len(original.body) == 1 and calls else None
        name = uses.hvd_name(call.func) if call is not None else None
        synchronize = call is not None and m.matches(call.func, m.Attribute(attr=m.Name("synchronize")))
        if uses.lightning and name in ("init", "shutdown") and (name == "shutdown" or original is uses.init_stmt):
            self.note(original, "", notes.LIGHTNING_INIT if name == "init" else notes.LIGHTNING_SHUTDOWN)
            return []
        if uses.lightning and (name in ("broadcast_parameters", "broadcast_optimizer_state", "join") or synchronize):
            return None  # Lightning's strategy does this: the Horovod use stays, flagged (plan_lightning)
        if original in uses.broadcast_parameters_stmts:
            return self._broadcast_parameters(original, call)  # type: ignore[arg-type]
        if name == "broadcast_optimizer_state":
            return self._broadcast_optimizer_state(original, call)  # type: ignore[arg-type]
        if original is uses.dist_optimizer_stmt and self.model:
            return self._plain_optimizer(original, updated)
        if name == "join" and id(original) in {id(s) for s in uses.join_loops.values()}:
            self.note(original, "", notes.JOIN_REMOVED)
            return []
        if name == "init" and self.uses.is_init_statement(call):  # type: ignore[arg-type]
            guard = parse_stmt(f"{INIT_GUARD}\n    pass\n")
            return [guard.with_changes(body=cst.IndentedBlock([updated.with_changes(leading_lines=[])]))]
        if name == "shutdown":
            self.note(original, "dist.barrier(); dist.destroy_process_group()", notes.SHUTDOWN)
            return [parse_stmt("dist.barrier()"), parse_stmt("dist.destroy_process_group()")]
        if synchronize and get_full_name_for_node(call.func.value) in uses.optimizers:  # type: ignore[union-attr]
            self.note(original, "", notes.SYNCHRONIZE)
            return []
        if id(original) in self.accumulation.accumulate and self.model:
            return self._accumulating_backward(original, updated)
        return None

    def _broadcast_parameters(self, original: cst.SimpleStatementLine, call: cst.Call) -> list[cst.BaseStatement]:
        params = argument(call, 0, "params")
        of = receiver_of(params, "state_dict") or receiver_of(params, "named_parameters")
        if self.uses.dist_optimizer_stmt is not None and self.model and of not in (None, self.model):
            # another model (an EMA copy, a teacher): DDP's constructor broadcasts only the wrapped one
            out = self._broadcast_by_hand(original, call)
            self.changes[-1].note = notes.BROADCAST_OTHER_MODEL.format(name=of)
            return out
        if self.uses.dist_optimizer_stmt is not None and self.model:
            self.note(original, "" if original is not self.wrap_stmt else f"{self.wrapper} = DDP({self.plan.wrapped})",  # type: ignore[union-attr]
                      notes.BROADCAST_PARAMETERS)
            return []
        return self._broadcast_by_hand(original, call)

    def _broadcast_by_hand(self, original: cst.SimpleStatementLine, call: cst.Call) -> list[cst.BaseStatement]:
        params = self.uses.module.code_for_node(argument(call, 0, "params"))  # type: ignore[arg-type]
        root = argument(call, 1, "root_rank")
        root_code = self.uses.module.code_for_node(root) if root is not None else "0"
        out = [parse_stmt(f"for tensor in ({params}).values():\n    dist.broadcast(tensor, src={root_code})\n")]
        self.note(original, f"for tensor in {params}.values(): dist.broadcast(...)",
                  notes.BROADCAST_PARAMETERS_BY_HAND)
        return out

    def _an_argument(self, statement: cst.CSTNode, name: str) -> bool:
        """name is a parameter of the function the statement is in: whether its state came from a checkpoint is
        the caller's to know, so what Horovod broadcast stays broadcast."""
        function = self.uses.enclosing_function(statement)
        return function is not None and name in parameter_names(function)

    def _broadcast_optimizer_state(self, original: cst.SimpleStatementLine, call: cst.Call,
                                   ) -> list[cst.BaseStatement]:
        optimizer = self.uses.module.code_for_node(argument(call, 0, "optimizer"))  # type: ignore[arg-type]
        root = argument(call, 1, "root_rank")
        root_code = self.uses.module.code_for_node(root) if root is not None else "0"
        if optimizer not in self.uses.loaded_optimizers and not self._an_argument(original, optimizer):
            return self._zero_gradient_step(original, optimizer)
        out = [parse_stmt(f"optimizer_state = [{optimizer}.state_dict()]"),
               parse_stmt(f"dist.broadcast_object_list(optimizer_state, src={root_code})"),
               parse_stmt(f"{optimizer}.load_state_dict(optimizer_state[0])")]
        self.note(original, "dist.broadcast_object_list([optimizer.state_dict()]); load_state_dict",
                  notes.BROADCAST_OPTIMIZER_STATE_RESUMED)
        return out

    def _zero_gradient_step(self, original: cst.SimpleStatementLine, optimizer: str) -> list[cst.BaseStatement]:
        """A fresh optimizer's broadcast: Horovod's zero-gradient step, run again where it changes training
        (compare/migrate/plan/zero_step.py), dropped with the reason where it does not."""
        line = self.uses.line(original)
        # DistributedOptimizer(optimizer) built after the broadcast (assigned, returned or passed on) is a new
        # optimizer made from the param groups: the stepped one's state is left behind
        wraps = [call for call in (self.uses.dist_optimizer_call, *self.uses.step_hook_optimizers)
                 if call is not None and (inner := argument(call, 0, "optimizer")) is not None
                 and self.uses.module.code_for_node(inner) == optimizer]
        state_kept = not any(self.uses.line(call) > line for call in wraps)
        assigns = self.uses.parsed.findall(m.Assign())
        made = construction_of(self.uses.module, assigns, optimizer, line, self.uses.line)  # type: ignore[arg-type]
        why = zero_step_effect(made, state_kept)
        if why is None:
            self.note(original, "", notes.BROADCAST_OPTIMIZER_STATE_FRESH.format(why=unchanged_words(made, state_kept)))
            return []
        call = f"{self.helper('horovod_zero_gradient_step')}({optimizer}, keep_state={state_kept})"
        kept = ("the optimizer that trains is the one Horovod stepped" if state_kept else
                "DistributedOptimizer, built after the broadcast, dropped the step's state; its effect on the "
                "parameters stays")
        self.note(original, call, notes.ZERO_GRADIENT_STEP.format(why=why, keep=state_kept, kept=kept))
        return [parse_stmt(call)]

    def _plain_optimizer(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                         ) -> list[cst.BaseStatement]:
        """`optimizer = hvd.DistributedOptimizer(optimizer, ...)` -> nothing; `opt = ...(torch.optim.SGD(...))`
        -> `opt = torch.optim.SGD(...)` (leave_Call has unwrapped the value)."""
        assign = updated.body[0]
        target = self.uses.module.code_for_node(assign.targets[0].target)  # type: ignore[attr-defined]
        value = cst.Module([]).code_for_node(assign.value)  # type: ignore[attr-defined]
        self.note(original, "" if target == value else f"{target} = {value}", self._optimizer_note())
        out: list[cst.BaseStatement] = [] if target == value else [updated]
        carried = self._carried_compression()
        if carried is not None:  # the wrap is made in another method: the argument goes there on the object
            code = self.uses.module.code_for_node(self._compression().visit(_CompressionHooks(self)))  # type: ignore[union-attr]
            out.append(parse_stmt(f"{carried} = {code}"))
            self.note(original, f"{carried} = {code}", notes.COMPRESSION_CARRIED)
        return out

    def _compression(self) -> cst.BaseExpression | None:
        call = self.uses.dist_optimizer_call
        return keyword_args(call).get("compression") if call is not None else None

    def _carried_compression(self) -> str | None:
        """The attribute that carries a compression= the DistributedOptimizer read to the method the wrap is made
        in (an argument of the constructor is unbound there), or None where the wrap reads it in place."""
        compression = self._compression()
        if compression is None or self.plan is None or self.uses.hvd_name(compression) in (
                "Compression.fp16", "Compression.none") or not self.plan.model.startswith("self."):
            return None
        made_in = self.uses.enclosing_function(self.uses.dist_optimizer_stmt)  # type: ignore[arg-type]
        if made_in is None or made_in is self.uses.enclosing_function(self.wrap_stmt):  # type: ignore[arg-type]
            return None
        return "self." + unique_name("ddp_compression_hook", tokenize_names(self.uses.module.code))

    def _accumulating_backward(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                               ) -> list[cst.BaseStatement]:
        """backward() under model.no_sync() but on the passes Horovod reduces on (backward_passes_per_step=k)."""
        condition, note = self.accumulation.accumulate[id(original)]
        body = cst.Module([]).code_for_node(updated.with_changes(leading_lines=())).strip()
        out = [parse_stmt(f"with contextlib.nullcontext() if {condition} else {self.wrapper}.no_sync():\n"
                          f"    {body}\n")]
        self.need("contextlib")
        self.note(original, f"with contextlib.nullcontext() if {condition} else {self.wrapper}.no_sync(): ...",
                  note)
        return out

    def _optimizer_note(self) -> str:
        keywords = keyword_args(self.uses.dist_optimizer_call)  # type: ignore[arg-type]
        parts = [notes.DISTRIBUTED_OPTIMIZER]
        if "named_parameters" in keywords:
            parts.append(notes.NAMED_PARAMETERS)
        if "op" in keywords:
            parts.append(notes.OPTIMIZER_OP_DROPPED)
        if "gradient_predivide_factor" in keywords:
            parts.append(notes.PREDIVIDE)
        return " ".join(parts)

    def _wrap_statements(self) -> list[cst.BaseStatement]:
        plan = self.plan
        assert plan is not None
        model = plan.wrapper  # what the comm hook is registered on
        self.need("torch.nn.parallel", "DistributedDataParallel", "DDP")
        unused = ", find_unused_parameters=True" if plan.find_unused else ""
        wrap = f"{plan.wrapper} = DDP({plan.wrapped}{unused})"
        out = [parse_stmt(wrap)]
        note = " ".join([notes.DDP_AFTER_AMP if plan.after_amp else notes.DDP_WRAP,
                         *([notes.FIND_UNUSED.format(why=plan.find_unused)] if plan.find_unused else [])])
        self.changes.append(Change(self.wrap_line or 0, self.uses.code(self.wrap_stmt), wrap, note))
        call = self.uses.dist_optimizer_call
        compression = keyword_args(call).get("compression") if call is not None else None
        if compression is not None:
            if self.uses.hvd_name(compression) == "Compression.fp16":
                self.need("torch.distributed.algorithms.ddp_comm_hooks", "default_hooks")
                out.append(parse_stmt(f"{model}.register_comm_hook(None, default_hooks.fp16_compress_hook)"))
            elif (carried := self._carried_compression()) is not None:
                out.append(parse_stmt(f"if {carried} is not None:\n    {model}.register_comm_hook(None, {carried})\n"))
            elif self.uses.hvd_name(compression) != "Compression.none":
                # A name (`compression=compression`) is rewritten where it is bound; any other expression
                # (`hvd.Compression.fp16 if args.fp16 else hvd.Compression.none`) is rewritten here, bound
                # once, under a name the file does not use.
                hook = self.uses.module.code_for_node(compression.visit(_CompressionHooks(self)))
                if not isinstance(compression, cst.Name):
                    name = unique_name("compression_hook", tokenize_names(self.uses.module.code))
                    out.append(parse_stmt(f"{name} = {hook}"))
                    hook = name
                out.append(parse_stmt(f"if {hook} is not None:\n    {model}.register_comm_hook(None, {hook})\n"))
            self.changes.append(Change(self.uses.line(compression), self.uses.code(compression),
                                       f"{model}.register_comm_hook(None, ...)", notes.COMPRESSION_HOOK))
        return out

    def leave_With(self, original: cst.With, updated: cst.With) -> cst.BaseStatement | cst.FlattenSentinel:
        uses = self.uses
        if not uses.lightning and len(original.items) == 1 and m.matches(original.items[0].item, m.Call(
                func=m.Attribute(attr=m.Name("skip_synchronize")))) and \
                get_full_name_for_node(original.items[0].item.func.value) in uses.optimizers:  # type: ignore[attr-defined]
            body = list(updated.body.body)  # type: ignore[attr-defined]
            body[0] = body[0].with_changes(leading_lines=[*updated.leading_lines, *body[0].leading_lines])
            self.note(original, "(its body, one level out)", notes.SKIP_SYNCHRONIZE)
            return cst.FlattenSentinel(body)
        return updated

    def _join_wrap(self, original: cst.CSTNode, updated: cst.BaseCompoundStatement) -> cst.BaseStatement:
        if id(original) not in self.uses.join_loops or not self.model:
            return updated
        self.need("torch.distributed.algorithms.join", "Join")
        loop = updated.with_changes(leading_lines=())
        wrapped = cst.With(items=[cst.WithItem(parse_expr(f"Join([{self.wrapper}])"))],
                           body=cst.IndentedBlock(body=[loop]), leading_lines=updated.leading_lines)
        self.note(original, f"with Join([{self.wrapper}]):  # around this loop", notes.JOIN)
        return wrapped

    def _bind_before_guard(self, original: cst.CSTNode, updated: cst.BaseStatement) -> None:
        """Before the if/try the wrap is made under, the wrapper is bound to the model itself: the path that does
        not wrap trains the model as it did."""
        if self.plan is None or original is not self.plan.guard:
            return
        bound = parse_stmt(f"{self.plan.wrapper} = {self.plan.wrapped}").with_changes(
            leading_lines=updated.leading_lines)
        self.expand[id(updated)] = (updated, [bound, updated.with_changes(leading_lines=())])
        self.note(original, f"{self.plan.wrapper} = {self.plan.wrapped}", notes.WRAPPER_UNWRAPPED_PATH)

    def leave_Try(self, original: cst.Try, updated: cst.Try) -> cst.Try:
        self._bind_before_guard(original, updated)
        return updated

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If:
        self._bind_before_guard(original, updated)
        if original in self.uses.rank_guards:
            what = [word for word, found in (("saving", m.findall(original.body, m.Call(func=m.Attribute(
                attr=m.Name("save"))))), ("printing", m.findall(original.body, m.Call(func=m.Name("print")))))
                if found]
            if what:
                test = cst.Module([]).code_for_node(updated.test)
                self.note(original, f"if {test}:  # {' and '.join(what)} on one rank",
                          notes.LIGHTNING_RANK_GUARD if self.uses.lightning else notes.RANK_GUARD)
        return updated

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.BaseStatement:
        plan = self.accumulation.inner_loops.get(id(original))
        if plan is None or not self.model:
            return self._join_wrap(original, updated)
        iterable = cst.Module([]).code_for_node(updated.iter)
        target = cst.Module([]).code_for_node(updated.target)
        if plan.over_range:
            loop = self._join_wrap(original, updated.with_changes(iter=cst.Name(plan.name)))
            held = parse_stmt(f"{plan.name} = {iterable}").with_changes(leading_lines=loop.leading_lines)
            loop = loop.with_changes(leading_lines=())
            self.expand[id(loop)] = (loop, [held, loop])
            self.note(original, f"{plan.name} = {iterable}; for {target} in {plan.name}:", notes.INNER_LOOP_RANGE)
            return loop
        item = updated.target
        if isinstance(item, cst.Tuple) and not item.lpar:
            item = item.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        marked = cst.Tuple([cst.Element(cst.Name(plan.name)), cst.Element(item)], lpar=[], rpar=[])
        call = cst.Call(func=cst.Name(self.helper("mark_last")), args=[cst.Arg(updated.iter)])
        self.note(original, f"for {plan.name}, {cst.Module([]).code_for_node(item)} in mark_last({iterable}):",
                  notes.INNER_LOOP_ITERABLE)
        return self._join_wrap(original, updated.with_changes(target=marked, iter=call))

    def leave_While(self, original: cst.While, updated: cst.While) -> cst.BaseStatement:
        return self._join_wrap(original, updated)

    # blocks: apply the statement expansions, keep the comments of removed statements
    def _body(self, body: list[cst.BaseStatement], *, end_of_job: bool) -> list[cst.BaseStatement]:
        result: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for stmt in body:
            held, replacement = self.expand.get(id(stmt), (stmt, [stmt]))
            if held is not stmt:
                replacement = [stmt]
            if not replacement:
                carried += stmt.leading_lines  # its comments stay, above the next statement
                continue
            first = replacement[0]
            lead = [*stmt.leading_lines] if first is not stmt else []
            replacement = [first.with_changes(leading_lines=[*carried, *lead, *first.leading_lines]),
                           *replacement[1:]]
            carried = []
            result += replacement
        if end_of_job:
            tail = [parse_stmt("dist.barrier()"), parse_stmt("dist.destroy_process_group()")]
            returns = bool(result) and m.matches(result[-1], m.SimpleStatementLine(body=[m.Return()]))
            if returns and m.findall(result[-1], m.Attribute(value=m.Name("dist"))):
                return result  # the return value still needs the group: it ends at exit
            index = len(result) - 1 if returns else len(result)
            result[index:index] = tail
            self.changes.append(Change(self.uses.line(self.uses.init_stmt), "(no hvd.shutdown())",
                                       "dist.barrier(); dist.destroy_process_group()  # at the end of the block "
                                       "that calls init_process_group()",
                                       notes.END_OF_JOB))
        if not result:
            result = [cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)]
        return result

    def _is_init_block(self, original: cst.CSTNode) -> bool:
        init = self.uses.init_stmt
        body = list(getattr(original, "body", ()))
        if init is None or self.uses.has_shutdown or self.uses.lightning or not self.end_of_job or init not in body:
            return False
        # The job ends at the end of the block that trains: the module, or a block with a loop after init(), or
        # that calls a function of this file with a loop (`main(args)` in a `__main__` block). A helper or a
        # branch that only initialises would destroy the group it has just made.
        looping = {f.name.value for f in self.uses.parsed.findall(m.FunctionDef())  # type: ignore[union-attr]
                   if self.uses.parsed.findall(m.For() | m.While(), f)}
        return isinstance(original, cst.Module) or any(
            m.findall(statement, m.For() | m.While() | m.Call(func=m.Name(m.MatchIfTrue(looping.__contains__))))
            for statement in body[body.index(init) + 1:])

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=self._body(list(updated.body), end_of_job=self._is_init_block(original)))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = self._body(list(updated.body), end_of_job=self._is_init_block(original))
        if self.helpers and self.helpers_module:
            for name in self.helpers:
                self.need(self.helpers_module, self.helper_names.get(name, name))
            self.changes.append(Change(0, "", f"helpers {', '.join(self.helpers)} imported from {self.helpers_module}",
                                       notes.HELPERS))
        elif self.helpers:
            last_import = max((i for i, s in enumerate(body) if m.matches(s, m.SimpleStatementLine(
                body=[m.Import() | m.ImportFrom()]))), default=-1)
            code = "\n".join(helper_code(name, self.helper_names) + "\n\n" for name in self.helpers)
            helpers = list(cst.parse_module(code).body)
            helpers[0] = helpers[0].with_changes(leading_lines=[
                cst.EmptyLine(), cst.EmptyLine(),
                cst.EmptyLine(comment=cst.Comment("# Added by `python -m compare migrate`: each helper stands "
                                                  "for the Horovod call its docstring names."))])
            if last_import + 1 < len(body):  # two blank lines between the helpers and what follows
                following = body[last_import + 1]
                blank = next((i for i, line in enumerate(following.leading_lines) if line.comment), None)
                blank = len(following.leading_lines) if blank is None else blank
                body[last_import + 1] = following.with_changes(
                    leading_lines=[*[cst.EmptyLine()] * max(0, 2 - blank), *following.leading_lines])
            body[last_import + 1:last_import + 1] = helpers
            self.changes.append(Change(0, "", f"helpers {', '.join(self.helpers)} added after the imports",
                                       notes.HELPERS))
        return updated.with_changes(body=self._without_unused_dist_import(body))

    def _without_unused_dist_import(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """torch.distributed is imported only where it is used: not where Lightning or Ray Train does the
        distributed work, nor where every use of Horovod in the file became something else (a wrapper, a removal,
        a helper imported from the helpers module). The file's whole body is read, its inlined helpers too."""
        index = next((i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine)
                      and s.body[0] is self.dist_import), None)
        if index is None or any(m.findall(s, m.Name("dist")) for i, s in enumerate(body) if i != index):
            return body
        self.imports.discard(("torch.distributed", None, "dist"))
        removed = body.pop(index)
        if index < len(body):  # its blank lines and comments stay, above the next statement
            body[index] = body[index].with_changes(leading_lines=[*removed.leading_lines, *body[index].leading_lines])
        gone = notes.LIGHTNING_IMPORT if self.uses.lightning else notes.RAY_HOROVOD_IMPORT if self.uses.ray else \
            notes.IMPORT_UNUSED
        for change in self.changes:
            if change.note == notes.IMPORT:
                change.after, change.note = "", gone
            elif change.note == notes.IMPORT_KEPT:
                change.after = "(this import kept)"
        return body


class _CompressionHooks(cst.CSTTransformer):
    """hvd.Compression.fp16 -> DDP's fp16 hook, hvd.Compression.none -> None, in an expression the rewrite copies."""

    def __init__(self, rewrite: RewriteBase):
        super().__init__()
        self.rewrite = rewrite

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        name = self.rewrite.uses.hvd_name(original)
        if name == "Compression.fp16":
            self.rewrite.need("torch.distributed.algorithms.ddp_comm_hooks", "default_hooks")
            return parse_expr("default_hooks.fp16_compress_hook")
        return cst.Name("None") if name == "Compression.none" else updated
