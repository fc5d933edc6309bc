"""What an install of the project can run. `pip install .` (pyproject.toml's dependencies: libcst, numpy, psutil)
gives `compare migrate` alone; every other command, and `migrate --verify`, needs the comparison's packages (the
`compare` extra) and Horovod built against their torch, which scripts/setup.sh installs (docs/setup.md). A missing
one is said in one line, never with a traceback."""

from __future__ import annotations

from importlib.util import find_spec

from workload.errors import UsageError

# The top-level modules of the `compare` extra's packages (pyproject.toml), and Horovod's.
COMPARISON_MODULES = ("torch", "scipy", "sklearn", "matplotlib", "rich", "mpi4py", "yaml", "tensorboard", "horovod")
SET_UP = ("the comparison's packages come with scripts/setup.sh (the `compare` extra and a Horovod built for its "
          "torch; docs/setup.md)")


def not_installed(exc: ModuleNotFoundError, command: str | None) -> str | None:
    """The line for a comparison module missing here, or None when the missing module is another one."""
    module = (exc.name or "").partition(".")[0]
    if module not in COMPARISON_MODULES:
        return None
    return f"{command or 'this command'} needs {module}, which is not installed here: {SET_UP}"


def require_comparison(what: str) -> None:
    """Refuse, in one line, before anything is written, when a module the comparison imports is missing."""
    if missing := [module for module in COMPARISON_MODULES if find_spec(module) is None]:
        raise UsageError(f"{what} needs {', '.join(missing)}, not installed here: {SET_UP}")
