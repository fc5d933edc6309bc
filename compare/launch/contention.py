"""What else the machine did while a launch ran: sampled beside the launch, written to contention.json.

A speed verdict is only about the frameworks when nothing else competed for the cores. Per launch:
load average before and after; the CPU time of the job's own processes against wall time x ranks; the
CPU time of every other process (psutil, sampled at each poll: the job's tree and this process are left
out); the machine's busy and steal time from /proc/stat; ranks x threads against the cores this process
may use. The judgement over these figures is pure and lives in compare/analysis/contention.py.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from dataclasses import dataclass, field

import psutil

TOP_OTHERS = 5  # the busiest other processes named in the record

Key = tuple[int, float]  # (pid, start time): a reused pid is another process


def proc_stat() -> dict[str, float] | None:
    """The machine's CPU seconds so far by kind (all cores summed), from the first line of /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    tick = os.sysconf("SC_CLK_TCK")
    return {name: int(value) / tick for name, value in zip(names, fields[1:], strict=False)}


def available_cores() -> int:
    """The cores this process (and so the launch it starts) may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cpu_seconds(times) -> float:
    return float(times.user + times.system)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class _Other:
    name: str
    first: float  # CPU seconds when first seen during the launch (0 for a process started during it)
    last: float


@dataclass
class ContentionSampler:
    """Start it just before the launcher, call sample() at each poll, finish() once the launch is over.

    The job's own CPU time is the larger of two counts: the CPU time of the processes it waited for (the
    launcher reaps the workers, this process reaps the launcher) and the sum over its tree as last sampled.
    """

    ranks: int
    threads: int
    started_unix: float = field(default_factory=time.time)
    started: float = field(default_factory=time.monotonic)
    load_before: tuple[float, float, float] = field(default_factory=os.getloadavg)
    stat_before: dict[str, float] | None = field(default_factory=proc_stat)
    children_before: float = field(default_factory=_children_cpu)
    self_before: float = field(default_factory=lambda: _cpu_seconds(psutil.Process().cpu_times()))
    others: dict[Key, _Other] = field(default_factory=dict)
    own: dict[Key, float] = field(default_factory=dict)
    samples: int = 0

    def __post_init__(self) -> None:
        self.sample({})

    def sample(self, tree: dict[Key, psutil.Process]) -> None:
        """One look at every process: the job's tree (as run_launch saw it) apart from all others."""
        me = os.getpid()
        own_pids = {pid for pid, _ in tree}
        for key, proc in tree.items():
            with contextlib.suppress(psutil.Error):
                self.own[key] = _cpu_seconds(proc.cpu_times())
        for proc in psutil.process_iter(["name", "cpu_times", "create_time", "ppid"]):
            info = proc.info
            if info["cpu_times"] is None or info["create_time"] is None or proc.pid == me:
                continue
            key = (proc.pid, info["create_time"])
            if key in tree or proc.pid in own_pids or info["ppid"] in own_pids:
                continue  # the ppid test catches a worker forked since run_launch walked the tree
            cpu = _cpu_seconds(info["cpu_times"])
            other = self.others.get(key)
            if other is None:
                # A process that started during the launch spent all its CPU time during it.
                self.others[key] = _Other(info["name"] or "?", 0.0 if self.samples else cpu, cpu)
            else:
                other.last = cpu
        self.samples += 1

    def finish(self, tree: dict[Key, psutil.Process]) -> dict:
        """The figures of the whole launch, for contention.json (plain JSON values)."""
        wall = max(time.monotonic() - self.started, 1e-9)
        stat_after = proc_stat()
        for key in tree:  # members of the tree first seen as "others" (forked between two looks)
            self.others.pop(key, None)
        own_waited = _children_cpu() - self.children_before
        own_sampled = sum(self.own.values())
        own = max(own_waited, own_sampled)
        this_process = _cpu_seconds(psutil.Process().cpu_times()) - self.self_before
        used = {key: o.last - o.first for key, o in self.others.items() if o.last > o.first}
        others = sum(used.values())
        top = sorted(used.items(), key=lambda item: -item[1])[:TOP_OTHERS]
        cores = available_cores()
        record = {
            "started_unix": round(self.started_unix, 3),
            "wall_s": round(wall, 3),
            "ranks": self.ranks,
            "threads_per_rank": self.threads,
            "available_cores": cores,
            "logical_cpus": psutil.cpu_count() or cores,
            "load_before": [round(x, 2) for x in self.load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "own_cpu_s": round(own, 3),
            "own_cpu_per_rank": round(own / wall / max(self.ranks, 1), 3),
            "others_cpu_s": round(others, 3),
            "others_cores": round(others / wall, 3),
            "top_others": [{"pid": pid, "name": self.others[(pid, t)].name, "cpu_s": round(cpu, 3)}
                           for (pid, t), cpu in top],
            "this_process_cpu_s": round(this_process, 3),
            "samples": self.samples,
            "steal_fraction": None,
            "machine_busy_cores": None,
            "unattributed_cores": None,
        }
        if self.stat_before and stat_after:
            delta = {k: stat_after.get(k, 0.0) - self.stat_before.get(k, 0.0) for k in stat_after}
            total = sum(delta.values()) or 1e-9
            busy = sum(delta.get(k, 0.0) for k in ("user", "nice", "system", "irq", "softirq"))
            record["steal_fraction"] = round(delta.get("steal", 0.0) / total, 4)
            record["machine_busy_cores"] = round(busy / wall, 3)
            # What /proc/stat counts as busy that no sampled process accounts for (processes too short-
            # lived to be sampled, kernel work): shown, not judged, since it is never exactly zero.
            record["unattributed_cores"] = round(max(busy - own - others - this_process, 0.0) / wall, 3)
        return record
