"""How --verify launches a Horovod script that Spark starts (horovod.spark.run, Databricks' sparkdl.HorovodRunner):
read from the script's syntax tree, as compare/migrate/launch_mode.py reads horovod.run.

Both sides run as `python SCRIPT` (the script makes its SparkSession and starts the job): the original through its
own front-end where that works here, the migration through TorchDistributor. horovod.spark.run works here
(Horovod 0.28.1 under pyspark); sparkdl does not install outside Databricks, so a HorovodRunner script's original
runs through a stand-in HorovodRunner (compare/migrate/sparkdl_standin/) that does what HorovodRunner does with
the training function: pickle it and run it in |np| Horovod processes, here under horovodrun.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from compare.migrate.horovod_api import SPARK_RUN, SPARK_RUNNER

STANDIN_RUNNER = Path(__file__).resolve().parent / "sparkdl_standin" / "run_original.py"


@dataclass(frozen=True)
class SparkLaunch:
    front_end: str                     # SPARK_RUN or SPARK_RUNNER
    sides: tuple[str, str]             # what each side runs under, for the screen
    why: str
    original_prefix: tuple[str, ...]   # put before the original script in its command (the stand-in's runner)


class SparkMissing(Exception):
    """--verify of a Spark script needs pyspark here (one line)."""


def _bindings(tree: ast.Module) -> dict[str, str]:
    """Bound name -> what it names, for the Spark front-ends' imports."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(("horovod.spark", "sparkdl")):
                    names[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("horovod.spark", "sparkdl")):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        value = _dotted(node.value)
        return f"{value}.{node.attr}" if value else None
    return None


def front_end(tree: ast.Module) -> tuple[str, ast.Call] | None:
    """(SPARK_RUN or SPARK_RUNNER, its call) where the script starts its job through one of them, else None."""
    names = _bindings(tree)
    if not names:
        return None
    for node in ast.walk(tree):
        called = _dotted(node.func) if isinstance(node, ast.Call) else None
        for bound in sorted(names, key=len, reverse=True):
            if called and (called == bound or called.startswith(bound + ".")):
                full = names[bound] + called[len(bound):]
                if full in (SPARK_RUN, SPARK_RUNNER):
                    return full, node  # type: ignore[return-value]
                break
    return None


def _processes(call: ast.Call) -> str:
    """'2' for HorovodRunner(np=-2) or np=2, else '|np|'."""
    np = next((kw.value for kw in call.keywords if kw.arg == "np"), call.args[0] if call.args else None)
    try:
        return str(abs(int(ast.literal_eval(np)))) if np is not None else "|np|"
    except (ValueError, TypeError):
        return "|np|"


def spark_launch(tree: ast.Module) -> SparkLaunch | None:
    """How each side of a Spark script runs, or None for a script that Spark does not start.
    Raises SparkMissing where pyspark is not installed: neither side could run."""
    located = front_end(tree)
    if located is None:
        return None
    found, call = located
    if importlib.util.find_spec("pyspark") is None:
        raise SparkMissing(f"the script starts its job through {found}, and pyspark is not installed here: --verify "
                           "runs both sides on a local Spark (pip install -e '.[spark]'; pyspark 4 needs Java 17)")
    migrated = "python (TorchDistributor)"
    if found == SPARK_RUN:
        return SparkLaunch(found, ("python (horovod.spark.run)", migrated),
                           "the script starts its job through horovod.spark.run (Horovod's Spark runner, which runs "
                           "here): both sides run as `python SCRIPT`, the migration through TorchDistributor", ())
    if importlib.util.find_spec("sparkdl") is not None:
        return SparkLaunch(found, ("python (sparkdl.HorovodRunner)", migrated),
                           "the script starts its job through sparkdl.HorovodRunner: both sides run as `python "
                           "SCRIPT`, the migration through TorchDistributor", ())
    return SparkLaunch(found, ("horovodrun (the training function HorovodRunner runs)", migrated),
                       "sparkdl (Databricks' HorovodRunner) is not installed here, so the original's training function "
                       f"runs under horovodrun -np {_processes(call)} --gloo, as HorovodRunner(np=...).run(main, "
                       "**kwargs) would run "
                       "it (a stand-in HorovodRunner pickles it and starts horovodrun; the rest of the script runs as "
                       "`python SCRIPT`); the migration runs through TorchDistributor",
                       (str(STANDIN_RUNNER),))
