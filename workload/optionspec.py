"""How an option is declared: one dataclass field whose metadata says everything else about it.

`option(default, help, group=..., owner=..., check=...)` is the field; workload/options.py declares every
option with it, and derives from the fields the parser, the checks, which framework refuses or ignores
what, and what the single-process reference ignores. Nothing here names a particular option.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from workload.errors import UsageError


class Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing usage and exiting: every parser of the project's, the
    implementations' and compare's commands (one line and exit 2, never argparse's own exit)."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


Owner = Literal["both", "horovod", "ddp"]
FRAMEWORK_NAMES = {"horovod": "Horovod", "ddp": "DDP"}
# (flag, value, all the options) -> what is wrong, in one line, or None. Not called for a value of None.
Check = Callable[[str, Any, Any], "str | None"]


@dataclass(frozen=True)
class Spec:
    """An option's metadata: everything about it but its name, type and default (the field's own)."""

    help: str
    group: str  # its section of --help
    owner: Owner = "both"  # the framework whose feature or setting it is
    # What the other framework does with a one-sided option: refuse it (a feature it lacks), or accept and
    # ignore it (a tuning setting, so that one command line serves both sides; run.json "ignored_options").
    elsewhere: Literal["refused", "ignored"] = "refused"
    refusal: str | None = None  # what the other side says instead of "--X has no ... equivalent"
    reference_ignores: bool = False  # the single-process reference has no use for it (it ignores one-sided ones anyway)
    check: Check | None = None
    metavar: str | None = None
    run_directory: bool = False  # left out of parsers that have an --out of their own
    internal: bool = False  # set by `compare run` on each launch, not by a user: accepted, left out of --help
    # For an option with more than one flag: add its arguments, and read its value back from the namespace.
    add: Callable[[Any], None] | None = None
    read: Callable[[argparse.Namespace], Any] | None = None


def option(default: Any, help: str, *, group: str | None = None, owner: Owner = "both", **spec: Any) -> Any:
    """A field of Options. A one-sided option's group is its framework's ("Horovod only", "DDP only")."""
    group = group or f"{FRAMEWORK_NAMES[owner]} only"
    return field(default=default, metadata={"spec": Spec(help, group, owner, **spec)})


def spec_of(f: dataclasses.Field) -> Spec:
    return f.metadata["spec"]


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def argument(f: dataclasses.Field, hint: Any) -> dict[str, Any]:
    """argparse.add_argument's keywords for a field: its type, choices and action follow from its annotation
    (bool: a switch; Literal[...]: choices; X | None: X)."""
    spec = spec_of(f)
    kwargs: dict[str, Any] = {"help": argparse.SUPPRESS if spec.internal else spec.help, "default": f.default}
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    base = args[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1 else hint
    if base is bool:
        return {**kwargs, "action": "store_true"}
    if typing.get_origin(base) is Literal:
        kwargs["choices"] = list(typing.get_args(base))
    elif base is not str:
        kwargs["type"] = base
    if spec.metavar:
        kwargs["metavar"] = spec.metavar
    return kwargs


# The checks most options share. Each returns the complaint, or None when the value is fine.

def positive_int(flag: str, value: int, _options: Any) -> str | None:
    return None if value > 0 else f"{flag} must be a positive integer, got {value}"


def positive(flag: str, value: float, _options: Any) -> str | None:
    return None if value > 0 else f"{flag} must be positive, got {value}"


def positive_finite(flag: str, value: float, _options: Any) -> str | None:
    return None if value > 0 and math.isfinite(value) else f"{flag} must be a positive finite number, got {value}"


def nonnegative(flag: str, value: float, _options: Any) -> str | None:
    return None if value >= 0 else f"{flag} must be zero or positive, got {value}"


def directory(flag: str, path: Any, _options: Any) -> str | None:
    return None if path.is_dir() else f"{flag} {path} is not a directory"
