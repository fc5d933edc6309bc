"""Print the speed verdict's simulated error rates and power, as docs/benchmarks.md shows them.

    python scripts/speed_error_rates.py            # the tables (2,000 trials per row; about 30 s of CPU)
    python scripts/speed_error_rates.py --check    # also exit 1 when a stated rate is not supported
    python scripts/speed_error_rates.py --half-widths  # only the default design's half-widths (no simulation)

Every row is a scenario of compare/analysis/simulate_speed.py under the noise measured here; a stated rate
holds when the exact 95% interval of its simulated rate lies on the right side of it. `pytest -m campaign
tests/test_speed_simulation.py` checks the same table against the docs.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compare.analysis import group_sequential
from compare.analysis.sequential import SHORT_MIXTURE_C, log_half_width, rounds_for
from compare.analysis.simulate_speed import GROUP_12, GROUP_CLAIMS, MEASURED, draw_run, judge_claims, round_logs
from compare.commands.sequential_rounds import planned_rounds
from compare.defaults import DEFAULT_BUDGET_S, DEFAULT_ROUNDS
from compare.render.speed import error_rate_markdown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a stated rate is not supported")
    parser.add_argument("--half-widths", action="store_true",
                        help="print only the default design's half-widths at its looks (computed, no simulation)")
    ns = parser.parse_args()
    if ns.half_widths:  # compare run's own design at its default budget, not a simulated one's
        print(half_width_markdown(planned_rounds(DEFAULT_BUDGET_S, DEFAULT_ROUNDS), DEFAULT_ROUNDS))
        return 0
    judged = judge_claims()
    print(error_rate_markdown(judged))
    grouped = judge_claims(GROUP_CLAIMS)
    print("\nThe default rounds: the group-sequential design beside the confidence sequence (c = 0.5)\n")
    print(error_rate_markdown(grouped))
    import numpy as np

    logs = round_logs(draw_run(np.random.default_rng(0), MEASURED, 1000, 8)[0], MEASURED.warmup)
    sd = float(logs.std())
    print(f"\nround log-ratio sd under this noise: {sd:.3f}; rounds the sequence needs for +-5%: "
          f"{rounds_for(0.05, sd)}, for +-10%: {rounds_for(0.10, sd)}")
    for spread in (0.05, 0.1, 0.2):
        needs = {p: group_sequential.rounds_for(p, spread, GROUP_12.first_look, GROUP_12.planned) for p in (0.10, 0.15)}
        print(f"the group-sequential design at a spread of {spread}: +-10% after {needs[0.10]} rounds, +-15% after "
              f"{needs[0.15]} (None: not within {GROUP_12.planned})")
    failing = [e for e in judged + grouped if not e["holds"]]
    return 1 if ns.check and failing else 0


def half_width_markdown(planned: int, first_look: int) -> str:
    """Each interval's half-width in round spreads (the rounds' log-ratio sd) at the default design's looks:
    the group-sequential design at a look on the way and at the budget's final look, the confidence sequence it
    replaced, and the fixed-n t interval, which is valid only when nobody looks before the end."""
    looks = group_sequential.looks_at(first_look, planned)
    rows = {
        "group-sequential, a look on the way":
            [group_sequential.t_multiplier(tuple(looks[:k + 1]), planned, False) / math.sqrt(n)
             for k, n in enumerate(looks)],
        "group-sequential, the budget's final look":
            [group_sequential.t_multiplier(tuple(looks[:k + 1]), planned, True) / math.sqrt(n)
             for k, n in enumerate(looks)],
        f"confidence sequence, c = {SHORT_MIXTURE_C:g} (the default before)":
            [float(log_half_width(n, n - 1, c=SHORT_MIXTURE_C)) for n in looks],
        "fixed-n t interval (valid only without looks)":
            [group_sequential.t_multiplier((n,), n, True) / math.sqrt(n) for n in looks],
    }
    lines = ["| rounds | " + " | ".join(map(str, looks)) + " |", "|---" * (len(looks) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(f"{value:.2f}" for value in values) + " |" for name, values in rows.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
