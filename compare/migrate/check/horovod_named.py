"""Where a result still names Horovod, read from its tree (Python's own parser: positions come with it, where
LibCST's PositionProvider costs ten times a parse on a repository): the name `horovod` where the code itself
writes it (not an attribute, `args.horovod`), and each string literal with its value. The driver turns these into
flags and notes (migrate_tree.py's _leftovers)."""

from __future__ import annotations

import ast
import dataclasses


@dataclasses.dataclass(frozen=True)
class Named:
    line: int            # in the result
    column: int
    string: str | None   # a string literal's value; None: the name itself


class _Reader(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[Named] = []

    def _name(self, node: ast.AST, name: str | None) -> None:
        if name is not None and name.lower() == "horovod":
            self.found.append(Named(node.lineno, node.col_offset, None))  # type: ignore[attr-defined]

    def visit_Name(self, node: ast.Name) -> None:
        self._name(node, node.id)

    def visit_alias(self, node: ast.alias) -> None:  # `import horovod.torch`, `from x import horovod as horovod`
        self._name(node, node.name.split(".")[0] if node.name != "*" else None)
        self._name(node, node.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # `from horovod import torch`, not `from .horovod`
        if node.level == 0 and node.module:
            self._name(node, node.module.split(".")[0])
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._name(node, node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_arg(self, node: ast.arg) -> None:
        self._name(node, node.arg)
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        self._name(node, node.arg)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.found.append(Named(node.lineno, node.col_offset, node.value))

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:  # an f-string's text is no string literal of its own
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                self.visit(value)


def horovod_named(code: str) -> tuple[list[Named], bool]:
    """Each place the code names `horovod` or holds a string, in the order they are written; and whether an
    import binds the name `horovod` (`import horovod.torch`, not `import horovod.torch as hvd`). Nothing where
    the code does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return [], False
    reader = _Reader()
    reader.visit(tree)
    binds = any(alias.name.split(".")[0] == "horovod" and alias.asname is None
                for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names)
    return sorted(reader.found, key=lambda named: (named.line, named.column)), binds
