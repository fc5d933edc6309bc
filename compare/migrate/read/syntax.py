"""Small reads and builds of LibCST nodes that both passes of the rewrite share."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.read.horovod_api import LIGHTNING_PACKAGES


class NoAttributeHooks:
    """For a LibCST visitor or transformer (put before its base) that has no visit_<Node>_<attribute> or
    leave_<Node>_<attribute> method: LibCST would otherwise look one up by name for every attribute of every node
    it walks."""

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


def shortened(code: str, limit: int = 100) -> str:
    text = " ".join(code.strip().split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position].value if position < len(positional) else None


def keyword_args(call: cst.Call) -> dict[str, cst.BaseExpression]:
    return {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}


def is_lightning_module(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] in LIGHTNING_PACKAGES  # type: ignore[union-attr]


def is_horovod_string(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.SimpleString) and str(node.evaluated_value).lower() == "horovod"


def elements_of(value: cst.BaseExpression) -> list[cst.BaseElement] | None:
    """The elements of a list or tuple display, else None."""
    return list(value.elements) if isinstance(value, (cst.List, cst.Tuple)) else None


def parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def parse_stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def parameter_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    return {p.name.value for p in [*params.params, *params.posonly_params, *params.kwonly_params]}


def dotted_name(node: cst.CSTNode | None) -> str | None:
    """'a.b.c' for a chain of names only (not hvd.broadcast(...).item, whose full name would read the same)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        value = dotted_name(node.value)
        return f"{value}.{node.attr.value}" if value else None
    return None


def receiver_of(node: cst.BaseExpression | None, method: str) -> str | None:
    """'model' for model.state_dict() when method is 'state_dict'."""
    if m.matches(node, m.Call(func=m.Attribute(attr=m.Name(method)))):
        return get_full_name_for_node(node.func.value)  # type: ignore[union-attr]
    return None
