"""Gradient accumulation (backward_passes_per_step=k): which backward() passes DDP syncs, planned from what
pass 1 recorded (the DistributedOptimizer call, the backward() statements, the ifs that step) into a frozen plan
that pass 2 applies. No walk of its own: it reads pass 1's records and the parents the source was read with."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.plan.migration import Flag
from compare.migrate.plan.uses_base import UsesBase
from compare.migrate.read import notes
from compare.migrate.read.flag_category import Category
from compare.migrate.read.syntax import keyword_args


@dataclasses.dataclass
class InnerLoop:
    """An inner `for` loop (backward() in its body, optimizer.step() after it): how its last pass is told."""
    name: str          # the variable that holds the range (`passes`), or the last-pass flag (`is_last_pass`)
    condition: str     # true on the last pass: `i == passes[-1]`, or `is_last_pass`
    over_range: bool   # `for i in range(...)`; otherwise any iterable, through mark_last()


@dataclasses.dataclass(frozen=True)
class AccumulationPlan:
    """Which backward() statements run under no_sync(), and how each inner loop tells its last pass."""
    accumulate: Mapping[int, tuple[str, str]]  # id(backward statement) -> (the sync condition, note)
    inner_loops: Mapping[int, InnerLoop]       # id(inner for loop) -> how its last pass is told
    flags: tuple[Flag, ...]                    # a backward() whose passes cannot be told apart


NO_ACCUMULATION = AccumulationPlan({}, {}, ())


def plan_accumulation(uses: UsesBase) -> AccumulationPlan:
    """backward_passes_per_step=k: each backward() before an `if ...: optimizer.step()` syncs only when that
    condition holds (DDP's no_sync() on the others), as Horovod reduces on every k-th pass; a backward() in an
    inner `for` loop followed by optimizer.step() syncs on that loop's last pass only."""
    if uses.dist_optimizer_call is None:
        return NO_ACCUMULATION
    k = keyword_args(uses.dist_optimizer_call).get("backward_passes_per_step")
    if k is None or m.matches(k, m.Integer("1")):
        return NO_ACCUMULATION
    planner = _Planner(uses)
    for stmt in uses.backward_stmts:
        parent = uses.parents[stmt]
        body = list(getattr(parent, "body", []))
        after = body[body.index(stmt) + 1:] if stmt in body else []
        guards = [s for s in after if isinstance(s, cst.If) and s in uses.step_guards]
        loop = planner.stepped_inner_loop(stmt)
        if guards:
            planner.accumulate[id(stmt)] = (uses.module.code_for_node(guards[0].test), notes.ACCUMULATION)
        elif loop is not None:
            plan = planner.inner_loops.get(id(loop)) or planner.plan_inner_loop(loop)
            planner.accumulate[id(stmt)] = (plan.condition, notes.INNER_ACCUMULATION)
        elif not any(f.line == uses.line(stmt) and f.category == Category.UNRECOGNISED for f in planner.flags):
            planner.flags.append(Flag(uses.line(stmt), Category.UNRECOGNISED, uses.code(uses.statement_of(stmt)),
                                      "backward_passes_per_step: no `if ...: optimizer.step()` after this "
                                      "backward(), and no optimizer.step() after an inner `for` loop around it; "
                                      "put it in `with model.no_sync():` on the passes that do not step"))
    return AccumulationPlan(planner.accumulate, planner.inner_loops, tuple(planner.flags))


class _Planner:
    """The plan as it is made: the loops planned so far and the names taken."""

    def __init__(self, uses: UsesBase):
        self.uses = uses
        self.accumulate: dict[int, tuple[str, str]] = {}
        self.inner_loops: dict[int, InnerLoop] = {}
        self.flags: list[Flag] = []
        self._names: set[str] | None = None  # every name in the script, once fresh_name() needs them

    def stepped_inner_loop(self, stmt: cst.SimpleStatementLine) -> cst.For | None:
        """The `for` loop whose body holds stmt directly, when a statement after that loop in its own block
        calls the optimizer's step() (optimizer.step(), or scaler.step(optimizer))."""
        parents = self.uses.parents
        block = parents[stmt]
        loop = parents[block] if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(loop, cst.For) or loop.body is not block or loop.asynchronous is not None:
            return None
        outer = parents[loop]
        siblings = list(getattr(outer, "body", []))
        after = siblings[siblings.index(loop) + 1:] if loop in siblings else []
        return loop if any(self._steps_optimizer(s) for s in after) else None

    def _steps_optimizer(self, stmt: cst.BaseStatement) -> bool:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for call in m.findall(stmt, m.Call(func=m.Attribute(attr=m.Name("step")))):
            receivers = [call.func.value, *(arg.value for arg in call.args)]  # type: ignore[attr-defined]
            if any(get_full_name_for_node(r) in self.uses.optimizers for r in receivers):
                return True
        return False

    def plan_inner_loop(self, loop: cst.For) -> InnerLoop:
        iterable = loop.iter
        is_range = m.matches(iterable, m.Call(func=m.Name("range"))) and isinstance(loop.target, cst.Name) \
            and 1 <= len(iterable.args) <= 3 and all(a.keyword is None and not a.star for a in iterable.args)  # type: ignore[attr-defined]
        if is_range:
            passes = self.fresh_name("passes")
            plan = InnerLoop(passes, f"{loop.target.value} == {passes}[-1]", over_range=True)  # type: ignore[attr-defined]
        else:
            last = self.fresh_name("is_last_pass")
            plan = InnerLoop(last, last, over_range=False)
        self.inner_loops[id(loop)] = plan
        return plan

    def fresh_name(self, base: str) -> str:
        """base, or base_2, base_3...: a name the script does not use."""
        if self._names is None:
            self._names = {name.value for name in m.findall(self.uses.module, m.Name())}
        name, number = base, 1
        while name in self._names:
            number += 1
            name = f"{base}_{number}"
        self._names.add(name)
        return name
