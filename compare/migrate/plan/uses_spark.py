"""Pass 1, Spark: a Horovod job that Spark starts, through horovod.spark.run or Databricks' sparkdl.HorovodRunner.

Both become pyspark's TorchDistributor (pyspark.ml.torch.distributor, Spark 3.4+): `horovod.spark.run(fn, args,
kwargs, num_proc=N)` becomes `TorchDistributor(num_processes=N, local_mode=False, use_gpu=...).run(fn, *args,
**kwargs)`, and `HorovodRunner(np=N)` becomes `TorchDistributor(num_processes=|N|, local_mode=N < 0, use_gpu=...)`,
whose `.run(main, **kwargs)` is called as HorovodRunner's was (an np that is more than a name is bound once, to
a new name, before its statement: `runner_np = -args.num_proc`, then `num_processes=abs(runner_np)` and
`local_mode=runner_np < 0`). The training function itself is a Horovod function like any other: the rest of the
rewrite turns it into one for torchrun, which TorchDistributor starts. The estimator API (TorchEstimator,
Store ...), run_elastic and the options with no counterpart stay, flagged.

HorovodUses calls its visit of a name (visit_spark_use) before its own visit of the same node.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
import libcst.matchers as m

from compare.migrate.plan.added_helpers import HELPERS
from compare.migrate.plan.uses_base import UsesBase
from compare.migrate.read import notes
from compare.migrate.read.flag_category import Category
from compare.migrate.read.horovod_api import (
    SPARK_ESTIMATOR_MODULES,
    SPARK_RUN,
    SPARK_RUN_ARGS,
    SPARK_RUN_DROPPED,
    SPARK_RUN_NO_EQUIVALENT,
    SPARK_RUNNER,
)
from compare.migrate.read.parsed import Parsed
from compare.migrate.read.syntax import argument, dotted_name, keyword_args

# names the migration itself may add to a script, which a new name must not be
ADDED_NAMES = frozenset({"dist", "DDP", "TorchDistributor", "SparkSession", "torch", "os", "tempfile", "ray"})
LINE_LENGTH = 100  # a longer horovod.spark.run replacement puts run()'s arguments on the next line


def is_spark_front_end(module: str | None) -> bool:
    """horovod.spark (and its submodules) or Databricks' sparkdl."""
    return bool(module) and any(module == p or module.startswith(p + ".")  # type: ignore[union-attr]
                                for p in ("horovod.spark", "sparkdl"))


@dataclasses.dataclass
class DistributorPlan:
    """A horovod.spark.run(...) or HorovodRunner(...) call and the TorchDistributor code that replaces it."""
    code: str                                     # the replacing expression
    notes: list[tuple[str, str]]                  # (what it became, why) for the report, in this order


class SparkUses(UsesBase):
    """horovod.spark's and sparkdl's names, and the plan of each call that starts a Spark job."""

    def __init__(self, parsed: Parsed):
        super().__init__(parsed)
        self.scopes = parsed.scopes
        self.spark_names: dict[str, str] = {}          # bound name -> what it names ("hvd" -> "horovod.spark.torch")
        self.spark_imports: list[cst.CSTNode] = []     # imports of horovod.spark... and sparkdl
        self.distributor_plans: dict[int, DistributorPlan] = {}  # id(call) -> its TorchDistributor
        self.dropped_subscripts: set[int] = set()      # ids of the `[0]` on a horovod.spark.run result
        self.spark_left: set[str] = set()              # bound names with a use that stays (flagged): import kept
        self.spark_import_names: dict[int, list[str]] = {}  # id(import) -> the names it binds
        self.runner_bindings: dict[int, str] = {}     # id(statement) -> `runner_np = <np>`, put before it

    # imports (called from HorovodUses.visit_Import / visit_ImportFrom)
    def record_spark_import(self, node: cst.Import, name: str, bound: str) -> None:
        """`import horovod.spark`, `import horovod.spark.torch as hvd`, `import sparkdl`."""
        if node not in self.spark_imports:
            self.spark_imports.append(node)
        self.spark_import_names[id(node)] = [*self.spark_import_names.get(id(node), []), bound]
        self.spark_names[bound] = name

    def record_spark_import_from(self, node: cst.ImportFrom, module: str) -> None:
        """`from sparkdl import HorovodRunner`, `from horovod.spark import run`, `from horovod.spark.torch import
        TorchEstimator`..."""
        self.spark_imports.append(node)
        if isinstance(node.names, cst.ImportStar):
            self.flag(node, Category.SPARK, f"from {module} import *: {notes.SPARK_UNRECOGNISED}")
            return
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            bound = dotted_name(alias.asname.name) if alias.asname else name
            self.spark_names[bound or name] = f"{module}.{name}"
            self.spark_import_names.setdefault(id(node), []).append(bound or name)

    def spark_name(self, node: cst.CSTNode | None) -> str | None:
        """'horovod.spark.run' for horovod.spark.run after `import horovod.spark`, 'sparkdl.HorovodRunner' for
        HorovodRunner after `from sparkdl import HorovodRunner`, else None."""
        bound = self._binding(node)
        return None if bound is None else self.spark_names[bound] + (dotted_name(node) or "")[len(bound):]

    def _binding(self, node: cst.CSTNode | None) -> str | None:
        """The bound name a use starts with (the longest that fits: `horovod.spark.torch` before `horovod.spark`)."""
        name = dotted_name(node) or ""
        return next((bound for bound in sorted(self.spark_names, key=len, reverse=True)
                     if name == bound or name.startswith(bound + ".")), None)

    # every use
    def visit_spark_use(self, node: cst.Attribute | cst.Name) -> None:
        parent = self.parents[node]
        if isinstance(parent, cst.Attribute) and (parent.value is node or parent.attr is node):
            return  # only the outermost of a.b.c
        if not self.spark_names or isinstance(parent, (cst.ImportAlias, cst.AsName, cst.Param, cst.FunctionDef,
                                                       cst.ClassDef)) or (isinstance(parent, cst.Arg)
                                                                          and parent.keyword is node):
            return
        full = self.spark_name(node)
        if full is None:
            return
        called = isinstance(parent, cst.Call) and parent.func is node
        if full == SPARK_RUN and called:
            self._plan_spark_run(parent)  # type: ignore[arg-type]
        elif full == SPARK_RUNNER and called:
            self._plan_runner(parent)  # type: ignore[arg-type]
        elif full == f"{SPARK_RUN}_elastic":
            self._keep(node, Category.ELASTIC, notes.SPARK_ELASTIC)
        elif full.startswith(SPARK_ESTIMATOR_MODULES):
            self._keep(node, Category.SPARK_ESTIMATOR, notes.SPARK_ESTIMATOR)
        elif full == SPARK_RUN:
            self._keep(node, Category.SPARK, notes.SPARK_RUN_SHAPE)
        elif full == SPARK_RUNNER:
            self._keep(node, Category.SPARK, notes.RUNNER_SHAPE)
        else:
            self._keep(node, Category.SPARK, f"{full}: {notes.SPARK_UNRECOGNISED}")

    def _keep(self, node: cst.CSTNode, category: Category, why: str) -> None:
        """A use that stays as it is, flagged; its import stays too."""
        self.spark_left.add(self._binding(node) or "")
        self.flag(node, category, why)

    # horovod.spark.run(fn, args=(), kwargs={}, num_proc=None, ...)
    def _plan_spark_run(self, call: cst.Call) -> None:
        given = self._spark_run_args(call)
        if given is None or "fn" not in given:
            self._keep(call.func, Category.SPARK, notes.SPARK_RUN_SHAPE)
            return
        unsupported = [name for name in given if name in SPARK_RUN_NO_EQUIVALENT]
        if unsupported:
            self._keep(call.func, Category.SPARK, " ".join(notes.SPARK_OPTION.format(option=name,
                                                                            what=SPARK_RUN_NO_EQUIVALENT[name])
                                                    for name in unsupported))
            return
        code = self.module.code_for_node
        plan_notes: list[tuple[str, str]] = []
        num_proc = given.get("num_proc")
        if num_proc is None or m.matches(num_proc, m.Name("None")):
            processes = "SparkSession.active().sparkContext.defaultParallelism"
            plan_notes.append((f"num_processes={processes}", notes.SPARK_NUM_PROC_DEFAULT))
        else:
            processes = code(num_proc)
        fn = given["fn"]
        use_gpu = self._uses_cuda(fn)
        run_args = [code(fn), *self._positional(given.get("args")), *self._keywords(given.get("kwargs"))]
        constructor = f"TorchDistributor(num_processes={processes}, local_mode=False, use_gpu={use_gpu})"
        one_line = f"{constructor}.run({', '.join(run_args)})"
        plan_notes.insert(0, (one_line, notes.SPARK_RUN))
        plan_notes.append((f"use_gpu={use_gpu}", notes.SPARK_GPU_ON if use_gpu else notes.SPARK_GPU_OFF))
        if use_gpu:  # a task with several GPUs runs several processes, which share one output file
            plan_notes.append(("", notes.SPARK_LOCAL_RESULT))
        if any(name in SPARK_RUN_DROPPED for name in given):
            plan_notes.append(("", notes.SPARK_DROPPED))
        code_of_call = one_line
        if self.positions[call].start.column + len(one_line) > LINE_LENGTH:  # the arguments on a line of their own
            code_of_call = f"{constructor}.run(\n    {', '.join(run_args)})"  # 4 more than the block's indent
        self.distributor_plans[id(call)] = DistributorPlan(code_of_call, plan_notes)
        self._plan_result(call)

    def _spark_run_args(self, call: cst.Call) -> dict[str, cst.BaseExpression] | None:
        """horovod.spark.run's arguments by parameter name, or None where a `*args`/`**kwargs` hides them."""
        given: dict[str, cst.BaseExpression] = {}
        for index, arg in enumerate(call.args):
            if arg.star:
                return None
            if arg.keyword is None:
                if index >= len(SPARK_RUN_ARGS):
                    return None
                given[SPARK_RUN_ARGS[index]] = arg.value
            elif arg.keyword.value in SPARK_RUN_ARGS:
                given[arg.keyword.value] = arg.value
            else:
                return None
        return given

    def _positional(self, value: cst.BaseExpression | None) -> list[str]:
        """args=(a, b) -> ['a', 'b']; args=some_tuple -> ['*some_tuple']."""
        if value is None or m.matches(value, m.Name("None")):
            return []
        if isinstance(value, (cst.Tuple, cst.List)):
            return [self.module.code_for_node(e.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for e in value.elements]
        return [f"*{self.module.code_for_node(value)}"]

    def _keywords(self, value: cst.BaseExpression | None) -> list[str]:
        """kwargs={'a': 1} -> ['a=1']; kwargs=some_dict -> ['**some_dict']."""
        if value is None or m.matches(value, m.Name("None")):
            return []
        code = self.module.code_for_node
        if isinstance(value, cst.Dict) and all(
                isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                and str(e.key.evaluated_value).isidentifier() for e in value.elements):
            return [f"{e.key.evaluated_value}={code(e.value)}" for e in value.elements]  # type: ignore[union-attr]
        return [f"**{code(value)}"]

    def _uses_cuda(self, fn: cst.BaseExpression | None) -> bool:
        """Whether the training function (else, where it is not defined here, the script) mentions CUDA."""
        name = dotted_name(fn)
        defined = [f for f in m.findall(self.module, m.FunctionDef()) if name and f.name.value == name]
        where = defined[0] if defined else self.module
        return any("cuda" in (n.value if isinstance(n, cst.Name) else str(n.evaluated_value)).lower()
                   for n in m.findall(where, m.Name() | m.SimpleString()))

    def _plan_result(self, call: cst.Call) -> None:
        """horovod.spark.run(...)[0], or `result = horovod.spark.run(...)` and result[0]: the [0] goes."""
        parent = self.parents[call]
        if _is_first(parent, call):
            self.dropped_subscripts.add(id(parent))
            return
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            return
        target = parent.targets[0].target
        plan = self.distributor_plans[id(call)]
        plan.notes.append((f"{target.value} = rank 0's return value", notes.SPARK_RUN_RESULT_NAME))
        scope = self.scopes[target]
        for assignment in scope.assignments[target.value] if scope is not None else ():
            if getattr(assignment, "node", None) is not target:
                continue
            for access in assignment.references:
                use = access.node
                above = self.parents[use]
                if _is_first(above, use):
                    self.dropped_subscripts.add(id(above))
                elif (isinstance(above, cst.Subscript) and above.value is use) or (
                        isinstance(above, cst.For) and above.iter is use) or (
                        isinstance(above, cst.Arg) and m.matches(self.parents[above], m.Call(func=m.Name("len")))):
                    self.flag(use, Category.SPARK, notes.SPARK_RESULT_LIST)

    # HorovodRunner(np=N, driver_log_verbosity=...)
    def _plan_runner(self, call: cst.Call) -> None:
        keywords = keyword_args(call)
        np = argument(call, 0, "np")
        others = [a for a in call.args if a.value is not np and not (
            a.keyword and a.keyword.value == "driver_log_verbosity")]
        if np is None or others or any(a.star for a in call.args):
            self._keep(call.func, Category.SPARK, notes.RUNNER_SHAPE)
            return
        number = _integer(np)
        code = self.module.code_for_node(np)
        plan_notes: list[tuple[str, str]] = []
        if number == 0:
            self._keep(call.func, Category.SPARK, notes.RUNNER_NP_ZERO)
            return
        if number is not None:
            processes, local = str(abs(number)), str(number < 0)
        elif isinstance(np, (cst.Name, cst.Attribute)):
            processes, local = f"abs({code})", f"{code} < 0"
            plan_notes.append((f"num_processes={processes}, local_mode={local}", notes.HOROVOD_RUNNER_EXPRESSION))
        else:  # any other expression is read once, into a new name, before the statement that makes the runner
            statement = self._statement_to_bind_before(call)
            if statement is None:
                self._keep(call.func, Category.SPARK, notes.RUNNER_SHAPE)
                return
            bound = self._fresh_name("runner_np")
            bare = "\n" in code and not getattr(np, "lpar", ())
            value = f"({code})" if bare else code  # an expression over lines needs its parentheses as a statement
            self.runner_bindings[id(statement)] = f"{bound} = {value}"
            processes, local = f"abs({bound})", f"{bound} < 0"
            plan_notes.append((f"{bound} = {code}; num_processes={processes}, local_mode={local}",
                               notes.RUNNER_NP_BOUND.format(name=bound)))
        use_gpu = self._uses_cuda(self._runner_main(call))
        new = f"TorchDistributor(num_processes={processes}, local_mode={local}, use_gpu={use_gpu})"
        plan_notes.insert(0, (new, notes.HOROVOD_RUNNER))
        plan_notes.append((f"use_gpu={use_gpu}", notes.SPARK_GPU_ON if use_gpu else notes.SPARK_GPU_OFF))
        if local != "False":
            plan_notes.append(("", notes.SPARK_LOCAL_RESULT))
        if "driver_log_verbosity" in keywords:
            plan_notes.append(("", notes.RUNNER_VERBOSITY))
        self.distributor_plans[id(call)] = DistributorPlan(new, plan_notes)

    def _statement_to_bind_before(self, call: cst.Call) -> cst.SimpleStatementLine | None:
        """The statement line that holds the call, where a name bound just before it is read as np was: once,
        in the same scope. None inside a lambda, a comprehension or a condition (np might be read later, never,
        or in another scope), in a compound statement's header, in a one-line block, after another statement on
        its line (`n = 2; HorovodRunner(np=-n)`), or where the statement already has one (the second np would be
        read before the first runner ran)."""
        node: cst.CSTNode = call
        child = node
        while not isinstance(node, cst.SimpleStatementLine):
            child, node = node, self.parents[node]
            if isinstance(node, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.IfExp,
                                 cst.BooleanOperation, cst.BaseCompoundStatement, cst.SimpleStatementSuite)):
                return None
        return node if node.body[0] is child and id(node) not in self.runner_bindings else None

    def _fresh_name(self, stem: str) -> str:
        """stem, else stem_2, stem_3 ...: a name that no name of the script or of what the migration adds is."""
        taken = {n.value for n in m.findall(self.module, m.Name())} | set(HELPERS) | ADDED_NAMES
        return next(name for name in (stem, *(f"{stem}_{i}" for i in range(2, 10_000))) if name not in taken)

    def _runner_main(self, call: cst.Call) -> cst.BaseExpression | None:
        """The function a HorovodRunner runs: `HorovodRunner(...).run(main, ...)`, or `hr = HorovodRunner(...)` and
        `hr.run(main, ...)` in the same scope."""
        parent = self.parents[call]
        if isinstance(parent, cst.Attribute) and parent.attr.value == "run":
            run = self.parents[parent]
            return argument(run, 0, "main") if isinstance(run, cst.Call) else None
        if not (isinstance(parent, cst.Assign) and isinstance(parent.targets[0].target, cst.Name)):
            return None
        target = parent.targets[0].target
        scope = self.scopes[target]
        for assignment in scope.assignments[target.value] if scope is not None else ():
            for access in assignment.references:
                above = self.parents[access.node]
                if isinstance(above, cst.Attribute) and above.attr.value == "run" and isinstance(
                        self.parents[above], cst.Call):
                    return argument(self.parents[above], 0, "main")  # type: ignore[arg-type]
        return None


def _is_first(parent: cst.CSTNode, value: cst.CSTNode) -> bool:
    """parent is `value[0]`."""
    return isinstance(parent, cst.Subscript) and parent.value is value and m.matches(
        parent, m.Subscript(slice=[m.SubscriptElement(slice=m.Index(value=m.Integer("0")))]))


def _integer(node: cst.BaseExpression) -> int | None:
    """2 for `2`, -2 for `-2`, else None."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if m.matches(node, m.UnaryOperation(operator=m.Minus(), expression=m.Integer())):
        return -int(node.expression.evaluated_value)  # type: ignore[attr-defined]
    return None
