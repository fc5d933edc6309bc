"""A repository as the migration sees it: every Python file (its bytes, encoding and line endings), the module
names it is imported by, the imports between its modules, and which files use Horovod.

A single script is a repository of one file. Nothing here rewrites anything: the model is read once and the
passes (compare/migrate/read/normalize.py, the rewrite, the output check) read it.
"""

from __future__ import annotations

import dataclasses
import io
import tokenize
from pathlib import Path, PurePosixPath

import libcst as cst
from libcst.helpers import get_full_name_for_node

from compare.migrate.read.syntax import NoAttributeHooks
from workload.errors import UsageError

# Directories that hold no code of the repository's own (environments, caches, builds, version control).
SKIPPED_DIRS = {"__pycache__", "node_modules", "build", "dist", "site-packages", "venv", "env"}


@dataclasses.dataclass(frozen=True)
class SourceFile:
    """One Python file: what it was on disk, and its text as the rewrite sees it (newlines as "\\n")."""

    path: str          # relative to the root, "/"-separated
    raw: bytes
    encoding: str      # "utf-8-sig" keeps a byte-order mark
    newline: str       # "\n" or "\r\n": the file's own, written back so that only changed lines differ
    text: str

    def encode(self, text: str) -> bytes:
        """The rewritten text in the file's own encoding and line endings."""
        return (text.replace("\n", "\r\n") if self.newline == "\r\n" else text).encode(self.encoding)

    @property
    def module_names(self) -> tuple[str, ...]:
        """The names an import can reach this file by: from the root ("pkg.sub.mod"), and from its own
        directory ("mod", as a script's siblings import it)."""
        parts = PurePosixPath(self.path).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names = {".".join(parts)} if parts else set()
        if len(parts) > 1:
            names.add(parts[-1])
        return tuple(sorted(names))


def read_source(path: Path, relative: str) -> SourceFile:
    """One file, decoded as Python decodes it (PEP 263 coding line, byte-order mark). UsageError if it is not
    Python text."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{relative}: cannot read ({exc.strerror})") from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        decoded = raw.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        raise UsageError(f"{relative}: not a Python file (its bytes do not decode as Python source)") from None
    crlf = decoded.count("\r\n")
    newline = "\r\n" if crlf and crlf >= decoded.count("\n") - crlf else "\n"
    return SourceFile(relative, raw, encoding, newline, decoded.replace("\r\n", "\n"))


def _python_files(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if any(part.startswith(".") or part in SKIPPED_DIRS for part in parts):
            continue
        if path.is_file() and not path.is_symlink():
            found.append(path)
    return found


@dataclasses.dataclass
class Repository:
    """Every Python file under a root, by relative path; for one script, root is its directory and files holds
    it alone."""

    root: Path
    files: dict[str, SourceFile]
    single_file: bool = False

    @classmethod
    def read(cls, path: Path) -> Repository:
        if path.is_file():
            if path.suffix != ".py":
                raise UsageError(f"{path}: not a Python file (expected a .py script or a directory)")
            root = path.resolve().parent
            return cls(root, {path.name: read_source(path, path.name)}, single_file=True)
        if not path.is_dir():
            raise UsageError(f"{path}: no such file or directory")
        root = path.resolve()
        files = {p.relative_to(root).as_posix(): read_source(p, p.relative_to(root).as_posix())
                 for p in _python_files(root)}
        if not files:
            raise UsageError(f"{path}: no Python file in it")
        return cls(root, files)

    def module_index(self) -> dict[str, str]:
        """Module name -> relative path, for the imports between the repository's modules."""
        index: dict[str, str] = {}
        for relative, source in self.files.items():
            for name in source.module_names:
                index.setdefault(name, relative)
        return index

    def identifiers(self) -> set[str]:
        """Every name written anywhere in the repository: what an added name must not be."""
        names: set[str] = set()
        for source in self.files.values():
            names.update(tokenize_names(source.text))
        for relative in self.files:
            names.update(PurePosixPath(relative).with_suffix("").parts)
        return names


def code_tokens(text: str) -> list[tuple[tokenize.TokenInfo, bool]]:
    """Each token of the code, with whether it follows a "." (an attribute's name: `x.name`); none for text that
    does not tokenize."""
    found = []
    previous = ""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            found.append((token, previous == "."))
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                previous = token.string
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return found


def tokenize_names(text: str) -> set[str]:
    """The names a file writes, but attribute names (`x.name` binds nothing a helper could shadow)."""
    return {token.string for token, attribute in code_tokens(text) if token.type == tokenize.NAME and not attribute}


def unique_name(wanted: str, taken: set[str]) -> str:
    """wanted, or wanted_2, wanted_3...: the first that no name of the repository is."""
    if wanted not in taken:
        return wanted
    number = 2
    while f"{wanted}_{number}" in taken:
        number += 1
    return f"{wanted}_{number}"


def absolute_module(node: cst.ImportFrom, own_name: str) -> str:
    """The module a `from ... import` names, a relative one resolved against the importing module's name."""
    name = get_full_name_for_node(node.module) if node.module else ""
    if not node.relative:
        return name or ""
    package = own_name.rsplit(".", 1)[0].split(".") if "." in own_name else []
    up = len(node.relative) - 1
    return ".".join([*(package[:len(package) - up] if up else package), *([name] if name else [])])


def imported_modules(module: cst.Module, own_name: str) -> dict[str, set[str]]:
    """The modules a file imports (absolute names, relative imports resolved against own_name), each with the
    names taken from it (empty for `import x`)."""
    found: dict[str, set[str]] = {}
    for node in _ImportStatements.of(module):
        if isinstance(node, cst.Import):
            for alias in node.names:
                found.setdefault(get_full_name_for_node(alias.name) or "", set())
            continue
        assert isinstance(node, cst.ImportFrom)
        names = found.setdefault(absolute_module(node, own_name), set())
        if isinstance(node.names, (list, tuple)):
            names.update(get_full_name_for_node(a.name) or "" for a in node.names)
    return found


class _ImportStatements(NoAttributeHooks, cst.CSTVisitor):
    """Every import statement of a module, at any depth, in order: a walk of the statements alone (an import is
    never inside an expression), which is what makes it cheaper than m.findall's walk of every node."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Import | cst.ImportFrom] = []

    @classmethod
    def of(cls, module: cst.Module) -> list[cst.Import | cst.ImportFrom]:
        walk = cls()
        module.visit(walk)
        return walk.found

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            self.found.append(node)
            return False
        return not isinstance(node, (cst.BaseExpression, cst.BaseSmallStatement))

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass
