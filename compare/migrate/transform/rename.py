"""A file's names renamed over its tree: every name `old` the file binds or reads written `new`, never an
attribute's (`x.old` stays) nor a relative import's module (`from .old import f`). The driver holds a file's own
`dist` aside under another name while the rewrite names torch.distributed `dist` (migrate_tree.py)."""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst


class NameRenamer(cst.CSTTransformer):
    """Each name in `names` (old -> new) renamed at once: {"dist": "torch_dist", "held": "dist"} swaps."""

    def __init__(self, names: Mapping[str, str]):
        super().__init__()
        self.names = dict(names)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.names.get(original_node.value)
        return updated_node.with_changes(value=new) if new is not None else updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)  # `x.old`: the attribute's own name stays

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        if original_node.relative and original_node.module is not None:  # `from .old import f`: a module's name
            return updated_node.with_changes(module=original_node.module)
        return updated_node


def names_renamed(code: str, names: Mapping[str, str]) -> str:
    """The code with each name in `names` renamed (see NameRenamer); as it is where it does not parse (its check
    says so)."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:
        return code
    return module.visit(NameRenamer(names)).code
