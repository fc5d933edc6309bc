"""How a Horovod script is launched by its users: under horovodrun ("cli") or by itself through horovod.run
("api"). Horovod's own examples call horovod.run only when an argument asks for it (`if args.num_proc:
horovod.run(main, np=args.num_proc) else: main(args)`), so a script that contains horovod.run is a horovodrun
script unless the arguments given select horovod.run. Read from the script's syntax tree and its arguments.
A job that Ray starts (horovod.ray's RayExecutor, Ray Train's HorovodTrainer) is "api" too: its driver starts
a local Ray and the workers.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass

from compare.migrate.spark_launch import SparkMissing, spark_launch

MODES = ("auto", "cli", "api")


@dataclass(frozen=True)
class LaunchMode:
    mode: str       # "cli" (horovodrun / torchrun) or "api" (the script starts its workers)
    why: str        # for the screen: how it was decided
    option: str | None = None  # the option that selects horovod.run (or sets Ray's workers), when there is one
    sides: tuple[str, str] | None = None  # what starts each side's workers, when it is not horovod.run / spawn
    original_prefix: tuple[str, ...] = ()  # put before the original script in its command (a front-end's stand-in)


class Undecided(Exception):
    """The arguments cannot tell the mode: ask for --launch-mode (one line)."""


def _is_horovod_run(node: ast.AST, horovod: set[str]) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run"
            and isinstance(node.func.value, ast.Name) and node.func.value.id in horovod)


def _horovod_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name for alias in node.names if alias.name == "horovod"}
    return names


def _options(tree: ast.Module) -> dict[str, list[str]]:
    """dest -> option strings, from every parser.add_argument("--x", ...) call."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        flags = [arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        dest = next((kw.value.value for kw in node.keywords if kw.arg == "dest" and isinstance(kw.value, ast.Constant)),
                    None)
        longs = [flag for flag in flags if flag.startswith("--")]
        if dest is None and (longs or flags):
            dest = (longs or flags)[0].lstrip("-").replace("-", "_")
        if dest:
            found.setdefault(dest, []).extend(flag for flag in flags if flag.startswith("-"))
    return found


def _is_main_guard(test: ast.expr) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__")


def _condition(test: ast.expr) -> tuple[str, bool] | None:
    """('num_proc', True) for `args.num_proc`, `args.num_proc is not None`, `args.num_proc > 0`;
    ('num_proc', False) for `not args.num_proc`, `args.num_proc is None`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _condition(test.operand)
        return (inner[0], not inner[1]) if inner else None
    if isinstance(test, ast.Attribute):
        return test.attr, True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Attribute):
        negated = isinstance(test.ops[0], ast.Is) or (
            isinstance(test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value in (None, 0))
        return test.left.attr, not negated
    return None


RAY_SIDES = {
    "RayExecutor": ("python (Horovod's RayExecutor on a local Ray)",
                    "python (Ray Train's TorchTrainer on a local Ray)"),
    "HorovodTrainer": ("python (Ray Train's HorovodTrainer, Train V1: RAY_TRAIN_V2_ENABLED=0, on a local Ray)",
                       "python (Ray Train's TorchTrainer on a local Ray)"),
}


# HorovodTrainer exists only on Ray Train V1: the original runs as `python -c TRAIN_V1 SCRIPT ARGS...`, with V1
# chosen before Ray is imported (its workers inherit the driver's environment).
TRAIN_V1 = ("import os, runpy, sys; os.environ['RAY_TRAIN_V2_ENABLED'] = '0'; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")


def _ray_mode(tree: ast.Module) -> LaunchMode | None:
    """A job that Ray starts (horovod.ray's RayExecutor, Ray Train's HorovodTrainer) runs as plain python on both
    sides: the driver starts a local Ray and its workers. The option behind num_workers=args.X, if any, is named."""
    fronts = ("horovod.ray", "ray.train.horovod")
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module in fronts for alias in node.names}
    if any(isinstance(node, ast.Import) and any(alias.name in fronts for alias in node.names)
           for node in ast.walk(tree)):  # `import horovod.ray`, then horovod.ray.RayExecutor(...)
        imported |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    front = next((name for name in RAY_SIDES if name in imported), None)
    if front is None:
        return None
    if importlib.util.find_spec("ray") is None:
        raise Undecided("--verify of a job that Ray starts needs Ray Train here: pip install 'ray[train]' "
                        "(the project's ray extra)")
    workers = [kw.value.attr for node in ast.walk(tree) if isinstance(node, ast.Call) for kw in node.keywords
               if kw.arg == "num_workers" and isinstance(kw.value, ast.Attribute)]
    flags = [flag for dest in workers for flag in _options(tree).get(dest, [])]
    return LaunchMode("api", f"the script starts its workers through Ray ({front}): plain python on both sides, "
                             "each starting a local Ray", flags[0] if flags else None, RAY_SIDES[front],
                      ("-c", TRAIN_V1) if front == "HorovodTrainer" else ())


def decide(source: str, script_args: list[str], requested: str = "auto") -> LaunchMode:
    """The launch mode for these arguments. Raises Undecided where only --launch-mode can tell."""
    try:  # a job that Spark starts runs as `python SCRIPT` on both sides (compare/migrate/spark_launch.py)
        spark = spark_launch(ast.parse(source))
    except SparkMissing as exc:
        raise Undecided(str(exc)) from None
    if spark is not None:
        if requested == "cli":
            raise Undecided(f"the script starts its job through {spark.front_end}, not under horovodrun: leave "
                            "--launch-mode at auto")
        return LaunchMode("api", spark.why, sides=spark.sides, original_prefix=spark.original_prefix)
    if requested != "auto":
        try:
            found = decide(source, script_args)
        except Undecided:
            found = LaunchMode(requested, "")
        return LaunchMode(requested, f"--launch-mode {requested}", found.option,
                          found.sides if requested == found.mode else None)
    tree = ast.parse(source)
    ray = _ray_mode(tree)
    if ray is not None:
        return ray
    horovod = _horovod_names(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    runs = [node for node in ast.walk(tree) if _is_horovod_run(node, horovod)]
    if not runs:
        return LaunchMode("cli", "the script does not call horovod.run: horovodrun starts its workers")
    options = _options(tree)
    for call in runs:
        node, branch = call, None
        while node in parents:
            parent = parents[node]
            if isinstance(parent, ast.If) and not _is_main_guard(parent.test):
                branch = (parent, node in parent.body)
                break
            node = parent
        if branch is None:
            return LaunchMode("api", "the script always starts its workers with horovod.run")
        condition = _condition(branch[0].test)
        if condition is None or condition[0] not in options:
            raise Undecided(f"the script calls horovod.run under a condition that names no argument (line "
                            f"{branch[0].lineno}): give --launch-mode cli (horovodrun) or api (horovod.run)")
        dest, positive = condition
        flags = options[dest]
        given = any(word == flag or word.startswith(flag + "=") for word in script_args for flag in flags)
        selected = given == (positive == branch[1])
        shown = flags[0]
        if selected:
            return LaunchMode("api", f"the script starts its workers with horovod.run when {shown} is given, "
                                     "and it is", shown)
        return LaunchMode("cli", f"the script calls horovod.run only with {shown}, which is not given: it is a "
                                 "horovodrun script", shown)
    raise AssertionError("unreachable")
