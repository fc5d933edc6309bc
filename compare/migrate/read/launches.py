"""How a repository's users start it: the commands its README and shell scripts type, its console entry points
(pyproject.toml, setup.py), and every `if __name__ == "__main__":` file none of those names.

A migrated tree must start the same way with nothing added to the environment; each launch says what Python's
import path holds at the start (import_reach.py resolves the migrated files' imports from it), and --verify starts
each side that way. Read statically: the repository's other dependencies may be missing here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from pathlib import Path, PurePosixPath

import tomllib

from compare.migrate.read.repository import SKIPPED_DIRS

LAUNCH_TEXTS = ("*.md", "*.rst", "*.txt", "*.sh", "Makefile", "*.mk")  # where a command line is written down
LAUNCHERS = {"python", "torchrun", "horovodrun", "mpirun", "mpiexec", "srun", "accelerate", "deepspeed"}
LAUNCHER_MODULES = ("torch.distributed", "horovod", "mpi4py")  # `python -m torch.distributed.run train.py`
CONSOLE_SCRIPT = re.compile(r"""['"]\s*([\w.-]+)\s*=\s*([\w.]+)\s*:\s*([\w.]+)\s*['"]""")
MAX_TEXT_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Launch:
    target: str                      # a path from the root ("scripts/train.py"), or a module ("tinynet.train")
    as_module: bool                  # `python -m`, or a console entry point (the package imported, installed)
    cwd: str = ""                    # the working directory, from the root ("" the root itself)
    python_path: tuple[str, ...] = ()  # directories the command puts on PYTHONPATH, from the root
    found: str = ""                  # where it was read: "README.md line 12", "pyproject.toml [project.scripts]"

    def describe(self) -> str:
        """The launch as a person types it (torchrun's or python's arguments after the launcher)."""
        path = " ".join(f"PYTHONPATH={p or '.'}" for p in self.python_path)
        cd = f"cd {self.cwd} && " if self.cwd else ""
        target = self.target if self.as_module or not self.cwd else os.path.relpath(self.target, self.cwd)
        return f"{cd}{path + ' ' if path else ''}{'-m ' if self.as_module else ''}{target}"

    def import_roots(self) -> list[str]:
        """Python's import path at the start, from the root, before the code changes it: the script's directory
        (or, for -m and an installed package, the working directory), then PYTHONPATH."""
        first = self.cwd if self.as_module else str(PurePosixPath(self.target).parent)
        return [_normal(first), *(_normal(str(PurePosixPath(self.cwd, p))) for p in self.python_path)]


def _normal(path: str) -> str:
    parts: list[str] = []
    for part in PurePosixPath(path).parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part not in (".", ""):
            parts.append(part)
    return "/".join(parts)


def module_path(module: str, python_files: set[str], roots: list[str]) -> str | None:
    """The file a module name runs or imports (`-m pkg` runs pkg/__main__.py), searched on the roots in order."""
    relative = module.replace(".", "/")
    for root in roots:
        for candidate in (f"{relative}.py", f"{relative}/__main__.py", f"{relative}/__init__.py"):
            path = _normal(str(PurePosixPath(root, candidate)))
            if path in python_files:
                return path
    return None


def _commands(text: str) -> list[tuple[int, str]]:
    """The command lines of a text, with their line numbers: each line, and each `code span` of a line."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        spans = re.findall(r"`([^`]+)`", line)
        for candidate in spans or [line]:
            if any(word in candidate for word in LAUNCHERS):
                found.append((number, candidate.strip()))
    return found


def _launch_in(command: str, python_files: set[str], found: str) -> Launch | None:
    """The repository's file or module a command line starts, with its working directory and PYTHONPATH."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    cwd, python_path = "", []
    started = False
    for index, word in enumerate(words):
        if index + 1 < len(words) and word == "cd" and not started:
            cwd = _normal(str(PurePosixPath(cwd, words[index + 1])))
        elif word.startswith("PYTHONPATH=") and not started:
            python_path += [p.replace("$PWD", ".").replace("${PWD}", ".") for p in word.split("=", 1)[1].split(":")
                            if p and not p.startswith("$")]
        elif PurePosixPath(word).name.rstrip("0123456789.") in LAUNCHERS:
            started = True
        elif started and word == "-m" and index + 1 < len(words):
            module = words[index + 1]
            if module.startswith(LAUNCHER_MODULES):
                continue
            roots = [cwd, *python_path]
            if module_path(module, python_files, roots) is not None:
                return Launch(module, True, cwd, tuple(python_path), found)
            return None
        elif started and word.endswith(".py"):
            path = _normal(str(PurePosixPath(cwd, word)))
            return Launch(path, False, cwd, tuple(python_path), found) if path in python_files else None
    return None


def _console_scripts(root: Path) -> list[tuple[str, str]]:
    """(module, where) of each console entry point of pyproject.toml and setup.py."""
    found = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(errors="replace"))
        except tomllib.TOMLDecodeError:
            data = {}
        for name, value in (data.get("project", {}).get("scripts", {}) or {}).items():
            found.append((str(value).split(":")[0].strip(), f"pyproject.toml [project.scripts] {name}"))
    setup = root / "setup.py"
    if setup.is_file():
        text = setup.read_text(errors="replace")
        if "console_scripts" in text:
            found += [(module, f"setup.py console_scripts {name}") for name, module, _ in CONSOLE_SCRIPT.findall(text)]
    return found


def launches_of(root: Path, python_files: dict[str, str]) -> list[Launch]:
    """Every way the repository says it is started, then each `__main__` file none of them starts (run by its path
    from the root): in that order, each target once."""
    names = set(python_files)
    launches: dict[str, Launch] = {}
    texts = sorted({p for pattern in LAUNCH_TEXTS for p in root.rglob(pattern)
                    if p.is_file() and not any(part.startswith(".") or part in SKIPPED_DIRS
                                               for part in p.relative_to(root).parts[:-1])})
    for path in texts:
        if path.stat().st_size > MAX_TEXT_BYTES:
            continue
        relative = path.relative_to(root).as_posix()
        for number, command in _commands(path.read_text(errors="replace")):
            launch = _launch_in(command, names, f"{relative} line {number}")
            if launch is not None:
                launches.setdefault(launch.target, launch)
    src = "src" if (root / "src").is_dir() else ""
    for module, where in _console_scripts(root):
        if module_path(module, names, [src, ""]) is not None:
            launches.setdefault(module, Launch(module, True, src, (), where))
    started = {target_path(launch, names) for launch in launches.values()}
    for path, text in sorted(python_files.items()):
        if path not in started and re.search(r"__name__\s*==\s*['\"]__main__['\"]", text):
            launches.setdefault(path, Launch(path, False, "", (), f"{path} (a __main__ block)"))
    return list(launches.values())


def target_path(launch: Launch, python_files: set[str]) -> str | None:
    """The file the launch runs first."""
    return module_path(launch.target, python_files, launch.import_roots()) if launch.as_module else launch.target
