"""The run record's format is said once, in workload/record_format.py: every writer (the trainer, the
recorder a user copies, the importers) writes it and the reader reads it. recorder/__init__.py keeps its own
copy of the constants, so that it stays one file with no project imports; this pins the copy to the module."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest
import torch
from helpers import ROOT

import recorder
from compare.analysis.records import RecordError, load_run
from compare.importers import Series, build_record
from workload import record_format
from workload.record_format import (
    METRICS,
    METRICS_PART,
    RECORDED_ENV,
    REQUIRED_STEP_KEYS,
    RUN_JSON,
    RUN_KEYS,
    SCHEMA_VERSION,
)


def test_the_recorder_copy_of_the_constants_is_the_module_s():
    assert recorder.SCHEMA_VERSION == SCHEMA_VERSION
    assert (recorder.RUN_JSON, recorder.METRICS, recorder.METRICS_PART) == (RUN_JSON, METRICS, METRICS_PART)
    assert recorder.RECORDED_ENV == RECORDED_ENV


def test_the_recorder_imports_nothing_of_the_project():
    tree = ast.parse((ROOT / "recorder" / "__init__.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    # horovod only for its version, inside a run that has already imported it
    assert imported - set(sys.stdlib_module_names) <= {"torch", "horovod"}, imported


def _recorded(out: Path) -> dict:
    with recorder.Recorder(out, options={"lr": 0.1}, seed=3, gather_every=2) as rec:
        for loss in (2.0, float("nan"), 1.0):
            rec.step(torch.tensor(loss), lr=0.1, samples=4)
    return json.loads((out / RUN_JSON).read_text())


def _trained(out: Path) -> dict:
    from workload.reference import main

    assert main(["--steps", "2", "--emulate-world-size", "2", "--out", str(out)]) == 0
    return json.loads((out / RUN_JSON).read_text())


def _imported(out: Path) -> dict:
    series = Series()
    for step, loss in ((1, 2.0), (2, 1.5)):
        series.add_step(step, {"loss": loss})
    meta, lines = build_record(series, kind="csv", source=out / "log.csv", digest="0" * 16, framework="ddp",
                               world_size=2, seed=0, options={}, global_batch=8)
    record_format.write_metrics(out, lines)
    record_format.write_run_json(out, meta)
    return meta


@pytest.mark.parametrize("writer", [_recorded, _trained, _imported])
def test_every_writer_writes_the_fields_and_files_the_reader_reads(tmp_path, writer):
    meta = writer(tmp_path)
    assert meta["schema_version"] == SCHEMA_VERSION
    assert [key for key in RUN_KEYS if key not in meta] == [], writer.__name__
    assert (tmp_path / METRICS).exists() and not (tmp_path / METRICS_PART).exists()
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write leaves no temporary file
    run = load_run(tmp_path)
    assert run.ok and run.steps and all(key in step for step in run.steps for key in REQUIRED_STEP_KEYS)
    assert "NaN" not in (tmp_path / METRICS).read_text() and "NaN" not in (tmp_path / RUN_JSON).read_text()


def test_the_documented_run_json_names_every_field():
    doc = (ROOT / "docs" / "run-record.md").read_text()
    example = doc.split("## `run.json`", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    assert f'"schema_version": {SCHEMA_VERSION}' in example
    assert [key for key in RUN_KEYS if not re.search(rf'"{key}":', example)] == []
    assert f"schema version {SCHEMA_VERSION}" in doc.splitlines()[0]


def test_strict_json_out_and_in(tmp_path):
    line = json.loads(record_format.metrics_line({"kind": "step", "step": 2, "loss": float("inf")}))
    assert line == {"kind": "step", "step": 2, "loss": None, "nonfinite": {"loss": "inf"}}
    with pytest.raises(ValueError, match="not strict JSON"):
        record_format.loads('{"loss": NaN}')
    with pytest.raises(ValueError):
        record_format.dumps({"lr": float("nan")})
    _recorded(tmp_path)
    meta = json.loads((tmp_path / RUN_JSON).read_text())
    (tmp_path / RUN_JSON).write_text(json.dumps({**meta, "effective_lr": float("nan")}))
    with pytest.raises(RecordError, match="NaN is not strict JSON"):
        load_run(tmp_path)


def test_the_recorders_horovodrun_mpi_check_is_the_launcher_tables():
    """recorder/ is one copyable file, so it keeps its own copy of workload/launchers.py's check: the same
    code line for line (the docstrings may word it differently)."""
    import inspect

    import recorder
    from workload.launchers import under_horovodrun_mpi

    def body(function) -> list[str]:
        lines = inspect.getsource(function).splitlines()
        end = next(i for i, line in enumerate(lines) if i > 0 and line.rstrip().endswith('"""'))
        return lines[end + 1:]

    assert body(recorder._under_horovodrun_mpi) == body(under_horovodrun_mpi)


def test_the_recorders_launcher_table_is_workload_launchers():
    """recorder/'s copy of LAUNCHERS: the same rows in the same order, and the same answer for every
    launcher's environment (the horovodrun --mpi check reads the process tree: false here, for both)."""
    import recorder
    from workload.launchers import LAUNCHERS, detect_launcher

    assert list(recorder._LAUNCHERS) == [(row.name, row.frameworks, row.rank, row.also, row.check is not None)
                                         for row in LAUNCHERS]
    names = {name for row in LAUNCHERS for name in (*row.rank, *row.also)}
    environments = [{}, *({name: "0"} for name in names), *({**{a: "0" for a in row.also}, row.rank[0]: "0"}
                                                           for row in LAUNCHERS)]
    for framework in ("horovod", "ddp"):
        for environ in environments:
            assert recorder._launcher(framework, environ) == detect_launcher(framework, environ), environ
