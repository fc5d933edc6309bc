"""Reduced precision judged as such: without a calibration, records trained under autocast or with fp16
gradient compression get the default band's floor from their format's unit roundoff (compare/analysis/
parity.py, PRECISION_FACTOR); a real learning-rate change still fails, and a calibration, when given, decides."""

from __future__ import annotations

import re

import numpy as np
import pytest
from fixtures import write_run
from test_analysis import base_losses

from compare.__main__ import main as compare_main
from compare.analysis.parity import UNIT_ROUNDOFF, precision_floor

STEPS = 80


def bf16_noise(losses: np.ndarray) -> np.ndarray:
    """2e-4 relative from step 2 on, as bf16 rounding parts two sides whose reduction orders differ."""
    rng = np.random.default_rng(7)
    noisy = losses * (1 + rng.choice([-2e-4, 2e-4], len(losses)))
    noisy[0] = losses[0]
    return noisy


def lr_change_at_40(losses: np.ndarray) -> np.ndarray:
    """The gap a 5% learning-rate change from step 40 opened under bf16 here (mlp: 2.9e-4 at step 41, 2.4e-3
    at 42, 7.1e-3 at 45, about 1e-2 later)."""
    steps = np.arange(1, len(losses) + 1)
    gap = np.where(steps > 40, np.minimum(1e-2, 2.9e-4 * 3.0 ** (steps - 41)), 0.0)
    return losses * (1 + gap)


def pair(tmp_path, b_losses, options):
    losses = base_losses(0, STEPS)
    a = write_run(tmp_path / "horovod", framework="horovod", world_size=2, seed=0, losses=losses, options=options)
    b = write_run(tmp_path / "ddp", framework="ddp", world_size=2, seed=0, losses=b_losses(losses), options=options)
    return str(a), str(b)


def test_the_floor_comes_from_the_format():
    assert precision_floor(set()) is None
    assert precision_floor({"bf16"})[0] == UNIT_ROUNDOFF["bf16"] * 0.5 == pytest.approx(1.953e-3, rel=1e-3)
    assert precision_floor({"fp16", "bf16"})[0] == precision_floor({"bf16"})[0]  # the wider format decides
    assert "fp16" in precision_floor({"fp16"})[1]


def test_bf16_noise_holds_without_calibration_and_says_why(tmp_path, capsys):
    assert compare_main(["check", *pair(tmp_path, bf16_noise, {"amp": True})]) == 0
    out = capsys.readouterr().out
    assert "reduced precision (bf16): floor 0.002" in out and "parity holds" in out


def test_the_same_noise_in_float32_fails(tmp_path, capsys):
    assert compare_main(["check", *pair(tmp_path, bf16_noise, {"amp": False})]) == 1
    assert re.search(r"diverges at step 2\b", capsys.readouterr().out)


def test_a_five_percent_lr_change_under_bf16_still_fails(tmp_path, capsys):
    assert compare_main(["check", *pair(tmp_path, lambda x: lr_change_at_40(bf16_noise(x)), {"amp": True})]) == 1
    out = capsys.readouterr().out
    assert re.search(r"parity fails: diverges at step 4[0-5]\b", out), out  # within 5 steps of the change at 40
    assert "identical to step" not in out  # in bf16 one rounding can part identical histories at once


def test_fp16_compression_gets_the_fp16_floor(tmp_path, capsys):
    assert compare_main(["check", *pair(tmp_path, bf16_noise, {"compression": "fp16"})]) == 0  # 2e-4 < 2.4e-4
    assert "reduced precision (fp16): floor 0.00024" in capsys.readouterr().out
    noisier = pair(tmp_path / "more", lambda x: x + (bf16_noise(x) - x) * 2, {"compression": "fp16"})
    assert compare_main(["check", *noisier]) == 1  # 4e-4 is more than fp16's floor


def test_a_calibration_decides_when_given(tmp_path, capsys):
    a, b = pair(tmp_path, bf16_noise, {"amp": True})
    quiet = write_run(tmp_path / "cal-b", framework="ddp", world_size=2, seed=0, losses=base_losses(0, STEPS),
                      options={"amp": True})
    assert compare_main(["check", a, b, "--calibration", a, str(quiet)]) == 1  # the pair is quiet: noise fails
    assert "reduced precision" not in capsys.readouterr().out


@pytest.mark.parametrize(("margin", "message"), [
    ("final_loss=1000%", "a margin of 100% or more calls every job equivalent"),
    ("eval_accuracy=1", "a margin of 1 (all of accuracy) or more calls every job equivalent"),
])
def test_a_margin_that_makes_every_job_equivalent_is_refused(tmp_path, capsys, margin, message):
    a, b = pair(tmp_path, bf16_noise, {"amp": True})
    assert compare_main(["check", a, b, "--margin", margin]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
