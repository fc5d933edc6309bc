"""compare/migrate/'s stages import one way: read -> plan -> transform -> check -> the driver -> report. A module
may import its own stage and the ones before it, never a later one (the output check once held the parsing
that pass 1 reads, and pass 1 imported it from there). Stage 1: no launcher."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "compare" / "migrate"
STAGES = ("read", "plan", "transform", "check", "driver", "report")  # the driver: the modules at the top


def stage_of(module: str) -> str | None:
    """A dotted module's stage, None outside compare.migrate."""
    parts = module.split(".")
    if parts[:2] != ["compare", "migrate"]:
        return None
    return parts[2] if len(parts) > 3 and parts[2] in STAGES else "driver"


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports (in functions too), with its line; `from compare.migrate.read import notes`
    counts as compare.migrate.read.notes."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def reverse_imports(package: Path) -> list[str]:
    """Each import in the package that points to a later stage than its own module's."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent.parent).with_suffix("")
        own = stage_of(".".join(relative.parts))
        for line, module in imported_modules(path):
            target = stage_of(module)
            # `from compare.migrate import migrate_source` is the package's own re-export, the driver's
            if target is not None and STAGES.index(target) > STAGES.index(own):
                found.append(f"{path.relative_to(package)}:{line} ({own}) imports {module} ({target})")
    return found


def test_every_module_of_the_migration_sits_in_a_stage():
    loose = {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py", "migrate_tree.py", "rewrite.py"}
    assert not loose, f"modules at the top of compare/migrate/ that are not the driver: {sorted(loose)}"
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} == set(STAGES) - {"driver"}


def test_no_stage_imports_a_later_one():
    assert reverse_imports(PACKAGE) == []


@pytest.mark.parametrize("planted", ["from compare.migrate.report.migration_report import render\n",
                                     "from compare.migrate import migrate_source\n"])
def test_a_reverse_import_is_found(tmp_path, planted):
    """The check fails where a reading module imports a later stage (here: the report, the driver)."""
    package = tmp_path / "compare" / "migrate"
    for path in PACKAGE.rglob("*.py"):
        copy = package / path.relative_to(PACKAGE)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(path.read_text())
    target = package / "read" / "syntax.py"
    target.write_text(target.read_text() + planted)
    found = reverse_imports(package)
    assert len(found) == 1 and found[0].startswith("read/syntax.py:") and "(read) imports" in found[0], found
