"""The check of a migrated file (compare.migrate.check.output_check), its DDP part: every trained model wrapped and
trained through forward, DDP made after apex's amp.initialize, `.module` only where the model is wrapped, and
collectives every rank reaches, on tensors the chosen backend serves.
"""

from __future__ import annotations

import ast
import re

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.plan.wrap_plan import training_forwards
from compare.migrate.read.flag_category import Category
from compare.migrate.read.parsed import Finding, Parsed
from compare.migrate.read.syntax import dotted_name

# nn.Module's and DDP's own methods: calling these on a wrapped model is not training through another method.
MODULE_METHODS = {
    "add_module", "apply", "bfloat16", "buffers", "children", "compile", "cpu", "cuda", "double", "eval", "float",
    "forward", "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "load_state_dict",
    "modules", "named_buffers", "named_children", "named_modules", "named_parameters", "parameters",
    "register_buffer", "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_module", "register_parameter", "requires_grad_", "set_extra_state", "share_memory", "state_dict",
    "to", "to_empty", "train", "type", "zero_grad", "no_sync", "join", "join_hook", "register_comm_hook", "xpu",
}
MODULE_ATTRIBUTES = MODULE_METHODS | {"module", "training", "device", "device_ids", "process_group"}
WRAPPERS = {"DDP", "DistributedDataParallel", "torch.nn.parallel.DistributedDataParallel",
            "nn.parallel.DistributedDataParallel", "prepare_model", "ray.train.torch.prepare_model",
            "train.torch.prepare_model"}
COLLECTIVES = {"all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "broadcast",
               "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "reduce_scatter",
               "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "gather_object", "scatter",
               "scatter_object_list"}
RANK_TEST = re.compile(r"rank|is_main|is_master|main_process|is_primary|is_chief|is_root", re.IGNORECASE)
# `args.local_rank != -1`: whether the job is distributed at all (every rank takes the same branch)
MODE_TEST = re.compile(r"rank\w*\s*(==|!=|<|>=)\s*-1|-1\s*(==|!=)\s*\w*rank", re.IGNORECASE)
CPU_FACTORIES = {"tensor", "zeros", "ones", "empty", "full", "arange", "as_tensor", "from_numpy", "rand", "randn",
                 "zeros_like", "ones_like"}


def _name(node: cst.CSTNode | None) -> str:
    return (get_full_name_for_node(node) or "") if node is not None else ""


def _wraps(result: Parsed) -> dict[str, list[cst.Call]]:
    """model name -> the DDP(...) / prepare_model(...) calls that wrap it."""
    wraps: dict[str, list[cst.Call]] = {}
    for call in result.findall(m.Call()):
        if _name(call.func) in WRAPPERS and call.args:  # type: ignore[attr-defined]
            wraps.setdefault(_name(call.args[0].value), []).append(call)  # type: ignore[attr-defined]
    return wraps


def _optimizer_models(result: Parsed) -> list[tuple[str, cst.Call]]:
    """(model, optimizer call) for every model.parameters() / named_parameters() an optimizer is built from."""
    found = []
    for call in result.findall(m.Call()):
        func = _name(call.func)  # type: ignore[attr-defined]
        if not re.fullmatch(r"(torch\.)?optim\.\w+|(torch\.optim\.)?(SGD|Adam|AdamW|RMSprop|Adagrad|LAMB|Lamb|"
                            r"LARS|Adadelta|Adamax|NAdam|RAdam)", func):
            continue
        for inner in result.findall(m.Call(func=m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters"))),
                                    call):
            model = re.sub(r"\.module$", "", _name(inner.func.value))  # type: ignore[attr-defined]
            if model and model != "self":
                found.append((model, call))
    return found


RANDOM_CALL = re.compile(r"(random|np\.random|numpy\.random)\.\w+|torch\.(randint|rand|bernoulli|multinomial)")


def samples_sub_networks(parsed: Parsed, model: str) -> bool:
    """Whether the model's class (defined in this script, `model = Class(...)`) draws at random inside forward
    (a sampled sub-network, stochastic depth, a random branch): then some parameters get no gradient in a step."""
    classes = {c.name.value: c for c in parsed.findall(m.ClassDef())}  # type: ignore[attr-defined]
    for assign in parsed.findall(m.Assign(value=m.Call(func=m.Name()))):
        if not any(_name(t.target) == model for t in assign.targets):  # type: ignore[attr-defined]
            continue
        cls = classes.get(assign.value.func.value)  # type: ignore[attr-defined]
        forwards = parsed.findall(m.FunctionDef(name=m.Name("forward")), cls) if cls is not None else []
        if any(RANDOM_CALL.fullmatch(_name(c.func)) for f in forwards for c in parsed.findall(m.Call(), f)):  # type: ignore[attr-defined]
            return True
    return False


def _unused_parameters(result: Parsed, model: str, calls: list[cst.Call]) -> list[Finding]:
    if not samples_sub_networks(result, model) or any(
            a.keyword is not None and a.keyword.value == "find_unused_parameters" for c in calls for a in c.args):
        return []
    return [result.finding(calls[0], Category.UNUSED_PARAMETERS,
                           f"`{model}`'s forward draws at random which parts run, "
                           "so some parameters get no gradient in a step, which DDP waits for (an error at the next "
                           "step): give DDP find_unused_parameters=True")]


def _aliases(result: Parsed, wrapped: set[str]) -> set[str]:
    """The wrapped models and the names bound to the same object before the wrap (`self.model = model`, then
    `self.model = DDP(self.model)`: the optimizer made from `model.parameters()` trains the wrapped module)."""
    names = set(wrapped)
    for assign in result.findall(m.Assign(value=m.Name() | m.Attribute())):
        value = _name(assign.value)  # type: ignore[attr-defined]
        for target in assign.targets:  # type: ignore[attr-defined]
            bound = _name(target.target)
            for name in wrapped if value else ():
                if name == bound or name.startswith(f"{bound}."):  # the inner module: `self.model.model`
                    names.add(value + name[len(bound):])
    return names


def _averaged_at_step(result: Parsed) -> set[str]:
    """Optimizers whose gradients the migration averages at step() (average_gradients_at_step: a second
    optimizer, a model no DDP can wrap where the caller trains it), by the name passed."""
    return {_name(call.args[0].value) for call in result.findall(m.Call(func=m.Name()))
            if call.func.value.startswith("average_gradients_at_step") and call.args}  # type: ignore[attr-defined]


def _optimizer_averaged(result: Parsed, call: cst.Call, averaged: set[str]) -> bool:
    """The optimizer made by this call reaches average_gradients_at_step (by its name, or as its argument)."""
    node: cst.CSTNode | None = call
    while node is not None and not isinstance(node, (cst.SimpleStatementLine, cst.Module)):
        parent = result.parents.get(node)
        if isinstance(parent, cst.Arg):
            outer = result.parents.get(parent)
            if isinstance(outer, cst.Call) and _name(outer.func).startswith("average_gradients_at_step"):
                return True
        node = parent
    if isinstance(node, cst.SimpleStatementLine) and isinstance(node.body[0], cst.Assign):
        return any(_name(t.target) in averaged for t in node.body[0].targets)
    return False


def _covered(model: str, wrapped: set[str]) -> bool:
    """Wrapped itself, as a part of a wrapped model, or through the inner module its training forward calls."""
    return any(model == w or model.startswith(w + ".") or w.startswith(model + ".") for w in wrapped)


def check_models(original: Parsed, result: Parsed) -> list[Finding]:
    """Models an optimizer trains but DDP does not wrap; wrapped models trained through another method; DDP
    before amp.initialize; `.module` where the model may not be wrapped."""
    findings: list[Finding] = []
    if not original.findall(m.Attribute(attr=m.Name("DistributedOptimizer"))):
        return findings  # Horovod averaged no model's gradients: nothing was to be wrapped
    wraps = _wraps(result)
    wrapped = _aliases(result, set(wraps))
    averaged = _averaged_at_step(result)
    for model, call in _optimizer_models(result):
        if not _covered(model, wrapped) and not _optimizer_averaged(result, call, averaged):
            findings.append(result.finding(call, Category.MODEL_NOT_WRAPPED, f"`{model}` is trained by this optimizer "
                                           "but never wrapped in DDP: each rank would train its own copy (wrap it "
                                           "as the other model is, or average its gradients by hand)"))
    for model, calls in wraps.items():
        first = min(result.line(c) for c in calls)
        wrappers = {w for c in calls if (w := _bound_to(result, c)) and w != model}
        if wrappers:  # `ddp_model = DDP(model)`: the model stays itself; only training must go through the wrapper
            for call in calls:
                findings += _raw_training(result, model, call)
            for wrapper in wrappers:
                findings += _wrapper_attributes(result, wrapper, first)
        else:         # `model = DDP(model)`: every later use of the name is the wrapper's
            findings += _other_methods(result, model, min(calls, key=result.line))
            findings += _module_off_the_wrap(result, model, calls)
        findings += _amp_after(result, model, first)
        findings += _unused_parameters(result, model, calls)
    return findings


def _bound_to(result: Parsed, call: cst.Call) -> str:
    """The name the wrapper is bound to (`ddp_model = DDP(model)`), or "" where it is not assigned."""
    parent = result.parents.get(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return _name(parent.targets[0].target)
    return ""


def _raw_training(result: Parsed, model: str, call: cst.Call) -> list[Finding]:
    """A forward of the model itself whose result is back-propagated, after the wrap: DDP's reducer never sees
    it, so that step's gradients are not averaged."""
    statement = result.parents[result.parents[call]]
    if model.startswith("self."):
        owner: cst.CSTNode | None = statement
        while owner is not None and not isinstance(owner, cst.ClassDef):
            owner = result.parents.get(owner)
        functions = result.findall(m.FunctionDef(), owner) if owner is not None else []
        found = training_forwards(result, model, functions)  # type: ignore[arg-type]
    else:
        scope: cst.CSTNode = statement
        while scope is not result.module and not isinstance(scope, cst.FunctionDef):
            scope = result.parents[scope]
        found = training_forwards(result, model, scope=scope, after_line=result.line(call))
    return [result.finding(forward, Category.BYPASSES_DDP,
                           f"`{_name(forward.func)}(...)`: its result is back-propagated, "
                           f"but `{model}` is the module inside the DDP wrapper made at line {result.line(call)}, "
                           "whose reducer never sees this forward: the gradients of this step are not averaged "
                           "(call the wrapper)")
            for forward, _ in found.values()]


def _wrapper_attributes(result: Parsed, wrapper: str, wrap_line: int) -> list[Finding]:
    """`ddp_model.num_classes`: the wrapper answers nn.Module's own API and its forward, nothing of the model's."""
    findings = []
    for node in result.findall(m.Attribute(attr=m.Name())):
        if dotted_name(node.value) != wrapper or node.attr.value in MODULE_ATTRIBUTES:  # type: ignore[attr-defined]
            continue
        findings.append(result.finding(node, Category.WRAPPER_ATTRIBUTE,
                                       f"`{wrapper}.{node.attr.value}`: the DDP wrapper "  # type: ignore[attr-defined]
                                       "has no such attribute (it raises); read it on the model itself"))
    return findings



def reached_by_wrap(result: Parsed, node: cst.CSTNode, model: str, wrap: cst.CSTNode) -> bool:
    """Whether `model` at `node` is the name the wrap rebound, judged per function and in order: after the wrap in
    its own function; in another method of its class for `self.x`; in another function only for a module-level
    wrap of a name that function does not bind itself."""
    here, wrapped_in = result.enclosing(node, cst.FunctionDef), result.enclosing(wrap, cst.FunctionDef)
    if here is wrapped_in:
        return result.line(node) > result.line(wrap)
    if model.startswith("self."):
        return result.enclosing(node, cst.ClassDef) is result.enclosing(wrap, cst.ClassDef) is not None
    if wrapped_in is not None or here is None:
        return False
    root = model.split(".")[0]
    bound = {p.name.value for p in here.params.params} | {  # type: ignore[attr-defined]
        n for a in result.findall(m.Assign(), here) for t in a.targets for n in [_name(t.target)]}  # type: ignore[attr-defined]
    return root not in bound


def _other_methods(result: Parsed, model: str, wrap: cst.CSTNode) -> list[Finding]:
    findings = []
    for call in result.findall(m.Call(func=m.Attribute())):
        func = call.func  # type: ignore[attr-defined]
        receiver, method = dotted_name(func.value) or "", func.attr.value
        through_module = receiver == f"{model}.module"
        allowed = MODULE_METHODS - {"forward"} if through_module else MODULE_METHODS
        if (receiver != model and not through_module) or method in allowed:
            continue
        if not reached_by_wrap(result, call, model, wrap):
            continue
        findings.append(result.finding(call, Category.BYPASSES_DDP,
                                       f"`{receiver}.{method}(...)` trains the wrapped model "
                                       "without DDP's forward, so its gradients are never averaged"
                                       + ("" if through_module else " (and the DDP wrapper has no such method)")
                                       + ": call the model itself, or move this into forward"))
    for node in result.findall(m.Attribute(value=m.Name(model))):
        parent = result.parents[node]
        if node.attr.value in MODULE_ATTRIBUTES or (isinstance(parent, cst.Call) and parent.func is node) \
                or not reached_by_wrap(result, node, model, wrap):  # type: ignore[attr-defined]
            continue
        findings.append(result.finding(node, Category.BYPASSES_DDP,
                                       f"`{model}.{node.attr.value}`: the DDP wrapper has no "  # type: ignore[attr-defined]
                                       f"such attribute (it raises): `{model}.module.{node.attr.value}` reaches the "  # type: ignore[attr-defined]
                                       "model, and what is trained through it must go through forward"))
    return findings


def _amp_after(result: Parsed, model: str, wrap_line: int) -> list[Finding]:
    return [result.finding(call, Category.DDP_BEFORE_AMP, f"apex's amp.initialize after `{model}` is wrapped in DDP "
                           "(line " + str(wrap_line) + "): it raises; wrap the model after amp.initialize")
            for call in result.findall(m.Call(func=m.Attribute(attr=m.Name("initialize"))))
            if _name(call.func).endswith("amp.initialize") and result.line(call) > wrap_line  # type: ignore[attr-defined]
            and any(_name(a.value) == model for a in call.args)]  # type: ignore[attr-defined]


def _conditions(result: Parsed, node: cst.CSTNode) -> list[cst.If]:
    """The ifs whose body (or else) holds node, innermost first (up to its function)."""
    found = []
    while node is not result.module and not isinstance(node, cst.FunctionDef):
        parent = result.parents[node]
        if isinstance(parent, cst.If) and node is not parent.test:
            found.append(parent)
        node = parent
    return found


def _module_off_the_wrap(result: Parsed, model: str, calls: list[cst.Call]) -> list[Finding]:
    wrap_conditions = [_conditions(result, c) for c in calls]
    if any(not conditions for conditions in wrap_conditions):
        return []  # wrapped on every path
    tests = {result.module.code_for_node(i.test) for conditions in wrap_conditions for i in conditions}
    findings = []
    for node in result.findall(m.Attribute(attr=m.Name("module"))):
        if _name(node.value) != model or not reached_by_wrap(result, node, model, calls[0]):  # type: ignore[attr-defined]
            continue  # another model, or this name where the wrap does not reach (before it, another function)
        if any(result.module.code_for_node(i.test) in tests for i in _conditions(result, node)):
            continue
        findings.append(result.finding(node, Category.MODULE_OFF_THE_WRAP,
                                       f"`{model}.module`, but `{model}` is wrapped "
                                       "in DDP only under a condition this line is not under: it fails where the "
                                       "model is not wrapped"))
    return findings


def _collective_functions(result: Parsed) -> set[str]:
    """The script's own functions (the added helpers among them) that make a collective, to a fixed point."""
    defs = {d.name.value: d for d in result.findall(m.FunctionDef())}  # type: ignore[attr-defined]
    names: set[str] = set()
    while True:
        more = {name for name, d in defs.items() if name not in names and any(
            _is_collective(c, names) for c in result.findall(m.Call(), d))}
        if not more:
            return names
        names |= more


def _collective_name(name: str, functions: set[str], methods: frozenset[str] = frozenset()) -> bool:
    """Whether a call of this dotted name makes a collective: torch.distributed's, a DDP wrap, one of the file's
    `functions` that does, or (`methods`: the repository's methods that do, collective_methods) one of those
    called on any object."""
    if name in functions or name in WRAPPERS - {"prepare_model"}:
        return True
    head, _, last = name.rpartition(".")
    return (bool(head) and last in methods) or (last in COLLECTIVES and head in ("dist", "torch.distributed"))


def _is_collective(call: cst.Call, functions: set[str], methods: frozenset[str] = frozenset()) -> bool:
    return _collective_name(_name(call.func), functions, methods)


def _calls(result: Parsed, block: cst.CSTNode, functions: set[str], methods: frozenset[str] = frozenset(),
           ) -> list[str]:
    return [_name(c.func) for c in result.findall(m.Call(), block) if _is_collective(c, functions, methods)]  # type: ignore[attr-defined]


def _rank_only(result: Parsed, call: cst.Call, functions: set[str], methods: frozenset[str] = frozenset(),
               ) -> Finding | None:
    for guard in _conditions(result, call):
        test = result.module.code_for_node(guard.test)
        if not RANK_TEST.search(test) or MODE_TEST.search(test):
            continue
        other = guard.orelse.body if isinstance(guard.orelse, cst.Else) else None
        if other is not None and \
                _calls(result, guard.body, functions, methods) == _calls(result, other, functions, methods):
            continue  # every rank makes the same calls, one branch or the other
        return result.finding(call, Category.RANK_ONLY_COLLECTIVE,
                              f"`{_name(call.func)}(...)` under `if {test}:` only: the other ranks never reach it, "
                              "and the job hangs (make it on every rank, outside the condition)")
    return None


def check_collectives(result: Parsed) -> list[Finding]:
    """Collectives under a rank condition; collectives of CPU tensors where the script asks for NCCL."""
    functions = _collective_functions(result)
    findings = [found for call in result.findall(m.Call()) if _is_collective(call, functions)  # type: ignore[arg-type]
                and (found := _rank_only(result, call, functions)) is not None]  # type: ignore[arg-type]
    findings += _cpu_on_nccl(result, functions)
    return findings


def collective_methods(code: str) -> set[str]:
    """The names of the file's methods that make a collective (a backend's `barrier()` that calls dist.barrier()),
    directly or through another of them (`self.sync()`), to a fixed point; not the dunders (`__init__` is called
    by its class's name, never as a method). Read with ast, the fast parser: the driver asks it of every changed
    file with a class."""
    tree = ast.parse(code)

    def called(node: ast.AST) -> list[str]:
        return [ast.unparse(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)]

    defs = [d for d in ast.walk(tree) if isinstance(d, ast.FunctionDef)]
    functions: set[str] = set()
    while more := {d.name for d in defs if d.name not in functions and any(
            _collective_name(name, functions) for name in called(d))}:
        functions |= more
    methods = [d for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for d in c.body
               if isinstance(d, ast.FunctionDef) and not d.name.startswith("__")]
    names: set[str] = set()
    while more := {d.name for d in methods if d.name not in names and any(
            _collective_name(name, functions, frozenset(names)) for name in called(d))}:
        names |= more
    return names


def rank_only_method_calls(result: Parsed, methods: set[str]) -> list[Finding]:
    """Calls of the repository's methods that make a collective (`methods`: collective_methods of the files that
    define them) under a rank condition: `if rank == 0: backend.barrier()` hangs as the barrier itself would, one
    call away, in a file that may never name torch.distributed."""
    functions, named = _collective_functions(result), frozenset(methods)
    return [found for call in result.findall(m.Call(func=m.Attribute()))
            if call.func.attr.value in named  # type: ignore[attr-defined]
            and (found := _rank_only(result, call, functions, named)) is not None]  # type: ignore[arg-type]


def _asks_for_nccl(result: Parsed) -> bool:
    for call in result.findall(m.Call()):
        if _name(call.func).endswith("init_process_group"):  # type: ignore[attr-defined]
            args = [a.value for a in call.args if a.keyword is None or a.keyword.value == "backend"]  # type: ignore[attr-defined]
            if args and m.matches(args[0], m.SimpleString()) and "nccl" in args[0].evaluated_value:  # type: ignore[attr-defined]
                return True
    return False


def _made_on_cpu(node: cst.BaseExpression, result: Parsed, scope_node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Call):
        name = _name(node.func)
        if name.endswith(".cpu"):
            return True
        head, _, last = name.rpartition(".")
        if head == "torch" and last in CPU_FACTORIES:
            return not any(a.keyword is not None and a.keyword.value == "device" for a in node.args)
        return False
    if isinstance(node, cst.Name):  # one hop: the name's last assignment in the same function or module
        values = [a.value for a in result.findall(m.Assign(), scope_node) if any(
            _name(t.target) == node.value for t in a.targets) and result.line(a) < result.line(node)]  # type: ignore[attr-defined]
        return bool(values) and _made_on_cpu(values[-1], result, scope_node)
    return False


def _cpu_on_nccl(result: Parsed, functions: set[str]) -> list[Finding]:
    if not _asks_for_nccl(result):
        return []
    findings = []
    for call in result.findall(m.Call()):
        name = _name(call.func)  # type: ignore[attr-defined]
        if not _is_collective(call, functions) or name.endswith("barrier") or name.endswith("_object") \
                or name.endswith("_object_list") or name in WRAPPERS or not call.args:  # type: ignore[attr-defined]
            continue
        scope_node: cst.CSTNode = call
        while scope_node is not result.module and not isinstance(scope_node, cst.FunctionDef):
            scope_node = result.parents[scope_node]
        tensors = [a.value for a in call.args[:2]]  # type: ignore[attr-defined]
        if any(_made_on_cpu(t, result, scope_node) for t in tensors):
            findings.append(result.finding(call, Category.CPU_TENSOR_ON_NCCL,
                                           f"`{name}(...)` of a tensor made on the CPU, "
                                           "but the script asks for NCCL, which serves CUDA tensors only: move it "
                                           "to the GPU first"))
    return findings
