"""What the original script says about how it is launched, read once from the tree the migration parsed: its
horovod.run calls and the conditions they sit under, its command-line options, and the Ray and Spark front-ends
that start a job themselves. compare/verify/launch_mode.py decides from these facts and the arguments given;
nothing parses the script a second time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from compare.migrate.read.horovod_api import SPARK_RUN, SPARK_RUNNER
from compare.migrate.read.parsed import Parsed

RAY_FRONT_ENDS = ("RayExecutor", "HorovodTrainer")  # the order in which a script's imports are looked up
_RAY_MODULES = ("horovod.ray", "ray.train.horovod")
_SPARK_MODULES = ("horovod.spark", "sparkdl")


@dataclasses.dataclass(frozen=True)
class RunSite:
    """One horovod.run(...) call: under no condition (line 0), or the innermost `if` around it (not a `__main__`
    guard): its line, what it tests ((dest, True) for `args.num_proc`, (dest, False) for `not args.num_proc`;
    None where it names no argument), and whether the call is in its body or in its else."""
    line: int
    condition: tuple[str, bool] | None = None
    in_body: bool = True


@dataclasses.dataclass(frozen=True)
class LaunchFacts:
    horovod_runs: tuple[RunSite, ...] = ()
    options: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # dest -> option strings
    ray_front_end: str | None = None        # RayExecutor or HorovodTrainer
    ray_workers: tuple[str, ...] = ()       # the dests behind num_workers=args.X
    spark_front_end: str | None = None      # SPARK_RUN or SPARK_RUNNER
    spark_processes: str = "|np|"           # HorovodRunner(np=-2): "2"


def launch_facts_of(source: str) -> LaunchFacts:
    """The facts of a script the rewrite did not walk (an entry point with no Horovod of its own, or one whose
    Horovod path a switch removed)."""
    return launch_facts(Parsed(source))


def launch_facts(parsed: Parsed) -> LaunchFacts:
    """The facts, from the tree the rewrite's first pass read (its index of nodes, parents and positions)."""
    parents, positions = parsed.parents, parsed.positions
    imports = parsed.findall(m.Import())
    froms = parsed.findall(m.ImportFrom())
    calls = parsed.findall(m.Call())
    horovod = {_bound(alias) for node in imports for alias in node.names  # type: ignore[union-attr]
               if get_full_name_for_node(alias.name) == "horovod"}
    runs = tuple(_run_site(call, parents, positions) for call in calls  # type: ignore[arg-type]
                 if m.matches(call, m.Call(func=m.Attribute(value=m.Name(), attr=m.Name("run"))))
                 and call.func.value.value in horovod)  # type: ignore[union-attr,attr-defined]
    spark_front, spark_call = _spark_front_end(imports, froms, calls)  # type: ignore[arg-type]
    return LaunchFacts(runs, _options(calls), _ray_front_end(parsed, imports, froms),  # type: ignore[arg-type]
                       tuple(get_full_name_for_node(a.value.attr) or "" for call in calls for a in call.args  # type: ignore[union-attr,attr-defined]
                             if a.keyword is not None and a.keyword.value == "num_workers"
                             and isinstance(a.value, cst.Attribute)),
                       spark_front, _processes(spark_call) if spark_call is not None else "|np|")


def _bound(alias: cst.ImportAlias) -> str:
    return get_full_name_for_node(alias.asname.name if alias.asname else alias.name) or ""  # type: ignore[union-attr]


def _string(node: cst.BaseExpression) -> str | None:
    value = node.evaluated_value if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)) else None
    return value if isinstance(value, str) else None


def _options(calls: list[cst.Call]) -> dict[str, tuple[str, ...]]:
    """dest -> option strings, from every parser.add_argument("--x", ...) call."""
    found: dict[str, tuple[str, ...]] = {}
    for call in calls:
        if not m.matches(call.func, m.Attribute(attr=m.Name("add_argument"))):
            continue
        flags = [s for a in call.args if a.keyword is None and (s := _string(a.value)) is not None]
        dest = next((_string(a.value) for a in call.args if a.keyword is not None and a.keyword.value == "dest"),
                    None)
        longs = [flag for flag in flags if flag.startswith("--")]
        if dest is None and (longs or flags):
            dest = (longs or flags)[0].lstrip("-").replace("-", "_")
        if dest:
            found[dest] = found.get(dest, ()) + tuple(flag for flag in flags if flag.startswith("-"))
    return found


def _is_main_guard(test: cst.BaseExpression) -> bool:
    return m.matches(test, m.Comparison(left=m.Name("__name__")))


def _condition(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """('num_proc', True) for `args.num_proc`, `args.num_proc is not None`, `args.num_proc > 0`;
    ('num_proc', False) for `not args.num_proc`, `args.num_proc is None`, `args.num_proc == 0`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _condition(test.expression)
        return (inner[0], not inner[1]) if inner else None
    if isinstance(test, cst.Attribute):
        return test.attr.value, True
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Attribute):
        target = test.comparisons[0]
        negated = isinstance(target.operator, cst.Is) or (
            isinstance(target.operator, cst.Equal) and m.matches(target.comparator, m.Name("None") | m.Integer("0")))
        return test.left.attr.value, not negated
    return None


def _run_site(call: cst.Call, parents: Mapping[cst.CSTNode, cst.CSTNode],
              positions: Mapping[cst.CSTNode, cst.metadata.CodeRange]) -> RunSite:
    node: cst.CSTNode = call
    while node in parents:
        parent = parents[node]
        if isinstance(parent, cst.If) and node is not parent.test and not _is_main_guard(parent.test):
            return RunSite(positions[parent].start.line, _condition(parent.test), node is parent.body)
        node = parent
    return RunSite(0)


def _ray_front_end(parsed: Parsed, imports: list[cst.Import], froms: list[cst.ImportFrom]) -> str | None:
    """RayExecutor or HorovodTrainer where the script imports one (by name, or `import horovod.ray` then
    horovod.ray.RayExecutor(...)), else None."""
    imported = {get_full_name_for_node(alias.name) for node in froms if node.module is not None
                and get_full_name_for_node(node.module) in _RAY_MODULES and isinstance(node.names, (list, tuple))
                for alias in node.names}
    if any(get_full_name_for_node(alias.name) in _RAY_MODULES for node in imports for alias in node.names):
        imported |= {a.attr.value for a in parsed.findall(m.Attribute())}  # type: ignore[union-attr]
    return next((name for name in RAY_FRONT_ENDS if name in imported), None)


def _spark_front_end(imports: list[cst.Import], froms: list[cst.ImportFrom], calls: list[cst.Call],
                     ) -> tuple[str | None, cst.Call | None]:
    """(SPARK_RUN or SPARK_RUNNER, its call) where the script starts its job through one of them."""
    names: dict[str, str] = {}  # bound name -> what it names
    for node in imports:
        for alias in node.names:
            name = get_full_name_for_node(alias.name) or ""
            if name.startswith(_SPARK_MODULES):
                names[_bound(alias)] = name
    for node in froms:
        module = get_full_name_for_node(node.module) if node.module is not None else ""
        if module and module.startswith(_SPARK_MODULES) and isinstance(node.names, (list, tuple)):
            for alias in node.names:
                names[_bound(alias)] = f"{module}.{get_full_name_for_node(alias.name)}"
    if not names:
        return None, None
    for call in calls:
        called = get_full_name_for_node(call.func)
        for bound in sorted(names, key=len, reverse=True):
            if called and (called == bound or called.startswith(bound + ".")):
                full = names[bound] + called[len(bound):]
                if full in (SPARK_RUN, SPARK_RUNNER):
                    return full, call
                break
    return None, None


def _processes(call: cst.Call) -> str:
    """'2' for HorovodRunner(np=-2) or np=2, else '|np|'."""
    np = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "np"),
              call.args[0].value if call.args and call.args[0].keyword is None else None)
    if isinstance(np, cst.UnaryOperation) and isinstance(np.operator, cst.Minus):
        np = np.expression
    return str(int(np.value)) if isinstance(np, cst.Integer) else "|np|"
