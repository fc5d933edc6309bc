"""Tuned configurations (`python -m compare bench` writes OUT/tuned.json) applied to a comparison.

`compare run --tuned FILE` compares tuned against tuned; without it, defaults against defaults. Either way
the report says which, with the settings each framework ran with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from compare.launch.lines import launch_env
from compare.names import FRAMEWORKS
from workload.errors import UsageError
from workload.options import Options, build_parser, options_from_namespace, to_argv, validate

TUNING_RECORD = "tuning.json"  # what a comparison ran with, beside its runs/
# What tuning may change; anything else (seed, learning rate, ...) would make the comparison unequal.
TUNABLE = {"horovod": {"fusion_threshold_mb", "cycle_time_ms", "threads"},
           "ddp": {"bucket_cap_mb", "gradient_as_bucket_view", "threads"}}
HARNESS_ENV = set(launch_env("ddp", 1)) | set(launch_env("horovod", 1))  # what every launch sets itself (lines.py)


@dataclass(frozen=True)
class Tuning:
    """Each framework's extra implementation arguments and launcher environment."""

    source: str | None = None  # the file, or None for the defaults
    args: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in FRAMEWORKS})
    env: dict[str, dict[str, str]] = field(default_factory=lambda: {name: {} for name in FRAMEWORKS})
    tuned_for: dict[str, object] = field(default_factory=dict)

    def describe(self) -> str:
        if self.source is None:
            return "defaults vs defaults"
        parts = [f"{name}: {settings_text(self.args[name], self.env[name]) or 'defaults'}" for name in FRAMEWORKS]
        return f"tuned vs tuned ({self.source}; {'; '.join(parts)})"

    def options_for(self, framework: str, options: Options) -> Options:
        """The comparison's options with this framework's tuned arguments applied on top."""
        extra = self.args.get(framework, [])
        if not extra:
            return options
        argv = to_argv(options, out=options.out, seeds=options.seeds) + extra
        try:
            tuned = options_from_namespace(build_parser(f"{framework} tuning", "").parse_args(argv))
            validate(tuned)
        except UsageError as exc:
            raise UsageError(f"--tuned {self.source}: {framework}'s arguments {' '.join(extra)}: {exc}") from None
        before, after = options.as_record(), tuned.as_record()
        changed = sorted(key for key in after if after[key] != before.get(key) and key not in TUNABLE[framework])
        if changed:
            raise UsageError(f"--tuned {self.source}: {framework}'s arguments change {', '.join(changed)}; tuning "
                             f"may change only {', '.join(sorted(TUNABLE[framework]))}")
        return tuned

    def record(self) -> dict:
        return {"configuration": "tuned" if self.source else "defaults", "source": self.source,
                "args": self.args, "env": self.env, "tuned_for": self.tuned_for,
                "settings": {name: settings_text(self.args[name], self.env[name]) for name in FRAMEWORKS}}


def settings_text(args: list[str], env: dict[str, str]) -> str:
    """One framework's tuned settings as a command line would show them: arguments, then VAR=value."""
    return " ".join([*args, *(f"{k}={v}" for k, v in sorted(env.items()))])


def load_tuning(path: Path | None) -> Tuning:
    """Read tuned.json ({"horovod": [args], "ddp": [args], "env": {"horovod": {...}, "ddp": {...}}});
    a malformed file is a one-line usage error."""
    if path is None:
        return Tuning()
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"--tuned {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--tuned {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except ValueError as exc:  # not UTF-8
        raise UsageError(f"--tuned {path}: not JSON text ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("env", {}), dict) \
            or not isinstance(data.get("tuned_for", {}), dict):
        raise UsageError(f"--tuned {path}: expected an object with lists {', '.join(FRAMEWORKS)} and objects env, "
                         "tuned_for (as compare bench writes it)")
    args, env = {}, {}
    for name in FRAMEWORKS:
        value = data.get(name, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise UsageError(f"--tuned {path}: {name!r} must be a list of argument strings")
        args[name] = value
        variables = data.get("env", {}).get(name, {})
        if not isinstance(variables, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in variables.items()):
            raise UsageError(f"--tuned {path}: env.{name} must map variable names to strings")
        if reserved := sorted(HARNESS_ENV & variables.keys()):
            raise UsageError(f"--tuned {path}: env.{name} sets {', '.join(reserved)}, which the comparison sets "
                             "the same for both sides (use --threads)")
        env[name] = variables
    return Tuning(str(path), args, env, data.get("tuned_for", {}))


def mismatch(tuning: Tuning, options: Options, horovod_controller: str) -> str | None:
    """A warning when the file was tuned for another workload, batch, thread count or Horovod controller."""
    ours = {"workload": options.workload, "batch_size": options.batch_size, "threads": options.threads,
            "horovod_controller": horovod_controller}
    differ = [f"{key} {tuning.tuned_for[key]} (here {value})" for key, value in ours.items()
              if key in tuning.tuned_for and tuning.tuned_for[key] != value]
    return f"{tuning.source} was tuned for {', '.join(differ)}" if differ else None


def tuning_from_record(path: Path) -> Tuning | None:
    """What `compare run` recorded (TUNING_RECORD); None for a directory it did not write."""
    try:
        record = json.loads(path.read_text())
        return Tuning(record["source"], record["args"], record["env"], record["tuned_for"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
