"""Whether each launch of the migrated tree reaches the helpers module it imports, as Python would resolve it.

From a launch (launches.py): Python's import path at the start (the script's directory, or the working directory
for -m; PYTHONPATH where the command sets it), then each file the launch reaches, in the order it is reached: its
`sys.path` changes (`sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))`, read statically), and
its imports of the repository's own modules, resolved on the path as it stands at that import (relative ones
against the package the file was reached as). Modules outside the tree are taken as installed. What fails is an
import of the added helpers module that resolves to nothing: the migrated tree would not start.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path, PurePosixPath

from compare.migrate.read.launches import Launch, _normal, module_path
from compare.migrate.read.repository import SKIPPED_DIRS


@dataclasses.dataclass(frozen=True)
class Unreached:
    path: str    # the importing file
    line: int
    why: str


def _static_path(node: ast.expr, file: str, cwd: str) -> str | None:
    """A path expression of the `sys.path` idioms, as a path from the root; None where it is not static."""
    if isinstance(node, ast.Name) and node.id == "__file__":
        return file
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _normal(str(PurePosixPath(cwd, node.value))) if not node.value.startswith("/") else None
    if isinstance(node, ast.Call):
        func = ast.unparse(node.func)
        args = [_static_path(a, file, cwd) if not (isinstance(a, ast.Constant) and isinstance(a.value, str))
                else a.value for a in node.args]
        if func in ("os.path.dirname", "path.dirname", "dirname") and args and args[0] is not None:
            return str(PurePosixPath(args[0]).parent) if args[0] else ".."
        if func in ("os.path.abspath", "os.path.realpath", "os.path.normpath", "str", "Path", "pathlib.Path",
                    "os.fspath") and len(args) == 1:
            return args[0] if args[0] is None or func not in ("Path", "pathlib.Path", "str") or \
                not isinstance(node.args[0], ast.Constant) else _normal(str(PurePosixPath(cwd, args[0])))
        if func in ("os.path.join", "path.join", "join") and args and all(a is not None for a in args):
            return _normal(str(PurePosixPath(*args)))  # type: ignore[arg-type]
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute") and not node.args:
            return _static_path(node.func.value, file, cwd)
        return None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _static_path(node.value, file, cwd)
        return None if inner is None else _normal(str(PurePosixPath(inner).parent))
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents" \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
        inner = _static_path(node.value.value, file, cwd)
        if inner is None:
            return None
        return _normal(str(PurePosixPath(inner, *([".."] * (node.slice.value + 1)))))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left, right = _static_path(node.left, file, cwd), node.right
        if left is not None and isinstance(right, ast.Constant) and isinstance(right.value, str):
            return _normal(str(PurePosixPath(left, right.value)))
    return None


def _path_change(statement: ast.stmt, file: str, cwd: str) -> tuple[str, str] | None:
    """("insert" | "append", directory) of a `sys.path.insert(i, X)` / `sys.path.append(X)` statement."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    func = ast.unparse(call.func)
    if func == "sys.path.insert" and len(call.args) == 2:
        where = _static_path(call.args[1], file, cwd)
        return ("insert", where) if where is not None else None
    if func == "sys.path.append" and len(call.args) == 1:
        where = _static_path(call.args[0], file, cwd)
        return ("append", where) if where is not None else None
    return None


def _package_of(path: str, module: str) -> str:
    """The package a file reached as `module` is in (its own name for a package's __init__)."""
    return module if path.endswith("__init__.py") else module.rpartition(".")[0]


def linked_directories(root: Path) -> dict[str, str]:
    """The tree's directory symlinks that point inside it (`cmd/pkg -> ../pkg`), link -> target, relative to the
    root: Python imports through them, so a package reached that way is the same files under another directory."""
    found = {}
    real_root = root.resolve()
    for directory, subdirectories, _ in os.walk(root):  # not into the links themselves (followlinks=False)
        subdirectories[:] = [d for d in subdirectories if not d.startswith(".") and d not in SKIPPED_DIRS]
        for name in subdirectories:
            link = Path(directory, name)
            target = link.resolve()
            if link.is_symlink() and target.is_dir() and target.is_relative_to(real_root):
                found[link.relative_to(root).as_posix()] = target.relative_to(real_root).as_posix()
    return found


def unreached_helpers(launch: Launch, files: dict[str, str], helpers_modules: set[str],
                      links: dict[str, str] | None = None) -> list[Unreached]:
    """Each import of a helpers module (by its module name's last part) that does not resolve when the tree is
    started as `launch`; `files`: every Python file of the migrated tree, path -> text; `links`: its directory
    symlinks (linked_directories), whose files are also reached under the link (and told by their own path)."""
    aliases = {link + path[len(target):]: path for link, target in (links or {}).items() for path in files
               if path.startswith(target + "/")}
    files = {**files, **{alias: files[path] for alias, path in aliases.items()}}
    names = set(files)
    sys_path = launch.import_roots()
    start = module_path(launch.target, names, sys_path) if launch.as_module else launch.target
    if start is None or start not in files:
        return []
    first_module = "__main__" if not launch.as_module else launch.target
    queue: list[tuple[str, str]] = [(start, first_module)]
    seen: set[str] = set()
    found: list[Unreached] = []
    while queue:
        path, module = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        try:
            tree = ast.parse(files[path])
        except SyntaxError:
            continue
        package = "" if module == "__main__" else _package_of(path, module)
        # In the order the file runs: a path change counts for the imports after it, not for those above it.
        for node in (n for statement in tree.body for n in ast.walk(statement)):
            change = _path_change(node, path, launch.cwd) if isinstance(node, ast.stmt) else None
            if change is not None:
                sys_path.insert(0, change[1]) if change[0] == "insert" else sys_path.append(change[1])
            for target, line in _imported(node, package):
                if target is None:
                    if isinstance(node, ast.ImportFrom) and node.module and \
                            node.module.rpartition(".")[2] in helpers_modules:
                        found.append(Unreached(path, node.lineno, "a relative import in a file run as a script "
                                                                  f"({launch.describe()}): no parent package"))
                    continue
                resolved = module_path(target, names, sys_path)
                if resolved is None and target.rpartition(".")[2] in helpers_modules:
                    searched = ", ".join(repr(p or ".") for p in sys_path)
                    found.append(Unreached(path, line, f"`{target}` is on no directory of the import path when "
                                                       f"started as {launch.describe()} ({searched})"))
                elif resolved is not None:
                    queue.append((resolved, target))
    return [dataclasses.replace(u, path=aliases.get(u.path, u.path)) for u in found]


def _imported(node: ast.AST, package: str) -> list[tuple[str | None, int]]:
    """The absolute module names an import statement reaches (None for a relative import with no package)."""
    if isinstance(node, ast.Import):
        return [(alias.name, node.lineno) for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        if not package:
            return [(None, node.lineno)]
        parts = package.split(".")
        base = parts[:len(parts) - node.level + 1] if node.level > 1 else parts
        prefix = ".".join(base)
    else:
        prefix = ""
    module = ".".join(p for p in (prefix, node.module or "") if p)
    # `from pkg import sub`: sub may be a module of the package
    return [(module, node.lineno), *((f"{module}.{alias.name}", node.lineno) for alias in node.names
                                     if alias.name != "*")]
