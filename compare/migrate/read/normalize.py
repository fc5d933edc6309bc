"""Before the rewrite: the ways a repository reaches Horovod other than `import horovod.torch as hvd`, written as
that import, so that the one rewrite (compare/migrate/rewrite.py) sees every use.

- loaded by name: `hvd = importlib.import_module("horovod.torch")`, `__import__("horovod.torch", fromlist=...)`,
  the name a string held in a module constant or a class attribute (`importlib.import_module(self.MODULE)`);
  when the module is kept on the object (`self.hvd = ...`), every `self.hvd` of that class reads a module-level
  name instead;
- re-exported: `from utils.distributed import hvd`, where that module of the repository binds hvd to
  horovod.torch;
- returned by an accessor of the repository: `hvd = tinynet.distributed()`, where `distributed()` only imports
  horovod.torch and returns it (a package that imports without Horovod installed).

Each is recorded (line, what it was) for the report.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.read.line_map import LineMap, tracked_visit
from compare.migrate.read.repository import absolute_module

HOROVOD_MODULES = {"horovod", "horovod.torch"}
LOADERS = {"importlib.import_module", "import_module", "__import__"}


class Reached(enum.StrEnum):
    """How the file reached Horovod other than by its import (the report says "Horovod <value>")."""

    LOADED_BY_NAME = "loaded by name"
    RE_EXPORTED = "re-exported by the repository"
    RETURNED_BY_ACCESSOR = "returned by the repository's accessor"


@dataclasses.dataclass(frozen=True)
class Normalized:
    line: int
    before: str
    how: Reached


def horovod_bindings(module: cst.Module) -> set[str]:
    """Module-level names this file binds to horovod.torch (`import horovod.torch as hvd`, `from horovod import
    torch as hvd`): what another module may import from it."""
    return _bindings(module.body)


def horovod_accessors(module: cst.Module) -> set[str]:
    """This file's module-level functions that import horovod.torch and return it, doing nothing else
    (`def distributed(): from horovod import torch as hvd; return hvd`): a call to one is that import."""
    found = set()
    for function in module.body:
        params = function.params if isinstance(function, cst.FunctionDef) else None
        if params is None or params.params or isinstance(params.star_arg, cst.Param) or params.kwonly_params or \
                not isinstance(function.body, cst.IndentedBlock):  # type: ignore[union-attr]
            continue
        body = [s for s in function.body.body if not m.matches(s, m.SimpleStatementLine(
            body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())]))]  # the docstring
        returned = body[-1] if body else None
        if m.matches(returned, m.SimpleStatementLine(body=[m.Return(value=m.Name())])) and \
                returned.body[0].value.value in _bindings(body[:-1]) and \
                all(m.matches(s, m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])) for s in body[:-1]):  # type: ignore[union-attr]
            found.add(function.name.value)
    return found


def _bindings(body: Sequence[cst.BaseStatement]) -> set[str]:
    bound: set[str] = set()
    for statement in body:
        if isinstance(statement, cst.Try):  # a probe (`try: import horovod.torch as hvd`): bound where installed
            bound |= _bindings(statement.body.body)  # type: ignore[arg-type]
            continue
        if not m.matches(statement, m.SimpleStatementLine()):
            continue
        for node in statement.body:  # type: ignore[attr-defined]
            if isinstance(node, cst.Import):
                for alias in node.names:
                    if get_full_name_for_node(alias.name) == "horovod.torch" and alias.asname:
                        bound.add(get_full_name_for_node(alias.asname.name) or "")
            elif isinstance(node, cst.ImportFrom) and get_full_name_for_node(node.module) == "horovod" and \
                    isinstance(node.names, (list, tuple)):
                for alias in node.names:
                    if get_full_name_for_node(alias.name) == "torch":
                        bound.add(get_full_name_for_node(alias.asname.name) if alias.asname else "torch")  # type: ignore[arg-type]
    return bound


def _strings(body: list[cst.BaseStatement] | tuple) -> dict[str, str]:
    """NAME = "text" assignments directly in a body."""
    found = {}
    for statement in body:
        if m.matches(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())],
                                                                     value=m.SimpleString())])):
            assign = statement.body[0]  # type: ignore[attr-defined]
            found[assign.targets[0].target.value] = str(assign.value.evaluated_value)
    return found


def class_module_names(module: cst.Module) -> dict[str, str]:
    """Class attributes of this file that name a Horovod module (`dist_module_name = "horovod.torch"` in a backend
    subclass): a base class elsewhere may load the module from `self.<attribute>`."""
    found = {}
    for node in m.findall(module, m.ClassDef()):
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()  # type: ignore[union-attr]
        found.update({name: value for name, value in _strings(body).items() if value == "horovod.torch"})
    return found


def held_module_attributes(module: cst.Module, named: dict[str, str]) -> set[str]:
    """Attributes this file keeps a module on, loaded from a class attribute of `named`
    (`self.dist_module = importlib.import_module(self.dist_module_name)`): Horovod, wherever they are read."""
    found = set()
    for assign in m.findall(module, m.Assign(targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))],
                                             value=m.Call(args=[m.Arg(value=m.Attribute(value=m.Name("self")))]))):
        call = assign.value  # type: ignore[union-attr]
        if get_full_name_for_node(call.func) in LOADERS and call.args[0].value.attr.value in named:
            found.add(assign.targets[0].target.attr.value)  # type: ignore[union-attr]
    return found


class Normalize(cst.CSTTransformer):
    """One file's indirect Horovod uses, written as imports of horovod.torch."""

    METADATA_DEPENDENCIES = (cst.metadata.PositionProvider,)

    def __init__(self, reexports: dict[str, set[str]], module_name: str, accessors: dict[str, set[str]],
                 inherited: dict[str, str] | None = None, held: set[str] | None = None):
        super().__init__()
        self.inherited = inherited or {}    # class attribute -> the Horovod module a subclass names in it
        self.held_anywhere = held or set()  # attributes a (base) class keeps the loaded module on
        self.reexports = reexports          # repository module -> names it binds to horovod.torch
        self.accessors = accessors          # repository module -> its functions that return horovod.torch
        self.imported: dict[str, str] = {}  # a name this file binds by an import -> what it names
        self.functions = 0                  # how deep in function definitions the walk is
        self.module_name = module_name
        self.constants: dict[str, str] = {}
        self.classes: list[dict[str, str]] = []
        self.held: dict[str, str] = {}      # attribute kept on an object -> module-level name it becomes
        self.module_imports: list[tuple[str, str]] = []  # (horovod module, name) to bind at module level
        self.done: list[Normalized] = []
        self.spent: set[str] = set()        # constants holding a Horovod module's name that a loader read

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(cst.metadata.PositionProvider, node).start.line

    def visit_Module(self, node: cst.Module) -> None:
        self.constants = _strings(node.body)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        self.classes.append(_strings(body))

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.classes.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions += 1

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.functions -= 1
        return updated

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = get_full_name_for_node(alias.name) or ""
            if alias.asname:
                self.imported[get_full_name_for_node(alias.asname.name) or ""] = name
            else:
                self.imported[name.split(".")[0]] = name.split(".")[0]

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, (list, tuple)):
            source = absolute_module(node, self.module_name)
            for alias in node.names:
                name = get_full_name_for_node(alias.name) or ""
                self.imported[get_full_name_for_node(alias.asname.name) if alias.asname else name] = \
                    f"{source}.{name}"  # type: ignore[index]

    def _accessed(self, value: cst.BaseExpression) -> bool:
        """A call of one of the repository's accessors (no arguments), however this file names it."""
        if not self.accessors or not isinstance(value, cst.Call) or value.args:
            return False
        name = get_full_name_for_node(value.func) or ""
        head, _, rest = name.partition(".")
        qualified = self.imported.get(head, f"{self.module_name}.{head}") + (f".{rest}" if rest else "")
        module, _, function = qualified.rpartition(".")
        return function in self.accessors.get(module, set())

    def _text(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.SimpleString):
            return str(node.evaluated_value)
        if isinstance(node, cst.Name) and node.value in self.constants:
            self.spent.add(node.value)
            return self.constants[node.value]
        if isinstance(node, cst.Attribute) and self.classes and node.attr.value in self.classes[-1] and not (
                node.attr.value in self.inherited and self.classes[-1][node.attr.value] not in HOROVOD_MODULES):
            self.spent.add(node.attr.value)
            return self.classes[-1][node.attr.value]  # self.X, cls.X, Class.X: the enclosing class's
        if isinstance(node, cst.Attribute) and self.classes and node.attr.value in self.inherited and \
                m.matches(node.value, m.Name("self") | m.Name("cls")):
            return self.inherited[node.attr.value]  # a subclass's, which a base class loads
        return None

    def _loaded(self, value: cst.BaseExpression) -> str | None:
        """The Horovod module a loader call loads, else None."""
        if not isinstance(value, cst.Call) or get_full_name_for_node(value.func) not in LOADERS or not value.args:
            return None
        name = self._text(value.args[0].value)
        if name not in HOROVOD_MODULES:
            return None
        if get_full_name_for_node(value.func) == "__import__" and len(value.args) < 4 and not any(
                a.keyword and a.keyword.value == "fromlist" for a in value.args):
            return "horovod"  # __import__("horovod.torch") returns the top-level package
        return name

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine,
                                  ) -> cst.BaseStatement | cst.FlattenSentinel | cst.RemovalSentinel:
        if len(updated.body) != 1:
            return updated
        node = updated.body[0]
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and (loaded := self._loaded(node.value)):
            target = node.targets[0].target
            before = cst.Module([]).code_for_node(original).strip()
            self.done.append(Normalized(self._line(original), before, Reached.LOADED_BY_NAME))
            if isinstance(target, cst.Name) and (loaded, target.value) in self.module_imports:
                return cst.RemoveFromParent()  # a base class's `self.<held> = loader(...)`: imported at the top
            if isinstance(target, cst.Name):
                return updated.with_changes(body=[_import(loaded, target.value)])
            if isinstance(target, cst.Attribute):
                name = self.held.setdefault(target.attr.value, target.attr.value)
                self.module_imports.append((loaded, name))
                return cst.RemoveFromParent()
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                and self._accessed(node.value):
            self.done.append(Normalized(self._line(original), cst.Module([]).code_for_node(original).strip(),
                                        Reached.RETURNED_BY_ACCESSOR))
            if self.functions:
                return updated.with_changes(body=[_import("horovod.torch", node.targets[0].target.value)])
            # In the module's scope (a `__main__` block): imported at the top, where the module's functions that
            # receive it see torch.distributed's import after the rewrite, bound once.
            self.module_imports.append(("horovod.torch", node.targets[0].target.value))
            return cst.RemoveFromParent()
        if isinstance(node, cst.ImportFrom) and isinstance(node.names, (list, tuple)) and node.module is not None:
            source = absolute_module(node, self.module_name)
            bound = self.reexports.get(source, set())
            moved = [a for a in node.names if get_full_name_for_node(a.name) in bound]
            if moved:
                self.done.append(Normalized(self._line(original), cst.Module([]).code_for_node(original).strip(),
                                            Reached.RE_EXPORTED))
                kept = [a for a in node.names if a not in moved]
                imports: list[cst.BaseSmallStatement] = [
                    _import("horovod.torch", get_full_name_for_node(a.asname.name if a.asname else a.name) or "")
                    for a in moved]
                if kept:
                    kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                    imports.insert(0, node.with_changes(names=kept))
                return cst.FlattenSentinel([updated.with_changes(body=[statement]) for statement in imports])
        return updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if not isinstance(original.value, cst.Name) or original.value.value not in ("self", "cls"):
            return updated
        if self.held and original.attr.value in self.held:
            return cst.Name(self.held[original.attr.value])
        if original.attr.value in self.held_anywhere and self.classes:
            # kept on the object by a base class's loader: read here as the module it holds
            name = self.held.setdefault(original.attr.value, original.attr.value)
            if ("horovod.torch", name) not in self.module_imports:
                self.module_imports.append(("horovod.torch", name))
                self.done.append(Normalized(self._line(original), cst.Module([]).code_for_node(original),
                                            Reached.LOADED_BY_NAME))
            return cst.Name(name)
        return updated

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.module_imports:
            return updated
        body = list(updated.body)
        last = max((i for i, s in enumerate(body) if m.matches(s, m.SimpleStatementLine(
            body=[m.Import() | m.ImportFrom()]))), default=-1)
        added = [cst.SimpleStatementLine([_import(module, name)])
                 for module, name in dict.fromkeys(self.module_imports)]
        body[last + 1:last + 1] = added
        return updated.with_changes(body=body)


def _import(module: str, name: str) -> cst.Import:
    dotted = cst.parse_expression(module)
    return cst.Import(names=[cst.ImportAlias(name=dotted, asname=None if name == module else  # type: ignore[arg-type]
                                             cst.AsName(name=cst.Name(name)))])


def normalize(module: cst.Module, reexports: dict[str, set[str]], module_name: str, source: str,
              imported: dict[str, set[str]], accessors: dict[str, set[str]] | None = None,
              inherited: dict[str, str] | None = None, held: set[str] | None = None,
              ) -> tuple[cst.Module, list[Normalized], set[str], LineMap]:
    """The file with its indirect Horovod uses written as imports, what was so written, and the constants that
    held a Horovod module's name for a loader (removed after the rewrite where nothing else reads them), and the map
    of its lines (an import hoisted to the top has no original line).
    `reexports` and `accessors`: the repository's modules that bind horovod.torch, and their functions that
    return it; `source` is the module's text, `imported` what it imports
    (compare.migrate.read.repository.imported_modules)."""
    accessors = accessors or {}
    reexported = any(names & reexports.get(name, set()) for name, names in imported.items())
    accessed = any(name in accessors for name in imported) or module_name in accessors
    holds = any(f".{attribute}" in source for attribute in held or ())
    if not any(loader in source for loader in ("import_module", "__import__")) and not reexported and not accessed \
            and not holds:
        return module, [], set(), LineMap()  # nothing to normalize (the common case): no second walk
    if holds:  # an attribute this file sets itself is its own loader's business (or not a module at all)
        assigned = {node.target.attr.value for node in m.findall(module, m.AssignTarget(  # type: ignore[union-attr]
            target=m.Attribute(value=m.Name("self"))))}
        held = (held or set()) - assigned
    wrapper = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    transform = Normalize(reexports, module_name, accessors, inherited, held)
    new, lines = tracked_visit(wrapper, transform)
    # A method whose only statement was the loader is left empty: `pass` keeps it valid.
    filled, filled_lines = tracked_visit(new, _FillEmpty())
    return filled, transform.done, transform.spent, lines.then(filled_lines)


class _FillEmpty(cst.CSTTransformer):
    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated
