"""Tuned configurations (`python -m compare bench` writes OUT/tuned.json) applied to a comparison.

`compare run --tuned FILE` compares tuned against tuned; without it, defaults against defaults. Either way
the report says which, with the settings each framework ran with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from workload.options import Options, UsageError, build_parser, options_from_namespace, to_argv, validate

FRAMEWORKS = ("horovod", "ddp")


@dataclass(frozen=True)
class Tuning:
    """Each framework's extra implementation arguments and launcher environment."""

    source: str | None = None  # the file, or None for the defaults
    args: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in FRAMEWORKS})
    env: dict[str, dict[str, str]] = field(default_factory=lambda: {name: {} for name in FRAMEWORKS})
    tuned_for: dict = field(default_factory=dict)

    def describe(self) -> str:
        if self.source is None:
            return "defaults vs defaults"
        parts = []
        for name in FRAMEWORKS:
            settings = [*self.args[name], *(f"{k}={v}" for k, v in sorted(self.env[name].items()))]
            parts.append(f"{name}: {' '.join(settings) if settings else 'defaults'}")
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
        return tuned

    def record(self) -> dict:
        return {"configuration": "tuned" if self.source else "defaults", "source": self.source,
                "args": self.args, "env": self.env, "tuned_for": self.tuned_for}


def load_tuning(path: Path | None) -> Tuning:
    """Read tuned.json ({"horovod": [args], "ddp": [args], "env": {"horovod": {...}, "ddp": {...}}});
    a malformed file is a one-line usage error."""
    if path is None:
        return Tuning()
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"--tuned {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--tuned {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise UsageError(f"--tuned {path}: expected an object with keys {', '.join(FRAMEWORKS)}, env")
    args, env = {}, {}
    for name in FRAMEWORKS:
        value = data.get(name, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise UsageError(f"--tuned {path}: {name!r} must be a list of argument strings")
        args[name] = value
        variables = (data.get("env") or {}).get(name, {})
        if not isinstance(variables, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in variables.items()):
            raise UsageError(f"--tuned {path}: env.{name} must map variable names to strings")
        env[name] = variables
    return Tuning(str(path), args, env, data.get("tuned_for") or {})


def mismatch(tuning: Tuning, options: Options) -> str | None:
    """A warning when the file was tuned for another workload, batch or thread count than this run's."""
    ours = {"workload": options.workload, "batch_size": options.batch_size, "threads": options.threads}
    differ = [f"{key} {tuning.tuned_for[key]} (here {value})" for key, value in ours.items()
              if key in tuning.tuned_for and tuning.tuned_for[key] != value]
    return f"{tuning.source} was tuned for {', '.join(differ)}" if differ else None
