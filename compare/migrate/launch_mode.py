"""How a Horovod script is launched by its users: under horovodrun ("cli") or by itself through horovod.run
("api"). Horovod's own examples call horovod.run only when an argument asks for it (`if args.num_proc:
horovod.run(main, np=args.num_proc) else: main(args)`), so a script that contains horovod.run is a horovodrun
script unless the arguments given select horovod.run. Read from the script's syntax tree and its arguments.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

MODES = ("auto", "cli", "api")


@dataclass(frozen=True)
class LaunchMode:
    mode: str       # "cli" (horovodrun / torchrun) or "api" (the script starts its workers)
    why: str        # for the screen: how it was decided
    option: str | None = None  # the option that selects horovod.run, when there is one


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


def decide(source: str, script_args: list[str], requested: str = "auto") -> LaunchMode:
    """The launch mode for these arguments. Raises Undecided where only --launch-mode can tell."""
    if requested != "auto":
        try:
            option = decide(source, script_args).option
        except Undecided:
            option = None
        return LaunchMode(requested, f"--launch-mode {requested}", option)
    tree = ast.parse(source)
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
