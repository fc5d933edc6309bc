"""Every log of examples/logs/corpus (real tools' output, each beside the script that printed it and its
expected.json, the values the script itself printed) imported as a user types it, `compare import text LOG`,
and read by compare/loss_lines/: the right steps and values, or a refusal in one line. Nothing is launched:
the logs were captured once (examples/logs/corpus/README.md)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from helpers import ROOT, read_meta, read_steps

from compare.__main__ import main as compare_main
from compare.loss_lines import FORMATS, read_loss_log

CORPUS = ROOT / "examples" / "logs" / "corpus"
TEXT_SAMPLES = sorted(p.name[:-len(".expected.json")] for p in CORPUS.glob("*.expected.json")
                      if (CORPUS / p.name.replace(".expected.json", ".log")).exists())


def expected(name: str) -> dict:
    body = json.loads((CORPUS / f"{name}.expected.json").read_text())
    body["steps"] = {int(k): float(v) for k, v in body["steps"].items()}
    body["evals"] = {int(k): {m: float(x) for m, x in v.items()} for k, v in body["evals"].items()}
    return body


def text(name: str) -> str:
    with (CORPUS / f"{name}.log").open(encoding="utf-8", newline="") as file:  # "\r" kept, as the importer does
        return file.read()


def same(a: float | None, b: float) -> bool:
    """Equal as printed; a non-finite value is null in the record (strict JSON) and nan/inf when read."""
    if a is None:
        return not math.isfinite(b)
    return a == b or (math.isnan(a) and math.isnan(b))


def batch(flags: list[str]) -> int | None:
    if "--global-batch" not in flags:
        return None
    world = int(flags[flags.index("--world-size") + 1]) if "--world-size" in flags else 1
    return int(flags[flags.index("--global-batch") + 1]) // world


def check_steps(got: dict[int, float | None], want: dict[int, float], subset: bool) -> None:
    if subset:  # Keras' bar prints some batches of each epoch: what it printed, and every epoch's end
        assert set(got) <= set(want) and set(got) >= {s for s in want if s % 20 == 0}, (sorted(got), sorted(want))
    else:
        assert sorted(got) == sorted(want)
    bad = [(s, got[s], want[s]) for s in got if not same(got[s], want[s])]
    assert not bad, bad[:5]


@pytest.mark.parametrize("name", TEXT_SAMPLES)
def test_every_corpus_log_imports_with_the_steps_and_values_it_printed(name, tmp_path, capsys):
    truth = expected(name)
    out = tmp_path / "run"
    assert compare_main(["import", "text", str(CORPUS / f"{name}.log"), "--out", str(out), *truth["flags"]]) == 0, \
        capsys.readouterr().err
    steps = read_steps(out)
    check_steps({s["step"]: s["loss"] for s in steps}, truth["steps"], truth.get("subset", False))
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
    got = {e["step"]: {k: v for k, v in e.items() if k in ("eval_loss", "eval_accuracy")} for e in evals}
    assert sorted(got) == sorted(truth["evals"])
    for step, values in truth["evals"].items():
        assert all(same(got[step].get(k), v) for k, v in values.items()), (step, got[step], values)
    assert read_meta(out)["imported"]["fields"]["format"] in {f.name for f in FORMATS}


@pytest.mark.parametrize("name", TEXT_SAMPLES)
def test_every_corpus_log_is_read_by_read_loss_log(name):
    truth = expected(name)
    log = read_loss_log(text(name), batch=batch(truth["flags"]))
    offset = 1 if min(log.steps) == 0 else 0  # the record counts from 1 (import renumbers, step_offset)
    check_steps({s + offset: v["loss"] for s, v in log.steps.items()}, truth["steps"], truth.get("subset", False))
    assert {s + offset for s in log.evals} == set(truth["evals"])


def test_every_format_has_its_captured_sample():
    for fmt in FORMATS:
        assert (CORPUS / fmt.sample).is_file(), fmt
        assert read_loss_log(text(fmt.sample[:-len(".log")])).format == fmt.name


@pytest.mark.parametrize("name", ["horovodrun_mpi", "torchrun_tee", "srun_label", "mpich_prepend_rank"])
def test_a_sample_counter_without_the_batch_is_a_logging_interval_and_says_so(name, tmp_path, capsys):
    out = tmp_path / "run"
    assert compare_main(["import", "text", str(CORPUS / f"{name}.log"), "--out", str(out)]) == 0
    assert "give --global-batch and --world-size to number optimizer steps" in capsys.readouterr().err
    assert [s["loss"] for s in read_steps(out)] == [v for _, v in sorted(expected(name)["steps"].items())]


def test_two_logs_printed_at_different_intervals_pair_the_same_batches(tmp_path, capsys):
    """Epoch [e/E], Step [i/N] every 5 and every 2 batches; Train Epoch [N/M] every 2 and every 3 batches."""
    for a, b, flags in (("epoch_step_every5", "epoch_step_every2", []),
                        ("horovodrun_mpi", "torchrun_tee", ["--global-batch", "32", "--world-size", "2"])):
        for name in (a, b):
            assert compare_main(["import", "text", str(CORPUS / f"{name}.log"), "--out", str(tmp_path / name),
                                 *flags]) == 0
        first, second = ({s["step"]: s["loss"] for s in read_steps(tmp_path / n)} for n in (a, b))
        common = set(first) & set(second)
        assert len(common) >= 4 and all(first[s] == second[s] for s in common), (a, b)
        capsys.readouterr()
        assert compare_main(["check", str(tmp_path / a), str(tmp_path / b)]) == 0, capsys.readouterr().out


def test_lightnings_csv_logger_file_imports(tmp_path):
    truth = expected("lightning_metrics")
    out = tmp_path / "run"
    assert compare_main(["import", "csv", str(CORPUS / "lightning_metrics.csv"), "--out", str(out),
                         *truth["flags"]]) == 0
    check_steps({s["step"]: s["loss"] for s in read_steps(out)}, truth["steps"], False)


def test_the_command_line_keeps_a_progress_bars_repaints(tmp_path):
    """`python -m compare import text` in a process of its own, on the raw bytes of tqdm's bar."""
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "compare", "import", "text", str(CORPUS / "tqdm_bar.log"),
                             "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    check_steps({s["step"]: s["loss"] for s in read_steps(out)}, expected("tqdm_bar")["steps"], False)
