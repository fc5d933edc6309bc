"""Pass 1, Ray: a Horovod job that Ray starts, through horovod.ray's RayExecutor or Ray Train's HorovodTrainer.

Both become Ray Train's TorchTrainer. RayExecutor's life cycle (create_settings, the constructor, start(), run(),
shutdown()) collapses into one `TorchTrainer(...).fit()` where run() was; a HorovodTrainer(...) becomes a
TorchTrainer(...) with the same arguments but horovod_config. In a Ray script Ray makes the process group and
owns it, so the training function loses hvd.init() and takes its rank and size from ray.train.get_context().
What cannot be told, and elastic training, stays as it is, flagged.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.plan.uses_base import UsesBase
from compare.migrate.read import notes
from compare.migrate.read.flag_category import Category
from compare.migrate.read.horovod_api import (
    HOROVOD_ENVIRONMENT,
    RAY_EXECUTOR_ARGS,
    RAY_EXECUTOR_DROPPED,
    RAY_EXECUTOR_ELASTIC,
    RAY_FRONT_ENDS,
    RAY_TRAINER_KEYWORDS,
)
from compare.migrate.read.parsed import Parsed
from compare.migrate.read.syntax import argument, dotted_name, keyword_args

RESULT_KEY = "return"  # the helper reports what the training function returned under this metrics key


@dataclasses.dataclass
class ExecutorPlan:
    """One RayExecutor that becomes TorchTrainer(...).fit() at each run()."""
    name: str                                  # the variable the executor is bound to
    removed: dict[int, str]                    # id(statement) -> its note: settings, constructor, start, shutdown
    dropped: list[str] = dataclasses.field(default_factory=list)    # settings=, use_current_placement_group=
    runs: dict[int, str] = dataclasses.field(default_factory=dict)  # id(run call) -> the TorchTrainer(...).fit()
    results: set[int] = dataclasses.field(default_factory=set)      # ids of `results[0]` after a run


@dataclasses.dataclass
class RayTrainerPlan:
    """A Ray Train HorovodTrainer(...) -> TorchTrainer(...): horovod_config= becomes torch_config=."""
    horovod_config: int | None                 # id of the horovod_config= argument, if any
    dropped: list[str]                         # HorovodConfig's own arguments, which have no TorchConfig field


class RayUses(UsesBase):
    """horovod.ray's and Ray Train's Horovod names, and the plan of each executor and trainer."""

    def __init__(self, parsed: Parsed):
        super().__init__(parsed)
        self.ray_names: dict[str, str] = {}        # bound name -> what it names ("RayExecutor" -> "horovod.ray.Ray...")
        self.ray_imports: list[cst.CSTNode] = []   # imports of horovod.ray and ray.train.horovod
        self.ray_calls: list[cst.Call] = []        # calls of a front-end name (constructors, create_settings)
        self.method_calls: list[cst.Call] = []     # every `x.method(...)`: an executor's start/run/shutdown
        self.horovod_environment: list[cst.SimpleString] = []  # "HOROVOD_RANK" and the like
        self.ray = False                           # Ray starts the workers: Ray makes and owns the process group
        self.executors: list[ExecutorPlan] = []
        self.ray_trainers: dict[int, RayTrainerPlan] = {}
        self.ray_imports_kept = False              # a front-end use stays (flagged): its import too

    # pass 1 hooks, called by HorovodUses' import visits
    def record_ray_import(self, node: cst.Import | cst.ImportFrom, module: str) -> bool:
        """horovod.ray / ray.train.horovod: their names are recorded here and never flagged as unknown imports."""
        if isinstance(node, cst.ImportFrom):
            if module not in RAY_FRONT_ENDS or isinstance(node.names, cst.ImportStar):
                return False
            for alias in node.names:
                name = get_full_name_for_node(alias.name) or ""
                bound = get_full_name_for_node(alias.asname.name) if alias.asname else name
                self.ray_names[bound or name] = f"{module}.{name}"
        else:
            if module not in RAY_FRONT_ENDS:
                return False
            self.ray_names[module] = module  # `import horovod.ray`: used as horovod.ray.RayExecutor
        self.ray_imports.append(node)
        self.ray = True
        return True

    def ray_name(self, node: cst.CSTNode | None) -> str | None:
        """'horovod.ray.RayExecutor' for RayExecutor after `from horovod.ray import RayExecutor`, else None."""
        name = dotted_name(node) or ""
        for bound, full in self.ray_names.items():
            if name == bound:
                return full
            if name.startswith(bound + "."):
                return full + name[len(bound):]
        return None

    def visit_ray_call(self, node: cst.Call) -> None:
        if self.ray_name(node.func):
            self.ray_calls.append(node)
        elif isinstance(node.func, cst.Attribute):
            self.method_calls.append(node)

    def visit_environment_string(self, node: cst.SimpleString) -> None:
        if node.evaluated_value in HOROVOD_ENVIRONMENT:
            self.horovod_environment.append(node)

    # after pass 1
    def plan_ray(self) -> None:
        """Each front-end use planned or flagged; what a Ray script means for the training function."""
        if not self.ray:
            return
        for call in self.ray_calls:
            full = self.ray_name(call.func) or ""
            short = full.rsplit(".", 1)[-1]
            if full.endswith(".create_settings") or short == "HorovodConfig":
                continue  # planned with the executor / trainer that takes it
            if short == "ElasticRayExecutor":
                self.flag(call, Category.ELASTIC, notes.RAY_ELASTIC)
            elif short == "RayExecutor":
                self._plan_executor(call)
            elif short == "HorovodTrainer":
                self._plan_trainer_call(call)
            else:
                self.flag(call, Category.RAY, f"{full} has no migration here: rewrite it with Ray Train's TorchTrainer")
        self._flag_leftovers()
        for flag in self.flags:
            if flag.category == "elastic":
                flag.why = notes.RAY_ELASTIC  # the way out under Ray, not torchrun's
        if any(flag.category == Category.ELASTIC for flag in self.flags):
            for call in self.commit_calls:  # before flag_elastic_commits, which would give torchrun's note
                self.flag(call, Category.ELASTIC, notes.RAY_ELASTIC)
        for string in self.horovod_environment:
            self.flag(string, Category.RAY, notes.RAY_HOROVOD_ENVIRONMENT)
        for call in self.init_calls:
            if self.statement_of(call) is not self.init_stmt or not m.matches(self.init_stmt, m.SimpleStatementLine(
                    body=[m.Expr(value=m.Call())])):
                self.flag(call, Category.RAY,
                          "hvd.init() other than as a statement of its own in a Ray script: remove it "
                                       "by hand (Ray Train makes the process group)")

    def _scope(self, node: cst.CSTNode) -> cst.CSTNode:
        while not isinstance(node, (cst.FunctionDef, cst.Module)):
            node = self.parents[node]
        return node

    def _plan_executor(self, call: cst.Call) -> None:
        stmt = self.statement_of(call)
        assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and assign.value is call
                and dotted_name(assign.targets[0].target)):
            self.flag(call, Category.RAY, notes.RAY_EXECUTOR_SHAPE)
            return
        name = dotted_name(assign.targets[0].target) or ""
        given = self._executor_arguments(call)
        if given is None:
            return
        scope = self._scope(call)
        methods = [c for c in self.method_calls if dotted_name(c.func.value) == name]  # type: ignore[attr-defined]
        plan = ExecutorPlan(name, {id(stmt): notes.RAY_EXECUTOR}, [k for k in given if k in RAY_EXECUTOR_DROPPED])
        problems = False
        for method in methods:
            attr = method.func.attr.value  # type: ignore[attr-defined]
            own_statement = m.matches(self.statement_of(method), m.SimpleStatementLine(body=[m.Expr(value=m.Call())]))
            if self._scope(method) is not scope or self.line(method) < self.line(call):
                self.flag(method, Category.RAY, notes.RAY_EXECUTOR_SCOPE)
                problems = True
            elif attr in ("start", "shutdown") and own_statement and not method.args:
                plan.removed[id(self.statement_of(method))] = notes.RAY_START if attr == "start" else \
                    notes.RAY_SHUTDOWN
            elif attr == "run" and "callbacks" not in keyword_args(method) and len(method.args) <= 3:
                plan.runs[id(method)] = self._trainer_code(method, given)
                self._plan_results(method, plan)
            else:
                self.flag(method, Category.RAY, notes.RAY_EXECUTOR_METHOD)
                problems = True
        settings = argument(call, 0, "settings")
        settings_stmt = self._settings_statement(settings, scope)
        if settings_stmt is not None:
            plan.removed[id(settings_stmt)] = notes.RAY_SETTINGS
        if not problems:
            self.executors.append(plan)

    def _executor_arguments(self, call: cst.Call) -> dict[str, str] | None:
        """RayExecutor's arguments by name (positional ones by its signature), as code; None where one has no
        TorchTrainer counterpart (flagged)."""
        given: dict[str, str] = {}
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in call.args) or len(positional) > len(RAY_EXECUTOR_ARGS):
            self.flag(call, Category.RAY, notes.RAY_EXECUTOR_SHAPE)
            return None
        for index, arg in enumerate(call.args):
            key = arg.keyword.value if arg.keyword else RAY_EXECUTOR_ARGS[index]
            given[key] = self.module.code_for_node(arg.value)
        elastic = [key for key in given if key in RAY_EXECUTOR_ELASTIC]
        if elastic:
            self.flag(call, Category.ELASTIC, notes.RAY_ELASTIC)
            return None
        if "num_hosts" in given or "num_workers_per_host" in given:
            self.flag(call, Category.MULTI_HOST, notes.RAY_NUM_HOSTS)
            return None
        unknown = [key for key in given if key not in RAY_EXECUTOR_ARGS]
        if unknown or "num_workers" not in given:
            self.flag(call, Category.RAY, f"RayExecutor({', '.join(unknown) or 'without num_workers'}): give "
                                   "TorchTrainer's ScalingConfig(num_workers=...) by hand")
            return None
        return given

    def _trainer_code(self, run: cst.Call, given: dict[str, str]) -> str:
        """`TorchTrainer(train_loop_calling(fn), train_loop_config=..., scaling_config=..., torch_config=...)
        .fit()`, one argument a line, aligned after the parenthesis."""
        code = self.module.code_for_node
        fn, args, kwargs = (argument(run, i, key) for i, key in enumerate(("fn", "args", "kwargs")))
        scaling = [f"num_workers={given['num_workers']}"]
        if "use_gpu" in given:
            scaling.append(f"use_gpu={given['use_gpu']}")
        resources = [f'"CPU": {given["cpus_per_worker"]}'] if "cpus_per_worker" in given else []
        if "gpus_per_worker" in given:
            resources.append(f'"GPU": {given["gpus_per_worker"]}')
        if resources:
            scaling.append(f"resources_per_worker={{{', '.join(resources)}}}")
        use_gpu = given.get("use_gpu", "False")
        backend = {"False": '"gloo"', "True": '"nccl"'}.get(use_gpu, f'"nccl" if {use_gpu} else "gloo"')
        config = (f'{{"args": {code(args) if args is not None else "()"}, '
                  f'"kwargs": {code(kwargs) if kwargs is not None else "{}"}}}')
        # Continuation lines are aligned after the parenthesis; LibCST adds the block's own indentation to them.
        column = self.positions[run].start.column - self.positions[self.statement_of(run)].start.column
        indent = " " * (column + len("TorchTrainer("))
        scaling_line = f"scaling_config=ScalingConfig({', '.join(scaling)}),"
        if self.positions[run].start.column + len("TorchTrainer(") + len(scaling_line) > 120:
            scaling_line = f",\n{indent}{' ' * len('scaling_config=ScalingConfig(')}".join(
                ["scaling_config=ScalingConfig(" + scaling[0], *scaling[1:]]) + "),"
        lines = [f"train_loop_calling({code(fn) if fn is not None else 'None'}),", f"train_loop_config={config},",
                 scaling_line, f"torch_config=TorchConfig(backend={backend}))"]
        return "TorchTrainer(" + f"\n{indent}".join(lines) + ".fit()"

    def _plan_results(self, run: cst.Call, plan: ExecutorPlan) -> None:
        """`results = executor.run(...)`: each later `results[0]` (rank 0's value) in the same scope becomes
        `results.metrics["return"]`, what rank 0 reported."""
        stmt = self.statement_of(run)
        assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not (isinstance(assign, cst.Assign) and assign.value is run and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)):
            return
        name = assign.targets[0].target.value
        scope = self._scope(run)
        for node in m.findall(scope, m.Subscript(value=m.Name(name), slice=[m.SubscriptElement(m.Index(
                m.Integer("0")))])):
            if self.line(node) > self.line(run) and self._scope(node) is scope:
                plan.results.add(id(node))

    def _settings_statement(self, settings: cst.BaseExpression | None, scope: cst.CSTNode) -> cst.CSTNode | None:
        """`settings = RayExecutor.create_settings(...)`, when the executor is its only other use."""
        if not isinstance(settings, cst.Name):
            return None
        for call in self.ray_calls:
            stmt = self.statement_of(call)
            if not (self.ray_name(call.func) or "").endswith(".create_settings") or self._scope(call) is not scope:
                continue
            if m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name(
                    settings.value))], value=m.Call())])):
                uses = [n for n in m.findall(scope, m.Name(settings.value))]
                if len(uses) == 2:  # the assignment and the executor's argument
                    return stmt
        return None

    def _plan_trainer_call(self, call: cst.Call) -> None:
        keywords = keyword_args(call)
        config = next((a for a in call.args if a.keyword and a.keyword.value == "horovod_config"), None)
        dropped: list[str] = []
        if config is not None and m.matches(config.value, m.Call()) and \
                (self.ray_name(config.value.func) or "").endswith("HorovodConfig"):  # type: ignore[attr-defined]
            dropped = [self.module.code_for_node(a).rstrip(", ") for a in config.value.args]  # type: ignore[attr-defined]
        elif config is not None:
            self.flag(call, Category.RAY, notes.RAY_HOROVOD_CONFIG_VALUE)
            return
        if any(a.star for a in call.args) or set(keywords) - RAY_TRAINER_KEYWORDS:
            self.flag(call, Category.RAY, notes.RAY_TRAINER_UNKNOWN)
            return
        self.ray_trainers[id(call)] = RayTrainerPlan(id(config) if config is not None else None, dropped)

    def _flag_leftovers(self) -> None:
        """A front-end call that is not rewritten stays, and so does its import, so that its name resolves."""
        removed = {i for plan in self.executors for i in plan.removed}
        flagged = any(f.category in (Category.RAY, Category.ELASTIC, Category.MULTI_HOST) for f in self.flags)
        for call in self.ray_calls:
            if id(call) in self.ray_trainers or id(self.statement_of(call)) in removed or self._inside_trainer(call):
                continue
            self.ray_imports_kept = True
            if not flagged:  # (the executor or trainer it configures is flagged already, else this)
                self.flag(call, Category.RAY,
                          f"{self.ray_name(call.func)} outside the executor or trainer it configures: "
                                       "rewrite it by hand (TorchTrainer takes no Horovod settings)")

    def _inside_trainer(self, call: cst.Call) -> bool:
        node: cst.CSTNode = call
        while not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Module)):
            node = self.parents[node]
            if id(node) in self.ray_trainers:
                return True
        return False
