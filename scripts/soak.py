#!/usr/bin/env python
"""Soak the orchestration: many short jobs through compare's launch code, and nothing may be left behind.

Every job is launched the way `python -m compare run` and `python -m compare faults` launch theirs
(compare.launch.lines.build_launch / recovery_launch, then compare.launch.process.run_launch with its time limit
and its kill of the whole process tree). The jobs cycle deterministically through launcher setups
(torchrun, torchrun --max-restarts with --auto-resume, horovodrun --gloo, horovodrun --mpi, elastic
horovodrun) and scenarios (a clean run, a worker SIGKILLed, a worker exiting 13, a worker SIGSTOPped).

After every job, and once more at the end, it looks for what the job left: a process it started that is
still alive, or a listening socket that was not there before. Anything found is reported (job, pids,
ports), killed so that the next jobs run undisturbed, and makes the soak exit 1.

    .venv/bin/python scripts/soak.py --jobs 200 --out results/soak

Writes OUT/soak.json (after every job) and OUT/soak.md (the summary, also printed); each job's run
directory and launcher log stay in OUT/jobs/. Exit status: 0 nothing left behind, 1 something was,
2 usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "scripts"):  # run as a script from anywhere: compare/, workload/ and leftovers.py
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from leftovers import MARKER, LeftoverDetector, Leftovers, ProcKey  # noqa: E402

from compare.launch.lines import (  # noqa: E402
    Launch,
    build_launch,
    private_network_available,
    recovery_launch,
)
from compare.launch.logs import steps_done  # noqa: E402
from compare.launch.process import run_launch  # noqa: E402
from compare.render.progress import ProgressReporter  # noqa: E402
from workload.files import write_atomic, write_json_atomic  # noqa: E402
from workload.options import Options  # noqa: E402

SCENARIOS = ("clean", "kill", "exit", "hang")


@dataclass(frozen=True)
class Setup:
    name: str
    framework: str  # "ddp" | "horovod"
    describe: str
    recovery: bool
    # what a stopped worker leads to: the collective timeout fails the job, the recovery gets past it, or
    # nothing fires and the suite's launch timeout is the last line (docs/fault-tolerance.md)
    hang_outcome: str


SETUPS = {s.name: s for s in (
    Setup("ddp", "ddp", "torchrun", False, "failed as expected"),
    Setup("ddp-restarts", "ddp", "torchrun --max-restarts 3, --auto-resume", True, "recovered"),
    Setup("horovod-gloo", "horovod", "horovodrun --gloo", False, "failed as expected"),
    Setup("horovod-mpi", "horovod", "horovodrun --mpi", False, "timed out and killed"),
    Setup("horovod-elastic", "horovod", "horovodrun --gloo, elastic", True, "timed out and killed"),
)}


def expected_outcome(setup: Setup, scenario: str) -> str:
    if scenario == "clean":
        return "clean"
    if scenario == "hang":
        return setup.hang_outcome
    return "recovered" if setup.recovery else "failed as expected"


def plan(jobs: int, setups: list[str], scenarios: list[str]) -> list[tuple[str, str]]:
    """Job i runs combination i mod len: every setup with one scenario, then the next scenario."""
    combos = [(setup, scenario) for scenario in scenarios for setup in setups]
    return [combos[i % len(combos)] for i in range(jobs)]


def uses_private_network(setup: Setup, network: str) -> bool:
    """--network private puts the launches compare run makes (build_launch) in a loopback-only namespace,
    as `compare run --network auto` does as root; compare faults launches on the host's network."""
    return network == "private" and not setup.recovery


def job_launch(setup: Setup, scenario: str, run_root: Path, ns: argparse.Namespace) -> Launch:
    """The launch compare would make: build_launch for the plain launchers, compare.commands.faults' command for the
    recovery setups (the same command `python -m compare faults` runs)."""
    options = Options(workload="mlp", dataset_size=2048, batch_size=16, steps=ns.steps, seeds=(0,),
                      collective_timeout=ns.collective_timeout,
                      checkpoint_every=ns.checkpoint_every if setup.recovery else None)
    if scenario != "clean":
        options = dataclasses.replace(options, fail_at_step=ns.fail_at_step, fail_rank=1, fail_mode=scenario)
    private = uses_private_network(setup, ns.network)
    if setup.name == "ddp":
        return build_launch("ddp", 2, options, run_root, private_network=private)
    if setup.name in ("horovod-gloo", "horovod-mpi"):
        return build_launch("horovod", 2, options, run_root, horovod_controller=setup.name.split("-")[1],
                            private_network=private)
    return recovery_launch(setup.framework, options, run_root, faulty=True)  # on the host's network, as there


# ---------------------------------------------------------------------------------------------------------
# Leftover detection


# ---------------------------------------------------------------------------------------------------------
# The soak


@dataclass
class JobResult:
    index: int
    setup: str
    framework: str
    launcher: str
    scenario: str
    returncode: int | None
    timed_out: bool
    outcome: str
    expected: str
    seconds: float
    failing_rank: int | None
    leftover_processes: list[dict]
    leftover_ports: list[dict]
    run_dir: str
    network: str = "host"
    log_excerpt: str = ""

    @property
    def as_expected(self) -> bool:
        return self.outcome == self.expected


def classify(scenario: str, returncode: int | None, timed_out: bool) -> str:
    if timed_out:
        return "timed out and killed"
    if returncode == 0:
        return "clean" if scenario == "clean" else "recovered"
    return "failed unexpectedly" if scenario == "clean" else "failed as expected"


def soak_job(ns: argparse.Namespace, index: int, setup_name: str, scenario: str, detector: LeftoverDetector,
             reporter: ProgressReporter, foreign_seen: set[ProcKey]) -> JobResult:
    """One job of the soak: launched, what it left behind found and killed, its line printed."""
    setup = SETUPS[setup_name]
    run_root = (ns.out / "jobs" / f"{index:03d}-{setup_name}-{scenario}").resolve()
    # A stale checkpoint or fault marker would make --auto-resume skip the job or the fault not fire.
    shutil.rmtree(run_root, ignore_errors=True)
    launch = job_launch(setup, scenario, run_root, ns)
    launch = dataclasses.replace(launch, env={**launch.env, MARKER: detector.marker(index)})
    reporter.begin(f"{setup_name} {scenario}", index + 1, ns.jobs)

    def on_poll(launch: Launch = launch) -> None:
        detector.track_tree()
        reporter.update(steps_done(launch.run_root, launch.seeds))

    outcome = run_launch(launch, ns.timeout, on_poll=on_poll)
    found = detector.settle(run_root, ns.grace)
    foreign_seen.update(p.key for p in found.foreign)
    if found:
        detector.kill(found)
    result = JobResult(
        index, setup_name, setup.framework, setup.describe, scenario, outcome.returncode, outcome.timed_out,
        classify(scenario, outcome.returncode, outcome.timed_out), expected_outcome(setup, scenario),
        round(outcome.duration_s, 2), outcome.failing_rank, [p.as_dict() for p in found.processes],
        [p.as_dict() for p in found.ports], str(run_root),
        "private" if uses_private_network(setup, ns.network) else "host",
        "" if outcome.ok else outcome.log_tail[-2000:])
    message = f"{index:03d} {setup_name} {scenario}: {result.outcome} in {result.seconds:.1f} s"
    if not result.as_expected:
        message += f" (expected: {result.expected})"
    if found:
        message += f"; LEFT BEHIND, killed: {found.describe()}"
    reporter.end(message, ns.steps, ok=result.as_expected and not found)
    return result


def run_soak(ns: argparse.Namespace) -> int:
    out: Path = ns.out
    jobs_dir = out / "jobs"
    soak_id = f"{os.getpid()}-{int(time.time())}"
    detector = LeftoverDetector(soak_id)
    schedule = plan(ns.jobs, ns.setups, ns.scenarios)
    reporter = ProgressReporter(ns.jobs * ns.steps)
    results: list[JobResult] = []
    foreign_seen: set[ProcKey] = set()
    started = time.monotonic()
    final = Leftovers()
    interrupted = False
    try:
        for index, (setup_name, scenario) in enumerate(schedule):
            results.append(soak_job(ns, index, setup_name, scenario, detector, reporter, foreign_seen))
            write_json_atomic(out / "soak.json", document(ns, results, final, foreign_seen, started, done=False))
    except KeyboardInterrupt:
        interrupted = True  # run_launch has killed the launch in progress; report what ran
    finally:
        reporter.close()
    final = detector.settle(None, ns.grace)
    if final:
        print(f"at the end, left behind: {final.describe()}", file=sys.stderr)
        detector.kill(final)
    record = document(ns, results, final, foreign_seen, started, done=not interrupted)
    write_json_atomic(out / "soak.json", record)
    summary = render_markdown(record)
    write_atomic(out / "soak.md", summary)
    print(summary)
    print(f"soak: {out / 'soak.md'}  (also soak.json, job logs in {jobs_dir})")
    if interrupted:
        return 130
    leftovers = any(r.leftover_processes or r.leftover_ports for r in results) or bool(final)
    return 1 if leftovers else 0


def document(ns: argparse.Namespace, results: list[JobResult], final: Leftovers, foreign: set[ProcKey],
             started: float, *, done: bool) -> dict:
    return {
        "schema_version": 1,
        "complete": done,
        "command": " ".join(sys.argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"hostname": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "settings": {"jobs": ns.jobs, "setups": ns.setups, "scenarios": ns.scenarios, "steps": ns.steps,
                     "fail_at_step": ns.fail_at_step, "fail_rank": 1, "collective_timeout_s": ns.collective_timeout,
                     "checkpoint_every": ns.checkpoint_every, "launch_timeout_s": ns.timeout, "grace_s": ns.grace,
                     "network": ns.network},
        "totals": totals(results, final, time.monotonic() - started),
        "final_leftovers": {"processes": [p.as_dict() for p in final.processes],
                            "ports": [p.as_dict() for p in final.ports]},
        "foreign_processes_ignored": len(foreign),
        "jobs": [{**dataclasses.asdict(r), "as_expected": r.as_expected} for r in results],
    }


def totals(results: list[JobResult], final: Leftovers, seconds: float) -> dict:
    return {
        "jobs": len(results),
        "outcomes": dict(Counter(r.outcome for r in results)),
        "not_as_expected": sum(not r.as_expected for r in results),
        "jobs_leaving_something": sum(bool(r.leftover_processes or r.leftover_ports) for r in results),
        "leftover_processes": sum(len(r.leftover_processes) for r in results) + len(final.processes),
        "leftover_listening_ports": sum(len(r.leftover_ports) for r in results) + len(final.ports),
        "seconds": round(seconds, 1),
    }


def render_markdown(document: dict) -> str:
    """The summary, from soak.json's document alone (so that the docs' sample is re-rendered from its record)."""
    settings, t, jobs = document["settings"], document["totals"], document["jobs"]
    lines = [f"# Soak: {t['jobs']} jobs through compare's orchestration", "",
             f"mlp at np 2, {settings['steps']} steps; faults on rank 1 after step {settings['fail_at_step']}; "
             f"collective timeout {settings['collective_timeout_s']:g} s; launch timeout "
             f"{settings['launch_timeout_s']:g} s; leftovers checked after every job (grace {settings['grace_s']:g} s) "
             "and at the end.", "",
             "| launcher | scenario | jobs | outcomes | median s | max s | left processes | left ports |",
             "|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[dict]] = {}
    for job in jobs:
        groups.setdefault((job["setup"], job["scenario"]), []).append(job)
    order = {name: i for i, name in enumerate(SETUPS)}
    for (setup, scenario), group in sorted(groups.items(),
                                           key=lambda kv: (order[kv[0][0]], SCENARIOS.index(kv[0][1]))):
        counts = Counter(job["outcome"] for job in group)
        expected = group[0]["expected"]
        outcomes = ", ".join(f"{n} {o}" + ("" if o == expected else " (unexpected)") for o, n in counts.most_common())
        secs = [job["seconds"] for job in group]
        left_procs = sum(len(job["leftover_processes"]) for job in group)
        left_ports = sum(len(job["leftover_ports"]) for job in group)
        network = " (private network)" if group[0]["network"] == "private" else ""
        lines.append(f"| {SETUPS[setup].describe}{network} | {scenario} | {len(group)} | {outcomes} "
                     f"| {statistics.median(secs):.1f} | {max(secs):.1f} | {left_procs} | {left_ports} |")
    outcome_text = ", ".join(f"{n} {o}" for o, n in Counter(job["outcome"] for job in jobs).most_common())
    lines += ["", f"- jobs: {t['jobs']} ({outcome_text}); not as expected: {t['not_as_expected']}",
              f"- leftover processes: {t['leftover_processes']}",
              f"- leftover listening ports: {t['leftover_listening_ports']}",
              f"- total time: {t['seconds'] / 60:.1f} min"]
    if document["foreign_processes_ignored"]:
        lines.append(f"- ignored: {document['foreign_processes_ignored']} launcher processes of other runs on this "
                     "machine (no soak marker)")
    for job in jobs:
        if job["leftover_processes"] or job["leftover_ports"]:
            lines.append(f"- job {job['index']:03d} ({job['setup']} {job['scenario']}) left: "
                         f"{[p['pid'] for p in job['leftover_processes']]} "
                         f"{[p['address'] for p in job['leftover_ports']]}")
    final = document["final_leftovers"]
    if final["processes"] or final["ports"]:
        lines.append(f"- at the end: {[p['pid'] for p in final['processes']]} "
                     f"{[p['address'] for p in final['ports']]}")
    return "\n".join(lines) + "\n"


def _names(valid: Iterable[str]):
    valid = tuple(valid)

    def parse(text: str) -> list[str]:
        names = [part.strip() for part in text.split(",") if part.strip()]
        unknown = [n for n in names if n not in valid]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(valid)}; got {text!r}")
        return names

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200, help="jobs to launch, cycling through setups x scenarios")
    parser.add_argument("--out", type=Path, default=Path("results/soak"), help="soak.json, soak.md and jobs/")
    parser.add_argument("--setups", type=_names(SETUPS), default=list(SETUPS), help="launcher setups to cycle")
    parser.add_argument("--scenarios", type=_names(SCENARIOS), default=list(SCENARIOS), help="scenarios to cycle")
    parser.add_argument("--steps", type=int, default=15, help="optimizer steps per job")
    parser.add_argument("--fail-at-step", type=int, default=5, help="rank 1 fails after this step")
    parser.add_argument("--checkpoint-every", type=int, default=4, help="checkpoint / commit interval (recovery)")
    parser.add_argument("--collective-timeout", type=float, default=5, help="seconds before a stopped worker fails")
    parser.add_argument("--timeout", type=float, default=75, help="seconds allowed for each launch")
    parser.add_argument("--network", choices=["host", "private"], default="host",
                        help="private: compare run's launches each in a loopback-only network namespace (root); "
                             "their sockets are then out of this script's sight, their processes are not")
    parser.add_argument("--grace", type=float, default=5, help="seconds allowed for teardown before a leftover counts")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.jobs <= 0 or ns.steps <= 0 or not 0 < ns.fail_at_step < ns.steps or ns.checkpoint_every <= 0:
        parser.error("--jobs, --steps and --checkpoint-every must be positive, and --fail-at-step below --steps")
    if ns.network == "private" and not private_network_available():
        parser.error("--network private needs root, unshare and ip (iproute2)")
    return run_soak(ns)


if __name__ == "__main__":
    sys.exit(main())
