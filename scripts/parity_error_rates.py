"""Regenerate docs/parity.md's tables of the parity verdict's error rates, end to end.

compare/analysis/simulate_parity.py draws record pairs from the built-in workloads' profiles; the real judge
decides them along the paths of `compare run` and `compare check`, with a 95% Clopper-Pearson interval per cell.

    .venv/bin/python scripts/parity_error_rates.py                    # the full table, 2,000 trials a cell
    .venv/bin/python scripts/parity_error_rates.py --by-profile       # identical jobs, one profile at a time
    .venv/bin/python scripts/parity_error_rates.py --claims           # docs/parity.md's stated rates, judged
    .venv/bin/python scripts/parity_error_rates.py --json rates.json  # also the counts, machine-readable
    .venv/bin/python scripts/parity_error_rates.py --everything cells.jsonl --jobs 16   # every cell the page
    .venv/bin/python scripts/parity_error_rates.py --tables cells.jsonl                 # shows; then its tables

Each cell seeds its own generator, so a cell's numbers are the same whichever process computes it. About 5-30
ms a trial on one core (the long profile: 0.1 s): the full table takes tens of minutes on one core, a few on 16.
tests/test_parity_simulation.py checks docs/parity.md's stated claims against it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compare.analysis import parity
from compare.analysis.simulate_parity import CASES, CLAIMS, MIXTURE, PATHS, PROFILES, Rate, error_rate

Cell = tuple[str, str, int, tuple[str, ...], int, bool]  # case, path, seeds, profiles, trials, onset bound on
BY_PROFILE_TRIALS = 200
MAIN_SEEDS = (2, 3, 5)
ONSET_OFF_CASES = ("identical jobs", "lr x1.005-1.05 from a late step", "late jump by 5-30%")
"""The cases also computed with the onset bound off (the band by step number alone, as before issue 43)."""


def compute(cell: Cell) -> Rate:
    case, path, n, profiles, trials, onset = cell
    original = parity.onset_limits
    if not onset:  # the judge as it was: no onset bound
        parity.onset_limits = lambda steps, rel, band: [parity.BAND_CEILING] * len(steps)
    try:
        return error_rate([PROFILES[p] for p in profiles], CASES[case], n, path, trials)
    finally:
        parity.onset_limits = original


def every_cell() -> list[Cell]:
    """What docs/parity.md shows, the most telling first: its stated claims, the table over the mixture (and the
    late jump with one seed), the same with the onset bound off, then one profile at a time."""
    mixture = tuple(p.name for p in MIXTURE)
    cells: list[Cell] = [(c.case, c.path, c.seeds, c.profiles or mixture, c.trials, True) for c in CLAIMS]
    cells += [(case, path, n, mixture, 2000, True) for case in CASES for path in PATHS
              for n in ((1, *MAIN_SEEDS) if CASES[case].kind == "jump" else MAIN_SEEDS)]
    cells += [(case, path, n, mixture, 2000, on) for case in ONSET_OFF_CASES for path in PATHS for n in (1, 3)
              for on in (False, True)]
    for case, n in (("identical jobs", 3), ("late jump by 5-30%", 1)):
        cells += [(case, path, n, (p.name,), BY_PROFILE_TRIALS, onset) for p in (*MIXTURE, PROFILES["long"])
                  for path in PATHS for onset in (True, False)]
    return list(dict.fromkeys(cells))


def everything(out: Path, jobs: int) -> None:
    """Every cell, in `jobs` processes, each written as a JSON line as soon as it is done (a run cut short keeps
    what it finished)."""
    cells = every_cell()
    started = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool, out.open("w") as sink:
        futures = {pool.submit(compute, cell): cell for cell in cells}
        for done in as_completed(futures):
            case, path, n, profiles, trials, onset = futures[done]
            rate = done.result()
            sink.write(json.dumps({"case": case, "path": path, "seeds": n, "profiles": list(profiles),
                                   "trials": trials, "onset": onset, "wrong": rate.wrong,
                                   "s": round(time.perf_counter() - started)}) + "\n")
            sink.flush()


def cell_text(rate: Rate) -> str:
    return f"{100 * rate.rate:.1f}% ({100 * rate.low:.1f}-{100 * rate.high:.1f})"


def tables(source: Path) -> None:
    """docs/parity.md's tables from the cells `everything` wrote."""
    found: dict[Cell, Rate] = {}
    for line in source.read_text().splitlines():
        e = json.loads(line)
        found[e["case"], e["path"], e["seeds"], tuple(e["profiles"]), e["trials"], e["onset"]] = \
            Rate(e["wrong"], e["trials"])
    mixture = tuple(p.name for p in MIXTURE)
    print("| case | wrong verdict | band | 1 seed | " + " | ".join(f"{n} seeds" for n in MAIN_SEEDS) + " |")
    print("|---|---|---|---|---|---|---|")
    for name, case in CASES.items():
        for path in PATHS:
            row = [found.get((name, path, n, mixture, 2000, True)) for n in (1, *MAIN_SEEDS)]
            print(f"| {name} | {' or '.join(case.wrong_verdicts)} | `{path}` | "
                  + " | ".join(cell_text(r) if r else "" for r in row) + " |")
    print("\nThe onset bound off (the band by step number alone, as before), the same draws:\n")
    print("| case | wrong verdict | band | 1 seed, without / with | 3 seeds, without / with |\n|---|---|---|---|---|")
    for name in ONSET_OFF_CASES:
        for path in PATHS:
            pairs = [" / ".join(cell_text(found[name, path, n, mixture, 2000, on]) for on in (False, True))
                     for n in (1, 3)]
            print(f"| {name} | {' or '.join(CASES[name].wrong_verdicts)} | `{path}` | {pairs[0]} | {pairs[1]} |")
    for name, n in (("identical jobs", 3), ("late jump by 5-30%", 1)):
        print(f"\n{name}, {n} seed(s), one profile at a time ({BY_PROFILE_TRIALS} trials; without / with the "
              "onset bound):\n")
        print("| profile | " + " | ".join(PATHS) + " |\n|---|---|---|---|")
        for profile in (*mixture, "long"):
            print(f"| {profile} | " + " | ".join(
                " / ".join(cell_text(found[name, path, n, (profile,), BY_PROFILE_TRIALS, on]) for on in (False, True))
                for path in PATHS) + " |")
    print("\n| case | profiles | band | seeds | stated | simulated (95% interval), wrong/trials |")
    print("|---|---|---|---|---|---|")
    for claim in CLAIMS:
        rate = found[claim.case, claim.path, claim.seeds, claim.profiles or mixture, claim.trials, True]
        print(claim.row(rate) + ("" if claim.supported(rate) else "  <!-- NOT SUPPORTED -->"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seeds", default="2,3,5", help="numbers of seeds per comparison")
    parser.add_argument("--cases", default="|".join(CASES), help="case names separated by |")
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated: run, check --calibration, check")
    parser.add_argument("--profiles", default=",".join(p.name for p in MIXTURE),
                        help="the mixture each trial draws from, in turn")
    parser.add_argument("--by-profile", action="store_true", help="identical jobs, each profile alone")
    parser.add_argument("--claims", action="store_true", help="docs/parity.md's stated rates, each judged")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--everything", type=Path, default=None, help="every cell the page shows, as JSON lines")
    parser.add_argument("--tables", type=Path, default=None, help="print the page's tables from --everything's file")
    parser.add_argument("--jobs", type=int, default=1, help="processes for --everything")
    ns = parser.parse_args(argv)
    if ns.everything:
        everything(ns.everything, ns.jobs)
        return 0
    if ns.tables:
        tables(ns.tables)
        return 0
    seeds = [int(s) for s in ns.seeds.split(",")]
    paths = [p.strip() for p in ns.paths.split(",")]
    profiles = [PROFILES[p.strip()] for p in ns.profiles.split(",")]
    rows: list[dict] = []
    if ns.claims:
        print("| case | profiles | band | seeds | stated | simulated (95% interval), wrong/trials |")
        print("|---|---|---|---|---|---|")
        for claim in CLAIMS:
            rate = claim.rate()
            print(claim.row(rate) + ("" if claim.supported(rate) else "  <!-- NOT SUPPORTED -->"), flush=True)
        return 0
    if ns.by_profile:
        print("| profile | " + " | ".join(f"{p}, {n} seeds" for p in paths for n in seeds) + " |")
        print("|---" * (1 + len(paths) * len(seeds)) + "|")
        for profile in profiles:
            rates = {(p, n): error_rate([profile], CASES["identical jobs"], n, p, ns.trials)
                     for p in paths for n in seeds}
            print(f"| {profile.name} | " + " | ".join(cell_text(rates[p, n]) for p in paths for n in seeds) + " |",
                  flush=True)
            rows += [{"profile": profile.name, "case": "identical jobs", "path": p, "seeds": n, "wrong": r.wrong,
                      "trials": r.trials, "low": r.low, "high": r.high} for (p, n), r in rates.items()]
    else:
        print("| case | wrong verdict | band | " + " | ".join(f"{n} seeds" for n in seeds) + " |")
        print("|---" * (3 + len(seeds)) + "|")
        for name in (c.strip() for c in ns.cases.split("|")):
            case = CASES[name]
            for path in paths:
                started = time.perf_counter()
                rates = {n: error_rate(profiles, case, n, path, ns.trials) for n in seeds}
                print(f"| {name} | {' or '.join(case.wrong_verdicts)} | {path} | "
                      + " | ".join(cell_text(rates[n]) for n in seeds)
                      + f" |  <!-- {time.perf_counter() - started:.0f} s -->", flush=True)
                rows += [{"case": name, "path": path, "seeds": n, "wrong": r.wrong, "trials": r.trials, "low": r.low,
                          "high": r.high} for n, r in rates.items()]
    if ns.json:
        ns.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
