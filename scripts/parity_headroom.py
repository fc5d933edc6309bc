#!/usr/bin/env python
"""The numbers behind each parity default (docs/parity.md): a campaign of real runs, one record, markdown tables.

The campaign launches `compare run --np 1,2,4 --repeats 0 --horovod-controller gloo` for each built-in workload,
as the campaign test does (tests/test_parity_headroom.py; digits as tests/test_parity_launchers.py, with np 1):
every seed of DDP is launched again with its initial weights moved one ulp (the calibration pair), and for mlp
and digits the one-process reference and its own pair. Then, in bf16 autocast, one process
(`python -m workload.reference --amp`): a run, the same run one ulp apart, and the same job with the learning rate
5% higher from step 40. From each pair of runs it keeps, per seed, the relative loss gap at every step, the band
the verdict held it to, the evaluation gaps and the end points, in OUT/headroom.json (rewritten after each part);
the tables are rendered from that record alone (compare/analysis/headroom.py does the arithmetic):

    python scripts/parity_headroom.py --out results/headroom             # everything: about 30 minutes on 2 cores
    python scripts/parity_headroom.py --out /tmp/h --workloads lm --np 1,2 --seeds 1 --bf16 none   # a quick look
    python scripts/parity_headroom.py render results/headroom/headroom.json --table margins

Progress goes to stderr, each `compare run`'s output to OUT/logs/. Exit status: 0 the tables were made, 1 a run
gave no record, 2 usage error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere: compare/ and workload/
    sys.path.insert(0, str(ROOT))

from compare.analysis.headroom import Room, margin_room, series_rooms  # noqa: E402
from compare.analysis.judge import END_POINTS, judge  # noqa: E402
from compare.analysis.parity import (  # noqa: E402  # noqa: E402
    PRECISION_FACTOR,
    STEP_K,
    STEP_RTOL,
    UNIT_ROUNDOFF,
    Band,
)
from compare.analysis.records import RecordError, RunRecord, find_runs, load_run  # noqa: E402
from compare.analysis.summary import group_world_size  # noqa: E402
from compare.defaults import DEFAULT_MARGINS  # noqa: E402
from workload.files import write_atomic  # noqa: E402

PY = sys.executable
CAMPAIGNS = {  # workload: its job and seeds, as the tests launch it
    "mlp": (["--epochs", "3"], (0, 1, 2)),
    "digits": (["--epochs", "5"], (0, 1, 2, 3)),
    "resnet": (["--steps", "32"], (0, 1, 2)),
    "lm": (["--steps", "64"], (0, 1, 2)),
}
BF16 = {"mlp": ["--steps", "64"], "digits": ["--epochs", "1"]}  # one process under bf16 autocast
CHANGED_AT = 40
LR_CHANGE = ["--lr-change-at-step", str(CHANGED_AT), "--lr-change-factor", "1.05"]
PAIRS = {  # a pair's key in the record: how the tables name it
    "ddp_ulp": "DDP's one-ulp pair",
    "reference_ulp": "the reference's one-ulp pair",
    "horovod_vs_ddp": "Horovod vs DDP",
    "ddp_vs_reference": "DDP vs the reference",
}
ULP_PAIRS, COMPARED = ("ddp_ulp", "reference_ulp"), ("horovod_vs_ddp", "ddp_vs_reference")
TIMEOUT_S = 3500  # one compare run (the campaign test's)


# ---- measuring -------------------------------------------------------------------------------------------------


def kept(value: float | None) -> float | None:
    """A figure kept to 4 significant digits (the record's size; the tables show 2, rounded once from these)."""
    return None if value is None or not math.isfinite(value) else float(f"{value:.4g}")


def end_points(a: RunRecord, b: RunRecord) -> dict[str, list[float]]:
    pairs = {name: [read(a), read(b)] for name, read in END_POINTS.items()}
    return {name: [float(x) for x in pair] for name, pair in pairs.items() if None not in pair}


def seed_series(seed: dict, a: RunRecord, b: RunRecord) -> dict:
    """One seed of a verdict (judge's to_dict): its gaps and band at every step, its eval-loss gaps, end points."""
    losses = seed["losses"]
    evals = [[e["step"], kept(e["gap"]), kept(e["tolerance"])] for e in seed["evals"] if e["metric"] == "eval_loss"]
    return {"seed": seed["seed"], "steps": losses["steps"], "gaps": [kept(g) for g in losses["rel_diffs"]],
            "tolerances": [kept(t) for t in losses["tolerances"]], "evals": evals, "ends": end_points(a, b)}


def ulp_pair(plain: dict[int, RunRecord], nudged: dict[int, RunRecord]) -> list[dict]:
    """A run against itself one ulp apart, judged as `compare check` judges it without a calibration."""
    seeds = sorted(set(plain) & set(nudged))
    verdict = judge({s: plain[s] for s in seeds}, {s: nudged[s] for s in seeds}, band=Band("default"),
                    with_end_points=False).to_dict()
    return [seed_series(seed, plain[seed["seed"]], nudged[seed["seed"]]) for seed in verdict["seeds"]]


def campaign_levels(runs: list[RunRecord], analysis: dict) -> dict[str, dict]:
    """World size -> its pairs: the compared ones as `compare run` judged them (its calibrated band), the one-ulp
    pairs against the default band."""
    plain: dict[tuple[str, int], dict[int, RunRecord]] = {}
    nudged: dict[tuple[str, int], dict[int, RunRecord]] = {}
    for run in runs:
        if run.ok and run.round == 1:
            (nudged if run.is_calibration else plain).setdefault((run.framework, group_world_size(run)), {})[
                run.seed] = run
    levels = {}
    for level in analysis["levels"]:
        np_ = level["world_size"]
        pairs: dict[str, list[dict]] = {}
        for framework in ("ddp", "reference"):
            if (framework, np_) in plain and (framework, np_) in nudged:
                pairs[f"{framework}_ulp"] = ulp_pair(plain[(framework, np_)], nudged[(framework, np_)])
        for key in COMPARED:
            if key in level["comparisons"]:
                a, b = (plain[(name, np_)] for name in key.split("_vs_"))
                pairs[key] = [seed_series(seed, a[seed["seed"]], b[seed["seed"]])
                              for seed in level["comparisons"][key]["seeds"]]
        steps = max((len(s["steps"]) for series in pairs.values() for s in series), default=0)
        levels[str(np_)] = {"steps": steps, "pairs": pairs}
    return levels


def run_logged(argv: list[str], log: Path, timeout: float) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with log.open("w") as out:
        try:
            return subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout,
                                  check=False).returncode
        except subprocess.TimeoutExpired:
            return 124


def measure_campaign(workload: str, ns: argparse.Namespace) -> dict:
    job, default_seeds = CAMPAIGNS[workload]
    seeds = default_seeds[:ns.seeds] if ns.seeds else default_seeds
    out = ns.out / "runs" / workload
    argv = ["python", "-m", "compare", "run", "--workload", workload, *job, "--np", ",".join(map(str, ns.np)),
            "--seeds", ",".join(map(str, seeds)), "--repeats", "0", "--horovod-controller", "gloo"]
    started = time.monotonic()
    code = run_logged([PY, *argv[1:], "--out", str(out)], ns.out / "logs" / f"{workload}.log", ns.timeout)
    report_path = out / "report.json"
    if not report_path.is_file():
        raise RecordError(f"{workload}: compare run exited {code} without a report (see {ns.out}/logs/{workload}.log)")
    analysis = json.loads(report_path.read_text())["analysis"]
    return {"command": " ".join(argv), "exit": code, "parity": analysis["verdict"]["parity"],
            "seconds": round(time.monotonic() - started), "levels": campaign_levels(find_runs(out / "runs"), analysis)}


def measure_bf16(workload: str, ns: argparse.Namespace) -> dict:
    """One process in bf16: a run, the same one ulp apart, the same with the learning rate changed at step 40."""
    job = ["--workload", workload, *BF16[workload], "--amp", "--seed", "0"]
    started, runs = time.monotonic(), {}
    for name, extra in (("run", []), ("ulp", ["--perturb-init-ulps", "1"]), ("lr", LR_CHANGE)):
        target = ns.out / "bf16" / workload / name
        code = run_logged([PY, "-m", "workload.reference", *job, *extra, "--out", str(target)],
                          ns.out / "logs" / f"bf16-{workload}-{name}.log", ns.timeout)
        if code != 0:
            raise RecordError(f"bf16 {workload} {name}: exit {code} (see {ns.out}/logs/bf16-{workload}-{name}.log)")
        runs[name] = load_run(target)
    pairs = {}
    for key, other in (("ulp", "ulp"), ("lr_change", "lr")):
        verdict = judge({0: runs["run"]}, {0: runs[other]}, band=Band("default"), with_end_points=False).to_dict()
        pairs[key] = seed_series(verdict["seeds"][0], runs["run"], runs[other])
    return {"command": " ".join(["python", "-m", "workload.reference", *job]), "steps": len(runs["run"].steps),
            "seconds": round(time.monotonic() - started), "pairs": pairs}


def versions() -> dict[str, str]:
    code = "import torch, horovod; print(torch.__version__, horovod.__version__)"
    found = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=False).stdout.split()
    return dict(zip(("torch", "horovod"), found, strict=False))


def git_commit() -> str:
    """The commit of the code that ran: the repository `compare` is imported from (the script may be a copy)."""
    import compare

    repository = Path(compare.__file__).resolve().parents[1]

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repository, capture_output=True, text=True,
                              check=False).stdout.strip()

    changed = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    return (git("rev-parse", "--short", "HEAD") or "unknown") + changed


def write_record(path: Path, record: dict) -> None:
    write_atomic(path, json.dumps(record, separators=(",", ":")) + "\n")


def run_campaign(ns: argparse.Namespace) -> int:
    record = {"schema_version": 1, "complete": False,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "commit": git_commit(), "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                                  **versions()},
              "campaigns": {}, "bf16": {}}
    started, path = time.monotonic(), ns.out / "headroom.json"
    parts: list[tuple[str, str, Callable[[str, argparse.Namespace], dict]]] = [
        *(("campaigns", w, measure_campaign) for w in ns.workloads), *(("bf16", w, measure_bf16) for w in ns.bf16)]
    for number, (part, workload, measure) in enumerate(parts, start=1):
        print(f"[{number}/{len(parts)}] {part} {workload} ...", file=sys.stderr, flush=True)
        try:
            record[part][workload] = found = measure(workload, ns)
        except RecordError as exc:
            print(f"parity_headroom: {exc}", file=sys.stderr)
            return 1
        said = f"parity {found['parity']}, " if "parity" in found else ""
        print(f"[{number}/{len(parts)}] {part} {workload}: {said}{found['seconds']} s", file=sys.stderr, flush=True)
        record["seconds"] = round(time.monotonic() - started)
        write_record(path, record)
    record["complete"] = True
    write_record(path, record)
    print(render(record))
    print(f"parity_headroom: {path}")
    return 0


# ---- rendering: from the record alone ---------------------------------------------------------------------------


def times(value: float | None) -> str:
    """A headroom: 'n/a' where the default never applied, 'unbounded' where nothing differed."""
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "unbounded"
    if value >= 100:
        digits = math.floor(math.log10(value)) - 1  # two significant digits, with thousands separated
        return f"{round(value, -digits):,.0f}x"
    return f"{value:.2g}x"


def sci(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "0" if value == 0 else f"{value:.2g}".replace("e-0", "e-").replace("e+0", "e")


def span(values: Iterable[float]) -> str:
    """The smallest and largest of a figure over seeds."""
    found = list(values)
    low, high = min(found), max(found)
    return sci(high) if sci(low) == sci(high) else f"{sci(low)} to {sci(high)}"


def seeds_of(level: dict) -> str:
    found = sorted({s["seed"] for series in level["pairs"].values() for s in series})
    if found and found == list(range(found[0], found[-1] + 1)) and len(found) > 1:
        return f"seeds {found[0]}-{found[-1]}"
    return ("seed " if len(found) == 1 else "seeds ") + ", ".join(map(str, found))


def pair_rooms(series: list[dict], calibrated: bool) -> dict[str, Room]:
    rooms = {name: Room() for name in ("CHAOS_SAFETY", "STEP_RTOL", "DEFAULT_DECADE_STEPS", "margins")}
    for seed in series:
        for name, room in series_rooms(seed["steps"], seed["gaps"], seed["tolerances"] if calibrated else None,
                                       seed=seed["seed"]).items():
            rooms[name].merge(room)
    return rooms


def mean_margin_room(series: list[dict]) -> Room:
    """End points over seeds as the equivalence test sees them: the mean paired difference against the margin."""
    room = Room()
    for name in DEFAULT_MARGINS:
        pairs = [s["ends"][name] for s in series if name in s["ends"]]
        if pairs:
            a, b = (sum(p[i] for p in pairs) / len(pairs) for i in (0, 1))
            margin_room(room, name, a, b)
    return room


def rows_of(record: dict) -> Iterable[tuple[str, str, dict]]:
    for workload, found in record["campaigns"].items():
        for np_, level in sorted(found["levels"].items(), key=lambda kv: int(kv[0])):
            yield workload, np_, level


def ulp_rows(record: dict) -> Iterable[tuple[str, str, dict, list[dict]]]:
    """(row label, pair key, world size's level, the pair's seeds) for DDP's one-ulp pairs, then the reference's
    (one process, summing in its own order: far more chaotic, and judged apart)."""
    for workload, np_, level in rows_of(record):
        for key in ULP_PAIRS:
            if key in level["pairs"]:
                yield (f"{workload} np {np_}" + ("" if key == "ddp_ulp" else ", the reference"), key, level,
                       level["pairs"][key])


def header(record: dict) -> str:
    machine = record["machine"]
    return (f"measured {record['date'][:10]} at {record['commit']}, {machine['cpus']} cores, torch "
            f"{machine.get('torch', '?')}, Horovod {machine.get('horovod', '?')}"
            + ("" if record.get("complete") else " (incomplete: the campaign stopped early)"))


def table(above: list[str], head: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of prose, a blank line, then the markdown table."""
    return [*above, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(row) + " |" for row in rows)]


def fresh_table(record: dict) -> list[str]:
    lines = [header(record) + f"; {record.get('seconds', 0) / 60:.0f} min in all"]
    lines += [f"{workload}: {found['command']} ({found['seconds'] / 60:.1f} min): parity {found['parity']}"
              for workload, found in record["campaigns"].items()]
    rows = []
    for workload, np_, level in rows_of(record):
        pairs = level["pairs"]
        ulp = pair_rooms(pairs.get("ddp_ulp", []), calibrated=False)
        hvd = pair_rooms(pairs.get("horovod_vs_ddp", []), calibrated=True)
        hvd_ends = mean_margin_room(pairs.get("horovod_vs_ddp", []))
        ref = pair_rooms(pairs["ddp_vs_reference"], calibrated=True) if "ddp_vs_reference" in pairs else None
        rows.append([f"{workload} np {np_}", f"{level['steps']}, {seeds_of(level)}",
                     times(ulp["STEP_RTOL"].value), times(ulp["DEFAULT_DECADE_STEPS"].value),
                     times(hvd["CHAOS_SAFETY"].value), times(hvd_ends.value),
                     f"{times(hvd['STEP_RTOL'].value)}, {times(hvd['DEFAULT_DECADE_STEPS'].value)}",
                     times(ref["CHAOS_SAFETY"].value) if ref else "—"])
    return table(lines, ["workload, np", "steps, seeds", "DDP's one-ulp pairs vs `STEP_RTOL` (steps 1-20)",
                         "DDP's one-ulp pairs vs the default band (after 20)",
                         "Horovod vs DDP vs the calibrated band (`CHAOS_SAFETY`)",
                         "Horovod vs DDP end points vs the margins", "Horovod vs DDP vs the default band (1-20, after)",
                         "DDP vs the reference vs the calibrated band"], rows)


def largest(series: list[dict], keep: Callable[[int], bool]) -> list[float]:
    """Each seed's largest gap over the steps kept (a gap of None, not finite, as infinite); seeds without such a
    step are left out."""
    kept_gaps = [[math.inf if g is None else g for step, g in zip(s["steps"], s["gaps"], strict=True) if keep(step)]
                 for s in series]
    return [max(gaps) for gaps in kept_gaps if gaps]


def where(room: Room) -> str:
    """The tightest step a room saw: its gap against what was allowed there."""
    if room.value is None or math.isinf(room.value):
        return "—"
    return f"{sci(room.gap)} at step {room.step} (seed {room.seed}) against {sci(room.allowed)}"


def step_rtol_table(record: dict) -> list[str]:
    rows = []
    for label, key, level, ulp in ulp_rows(record):
        hvd = level["pairs"].get("horovod_vs_ddp", []) if key == "ddp_ulp" else []
        early = largest(ulp, lambda step: step <= STEP_K)
        hvd_early = largest(hvd, lambda step: step <= STEP_K)
        room = pair_rooms(ulp + hvd, calibrated=False)["STEP_RTOL"]
        rows.append([label, span(early) if early else "—",
                     "0 (bit-identical)" if hvd_early and max(hvd_early) == 0 else span(hvd_early) if hvd else "—",
                     where(room), times(room.value)])
    return table([header(record)], ["workload, np (whose one-ulp pair)",
                                     "one-ulp pairs: largest gap in steps 1-20 (each seed's)",
                                     "Horovod vs DDP: the same", f"the tightest step against {sci(STEP_RTOL)}",
                                     "headroom"], rows)


def chaos_safety_table(record: dict) -> list[str]:
    rows = []
    for workload, np_, level in rows_of(record):
        for key in COMPARED:
            if key not in level["pairs"]:
                continue
            room = pair_rooms(level["pairs"][key], calibrated=True)["CHAOS_SAFETY"]
            gaps = largest(level["pairs"][key], lambda step: True)
            rows.append([f"{workload} np {np_}", PAIRS[key],
                         "0 (bit-identical)" if max(gaps) == 0 else span(gaps), where(room), times(room.value)])
    return table([header(record)], ["workload, np", "compared pair", "largest gap over the run (each seed's)",
                                     "the tightest step against the calibrated band", "headroom"], rows)


def decade_steps_table(record: dict) -> list[str]:
    rows = []
    for label, _, level, ulp in ulp_rows(record):
        room = pair_rooms(ulp, calibrated=False)["DEFAULT_DECADE_STEPS"]
        late = largest(ulp, lambda step: step > STEP_K)
        rows.append([label, str(level["steps"]), span(late) if late else "—", where(room), times(room.value)])
    return table([header(record)], ["workload, np (whose one-ulp pair)", "steps",
                                     "one-ulp pairs: largest gap after step 20 (each seed's)",
                                     "the tightest step against the default band (before it passes 5%)",
                                     "headroom"], rows)


def margins_table(record: dict) -> list[str]:
    rows = []
    for label, _, _, ulp in ulp_rows(record):
        cells, room = [], Room()
        for name in DEFAULT_MARGINS:
            ends = [(s["seed"], s["ends"][name]) for s in ulp if name in s["ends"]]
            cells.append(span(abs(a - b) for _, (a, b) in ends) if ends else "—")
            for seed, (a, b) in ends:
                margin_room(room, name, a, b, seed)
        what = (f" ({room.what.replace('_', ' ')}, seed {room.seed})"
                if room.value is not None and math.isfinite(room.value) else "")
        rows.append([label, *cells, times(room.value) + what])
    return table([header(record)], ["workload, np (whose one-ulp pair)", "one-ulp pairs: final loss apart",
                                     "eval loss apart", "accuracy apart", "headroom (the tightest)"], rows)


def running_max_at(series: dict, steps: Iterable[int]) -> list[tuple[int, float, float]]:
    """(step, the running maximum of the gap there, the band there) at each step asked for that the run has."""
    found, worst = [], 0.0
    wanted = set(steps)
    for step, gap, tolerance in zip(series["steps"], series["gaps"], series["tolerances"], strict=True):
        worst = max(worst, gap or 0.0)
        if step in wanted:
            found.append((step, worst, tolerance))
    return found


def bf16_table(record: dict) -> list[str]:
    lines = [header(record), *(f"{workload}: {found['command']} ({found['steps']} steps), with --perturb-init-ulps 1 "
                               f"and with {' '.join(LR_CHANGE)}" for workload, found in record["bf16"].items())]
    rows = []
    for workload, found in record["bf16"].items():
        ulp, changed = found["pairs"]["ulp"], found["pairs"]["lr_change"]
        marks = running_max_at(ulp, (20, 40, ulp["steps"][-1]))
        room = Room()
        for step, gap, tolerance in zip(ulp["steps"], ulp["gaps"], ulp["tolerances"], strict=True):
            room.see(tolerance, gap or 0.0, step)
        after = [(s, math.inf if g is None else g, t) for s, g, t in
                 zip(changed["steps"], changed["gaps"], changed["tolerances"], strict=True) if s > CHANGED_AT]
        beyond = next(((s, g, t) for s, g, t in after if g > t), None)
        closest = max(after, key=lambda sgt: sgt[1] / sgt[2], default=None)
        caught = (f"beyond the band at step {beyond[0]} ({sci(beyond[1])} against {sci(beyond[2])})" if beyond
                  else f"never beyond the band; closest {sci(closest[1])} at step {closest[0]} against "
                       f"{sci(closest[2])} (the run ends at {changed['steps'][-1]})" if closest
                  else "the run ends before the change")
        rows.append([workload, ", ".join(f"{sci(g)} at {s}" for s, g, _ in marks),
                     ", ".join(sci(t) for _, _, t in marks), f"{times(room.value)} at step {room.step}", caught])
        evals = Room()
        for step, gap, tolerance in ulp["evals"]:
            evals.see(tolerance, gap or 0.0, step)
        if evals.value is not None:
            rows.append([f"{workload}, evaluation loss", f"{sci(evals.gap)} at {evals.step}", sci(evals.allowed),
                         times(evals.value), ""])
    floor = UNIT_ROUNDOFF["bf16"] * PRECISION_FACTOR
    return table(lines, ["workload", "one-ulp pair, running maximum", f"the band there (floor {sci(floor)})",
                         "headroom (tightest)", "5% lr change from step 40"], rows)


TABLES: dict[str, Callable[[dict], list[str]]] = {
    "fresh": fresh_table, "step-rtol": step_rtol_table, "chaos-safety": chaos_safety_table,
    "decade-steps": decade_steps_table, "margins": margins_table, "bf16": bf16_table,
}


def render(record: dict, name: str | None = None) -> str:
    """One table (`name`), or every table, in markdown."""
    names = [name] if name else [n for n in TABLES if n != "bf16" or record["bf16"]]
    return "\n\n".join("\n".join(TABLES[n](record)) for n in names) + "\n"


# ---- the command line ---------------------------------------------------------------------------------------------


def names(valid: Iterable[str], allow_none: bool = False) -> Callable[[str], list[str]]:
    valid = tuple(valid)

    def parse(text: str) -> list[str]:
        if allow_none and text == "none":
            return []
        found = [part.strip() for part in text.split(",") if part.strip()]
        if not found or any(n not in valid for n in found):
            raise argparse.ArgumentTypeError(f"choose from {', '.join(valid)}; got {text!r}")
        return found

    return parse


def world_sizes(text: str) -> list[int]:
    try:
        found = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"a list of world sizes such as 1,2,4; got {text!r}") from None
    if not found or found[0] <= 0:
        raise argparse.ArgumentTypeError(f"world sizes must be positive; got {text!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["render"]:
        parser = argparse.ArgumentParser(prog="parity_headroom.py render", description="the tables of a record")
        parser.add_argument("record", type=Path, help="headroom.json, as the campaign wrote it")
        parser.add_argument("--table", choices=list(TABLES), help="one table (default: all)")
        ns = parser.parse_args(argv[1:])
        try:
            tables = render(json.loads(ns.record.read_text(encoding="utf-8")), ns.table)
        except (OSError, ValueError) as exc:
            print(f"parity_headroom.py render: cannot read {ns.record}: {exc}", file=sys.stderr)
            return 2
        except (KeyError, TypeError, AttributeError) as exc:
            print(f"parity_headroom.py render: {ns.record} is not a record of this script (no {exc})",
                  file=sys.stderr)
            return 2
        print(tables, end="")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                     epilog=f"parity_headroom.py render RECORD [--table {{{','.join(TABLES)}}}] prints "
                                            "the tables of a campaign's record (all by default) and launches nothing")
    parser.add_argument("--out", type=Path, default=Path("results/headroom"), help="headroom.json, runs/ and logs/")
    parser.add_argument("--workloads", type=names(CAMPAIGNS), default=list(CAMPAIGNS), help="compare run campaigns")
    parser.add_argument("--np", type=world_sizes, default=[1, 2, 4], help="world sizes of each campaign")
    parser.add_argument("--seeds", type=int, default=0, help="only the first N of each workload's seeds (0: all)")
    parser.add_argument("--bf16", type=names(BF16, allow_none=True), default=list(BF16),
                        help="workloads of the bf16 part, or none")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds allowed for each launch")
    ns = parser.parse_args(argv)
    if ns.seeds < 0 or ns.timeout <= 0:
        parser.error("--seeds must be 0 or more and --timeout positive")
    return run_campaign(ns)


if __name__ == "__main__":
    sys.exit(main())
