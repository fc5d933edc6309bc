"""Horovod's zero-gradient step: what hvd.broadcast_optimizer_state does to a fresh optimizer, and whether it
changes training in the script being migrated.

On an optimizer with no state, broadcast_optimizer_state (horovod/torch/functions.py, 0.28.1) gives every
parameter a zero gradient and runs step() once, to create the state it then broadcasts. That step applies the
optimizer's weight decay to the parameters (SGD and AdamW: each shrinks by lr x weight_decay; Adam adds the
decay to the zero gradient, and its normalised update moves each parameter by about lr) and leaves state
behind (Adam's step count 1 with zero moments). DistributedOptimizer builds a new optimizer of the same class
from the param groups (horovod/torch/optimizer.py), so where it is built after the broadcast (Horovod's MNIST
example) that state is gone, and what the step did to the parameters stays. tests/test_migrate_zero_step.py
holds both facts under horovodrun and the migration's reproduction of them under torchrun.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import libcst as cst
from libcst.helpers import get_full_name_for_node

# The optimizers whose zero step the migration can tell apart from no-op: their class name -> the default
# weight_decay (AdamW decays by default).
KNOWN = {"SGD": 0.0, "Adam": 0.0, "AdamW": 0.01}
ZEROS = {"0", "0.0", "0.", "0e0", "0.0e0", "None"}


@dataclasses.dataclass(frozen=True)
class Construction:
    """How the optimizer that hvd.broadcast_optimizer_state steps was made: its class (None: not one of KNOWN,
    or not found) and the keyword arguments given to it (name -> code)."""

    cls: str | None
    keywords: dict[str, str]


def construction_of(module: cst.Module, assigns: list[cst.Assign], name: str, before_line: int,
                    line_of: Callable[[cst.CSTNode], int]) -> Construction:
    """How `name` was made: the last `name = Optimizer(...)` before the broadcast, through a
    `name = hvd.DistributedOptimizer(inner, ...)` to `inner`'s (a name, or the optimizer's call itself)."""
    last = None
    for assign in assigns:
        if len(assign.targets) == 1 and get_full_name_for_node(assign.targets[0].target) == name \
                and line_of(assign) < before_line and isinstance(assign.value, cst.Call):
            last = assign
    if last is None:
        return Construction(None, {})
    call = last.value
    assert isinstance(call, cst.Call)
    cls = (get_full_name_for_node(call.func) or "").rsplit(".", 1)[-1]
    if cls == "DistributedOptimizer" and call.args:
        inner = call.args[0].value
        if isinstance(inner, cst.Call):
            call, cls = inner, (get_full_name_for_node(inner.func) or "").rsplit(".", 1)[-1]
        else:
            inner_name = get_full_name_for_node(inner)
            return construction_of(module, assigns, inner_name, line_of(last), line_of) if inner_name else \
                Construction(None, {})
    if cls not in KNOWN:
        return Construction(None, {})
    return Construction(cls, {arg.keyword.value: module.code_for_node(arg.value) for arg in call.args
                              if arg.keyword is not None})


def _given(construction: Construction, keyword: str) -> bool:
    value = construction.keywords.get(keyword)
    return value is not None and value.strip() not in ZEROS


def zero_step_effect(construction: Construction, state_kept: bool) -> str | None:
    """Why Horovod's zero-gradient step changes training here (the note's words), or None when it changes
    nothing. state_kept: the optimizer that trains is the one that was stepped (no DistributedOptimizer built
    after the broadcast)."""
    cls = construction.cls
    if cls is None:
        return ("the optimizer is not one the migration can read (SGD, Adam or AdamW built in this file), so "
                "what the step changes is not known")
    decays = _given(construction, "weight_decay") or ("weight_decay" not in construction.keywords and KNOWN[cls] > 0)
    reasons = []
    if decays:
        shrink = ("its weight decay is added to the zero gradient and Adam's normalised update moves every "
                  "parameter by about lr towards zero" if cls == "Adam" else
                  "its weight decay shrinks every parameter once, by a factor 1 - lr x weight_decay"
                  + (" (AdamW's default weight_decay is 0.01)" if "weight_decay" not in construction.keywords
                     else ""))
        reasons.append(f"{shrink}, before the first batch, whichever the order of DistributedOptimizer")
    if state_kept and cls in ("Adam", "AdamW"):
        reasons.append("the optimizer that trains is the one stepped (DistributedOptimizer wraps it before the "
                       "broadcast, or there is none), so Adam's step count starts at 1 with zero moments, which "
                       "changes the bias correction of the first updates")
    elif state_kept and cls == "SGD" and _given(construction, "momentum") and decays:
        reasons.append("the optimizer that trains is the one stepped, so its momentum buffer starts as the step "
                       "left it, weight_decay x the parameters, which the first updates carry on")
    elif state_kept and cls == "SGD" and _given(construction, "momentum") and _given(construction, "dampening"):
        reasons.append("the optimizer that trains is the one stepped, so its momentum buffer exists (zero) at the "
                       "first update, and dampening then applies to the first gradient")
    return "; ".join(reasons) or None


def unchanged_words(construction: Construction, state_kept: bool) -> str:
    """Why the step changes nothing here (only for a construction zero_step_effect returns None for)."""
    decay = f"{construction.cls} without weight decay moves no parameter on a zero gradient"
    state = ("and the zero momentum buffer it may leave gives the same first update as none" if state_kept
             else "and DistributedOptimizer, built after the broadcast, is a new optimizer built from the param "
                  "groups, without the step's state")
    return f"{decay}, {state}"
