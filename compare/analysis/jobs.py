"""Are two sets of run records the same job? Checked before any loss is compared.

Every difference between the two sides' records is named and classed:
- "job": it makes another job (optimizer, learning rate, batch, workload, data, world size, steps...): the
  verdict is "different jobs" unless the user allows it (`--allow NAME`), which makes it "allowed";
- "expected": what a comparison of two frameworks is for (framework, launcher, communication backend, the
  frameworks' own tuning knobs, threads, fault-tolerance settings): listed, allowed;
- "version": torch, MPI, Python... differ: a warning in every output.

Pure: run.json contents in, a JobCheck out.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from compare.analysis.records import RunRecord, jsonable

# Options that say where and how a run was launched or recorded, not what it trains: not compared.
NOT_COMPARED = frozenset({"out", "seeds", "log_every", "round", "resume", "auto_resume", "collective_timeout",
                          "profile", "spawn", "spawn_controller", "fail_at_step", "fail_rank", "fail_mode",
                          "checkpoint_every", "text_dir", "step_delay_ms",
                          # controlled changes for tests and calibration: they stand for a difference the
                          # records would not show (a bug), so the job check does not name them
                          "perturb_init_ulps", "lr_change_at_step", "lr_change_factor"})
# What a comparison of Horovod and DDP is for: the frameworks' own settings, each ignored by the other side.
EXPECTED_OPTIONS = frozenset({"fusion_threshold_mb", "cycle_time_ms", "bucket_cap_mb", "gradient_as_bucket_view",
                              "elastic", "threads",
                              "zero"})  # ZeroRedundancyOptimizer shards the optimizer state: the same updates
EXPECTED_META = ("framework", "launcher", "backend", "threads")
# run.json fields that make another job when they differ (beyond the options).
JOB_META = ("data_world_size", "samples_per_step", "effective_lr", "steps", "workload_source")
# Variables each launcher sets its own way (interfaces, timeouts): never a difference worth naming.
LAUNCHER_ENV = frozenset({"GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME",
                          "TORCH_NCCL_ASYNC_ERROR_HANDLING", "HOROVOD_GLOO_TIMEOUT_SECONDS",
                          "HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"})
VERSION_KEYS = ("python", "torch", "numpy", "cuda", "mpi", "horovod", "nccl")
UNSET = "(unset)"


@dataclass(frozen=True)
class Difference:
    name: str
    a: object
    b: object
    kind: str  # "job" | "allowed" | "expected" | "version"


@dataclass(frozen=True)
class JobCheck:
    differences: list[Difference] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Difference]:
        return [d for d in self.differences if d.kind == kind]

    @property
    def same_job(self) -> bool:
        return not self.of_kind("job")

    def to_dict(self) -> dict:
        return jsonable({"same_job": self.same_job, "differences": [dataclasses.asdict(d) for d in self.differences]})


def _flatten(value: dict, prefix: str = "") -> dict:
    flat = {}
    for key, item in value.items():
        if isinstance(item, dict):
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat


def _pairs(a: dict, b: dict) -> list[tuple[str, object, object]]:
    """(name, a, b) for every name whose values differ; a name only one side knows is not a difference
    (an imported record cannot know every option)."""
    return [(name, a[name], b[name]) for name in sorted(set(a) & set(b)) if a[name] != b[name]]


def check_job(meta_a: dict, meta_b: dict, allow: frozenset[str] = frozenset()) -> JobCheck:
    """Every difference between two runs' records, classed (see the module's docstring)."""
    found: list[Difference] = []

    def add(name: str, a: object, b: object, kind: str) -> None:
        if kind == "job" and (name in allow or name.split(".")[0] in allow):
            kind = "allowed"
        found.append(Difference(name, a, b, kind))

    options_a, options_b = _flatten(meta_a.get("options") or {}), _flatten(meta_b.get("options") or {})
    for name, a, b in _pairs(options_a, options_b):
        root = name.split(".")[0]
        if root in NOT_COMPARED:
            continue
        add(name, a, b, "expected" if root in EXPECTED_OPTIONS else "job")
    seen = {d.name for d in found}
    for name in JOB_META:
        a, b = meta_a.get(name), meta_b.get(name)
        if a is not None and b is not None and a != b and name not in seen:
            add(name, a, b, "job")
    # The world size itself may differ only where the global batches are the same (a reference run).
    if meta_a.get("world_size") != meta_b.get("world_size"):
        same_data = meta_a.get("data_world_size", meta_a.get("world_size")) == \
            meta_b.get("data_world_size", meta_b.get("world_size"))
        add("world_size", meta_a.get("world_size"), meta_b.get("world_size"), "expected" if same_data else "job")
    for name in EXPECTED_META:
        a, b = meta_a.get(name), meta_b.get(name)
        if a is not None and b is not None and a != b and name not in seen:
            add(name, a, b, "expected")
    env_a = {k: v for k, v in (meta_a.get("env") or {}).items() if k not in LAUNCHER_ENV}
    env_b = {k: v for k, v in (meta_b.get("env") or {}).items() if k not in LAUNCHER_ENV}
    if not (meta_a.get("imported") or meta_b.get("imported")):  # an imported log knows no environment
        for name in sorted(set(env_a) | set(env_b)):
            if env_a.get(name, UNSET) != env_b.get(name, UNSET):
                add(f"env.{name}", env_a.get(name, UNSET), env_b.get(name, UNSET), "expected")
    versions_a, versions_b = meta_a.get("versions") or {}, meta_b.get("versions") or {}
    for name in VERSION_KEYS:
        a, b = versions_a.get(name), versions_b.get(name)
        if a is not None and b is not None and a != b:
            add(f"versions.{name}", a, b, "version")
    return JobCheck(found)


def check_sides(a: list[RunRecord], b: list[RunRecord], allow: frozenset[str] = frozenset()) -> JobCheck:
    """The job check of two sides, on their first runs (by seed), plus the recorded step counts of every seed."""
    check = check_job(min(a, key=lambda r: r.seed).meta, min(b, key=lambda r: r.seed).meta, allow)
    steps_a = {r.seed: r.last_step for r in a}
    steps_b = {r.seed: r.last_step for r in b}
    extra = [Difference(f"recorded steps (seed {seed})", steps_a[seed], steps_b[seed],
                        "allowed" if "steps" in allow else "job")
             for seed in sorted(set(steps_a) & set(steps_b)) if steps_a[seed] != steps_b[seed]]
    names = {d.name for d in check.differences}
    if "steps" in names:  # the options already say so
        extra = []
    return JobCheck(check.differences + extra + _grid_differences(a[0], b[0]))


STRIDE = re.compile(r"counter / (\d+) \(its stride\)")


def _grid_differences(a: RunRecord, b: RunRecord) -> list[Difference]:
    """Two imported logs whose epoch-relative counters were put on a grid by each log's own logging interval:
    where the intervals differ, the same step number names different batches, and nothing can be paired."""
    rules = [((run.imported or {}).get("fields") or {}).get("steps") or "" for run in (a, b)]
    strides = [STRIDE.search(rule) for rule in rules]
    if not all(strides) or strides[0][1] == strides[1][1]:
        return []
    return [Difference("step grid (the logs print at different intervals, so one step number names other "
                       "batches on each side: import both with --global-batch and --world-size)",
                       f"counter / {strides[0][1]}", f"counter / {strides[1][1]}", "job")]
