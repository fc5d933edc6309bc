"""Where a repository's own torch.distributed path does another job than its Horovod path, side by side.

Before a Horovod switch is routed to the repository's own DDP path (switch_routes.py), the two paths are compared
where they sit together: a function whose Horovod branch and DDP branch each make the same collective, and a
function that wraps the model on the DDP path and saves it. A difference found here means the route would train
or save otherwise than Horovod did; the driver then migrates the Horovod branch in place instead of routing.

- a gather whose backward sums the gradient over the ranks (`torch.distributed.nn.all_gather`) where
  `hvd.allgather`'s backward averaged it: a gradient world-size times larger;
- an all-reduce that averages on one path and sums on the other (`hvd.allreduce` averages unless `average=False`
  or `op=hvd.Sum`; `dist.all_reduce` sums unless `op=ReduceOp.AVG` or its block divides by the world size);
- a checkpoint saved from the model rebound to its DDP wrapper (`model = DDP(model)`, then
  `torch.save(model.state_dict())`): keys prefixed `module.`, where Horovod, which never wraps, saved the model's
  own keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider
from libcst.metadata.base_provider import LazyValue

SUMMING_GATHERS = {"torch.distributed.nn.all_gather", "torch.distributed.nn.functional.all_gather"}
ALL_REDUCE = "torch.distributed.all_reduce"
DDP_CLASSES = {"torch.nn.parallel.DistributedDataParallel",
               "torch.nn.parallel.distributed.DistributedDataParallel"}
SAVES = {"torch.save"}
DIVIDES = ("div", "div_", "true_divide", "true_divide_")


@dataclasses.dataclass(frozen=True)
class Differs:
    line: int
    code: str
    why: str


class _Scope:
    """A function, or the module's own statements: where the two paths are compared."""

    def __init__(self, node: cst.CSTNode, statements: list[cst.CSTNode]):
        self.node = node
        self.statements = statements

    def find(self, matcher: m.BaseMatcherNode) -> list[cst.CSTNode]:
        return [found for statement in self.statements for found in m.findall(statement, matcher)]


def _scopes(module: cst.Module) -> Iterator[_Scope]:
    for function in m.findall(module, m.FunctionDef()):
        yield _Scope(function, [function])
    yield _Scope(module, [s for s in module.body if not isinstance(s, cst.FunctionDef | cst.ClassDef)])


class _Reader:
    def __init__(self, module: cst.Module):
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.module = wrapper.module
        self.positions = wrapper.resolve(PositionProvider)
        self.qualified = wrapper.resolve(QualifiedNameProvider)
        self.parents = wrapper.resolve(cst.metadata.ParentNodeProvider)

    def names(self, call: cst.Call) -> set[str]:
        """What the called name resolves to through the file's imports (`dist.nn.all_gather`:
        torch.distributed.nn.all_gather)."""
        found = self.qualified.get(call.func, ())
        return {q.name for q in (found() if isinstance(found, LazyValue) else found)}

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def found(self, node: cst.CSTNode, why: str) -> Differs:
        return Differs(self.positions[node].start.line, self.code(node).strip().splitlines()[0][:100], why)

    def block_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost block holding the node (an `if` branch, a function body), or the module."""
        while not isinstance(node, cst.IndentedBlock | cst.Module):
            node = self.parents[node]
        return node


def _op(call: cst.Call) -> str:
    keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "op"), None)
    return (get_full_name_for_node(keyword) or "") if keyword is not None else ""


def _horovod_meaning(call: cst.Call) -> str | None:
    """"mean" or "sum" for an hvd.allreduce; None for another op (Adasum, Min, ...)."""
    average = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "average"), None)
    if isinstance(average, cst.Name) and average.value in ("True", "False"):
        return "mean" if average.value == "True" else "sum"
    op = _op(call).rpartition(".")[2]
    return {"": "mean", "Average": "mean", "Sum": "sum"}.get(op)


def _ddp_meaning(reader: _Reader, call: cst.Call) -> str | None:
    op = _op(call).rpartition(".")[2]
    if op == "AVG":
        return "mean"
    if op not in ("", "SUM"):
        return None
    # a sum divided by the world size in the same block is a mean (`dist.all_reduce(t); return t / world_size`)
    block = reader.block_of(call)
    divisors = [n.right for n in m.findall(block, m.BinaryOperation(operator=m.Divide()))]  # type: ignore[union-attr]
    divisors += [n.value for n in m.findall(block, m.AugAssign(operator=m.DivideAssign()))]  # type: ignore[union-attr]
    divisors += [a.value for c in m.findall(block, m.Call(func=m.Attribute(attr=m.OneOf(*map(m.Name, DIVIDES)))))
                 for a in c.args[:1]]  # type: ignore[union-attr]
    by_world = any(word in reader.code(d).lower() for d in divisors for word in ("world", "size"))
    return "mean" if by_world else "sum"


def _gathers(reader: _Reader, scope: _Scope, horovod: set[str]) -> list[Differs]:
    calls = [c for c in scope.find(m.Call()) if isinstance(c, cst.Call)]
    if not any(get_full_name_for_node(c.func) in {f"{a}.allgather" for a in horovod} for c in calls):
        return []
    return [reader.found(c, f"the repository's own DDP path gathers with {min(reader.names(c) & SUMMING_GATHERS)}, "
                            "whose backward sums the gradient over the ranks, where the Horovod path's "
                            "hvd.allgather averaged it: a gradient world-size times larger")
            for c in calls if reader.names(c) & SUMMING_GATHERS]


def _reductions(reader: _Reader, scope: _Scope, horovod: set[str]) -> list[Differs]:
    calls = [c for c in scope.find(m.Call()) if isinstance(c, cst.Call)]
    horovod_meanings = {_horovod_meaning(c) for c in calls
                        if get_full_name_for_node(c.func) in {f"{a}.{n}" for a in horovod for n in ("allreduce",
                                                                                                     "allreduce_")}}
    if len(horovod_meanings) != 1 or None in horovod_meanings:
        return []
    (horovod_meaning,) = horovod_meanings
    found = []
    for call in calls:
        meaning = _ddp_meaning(reader, call) if ALL_REDUCE in reader.names(call) else None
        if meaning not in (None, horovod_meaning):
            own, horovods = ("sums", "averaged") if meaning == "sum" else ("averages", "summed")
            found.append(reader.found(call, f"the repository's own DDP path {own} here where the Horovod path's "
                                            f"hvd.allreduce {horovods}"))
    return found


def _rebound_to_ddp(reader: _Reader, scope: _Scope) -> set[str]:
    """`model = DDP(model)`, `self.net = DistributedDataParallel(self.net, ...)`: the names that now hold the
    wrapper (a wrapper bound to a new name leaves the model's keys alone)."""
    rebound = set()
    for assign in scope.find(m.Assign(value=m.Call())):
        assert isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)
        if not reader.names(assign.value) & DDP_CLASSES or not assign.value.args:
            continue
        wrapped = reader.code(assign.value.args[0].value)
        rebound |= {target for t in assign.targets if (target := reader.code(t.target)) == wrapped}
    return rebound


def _checkpoints(reader: _Reader, scope: _Scope) -> list[Differs]:
    rebound = _rebound_to_ddp(reader, scope)
    if not rebound:
        return []

    def wrapper_state(node: cst.CSTNode) -> bool:
        return any(reader.code(c.func.value) in rebound  # type: ignore[union-attr]
                   for c in m.findall(node, m.Call(func=m.Attribute(attr=m.Name("state_dict")))))

    # a state dict kept in a name first (`state = {"model": model.state_dict()}`, then `torch.save(state, ...)`)
    holders = {reader.code(t.target) for a in scope.find(m.Assign()) if isinstance(a, cst.Assign)
               and wrapper_state(a.value) for t in a.targets}
    found = []
    for call in scope.find(m.Call()):
        assert isinstance(call, cst.Call)
        if reader.names(call) & SAVES and call.args and (
                wrapper_state(call.args[0].value) or reader.code(call.args[0].value) in holders):
            found.append(reader.found(call, "the repository's own DDP path saves the state_dict() of the model "
                                            "rebound to its DDP wrapper (keys prefixed `module.`) where the Horovod "
                                            "path, which never wraps, saved the model's own keys"))
    return found


def differing_paths(module: cst.Module, horovod: set[str]) -> list[Differs]:
    """Where the repository's own DDP path does another job than the Horovod path beside it (`horovod`: the
    file's names for the Horovod module), in line order."""
    reader = _Reader(module)
    found: dict[int, Differs] = {}
    for scope in _scopes(reader.module):
        for differs in [*_gathers(reader, scope, horovod), *_reductions(reader, scope, horovod),
                        *_checkpoints(reader, scope)]:
            found.setdefault(differs.line, differs)
    return sorted(found.values(), key=lambda d: d.line)
