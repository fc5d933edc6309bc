"""The layers of docs/architecture.md: a lower layer never imports a higher one (checked on the source)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Longest prefix wins. Packages on one level do not import each other (launch and analysis are siblings).
LAYERS = {
    "workload": 0, "recorder": 0,
    "hvd_impl": 1, "native_impl": 1,
    "compare.names": 2,
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
    """Every absolute import in the source, also those inside functions."""
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
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


def test_no_lower_layer_imports_a_higher_one():
    wrong = [v for path in SOURCES for v in violations(path)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("source", "expect_violation"), [
    ("from compare.commands.run import main\n", True),       # analysis importing a command
    ("from compare.launch.commands import Launch\n", True),  # analysis importing its sibling
    ("from compare.names import FRAMEWORKS\n", False),
    ("import numpy\n", False),
])
def test_the_check_catches_an_upward_import(source, expect_violation):
    probe = ROOT / "compare" / "analysis" / "_layer_probe.py"  # never written: the source is given
    assert bool(violations(probe, source)) is expect_violation
