"""Where the model is trained, and what goes through the DDP wrapper: the plan pass 2 applies.

The model keeps its name, its class and its state-dict keys. DistributedDataParallel is bound to a new name
(`ddp_model = DDP(model)`, `self.model_ddp = DDP(self.model)`, the shape of PyTorch's own DDP tutorial) and only
the forward calls whose result is back-propagated go through it. Everything else (saving, loading, an EMA copy,
attributes, evaluation, other modules, the repository's DataParallel unwraps) keeps the model itself: no
`.module` is added, and checkpoints keep their keys. That is all DDP needs: its reducer is armed by its own
forward, which must be the one each backward() runs through; a forward of the module itself between steps (an
evaluation under no_grad) leaves the reducer alone.

A training forward is a call of the model (`model(x)`, `model.forward(x)`, an inner module `self.model.model(x)`)
whose result reaches a backward() in the same function, through assignments, or through a function of the file
that returns it (`loss = self.compute_loss(batch)`); or the model handed to a function that trains it (`train(model,
loader)`, in this file or, by the repository's index, in another module): that function gets the wrapper.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.read.flag_category import Category
from compare.migrate.read.parsed import Parsed
from compare.migrate.read.repository import tokenize_names
from compare.migrate.read.syntax import dotted_name, parameter_names

if TYPE_CHECKING:
    from compare.migrate.plan.horovod_uses import HorovodUses

NO_GRAD = {"torch.no_grad", "no_grad", "torch.inference_mode", "inference_mode", "torch.set_grad_enabled"}
# What a function that trains its argument may also do with it: the wrapper answers these as the model would.
WRAPPER_SAFE = {"train", "eval", "parameters", "named_parameters", "zero_grad", "to", "cuda", "cpu", "modules",
                "children", "named_modules", "buffers", "named_buffers", "no_sync", "training", "requires_grad_"}


@dataclasses.dataclass(frozen=True)
class Problem:
    line: int
    category: Category
    why: str


@dataclasses.dataclass(frozen=True)
class WrapPlan:
    """What pass 2 writes for the model the DistributedOptimizer trained."""
    wrap_stmt: cst.CSTNode        # DDP is made after this statement (original tree)
    after_amp: bool               # moved below apex's amp.initialize, which raises on a wrapped model
    find_unused: str              # why find_unused_parameters=True ("": DDP's default)
    model: str                    # the model as the file names it: "model", "self.model"
    wrapped: str                  # what DDP wraps: the model, or the inner module its training forward calls
    wrapper: str                  # the new name the wrapper is bound to: "ddp_model", "self.model_ddp"
    forwards: frozenset[int]      # id() of each training forward's Call (original tree): it calls the wrapper
    handed: frozenset[int]        # id() of each Arg handing the model to a function that trains it
    problems: tuple[Problem, ...]  # lines a person must change, and why
    guard: cst.CSTNode | None = None  # the outermost if/try the wrap is made under: the wrapper is bound to the
    #                                   model itself before it, so the path that does not wrap trains the model

    @property
    def found(self) -> bool:
        return bool(self.forwards or self.handed)


@dataclasses.dataclass(frozen=True)
class TrainsArgument:
    """A function of the repository that trains a model it receives: its parameter's name and position."""
    parameter: str
    position: int
    other_uses: tuple[str, ...]   # what else the function reads of it, that the wrapper does not answer


def wrapper_name(model: str, taken: Iterable[str]) -> str:
    """`model` -> `ddp_model`, `self.model` -> `self.model_ddp`: a name the file does not use."""
    head, _, last = model.rpartition(".")
    names = set(taken)
    if head:
        base = f"{last}_ddp"
        name, number = base, 2
        while f"{head}.{name}" in names or name in names:
            name, number = f"{base}{number}", number + 1
        return f"{head}.{name}"
    base = f"ddp_{last}"
    name, number = base, 2
    while name in names:
        name, number = f"{base}{number}", number + 1
    return name


def _targets(node: cst.CSTNode) -> list[str]:
    """The names an assignment target binds: `a`, `self.a`, the base of `a[k]`, each element of a tuple."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _targets(e.value)]
    if isinstance(node, cst.StarredElement):
        return _targets(node.value)
    if isinstance(node, cst.Subscript):
        return _targets(node.value)
    name = dotted_name(node)
    return [name] if name else []


def _under_no_grad(parsed: Parsed, node: cst.CSTNode) -> bool:
    while node is not parsed.module:
        node = parsed.parents[node]
        if isinstance(node, cst.With) and any(
                isinstance(i.item, cst.Call) and (get_full_name_for_node(i.item.func) or "") in NO_GRAD
                for i in node.items):
            return True
        if isinstance(node, cst.FunctionDef) and any(
                (get_full_name_for_node(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                 or "") in NO_GRAD for d in node.decorators):
            return True
    return False


class _Flow:
    """Within one function: which values come from given calls, by assignment, and whether one reaches a
    backward() or the function's return."""

    def __init__(self, parsed: Parsed, function: cst.CSTNode, sources: list[cst.CSTNode]):
        self.parsed, self.function = parsed, function
        self.source_ids = {id(s) for s in sources}
        self.names: set[str] = set()
        bindings: list[tuple[list[str], cst.CSTNode]] = []
        for assign in parsed.findall(m.Assign() | m.AugAssign() | m.AnnAssign(), function):
            value = getattr(assign, "value", None)
            if value is None:
                continue
            targets = [n for t in assign.targets for n in _targets(t.target)] if isinstance(assign, cst.Assign) \
                else _targets(assign.target)  # type: ignore[attr-defined]
            bindings.append((targets, value))
        for with_node in parsed.findall(m.With(), function):
            for item in with_node.items:  # type: ignore[attr-defined]
                if item.asname is not None:
                    bindings.append((_targets(item.asname.name), item.item))
        for loop in parsed.findall(m.For(), function):
            bindings.append((_targets(loop.target), loop.iter))  # type: ignore[attr-defined]
        changed = True
        while changed:
            changed = False
            for targets, value in bindings:
                if self.carries(value) and not set(targets) <= self.names:
                    self.names |= set(targets)
                    changed = True

    def carries(self, node: cst.CSTNode) -> bool:
        if id(node) in self.source_ids:
            return True
        for found in self.parsed.findall(m.Call() | m.Name() | m.Attribute(), node):
            if id(found) in self.source_ids or (not isinstance(found, cst.Call) and dotted_name(found) in self.names):
                return True
        return False

    def back_propagated(self) -> bool:
        for call in self.parsed.findall(m.Call(), self.function):
            func = get_full_name_for_node(call.func) or ""  # type: ignore[attr-defined]
            is_backward = m.matches(call.func, m.Attribute(attr=m.Name("backward"))) or func.endswith(  # type: ignore[attr-defined]
                ("autograd.backward", "autograd.grad"))
            if not is_backward:
                continue
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None  # type: ignore[attr-defined]
            if (receiver is not None and self.carries(receiver)) or any(self.carries(a.value) for a in call.args):  # type: ignore[attr-defined]
                return True
        return False

    def returned(self) -> bool:
        return any(r.value is not None and self.carries(r.value)  # type: ignore[attr-defined]
                   for r in self.parsed.findall(m.Return(), self.function))


def _functions(parsed: Parsed) -> list[cst.FunctionDef]:
    return parsed.findall(m.FunctionDef())  # type: ignore[return-value]



def _callable_name(parsed: Parsed, function: cst.FunctionDef) -> str:
    """How the file calls it: `self.compute_loss` for a method, `compute_loss` for a function."""
    return f"self.{function.name.value}" if parsed.enclosing(function, cst.ClassDef) is not None \
        else function.name.value


def _model_methods(parsed: Parsed) -> set[str]:
    """Methods of the file's own nn.Module classes: `model.x(...)` with one of these names is no inner module."""
    return {f.name.value for c in parsed.findall(m.ClassDef()) for f in parsed.findall(m.FunctionDef(), c)}  # type: ignore[attr-defined]


def training_forwards(parsed: Parsed, model: str, functions: list[cst.FunctionDef] | None = None,
                      after_line: int = 0, scope: cst.CSTNode | None = None) -> dict[int, tuple[cst.Call, str]]:
    """id(call) -> (the call, what it calls: the model or its inner module) for each call of the model whose
    result is back-propagated: in `scope` after `after_line` (the wrap), or in the given functions; a function of
    the file that returns such a result makes its callers' back-propagated calls of it count."""
    methods = _model_methods(parsed)
    candidates: list[tuple[cst.Call, str]] = []
    places = [scope] if scope is not None else (functions or [])
    for place in places:
        for call in parsed.findall(m.Call(), place):
            func = dotted_name(call.func) or ""  # type: ignore[attr-defined]
            if scope is not None and parsed.line(call) <= after_line:
                continue
            if func in (model, f"{model}.forward"):
                candidates.append((call, model))  # type: ignore[arg-type]
            elif func.startswith(f"{model}.") and func.count(".") == model.count(".") + 1 \
                    and func.rsplit(".", 1)[1] not in WRAPPER_SAFE | {"forward"}:
                candidates.append((call, func))  # type: ignore[arg-type]
    candidates = [(c, f) for c, f in candidates if not _under_no_grad(parsed, c)]
    found: dict[int, tuple[cst.Call, str]] = {}
    if not candidates:
        return found
    if scope is not None and not isinstance(scope, cst.FunctionDef):  # module level: the script's loop
        for call, what in candidates:
            if parsed.enclosing(call, cst.FunctionDef) is None and _Flow(parsed, scope, [call]).back_propagated():
                found[id(call)] = (call, what)
    by_function: dict[int, list[tuple[cst.Call, str]]] = {}
    for call, what in candidates:
        by_function.setdefault(id(parsed.enclosing(call, cst.FunctionDef)), []).append((call, what))
    returning: dict[str, list[tuple[cst.Call, str]]] = {}  # a function of the file -> the forwards it returns
    for function in _functions(parsed):
        for call, what in by_function.get(id(function), []):
            flow = _Flow(parsed, function, [call])
            if flow.back_propagated():
                found[id(call)] = (call, what)
            if flow.returned():
                returning.setdefault(_callable_name(parsed, function), []).append((call, what))
    for _ in range(3):  # a forward returned through up to three functions of the file
        for function in _functions(parsed) if returning else ():
            for call in parsed.findall(m.Call(), function):
                inner = returning.get(dotted_name(call.func) or "")  # type: ignore[attr-defined]
                if inner is None:
                    continue
                flow = _Flow(parsed, function, [call])
                if flow.back_propagated():
                    found.update({id(c): (c, f) for c, f in inner})
                if flow.returned():
                    returning.setdefault(_callable_name(parsed, function), []).extend(
                        pair for pair in inner if pair not in returning.get(_callable_name(parsed, function), []))
    # A method the model's own class defines (`model.compute_loss(x)`) is no inner module: "" says so.
    return {key: (call, what if what == model or what.rsplit(".", 1)[1] not in methods else "")
            for key, (call, what) in found.items()}


def trains_arguments(parsed: Parsed, function: cst.FunctionDef) -> tuple[TrainsArgument, ...]:
    """The parameters of `function` it trains (a forward of one back-propagated), with what else it reads of
    each."""
    params = list(function.params.params)
    offset = 1 if params and params[0].name.value in ("self", "cls") else 0
    found = []
    for position, param in enumerate(params[offset:]):
        name = param.name.value
        if not training_forwards(parsed, name, [function]):
            continue
        others = sorted({a.attr.value for a in parsed.findall(m.Attribute(value=m.Name(name)), function)  # type: ignore[attr-defined]
                         if a.attr.value not in WRAPPER_SAFE | {"forward"}  # type: ignore[attr-defined]
                         and not _called_as_forward(parsed, a)})
        if any(m.matches(arg.value, m.Name(name)) for arg in parsed.findall(m.Arg(), function)):
            others.append("(handed on)")
        found.append(TrainsArgument(name, position, tuple(others)))
    return tuple(found)


def _called_as_forward(parsed: Parsed, attribute: cst.Attribute) -> bool:
    parent = parsed.parents.get(attribute)
    return isinstance(parent, cst.Call) and parent.func is attribute


def repository_trainers(parsed: Parsed, module_names: Iterable[str]) -> dict[str, tuple[TrainsArgument, ...]]:
    """A module's top-level functions that train a model they receive, by `module.function` for each name the
    module is imported by (the repository's index, for the files that hand a model to one)."""
    out = {}
    for function in _functions(parsed):
        if parsed.enclosing(function, cst.FunctionDef) is None and parsed.enclosing(function, cst.ClassDef) is None:
            found = trains_arguments(parsed, function)
            if found:
                out.update({f"{name}.{function.name.value}": found for name in module_names})
    return out


def _imported_functions(parsed: Parsed) -> dict[str, str]:
    """name bound in the file -> `module.function` for each `from module import function [as name]`."""
    out = {}
    for node in parsed.findall(m.ImportFrom()):
        module = get_full_name_for_node(node.module) if node.module else ""  # type: ignore[attr-defined]
        if isinstance(node.names, cst.ImportStar):  # type: ignore[attr-defined]
            continue
        for alias in node.names:  # type: ignore[attr-defined]
            name = get_full_name_for_node(alias.name) or ""
            bound = get_full_name_for_node(alias.asname.name) if alias.asname else name
            out[bound or name] = f"{module}.{name}" if module else name
    return out


def plan_wrap(parsed: Parsed, model: str, wrap_stmt: cst.CSTNode, taken: Iterable[str],
              trainers: Mapping[str, tuple[TrainsArgument, ...]] | None = None) -> WrapPlan:
    """Where `model` (which the DistributedOptimizer trained, wrapped after `wrap_stmt`) is trained: the forwards
    and hand-overs that take the wrapper, the name it gets, and what a person must see."""
    trainers = trainers or {}
    wrap_line = parsed.line(wrap_stmt)
    function = parsed.enclosing(wrap_stmt, cst.FunctionDef)
    problems: list[Problem] = []
    if model.startswith("self."):
        owner = parsed.enclosing(wrap_stmt, cst.ClassDef)
        functions = [f for f in parsed.findall(m.FunctionDef(), owner)] if owner is not None else []  # type: ignore[misc]
        found = training_forwards(parsed, model, functions)  # type: ignore[arg-type]
        scopes = functions
    else:
        scope = function if function is not None else parsed.module
        found = training_forwards(parsed, model, scope=scope, after_line=wrap_line)
        scopes = [scope]
    forwards = {k: v for k, v in found.items() if v[1]}
    for call, _ in (v for v in found.values() if not v[1]):
        problems.append(Problem(parsed.line(call), Category.BYPASSES_DDP,
                                f"`{dotted_name(call.func)}(...)` is a method "
                                "of the model whose result is back-propagated: DDP averages gradients only for what "
                                "runs in its forward; call the model (move this into forward)"))
    inner = {what for _, what in forwards.values()}
    wrapped = model
    if len(inner) > 1:
        problems.append(Problem(wrap_line, Category.MODEL_NOT_WRAPPED, f"`{model}` is trained through {len(inner)} "
                                f"callables ({', '.join(sorted(inner))}): one DDP wraps one module; wrap a module "
                                "whose forward calls them all"))
        forwards = {}
    elif inner:
        wrapped = inner.pop()
    handed_args, hand_problems = _hand_overs(parsed, model, scopes, wrap_line if not model.startswith("self.") else 0,
                                        trainers)
    problems += hand_problems
    problems += _rebound(parsed, model, wrap_stmt, scopes)
    wrapper = wrapper_name(model, taken)
    return WrapPlan(wrap_stmt, False, "", model, wrapped, wrapper, frozenset(forwards),
                    frozenset(id(a) for a in handed_args),
                    tuple(problems), _guard(parsed, wrap_stmt, [c for c, _ in forwards.values()] + handed_args))


def _guard(parsed: Parsed, statement: cst.CSTNode, uses: list[cst.CSTNode]) -> cst.CSTNode | None:
    """The outermost if or try, within its function, that the wrap is under and some use of the wrapper is not:
    on the path that does not wrap, the wrapper must still name something that trains."""
    guard = None
    node = statement
    while node is not parsed.module and not isinstance(node, cst.FunctionDef):
        node = parsed.parents[node]
        if isinstance(node, (cst.If, cst.Try)) and not all(_within(parsed, use, node) for use in uses):
            guard = node
    return guard


def _within(parsed: Parsed, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
    while node is not parsed.module:
        if node is ancestor:
            return True
        node = parsed.parents[node]
    return False


def _hand_overs(parsed: Parsed, model: str, scopes: list[cst.CSTNode], after_line: int,
                trainers: Mapping[str, tuple[TrainsArgument, ...]]) -> tuple[list[cst.Arg], list[Problem]]:
    """The Args handing the model to a function that trains it (the file's own, or another module's by the
    repository's index): they get the wrapper."""
    own = {_callable_name(parsed, f): f for f in _functions(parsed)}
    imported = _imported_functions(parsed)
    handed: list[cst.Arg] = []
    problems: list[Problem] = []
    for scope in scopes:
        for call in parsed.findall(m.Call(), scope):
            if parsed.line(call) <= after_line:
                continue
            callee = dotted_name(call.func) or ""  # type: ignore[attr-defined]
            for position, arg in enumerate(call.args):  # type: ignore[attr-defined]
                if dotted_name(arg.value) != model or arg.star:
                    continue
                if callee in own:
                    candidates = trains_arguments(parsed, own[callee])
                else:
                    candidates = trainers.get(imported.get(callee, callee), ())
                trains = next((t for t in candidates if (arg.keyword is not None and arg.keyword.value == t.parameter)
                               or (arg.keyword is None and position == t.position)), None)
                if trains is None:
                    continue
                handed.append(arg)
                if trains.other_uses:
                    problems.append(Problem(parsed.line(call), Category.WRAPPER_HANDED_ON,
                                            f"`{callee}` trains `{model}` "
                                            "and now receives the DDP wrapper, but also reads "
                                            f"{', '.join(trains.other_uses)} of it: the wrapper has no such "
                                            "attribute and saves `module.` keys; hand it the model as a second "
                                            "argument for those"))
    return handed, problems


def _rebound(parsed: Parsed, model: str, wrap_stmt: cst.CSTNode, scopes: list[cst.CSTNode]) -> list[Problem]:
    """`model = ...` after the wrap: the wrapper still trains the object it was made with."""
    wrap_line = parsed.line(wrap_stmt)
    wrap_function = parsed.enclosing(wrap_stmt, cst.FunctionDef)
    problems = []
    for scope in scopes:
        for assign in parsed.findall(m.Assign(), scope):
            if model not in [n for t in assign.targets for n in _targets(t.target)]:  # type: ignore[attr-defined]
                continue
            here = parsed.enclosing(assign, cst.FunctionDef)
            if (here is wrap_function and parsed.line(assign) <= wrap_line) or (
                    model.startswith("self.") and here is not None and here.name.value == "__init__"  # type: ignore[attr-defined]
                    and parsed.line(assign) <= wrap_line):
                continue
            problems.append(Problem(parsed.line(assign), Category.MODEL_RE_BOUND,
                                    f"`{model}` is bound again after it is "
                                    f"wrapped in DDP (line {wrap_line}): the wrapper still trains the object it was "
                                    "made with; wrap the new one too"))
    return problems


def plan_model_wrap(uses: HorovodUses, trainers: Mapping[str, tuple[TrainsArgument, ...]] | None = None,
                    ) -> WrapPlan | None:
    """The wrap of the model the DistributedOptimizer trained, or None where no DDP is made (Lightning's strategy
    wraps; no model named; the model is an argument the function does not return; no training forward found).
    Where none is made, that optimizer keeps Horovod's meaning: its gradients are averaged at step()."""
    model = None if uses.lightning else uses.model
    stmts = [*uses.broadcast_parameters_stmts, *([uses.dist_optimizer_stmt] if uses.dist_optimizer_stmt else [])]
    if not model or not stmts or uses.dist_optimizer_stmt is None:
        return None
    wrap_stmt = max(stmts, key=uses.line)
    if _argument_not_returned(uses, model, wrap_stmt) or len(optimizer_modules(uses)) > 1:
        # several modules in one optimizer (two encoders): one DDP per module would need a forward per module;
        # the optimizer keeps Horovod's meaning instead, every parameter it covers averaged at step()
        return None
    # apex's amp.initialize raises on a model already in DDP: the wrap goes after the last one in its block
    block = uses.parents[wrap_stmt]
    later = [s for s in uses.amp_initialize_stmts if uses.parents[s] is block and uses.line(s) > uses.line(wrap_stmt)]
    site = later[-1] if later else wrap_stmt
    taken = tokenize_names(uses.module.code)
    plan = plan_wrap(uses.parsed, model, site, taken, trainers)
    for alias in _attribute_aliases(uses.parsed, model, site) if not plan.found else ():
        # `self.model = model` in the constructor, the model trained as `self.model(x)` in another method
        aliased = plan_wrap(uses.parsed, alias, site, taken, trainers)
        if aliased.found:
            plan = aliased
            break
    return dataclasses.replace(plan, after_amp=bool(later), find_unused=unused_parameters_evidence(uses, plan))


def _argument_not_returned(uses: HorovodUses, model: str, statement: cst.CSTNode) -> bool:
    """The model is a parameter of the function the optimizer is made in, and that function does not return it:
    a DDP made there would be a local name the caller never trains through."""
    function = uses.enclosing_function(statement)
    if function is None or model not in parameter_names(function):
        return False
    returned = {get_full_name_for_node(r.value) for r in m.findall(function.body, m.Return()) if r.value is not None}
    return model not in returned


RANDOM_CALL = re.compile(r"(random|np\.random|numpy\.random)\.\w+|torch\.(randint|rand|bernoulli|multinomial)")
SAMPLING_METHOD = re.compile(r"sample|set_active|set_sub|arch|choice|activate|drop_path|set_mode", re.IGNORECASE)


def unused_parameters_evidence(uses: HorovodUses, plan: WrapPlan) -> str:
    """Why some parameters may get no gradient in a step, which DDP waits for unless told
    (find_unused_parameters=True), or "" where the code shows nothing of the kind (DDP's default, and faster)."""
    parsed, model = uses.parsed, plan.model
    if model in uses.frozen_models or any(f.startswith(f"{model}.") for f in uses.frozen_models):
        return "requires_grad is turned off on part of the model while it trains"
    for compare in parsed.findall(m.Comparison()):
        code = parsed.module.code_for_node(compare)
        if re.search(r"\.grad\s+is\s+None", code):
            return (f"the script fills gradients that are None (line {parsed.line(compare)}), written so that ranks "
                    "that did not use a parameter still took part in Horovod's allreduce")
    for call in parsed.findall(m.Call(func=m.Attribute())):
        receiver = dotted_name(call.func.value) or ""  # type: ignore[attr-defined]
        method = call.func.attr.value  # type: ignore[attr-defined]
        if receiver in (model, plan.wrapped) and SAMPLING_METHOD.search(method) and method not in WRAPPER_SAFE:
            return (f"`{receiver}.{method}(...)` (line {parsed.line(call)}) changes what the model's forward runs "
                    "between steps (a sampled sub-network)")
    forwards = _forward_methods(parsed)
    for forward in forwards:
        if any(RANDOM_CALL.fullmatch(dotted_name(c.func) or "") for c in parsed.findall(m.Call(), forward)):  # type: ignore[attr-defined]
            return f"the forward at line {parsed.line(forward)} draws at random which parts run"
        for branch in parsed.findall(m.If(), forward):
            test = parsed.module.code_for_node(branch.test)  # type: ignore[attr-defined]
            if re.search(r"rank|\.sum\(|\.any\(|\.all\(|\.item\(", test):
                return (f"the forward at line {parsed.line(forward)} branches on its data or the rank "
                        f"(`if {test}:`): some parameters may take no part in a step")
    return ""


def _forward_methods(parsed: Parsed) -> list[cst.FunctionDef]:
    return [f for f in parsed.findall(m.FunctionDef(name=m.Name("forward")))]  # type: ignore[misc]


def optimizer_modules(uses: HorovodUses) -> set[str]:
    """The modules whose parameters the DistributedOptimizer covers: from its named_parameters= and from the
    optimizer it wraps (`torch.optim.SGD(list(a.parameters()) + list(b.parameters()))`, param groups, a chain),
    followed to that optimizer's assignment in the same function. A module inside another counts as that one."""
    call = uses.dist_optimizer_call
    if call is None:
        return set()
    places: list[cst.CSTNode] = [a.value for a in call.args]
    scope = uses.enclosing_function(call) or uses.module
    followed: set[str] = set()
    for place in places:  # grows: each name read is followed to its last assignment before the call
        for name in {n.value for n in uses.parsed.findall(m.Name(), place)} - followed:  # type: ignore[attr-defined]
            followed.add(name)
            made = [a for a in uses.parsed.findall(m.Assign(), scope) if uses.line(a) < uses.line(call)
                    and any(m.matches(t.target, m.Name(name)) for t in a.targets)]  # type: ignore[attr-defined]
            places += [made[-1].value] if made else []  # type: ignore[attr-defined]
    found = set()
    for place in places:
        for params in uses.parsed.findall(m.Call(func=m.Attribute(attr=m.Name("parameters") | m.Name(
                "named_parameters"))), place):
            name = dotted_name(params.func.value)  # type: ignore[attr-defined]
            if name:
                found.add(name)
    # one object under two names (`self.model = model`, then `model.parameters()` and `self.model.named_...`)
    scope = uses.enclosing_function(call) or uses.module
    same: dict[str, str] = {}
    for assign in uses.parsed.findall(m.Assign(value=m.Name() | m.Attribute()), scope):
        value = dotted_name(assign.value)  # type: ignore[attr-defined]
        for target in assign.targets:  # type: ignore[attr-defined]
            name = dotted_name(target.target)
            if value and name:
                same[name] = same.get(value, value)
    found = {same.get(n, n) for n in found}
    return {n for n in found if not any(n.startswith(f"{other}.") for other in found)}


def _attribute_aliases(parsed: Parsed, model: str, site: cst.CSTNode) -> list[str]:
    """`self.x` for each `self.x = model` in a method of the class the wrap is made in."""
    owner = parsed.enclosing(site, cst.ClassDef)
    if owner is None or "." in model:
        return []
    return [name for assign in parsed.findall(m.Assign(value=m.Name(model)), owner)
            for t in assign.targets if (name := dotted_name(t.target) or "").startswith("self.")]  # type: ignore[attr-defined]
