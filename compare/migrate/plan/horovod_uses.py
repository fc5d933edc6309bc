"""Pass 1: where Horovod is used, and what each use becomes (the imports, every hvd. name and call)."""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.plan.uses_lightning import LightningUses
from compare.migrate.plan.uses_ray import RayUses
from compare.migrate.plan.uses_spark import SparkUses, is_spark_front_end
from compare.migrate.read import notes
from compare.migrate.read.flag_category import Category
from compare.migrate.read.horovod_api import HANDLED, NEEDS_A_PERSON, REDUCTIONS, is_horovod_module
from compare.migrate.read.syntax import argument, is_lightning_module, keyword_args, receiver_of

# a function that may load an optimizer it is handed (`load_checkpoint`, `resume`, `restore_state`; not DataLoader)
LOADER = re.compile(r"(^|_)(load|resume|restore)", re.IGNORECASE)


class HorovodUses(LightningUses, RayUses, SparkUses):
    """Pass 1: where Horovod is used, and what each use becomes. The visits of the imports and of every
    Horovod name and call are here; Lightning's Trainer, Ray's and Spark's front-ends are the parts it is made of."""

    def visit_Module(self, node: cst.Module) -> None:
        # Every name bound to horovod.torch, before any use is visited: an import below a function that uses the
        # name (`def main(hvd, ...)` called from a `__main__` block that imports it) binds it for that function
        # too, as pass 2 sees it.
        torch_of_horovod = m.ImportAlias(name=m.Attribute(value=m.Name("horovod"), attr=m.Name("torch")))
        for alias in self.parsed.findall(torch_of_horovod):
            self.hvd.add(get_full_name_for_node(alias.asname.name) if alias.asname else "horovod.torch")  # type: ignore[union-attr,arg-type]

    # imports
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = get_full_name_for_node(alias.name)
            bound = get_full_name_for_node(alias.asname.name) if alias.asname else name
            if name == "horovod.torch":
                self.hvd.add(bound)  # `import horovod.torch` binds the dotted name itself
                self.hvd_imports.append(node)
            elif name == "horovod":
                self.horovod.add(bound)
                self.hvd_imports.append(node)
            elif self.record_ray_import(node, name or ""):
                pass  # horovod.ray, ray.train.horovod: uses_ray.py
            elif is_spark_front_end(name):
                self.record_spark_import(node, name, bound)  # horovod.spark, sparkdl: uses_spark.py
            elif is_horovod_module(name):
                self.hvd_imports.append(node)
                self.flag(node, Category.UNRECOGNISED, f"import of {name}: only horovod.torch is migrated")
            elif is_lightning_module(name):
                if alias.asname:
                    self.lightning_names[bound] = name  # type: ignore[index,assignment]
                else:  # `import lightning.pytorch` binds `lightning`
                    self.lightning_names[name.split(".")[0]] = name.split(".")[0]  # type: ignore[union-attr]

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = get_full_name_for_node(node.module) if node.module else ""
        if is_lightning_module(module):
            self.record_lightning_import(node, module)
            return
        if self.record_ray_import(node, module):
            return  # horovod.ray, ray.train.horovod: uses_ray.py
        if is_spark_front_end(module):
            self.record_spark_import_from(node, module)  # horovod.spark, sparkdl: uses_spark.py
            return
        if node.relative or not is_horovod_module(module):  # `from .horovod_backend import X`: the repository's
            return
        self.hvd_imports.append(node)
        names = node.names if isinstance(node.names, (list, tuple)) else []
        if module == "horovod" and names and all(get_full_name_for_node(a.name) == "torch" for a in names):
            self.hvd.add(get_full_name_for_node(names[0].asname.name) if names[0].asname else "torch")
        elif module == "horovod" and names and all(get_full_name_for_node(a.name) == "run" for a in names):
            self.flag(node, Category.UNRECOGNISED,
                      "from horovod import run: write horovod.run(...) to have it migrated")
        else:
            category = Category.ELASTIC if "elastic" in module else Category.UNRECOGNISED
            self.flag(node, category, f"from {module} import ...: not migrated; rewrite with "
                                      "`import horovod.torch as hvd`")

    # every use: the parts' visits of the same node first (Spark's front-end names, Ray's calls and strings)
    def visit_Name(self, node: cst.Name) -> None:
        self.visit_spark_use(node)
        super().visit_Name(node)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.visit_environment_string(node)
        super().visit_SimpleString(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.visit_spark_use(node)
        parent = self.parents[node]
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # only the outermost of hvd.a.b
        if self.is_horovod_class(node):
            self.horovod_class_refs.append((None, node))
        name = self.hvd_name(node)
        if name is None:
            horovod_name = get_full_name_for_node(node)
            if horovod_name in {f"{alias}.run" for alias in self.horovod} and not (
                    isinstance(parent, cst.Call) and parent.func is node):
                self.flag(node, Category.UNRECOGNISED, "horovod.run used other than as a call")
            return
        root = name.split(".")[0]
        if root in NEEDS_A_PERSON or name in NEEDS_A_PERSON:
            category, why = NEEDS_A_PERSON.get(name) or NEEDS_A_PERSON[root]
            self.flag(node, category, why)
        elif name not in HANDLED:
            self.flag(node, Category.UNRECOGNISED, f"hvd.{name} has no migration here: rewrite it by hand")
        elif name not in ("Compression.fp16", "Compression.none", *REDUCTIONS) and not (
                isinstance(parent, cst.Call) and parent.func is node):
            self.flag(node, Category.UNRECOGNISED, f"hvd.{name} used other than as a call: rewrite it by hand")

    def visit_Call(self, node: cst.Call) -> None:
        self.visit_ray_call(node)
        if m.matches(node.func, m.Attribute(attr=m.Name("commit"))):
            self.commit_calls.append(node)
        self._model_preconditions(node)
        name = self.hvd_name(node.func)
        keywords = keyword_args(node)
        if "process_set" in keywords or "process_sets" in keywords:
            self.flag(node, Category.PROCESS_SETS, notes.PROCESS_SETS)
        if self.is_trainer(node.func):
            self._plan_trainer(node)
        if name == "init":
            self.init_calls.append(node)
            stmt = self.statement_of(node)
            if isinstance(stmt, cst.SimpleStatementLine):
                self.init_stmt = stmt
            if node.args:
                self.flag(node, Category.PROCESS_SETS, "hvd.init(...) arguments (communicator, process sets): "
                                                 "dist.init_process_group / dist.new_group by hand")
        elif name == "shutdown":
            self.has_shutdown = True
        elif name == "SyncBatchNorm":
            self.has_sync_batchnorm = True
        elif name == "DistributedOptimizer":
            self._distributed_optimizer(node, keywords)
        elif name == "broadcast_parameters":
            stmt = self.statement_of(node)
            if isinstance(stmt, cst.SimpleStatementLine) and m.matches(stmt, m.SimpleStatementLine(
                    body=[m.Expr(value=m.Call())])):
                self.broadcast_parameters_stmts.append(stmt)
                params = argument(node, 0, "params")
                self.model = self.model or receiver_of(params, "state_dict") or receiver_of(params, "named_parameters")
            else:
                self.flag(node, Category.UNRECOGNISED, "hvd.broadcast_parameters(...) not as a statement of its own")
        elif name == "broadcast_optimizer_state":
            if not m.matches(self.statement_of(node), m.SimpleStatementLine(body=[m.Expr(value=m.Call())])):
                self.flag(node, Category.UNRECOGNISED,
                          "hvd.broadcast_optimizer_state(...) not as a statement of its own")
        elif name == "join":
            self._join(node)
        elif name in ("allreduce", "allreduce_"):
            for scale in ("prescale_factor", "postscale_factor"):
                if scale in keywords:
                    self.flag(node, Category.UNRECOGNISED, f"allreduce {scale}: multiply the tensor by hand")
        elif m.matches(node.func, m.Attribute(attr=m.Name("load_state_dict"))):
            receiver = get_full_name_for_node(node.func.value)  # type: ignore[union-attr]
            if receiver:
                self.loaded_optimizers.add(receiver)
        elif LOADER.search((get_full_name_for_node(node.func) or "").rsplit(".", 1)[-1]):
            # `load_checkpoint(path, model, optimizer)`: the optimizer may be loaded in another module
            self.loaded_optimizers |= {name for a in node.args if (name := get_full_name_for_node(a.value))}
        elif m.matches(node.func, m.Attribute(attr=m.Name("backward"))):
            stmt = self.statement_of(node)
            if m.matches(stmt, m.SimpleStatementLine(body=[m.Expr(value=m.Call())])):
                self.backward_stmts.append(stmt)
        if get_full_name_for_node(node.func) in {f"{a}.run" for a in self.horovod}:
            for multi_host in ("hosts", "hostfile", "min_np", "max_np", "host_discovery_script"):
                if multi_host in keywords:
                    self.flag(node, Category.MULTI_HOST, f"horovod.run({multi_host}=...): torch.multiprocessing.spawn "
                                                  "starts local processes only; use torchrun on each host")

    def _model_preconditions(self, node: cst.Call) -> None:
        """What decides where and how the model is wrapped: apex's amp.initialize (DDP after it), and parameters
        whose requires_grad is turned off (`model.x.requires_grad_(False)`)."""
        func = get_full_name_for_node(node.func) or ""
        stmt = self.statement_of(node)
        if (func == "amp.initialize" or func.endswith(".amp.initialize")) and isinstance(
                stmt, cst.SimpleStatementLine):
            self.amp_initialize_stmts.append(stmt)
        if m.matches(node, m.Call(func=m.Attribute(attr=m.Name("requires_grad_")),
                                  args=[m.Arg(value=m.Name("False"))])):
            self._record_frozen(node.func.value)  # type: ignore[attr-defined]

    def visit_Assign(self, node: cst.Assign) -> None:
        """`p.requires_grad = False` in `for p in model.x.parameters():`."""
        if not (len(node.targets) == 1 and m.matches(node.targets[0].target, m.Attribute(
                attr=m.Name("requires_grad"))) and not m.matches(node.value, m.Name("True"))):
            return
        loop = self.parents[self.statement_of(node)]
        while loop is not None and not isinstance(loop, (cst.For, cst.Module)):
            loop = self.parents.get(loop)
        target = node.targets[0].target.value  # type: ignore[attr-defined]
        if isinstance(loop, cst.For) and m.matches(loop.target, m.Name()) and m.matches(target, m.Name()) \
                and loop.target.value == target.value and m.matches(  # type: ignore[attr-defined]
                    loop.iter, m.Call(func=m.Attribute(attr=m.Name("parameters")))):
            self._record_frozen(loop.iter.func.value)  # type: ignore[attr-defined]

    def _record_frozen(self, node: cst.BaseExpression) -> None:
        name = get_full_name_for_node(node)
        if name:
            self.frozen_models.add(name.removesuffix(".module").split(".module.")[0])

    def visit_If(self, node: cst.If) -> None:
        if any(self.hvd_name(call.func) == "rank" for call in self.parsed.findall(m.Call(), node.test)):
            self.rank_guards.append(node)
        if self.parsed.findall(m.Call(func=m.Attribute(attr=m.Name("step"))), node.body):
            self.step_guards.append(node)

    def _check_optimizer_op(self, keywords: dict) -> None:
        op = keywords.get("op")
        if op is not None:
            names = {self.hvd_name(a) for a in m.findall(op, m.Attribute())}
            if "Adasum" not in names and names - {"Average"}:
                self.flag(op, Category.UNRECOGNISED, notes.OPTIMIZER_OP)

    def _distributed_optimizer(self, node: cst.Call, keywords: dict) -> None:
        stmt = self.statement_of(node)
        assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and assign.value is node):
            # Returned by a wrapper, passed on: no model to wrap here; its gradients are averaged at step().
            self.step_hook_optimizers.append(node)
            self._check_optimizer_op(keywords)
            return
        target = get_full_name_for_node(assign.targets[0].target)
        inner = argument(node, 0, "optimizer")
        inner_params = argument(inner, 0, "params") if isinstance(inner, cst.Call) else None
        model = receiver_of(keywords.get("named_parameters"), "named_parameters") or receiver_of(
            inner_params, "parameters")
        self._check_optimizer_op(keywords)
        if self.dist_optimizer_stmt is not None:
            # One model is wrapped in DDP; a second optimizer's model (a GAN's other network) keeps Horovod's
            # averaging at step() instead: both train as they did.
            self.step_hook_optimizers.append(node)
            return
        self.optimizers.add(target or "")
        self.dist_optimizer_stmt, self.dist_optimizer_call = stmt, node
        self.model = receiver_of(keywords.get("named_parameters"), "named_parameters") or self.model or model
        for dropped in ("gradient_predivide_factor", "groups", "sparse_as_dense", "num_groups"):
            if dropped in keywords and dropped in ("groups", "num_groups"):
                self.flag(node, Category.UNRECOGNISED, f"DistributedOptimizer({dropped}=...): DDP buckets by size "
                                                "(bucket_cap_mb); choose one by hand")

    def _join(self, node: cst.Call) -> None:
        stmt = self.statement_of(node)
        parent = self.parents[stmt]
        body = getattr(parent, "body", None)
        own_statement = m.matches(stmt, m.SimpleStatementLine(body=[m.Expr(value=m.Call())]))
        if not own_statement or not isinstance(body, tuple | list):
            self.flag(node, Category.UNRECOGNISED, "hvd.join() other than as a statement of its own: use "
                                            "torch.distributed.algorithms.Join by hand")
            return
        index = list(body).index(stmt)
        loops = [s for s in body[:index] if isinstance(s, (cst.For, cst.While))]
        if not loops:
            self.flag(node, Category.UNRECOGNISED, "hvd.join() with no loop before it in the same block: wrap the "
                                            "training loop in `with Join([model]):` by hand")
            return
        self.join_loops[id(loops[-1])] = stmt

    def flag_elastic_commits(self) -> None:
        """state.commit() has no hvd. in it: in an elastic script, flag it with the rest of the elastic state."""
        if any(flag.category == Category.ELASTIC for flag in self.flags):
            for call in self.commit_calls:
                self.flag(call, Category.ELASTIC, notes.ELASTIC)
