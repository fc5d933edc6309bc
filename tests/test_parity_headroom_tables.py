"""scripts/parity_headroom.py's tables (docs/parity.md, "The numbers behind each default"), rendered from a made-up
record whose figures are known: each default's headroom is what it allows over the gap seen, at the step named.
The docs' own tables are the same renderer over the campaign's record (tests/test_doc_samples.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import ROOT, script_module

from compare.analysis.parity import Band

headroom = script_module("parity_headroom")
DEFAULT = Band("default")


def seed(number: int, gaps: list[float], tolerances: list[float] | None = None, ends=None, evals=()) -> dict:
    steps = list(range(1, len(gaps) + 1))
    return {"seed": number, "steps": steps, "gaps": gaps,
            "tolerances": tolerances or [DEFAULT.tolerance(s) for s in steps], "evals": [list(e) for e in evals],
            "ends": ends or {"final_loss": [1.0, 1.0], "eval_loss": [1.0, 1.0], "eval_accuracy": [0.5, 0.5]}}


def record() -> dict:
    quiet = [0.0] * 40
    early = [0.0] * 40
    early[4] = 2e-6  # 5x under STEP_RTOL at step 5
    late = [0.0] * 40
    late[29] = 1e-3  # step 30: far beyond the default band there
    compared = [0.0] * 40
    compared[9] = 4e-7  # against a calibrated band of 1e-5: 25x
    return {
        "schema_version": 1, "complete": True, "date": "2026-12-06T00:00:00+00:00", "commit": "abc1234",
        "machine": {"cpus": 2, "python": "3.11.7", "torch": "2.13.0+cpu", "horovod": "0.28.1"}, "seconds": 600,
        "campaigns": {"mlp": {"command": "python -m compare run --workload mlp", "exit": 0, "parity": "holds",
                              "seconds": 300, "levels": {
                                  "1": {"steps": 40, "pairs": {"ddp_ulp": [seed(0, early), seed(1, quiet)],
                                                               "horovod_vs_ddp": [seed(0, quiet, [1e-5] * 40)]}},
                                  "4": {"steps": 40, "pairs": {
                                      "ddp_ulp": [seed(0, late, ends={"final_loss": [1.0, 1.05]})],
                                      "reference_ulp": [seed(0, early)],
                                      "horovod_vs_ddp": [seed(0, compared, [1e-5] * 40)]}}}}},
        "bf16": {"mlp": {"command": "python -m workload.reference --workload mlp", "steps": 40, "seconds": 30,
                         "pairs": {"ulp": seed(0, [1e-4] * 20 + [1e-3] * 20, [2e-3] * 40, evals=[(40, 4e-3, 2e-3)]),
                                   "lr_change": seed(0, [0.0] * 41 + [3e-3] * 4, [2e-3] * 45)}}},
    }


def rows(name: str) -> dict[str, list[str]]:
    """The table's rows, by their first two cells (workload and np, or compared pair)."""
    lines = headroom.render(record(), name).splitlines()
    return {" ".join(cells[:2]) if name == "chaos-safety" else cells[0]: cells
            for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[lines.index("") + 3:]
                          if line.startswith("|"))}


def test_the_fresh_table_gives_each_defaults_headroom_per_world_size():
    table = rows("fresh")
    assert table["mlp np 1"][1] == "40, seeds 0-1"
    assert table["mlp np 1"][2:7] == ["5x", "unbounded", "unbounded", "unbounded", "unbounded, unbounded"]
    tight = DEFAULT.tolerance(30) / 1e-3
    assert table["mlp np 4"][3] == f"{tight:.2g}x"  # below 1: the one-ulp pair is beyond the default band
    assert table["mlp np 4"][4] == "25x"
    assert table["mlp np 4"][7] == "—"  # no reference at this world size


def test_each_default_table_names_the_tightest_step_and_seed():
    assert rows("step-rtol")["mlp np 1"][1:] == ["0 to 2e-6", "0 (bit-identical)",
                                                  "2e-6 at step 5 (seed 0) against 1e-5", "5x"]
    assert rows("chaos-safety")["mlp np 4 Horovod vs DDP"][2:] == ["4e-7", "4e-7 at step 10 (seed 0) against 1e-5",
                                                                   "25x"]
    assert rows("decade-steps")["mlp np 4"][3].startswith("0.001 at step 30 (seed 0) against")
    # the reference's pair is a row of its own, never mixed into DDP's (its chaos is its own)
    assert rows("step-rtol")["mlp np 4, the reference"][1:] == ["2e-6", "—", "2e-6 at step 5 (seed 0) against 1e-5",
                                                                "5x"]
    assert rows("fresh")["mlp np 4"][2] == "unbounded"
    # 5% of a loss of 1.025 apart against a 2% margin: 0.41x, on the final loss of seed 0
    assert rows("margins")["mlp np 4"][1:] == ["0.05", "—", "—", "0.41x (final loss, seed 0)"]


def test_the_bf16_table_says_where_the_pair_and_the_change_pass_the_band():
    table = rows("bf16")
    assert table["mlp"][1:] == ["0.0001 at 20, 0.001 at 40", "0.002, 0.002", "2x at step 21",
                                "beyond the band at step 42 (0.003 against 0.002)"]
    assert table["mlp, evaluation loss"][1:4] == ["0.004 at 40", "0.002", "0.5x"]


@pytest.mark.parametrize("content", ["{not json", json.dumps({"campaigns": {}})])
def test_render_refuses_what_is_not_a_record_in_one_line(tmp_path, content):
    path = tmp_path / "headroom.json"
    path.write_text(content)
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "parity_headroom.py"), "render", str(path)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and str(path) in result.stderr
