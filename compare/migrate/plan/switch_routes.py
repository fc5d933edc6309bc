"""A switch's Horovod value, routed to the repository's own torch.distributed path (switches.py removes the
Horovod path): `--horovod` (store_true) beside `--distributed`, or `--backend {horovod,torch,none}` whose default
may be horovod. The README's command and the default still choose a distributed run: right after the parse, the
Horovod value becomes the DDP value (`if args.horovod: args.horovod, args.distributed = False, "WORLD_SIZE" in
os.environ`: under torchrun the DDP path, alone one process, as Horovod ran a job of one), so every test the
repository makes of either switch answers as on its DDP path.

Before routing, the two paths are compared where they sit side by side (path_differences.py: gathers, all-reduces,
checkpoint keys); where they differ, the driver migrates the Horovod branch in place instead of routing.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.helpers import get_full_name_for_node

from compare.migrate.read.line_map import LineMap, tracked_visit

DDP_CALLS = ("init_process_group", "DistributedDataParallel", "DDP")


@dataclasses.dataclass(frozen=True)
class Route:
    dest: str                  # the parsed option's attribute (`args.<dest>`)
    horovod: str | bool        # its Horovod value: True for a store_true flag, else the choice ("horovod")
    ddp_dest: str              # the attribute the DDP path tests
    ddp: str | bool            # its DDP value

    def statement(self, args: str) -> str:
        if self.horovod is True:  # under torchrun; alone (`python train.py --horovod`), one process, as Horovod's
            return (f"if {args}.{self.dest}:  # the Horovod option now takes the torch.distributed path\n"
                    f"    {args}.{self.dest}, {args}.{self.ddp_dest} = False, \"WORLD_SIZE\" in os.environ\n")
        return (f'if {args}.{self.dest} == "{self.horovod}":  # Horovod\'s value now takes the torch.distributed path\n'
                f'    {args}.{self.dest} = "{self.ddp}"\n')

    def describe(self) -> str:
        option = self.dest.replace("_", "-")
        ddp = self.ddp_dest.replace("_", "-")
        return f"--{option}" + ("" if self.horovod is True else f" {self.horovod}") + " now runs as " + (
            f"--{ddp}" if self.ddp is True else f"--{ddp} {self.ddp}")


def _called(node: cst.CSTNode) -> set[str]:
    return {get_full_name_for_node(c.func) or "" for c in m.findall(node, m.Call())}


def _ddp_tests(module: cst.Module) -> list[cst.BaseExpression]:
    """The tests of the `if`s whose own block starts or wraps with torch.distributed (the repository's DDP path)."""
    return [node.test for node in m.findall(module, m.If())  # type: ignore[union-attr]
            if any(name.rpartition(".")[2] in DDP_CALLS for name in _called(node.body))]


def _horovod_options(module: cst.Module) -> list[tuple[str, str | bool]]:
    """(dest, Horovod value) of each add_argument that offers Horovod."""
    found = []
    for call in m.findall(module, m.Call(func=m.Attribute(attr=m.Name("add_argument")))):
        assert isinstance(call, cst.Call)
        flags = [a.value.evaluated_value for a in call.args if a.keyword is None
                 and isinstance(a.value, cst.SimpleString)]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        long = next((f for f in flags if isinstance(f, str) and f.startswith("--")), None)
        if long is None:
            continue
        dest = keywords["dest"].evaluated_value if isinstance(keywords.get("dest"), cst.SimpleString) else \
            long[2:].replace("-", "_")
        action = keywords.get("action")
        if isinstance(action, cst.SimpleString) and action.evaluated_value == "store_true" and "horovod" in long:
            found.append((str(dest), True))
            continue
        values = [s.evaluated_value for key in ("choices", "default") if key in keywords
                  for s in m.findall(keywords[key], m.SimpleString())]  # type: ignore[union-attr]
        if "horovod" in values:
            found.append((str(dest), "horovod"))
    return found


def _ddp_value(tests: list[cst.BaseExpression], dest: str, horovod: str | bool) -> tuple[str, str | bool] | None:
    for test in tests:
        for attribute in m.findall(test, m.Attribute(attr=m.Name())):
            assert isinstance(attribute, cst.Attribute)
            name = attribute.attr.value
            if horovod is True and name != dest and "horovod" not in name.lower():
                return name, True
        if horovod is not True:
            for comparison in m.findall(test, m.Comparison()):
                assert isinstance(comparison, cst.Comparison)
                left = comparison.left
                target = comparison.comparisons[0].comparator
                if isinstance(left, cst.Attribute) and left.attr.value == dest and \
                        isinstance(target, cst.SimpleString) and target.evaluated_value != horovod:
                    return dest, str(target.evaluated_value)
    return None


def switch_routes(modules: dict[str, cst.Module]) -> dict[str, list[Route]]:
    """Per file that defines a Horovod option, the routes of its options to the repository's DDP path (an option
    without a DDP path to go to has none: switches.py refuses it)."""
    tests = [test for module in modules.values() for test in _ddp_tests(module)]
    routes: dict[str, list[Route]] = {}
    for path, module in modules.items():
        for dest, horovod in _horovod_options(module):
            ddp = _ddp_value(tests, dest, horovod)
            if ddp is not None:
                routes.setdefault(path, []).append(Route(dest, horovod, *ddp))
    return routes


class _AfterParse(cst.CSTTransformer):
    def __init__(self, routes: list[Route]):
        super().__init__()
        self.routes = routes
        self.done = False

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=self._body(list(updated.body)))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        return updated.with_changes(body=self._body(list(updated.body)))

    def _body(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for statement in body:
            out.append(statement)
            if self.done or not m.matches(statement, m.SimpleStatementLine(body=[m.Assign(
                    targets=[m.AssignTarget(target=m.Name())],
                    value=m.Call(func=m.Attribute(attr=m.Name("parse_args") | m.Name("parse_known_args"))))])):
                continue
            name = statement.body[0].targets[0].target.value  # type: ignore[attr-defined]
            if get_full_name_for_node(statement.body[0].value.func).endswith("parse_known_args"):  # type: ignore[attr-defined]
                continue  # (args, rest): not the namespace itself
            out += [cst.parse_statement(route.statement(name)) for route in self.routes]
            self.done = True
        return out


def route_switches(module: cst.Module, routes: list[Route]) -> tuple[cst.Module, bool, LineMap]:
    """The module with each route right after its `args = parser.parse_args()` (and `import os` where a route
    reads the environment); whether one was placed; the map of its lines."""
    transform = _AfterParse(routes)
    new, lines = tracked_visit(module, transform)
    if transform.done and any(route.horovod is True for route in routes):
        context = CodemodContext()
        AddImportsVisitor.add_needed_import(context, "os")
        new, imported = tracked_visit(new, AddImportsVisitor(context))  # (transform_module: this, on a copy)
        lines = lines.then(imported)
    return new, transform.done, lines

