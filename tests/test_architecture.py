"""The layers of docs/architecture.md: a lower layer never imports a higher one, and no modules import each
other, not even within one package (checked on the source)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Longest prefix wins. Packages on one level do not import each other (launch and analysis are siblings).
LAYERS = {
    "workload": 0, "recorder": 0,
    "hvd_impl": 1, "native_impl": 1,
    "compare.names": 2, "compare.defaults": 2,
    "compare.launch": 3, "compare.analysis": 3,
    "compare.render": 4,
    "compare": 5,  # commands, and the command-sized tools beside them (migrate, importers, k8s...)
    "compare.__main__": 6,
}


def layer_of(module: str) -> tuple[str, int] | None:
    matches = [name for name in LAYERS if module == name or module.startswith(name + ".")]
    if not matches:
        return None
    name = max(matches, key=len)
    return name, LAYERS[name]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, path: Path) -> list[tuple[int, str]]:
    """Every import in the source, also those inside functions, as absolute names (a relative import is
    resolved against the module's own package)."""
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module_name(path).split(".")[: -node.level + (path.name == "__init__.py") or None]
                base = ".".join([*package, *([base] if base else [])])
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def violations(path: Path, source: str | None = None) -> list[str]:
    own = layer_of(module_name(path))
    if own is None:
        return []
    own_package, own_level = own
    wrong = []
    for line, imported in imports(path.read_text() if source is None else source, path):
        target = layer_of(imported)
        if target is None or target[0] == own_package:
            continue
        package, level = target
        if level > own_level or (level == own_level and package != own_package):
            wrong.append(f"{path.relative_to(ROOT)}:{line} ({own_package}, layer {own_level}) imports {imported} "
                         f"({package}, layer {level})")
    return wrong


SOURCES = sorted(p for top in ("workload", "recorder", "hvd_impl", "native_impl", "compare")
                 for p in (ROOT / top).rglob("*.py"))


def import_graph(sources: dict[Path, str]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (`from a.b import c` is a.b.c when that is a module)."""
    modules = {module_name(path) for path in sources}
    graph: dict[str, set[str]] = {}
    for path, source in sources.items():
        targets = set()
        for _, imported in imports(source, path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]  # the name imported from a module: the module
            if imported:
                targets.add(imported)
        graph[module_name(path)] = targets - {module_name(path)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others (Tarjan's strongly
    connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_lower_layer_imports_a_higher_one():
    wrong = [v for path in SOURCES for v in violations(path)]
    assert not wrong, "\n".join(wrong)


def test_no_modules_import_each_other():
    # Imports inside functions count too: a cycle made lazy is still two modules that need each other.
    found = cycles(import_graph({path: path.read_text() for path in SOURCES}))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(group) for group in found)


def test_the_check_catches_a_cycle_inside_a_package():
    # The cycle workload.options and workload.workloads once had, the second import made lazy.
    options, workloads, errors = (ROOT / "workload" / f"{name}.py" for name in ("options", "workloads", "errors"))
    before = {options: "from workload.workloads import load_workload\n",
              workloads: "def fail():\n    from workload.options import UsageError\n"}
    after = {options: "from workload.errors import UsageError\nfrom workload.workloads import load_workload\n",
             workloads: "from workload.errors import UsageError\n", errors: "class UsageError(Exception): ...\n"}
    assert cycles(import_graph(before)) == [["workload.options", "workload.workloads"]]
    assert cycles(import_graph(after)) == []


@pytest.mark.parametrize(("source", "expect_violation"), [
    ("from compare.commands.run import main\n", True),       # analysis importing a command
    ("from compare.launch.lines import Launch\n", True),  # analysis importing its sibling
    ("from compare.names import FRAMEWORKS\n", False),
    ("import numpy\n", False),
])
def test_the_check_catches_an_upward_import(source, expect_violation):
    probe = ROOT / "compare" / "analysis" / "_layer_probe.py"  # never written: the source is given
    assert bool(violations(probe, source)) is expect_violation


# The command line is parsed in compare/commands/ and in the implementations' own CLI (generated from the option
# fields); everything below takes typed values (ComparisonPlan, SlurmSettings, Options), never a namespace.
ARGPARSE_HOMES = ("compare.commands", "workload.options", "workload.optionspec")


def argparse_users(sources: dict[Path, str]) -> list[str]:
    return sorted(module_name(path) for path, source in sources.items()
                  if any(name == "argparse" or name.startswith("argparse.") for _, name in imports(source, path))
                  and not any(module_name(path) == home or module_name(path).startswith(home + ".")
                              for home in ARGPARSE_HOMES))


def test_only_the_commands_and_the_implementations_cli_parse_arguments():
    assert argparse_users({path: path.read_text() for path in SOURCES}) == []
    probe = ROOT / "compare" / "launch" / "_probe.py"  # never written: the source is given
    assert argparse_users({probe: "import argparse\n"}) == ["compare.launch._probe"]
