"""Regenerate docs/parity.md's tables of the parity verdict's error rates, end to end.

compare/analysis/simulate_parity.py draws record pairs from the built-in workloads' profiles; the real judge
decides them along the paths of `compare run` and `compare check`, with a 95% Clopper-Pearson interval per cell.

    .venv/bin/python scripts/parity_error_rates.py                    # the full table, 2,000 trials a cell
    .venv/bin/python scripts/parity_error_rates.py --by-profile       # identical jobs, one profile at a time
    .venv/bin/python scripts/parity_error_rates.py --json rates.json  # also the counts, machine-readable

About 5-30 ms a trial on one core (the band's tolerance is looked up step by step): the full table takes
tens of minutes. tests/test_parity_simulation.py checks docs/parity.md's stated claims against it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compare.analysis.simulate_parity import CASES, CLAIMS, MIXTURE, PATHS, PROFILES, Rate, error_rate


def cell(rate: Rate) -> str:
    return f"{100 * rate.rate:.1f}% ({100 * rate.low:.1f}-{100 * rate.high:.1f})"


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
    ns = parser.parse_args(argv)
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
            print(f"| {profile.name} | " + " | ".join(cell(rates[p, n]) for p in paths for n in seeds) + " |",
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
                wrong = "fails" if case.same_job else "holds"
                print(f"| {name} | {wrong} | {path} | " + " | ".join(cell(rates[n]) for n in seeds)
                      + f" |  <!-- {time.perf_counter() - started:.0f} s -->", flush=True)
                rows += [{"case": name, "path": path, "seeds": n, "wrong": r.wrong, "trials": r.trials, "low": r.low,
                          "high": r.high} for n, r in rates.items()]
    if ns.json:
        ns.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
