"""The console logs of four widely used trainers, captured in examples/logs/corpus (timm's train script, MMEngine's
logger, Detectron2's event writer, fastai's progress table), imported with `python -m compare import text LOG`
and judged with `python -m compare check A B` in processes of their own, as a user types them, without an
option: each is read by rule (compare/loss_lines/fields.py), the import says which key and counter it read, the
same run again holds, a planted late difference fails from where it was planted, and fastai's validation
columns are judged too. Nothing is launched: the logs were captured once (examples/logs/corpus/README.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, read_meta

CORPUS = ROOT / "examples" / "logs" / "corpus"
# sample: what the import says it read, and the first step the late variant changed (it fails there or later)
SHAPES = {
    "timm_train": ("the loss from the key 'loss', the step from the counter e [i/N (p%)] ('Train: 0 [ 0/20 ( 5%)]') "
                   "(epoch and batch counter on a grid of 20 batches per epoch, from 1)", 41),
    "mmengine_train": ("the loss from the key 'loss', the step from the counter [e][i/N] ('Epoch(train) [1][ 5/20]') "
                       "(epoch and batch counter on a grid of 20 batches per epoch, from 1)", 41),
    "detectron2_events": ("the loss from the key 'total_loss', the step from the key 'iter' (as printed + 1, a counter "
                          "from 0: every value printed is one less than a multiple of 20, the logging interval)", 81),
    "fastai_table": ("the loss from the key 'train_loss', the step from the key 'epoch' (as printed); eval_loss from "
                     "'valid_loss', eval_accuracy from 'accuracy'", 6),
}


def compare(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compare", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Every sample and its variants imported once: the run directory and what the import printed."""
    out = tmp_path_factory.mktemp("trainers")
    runs = {}
    for log in sorted(CORPUS.glob("*.log")):
        if log.stem.split("_again")[0].split("_late")[0].split("_valid")[0] in SHAPES:
            result = compare("import", "text", log, "--out", out / log.stem)
            assert result.returncode == 0, result.stderr
            runs[log.stem] = (out / log.stem, result.stdout)
    return runs


@pytest.mark.parametrize("name", SHAPES)
def test_a_trainers_log_imports_without_options_and_says_which_key_and_counter(name, imported):
    run, printed = imported[name]
    assert f"read as fields: {SHAPES[name][0]}" in printed.splitlines()
    fields = read_meta(run)["imported"]["fields"]
    assert fields["format"] == "fields" and fields["loss_key"] in ("loss", "total_loss", "train_loss")


@pytest.mark.parametrize("name", SHAPES)
def test_the_same_run_again_holds_and_a_late_difference_fails_where_it_was_planted(name, imported):
    run = imported[name][0]
    held = compare("check", run, imported[f"{name}_again"][0])
    assert held.returncode == 0 and "parity holds" in held.stdout, held.stdout + held.stderr
    failed = compare("check", run, imported[f"{name}_late"][0])
    assert failed.returncode == 1, failed.stdout + failed.stderr
    step = int(re.search(r"parity fails: diverges at step (\d+)", failed.stdout)[1])
    assert SHAPES[name][1] <= step <= read_meta(run)["steps"], failed.stdout  # not before the change


def test_a_validation_column_that_differs_fails_while_the_training_losses_agree(imported):
    """fastai's valid_loss and accuracy columns of a run validated on other samples, trained alike."""
    failed = compare("check", imported["fastai_table"][0], imported["fastai_table_valid"][0])
    assert failed.returncode == 1
    assert "parity fails: the training losses agree, the evaluation at step 1 differs" in failed.stdout, failed.stdout
