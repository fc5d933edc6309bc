"""The user's own workload (docs/own-job.md): the Workload protocol, plug-ins by module or file, their errors,
and the example plug-in through every launcher and `compare run`. Also the papercuts of the shared
options: --help, --text-dir, the steps notice, the closing line, ignored options."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest
import torch
from helpers import ROOT, horovodrun, ok, read_losses, read_meta, reference, run, tool, torchrun

from workload.errors import UsageError
from workload.options import build_parser, ignored_options
from workload.workloads import BUILTIN_WORKLOADS, WORKLOADS, DataSettings, Workload, load_workload, text_sequences

EXAMPLE = "examples/digits_cnn.py:make_workload"
SMALL = ("--dataset-size", "512", "--batch-size", "16", "--steps", "8")

PLUGINS = '''
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset
from workload.workloads import Workload

def data(n):
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 4, generator=g), torch.randint(0, 2, (n,), generator=g))

def tiny(settings):
    return data(40), data(8)

def enough(settings):
    return data(256), data(32)

class Pairs(Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        return torch.full((4,), float(i % 7)), i % 2

def no_parameters():
    return Workload(data=enough, model=lambda d: nn.ReLU())

def too_little_data():
    return Workload(data=tiny, model=lambda d: nn.Linear(4, 2))

def returns_dict():
    return {"data": enough}

def data_is_a_list():
    return Workload(data=lambda s: [1, 2, 3], model=lambda d: nn.Linear(4, 2))

def raises():
    raise RuntimeError("no config file")

def map_style():
    return Workload(data=lambda s: (Pairs(), Pairs()), model=lambda d: nn.Linear(4, 2), lr=0.01,
                    loss=nn.functional.cross_entropy)

NOT_A_FUNCTION = 3
'''


@pytest.fixture(scope="module")
def plugin_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plugins") / "user_plugins.py"
    path.write_text(PLUGINS)
    return path


def test_the_built_ins_follow_the_protocol():
    assert set(BUILTIN_WORKLOADS) == {"mlp", "digits", "resnet", "lm"}
    for name, workload in BUILTIN_WORKLOADS.items():
        assert isinstance(workload, Workload) and workload.name == name and workload.lr > 0
    data = WORKLOADS["digits"].make_data(64, None)
    assert len(data.train) == 64 and data.input_shape == (1, 8, 8)
    assert sum(p.numel() for p in WORKLOADS["digits"].make_model(data).parameters()) > 0


def test_the_digits_are_sklearns_read_without_importing_sklearn():
    # Each worker would otherwise pay sklearn's import (about 1 s of CPU); the data must stay load_digits()'s.
    from sklearn.datasets import load_digits as sklearns

    from workload.digits import load_digits

    expected, digits = sklearns(), load_digits()
    for field in ("data", "images", "target"):
        ours, theirs = getattr(digits, field), getattr(expected, field)
        assert ours.dtype == theirs.dtype and (ours == theirs).all(), field
    probe = ("import sys; from workload.workloads import WORKLOADS; data = WORKLOADS['digits'].make_data(None, None);"
             "print(len(data.train) + len(data.test), 'sklearn' in sys.modules)")
    assert ok(run([sys.executable, "-c", probe], timeout=120)).stdout.split() == [str(len(expected.data)), "False"]


def test_a_plugin_by_file_and_by_module_is_the_same_workload(monkeypatch):
    by_file = load_workload(EXAMPLE)
    assert by_file.name == EXAMPLE and by_file.lr == 0.2 and "digits" in by_file.summary
    assert WORKLOADS[EXAMPLE] is by_file  # code that indexes WORKLOADS takes plug-ins too
    assert EXAMPLE not in WORKLOADS  # ...while iteration and `in` list the built-ins only
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    by_module = load_workload("digits_cnn:make_workload")
    data = by_module.make_data(None, None)
    assert data.fingerprint() == by_file.make_data(None, None).fingerprint()
    torch.manual_seed(0)
    model = by_module.make_model(data)
    loss, correct = by_module.loss_and_correct(model(data.test.tensors[0]), data.test.tensors[1])
    assert loss.ndim == 0 and 0 <= int(correct) <= len(data.test)


def test_a_map_style_dataset_is_stacked_into_tensors(plugin_file):
    workload = load_workload(f"{plugin_file}:map_style")
    data = workload.make_data(None, None)
    assert data.train.tensors[0].shape == (256, 4) and data.train.tensors[1].dtype == torch.long
    assert data.input_shape == (4,)


@pytest.mark.parametrize(("function", "message"), [
    ("nope.module:make", "no module named 'nope'"),
    ("examples/nope.py:make", "no such file examples/nope.py"),
    ("examples/digits_cnn.py:nope", "has no attribute 'nope'"),
    ("{plugins}:NOT_A_FUNCTION", "NOT_A_FUNCTION is not a function"),
    ("{plugins}:returns_dict", "returns_dict() returned dict, not a workload.workloads.Workload"),
    ("{plugins}:raises", "raises() raised RuntimeError: no config file"),
    ("{plugins}:data_is_a_list", "data() returned list"),
    ("{plugins}:no_parameters", "the model has no trainable parameters"),
    ("{plugins}:too_little_data", "has 40 training samples: 2 workers x batch 32 leaves no full batch"),
    ("mpl", "unknown workload 'mpl': choose one of mlp, digits, resnet, lm, or name your own"),
])
def test_a_bad_plugin_is_one_line_and_exit_2(function, message, plugin_file, tmp_path, capsys):
    from workload.reference import main

    spec = function.format(plugins=plugin_file)
    assert main(["--emulate-world-size", "2", "--workload", spec, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "run" / "run.json").exists()


def test_help_says_each_default_once_and_names_the_workload_choices(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one line per option: no phrase cut by the wrapping
    text = build_parser("python -m native_impl", "").format_help()
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "(default: run all epochs)" in text and "(default: 32)" in text  # stated ones stay, once
    assert text.count("(default: run all epochs)") == 1
    assert "{mlp,digits,resnet,lm,MODULE:FUNCTION,FILE.py:FUNCTION}" in text


def test_text_dir_reads_any_text_file_and_says_what_it_reads(tmp_path):
    data = text_sequences(DataSettings(64, ROOT / "docs"))  # Markdown only
    assert len(data.train) > 0
    (tmp_path / "image.bin").write_bytes(b"\0\1\2" * 1000)  # not text: skipped
    with pytest.raises(UsageError, match="0 bytes of text in the files directly in it"):
        text_sequences(DataSettings(64, tmp_path))


def test_ignored_options_name_the_other_frameworks_settings():
    options = {"fusion_threshold_mb": 4.0, "cycle_time_ms": None, "bucket_cap_mb": 10.0,
               "gradient_as_bucket_view": False, "compression": "none"}
    assert ignored_options(options, "ddp") == ["--fusion-threshold-mb"]
    assert ignored_options(options, "horovod") == ["--bucket-cap-mb"]
    assert ignored_options(options, "reference") == ["--fusion-threshold-mb", "--bucket-cap-mb"]


def test_a_run_says_when_it_stops_before_steps_and_closes_with_one_line(tmp_path, capsys):
    from workload.reference import main

    out = tmp_path / "run"
    assert main(["--dataset-size", "128", "--steps", "1000", "--bucket-cap-mb", "5", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "note: 4 steps, not 1000: one epoch of 128 samples at global batch 32; use --epochs for more" \
        in captured.err
    assert "note: --bucket-cap-mb does not apply to reference" in captured.err
    last = captured.out.strip().splitlines()[-1]
    assert last.startswith(f"wrote {out}/run.json: 4 steps, final loss ") and last.endswith(" s")
    meta = read_meta(out)
    assert meta["ignored_options"] == ["--bucket-cap-mb"] and meta["workload"] == {"name": "mlp", "kind": "built-in"}


# --- through the real launchers ------------------------------------------------------------------


@pytest.fixture(scope="module")
def plugin_runs(tmp_path_factory) -> dict[str, Path]:
    """The example plug-in under every launcher, np 2, the same small options."""
    root = tmp_path_factory.mktemp("plugin-runs")
    args = ("--workload", EXAMPLE, *SMALL)
    runs = {name: root / name for name in ("horovodrun", "mpirun", "torchrun", "hvd-spawn", "ddp-spawn", "ref")}
    ok(horovodrun(2, "gloo", *args, "--out", str(runs["horovodrun"])))
    ok(run([tool("mpirun"), "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "OMP_NUM_THREADS",
            sys.executable, "-m", "hvd_impl", *args, "--out", str(runs["mpirun"])]))
    ok(torchrun(2, *args, "--out", str(runs["torchrun"])))
    ok(run([sys.executable, "-m", "hvd_impl", "--spawn", "2", *args, "--out", str(runs["hvd-spawn"])]))
    ok(run([sys.executable, "-m", "native_impl", "--spawn", "2", *args, "--out", str(runs["ddp-spawn"])]))
    ok(reference(2, *args, "--out", str(runs["ref"])))
    return runs


@pytest.mark.slow
def test_the_plugin_trains_alike_under_every_launcher(plugin_runs):
    expected = read_losses(plugin_runs["torchrun"])
    assert len(expected) == 8 and all(math.isfinite(loss) for loss in expected)
    for name, run_dir in plugin_runs.items():
        losses = read_losses(run_dir)
        assert losses == pytest.approx(expected, rel=1e-5), name
        meta = read_meta(run_dir)
        assert meta["options"]["workload"] == EXAMPLE
        assert meta["workload"]["kind"] == "plug-in"
        assert meta["workload"]["file"] == str(ROOT / "examples" / "digits_cnn.py")
    frameworks = {read_meta(d)["framework"] for d in plugin_runs.values()}
    assert frameworks == {"horovod", "ddp", "reference"}


@pytest.mark.slow
@pytest.mark.parametrize("spawned,cli,launcher", [("ddp-spawn", "torchrun", "spawn"),
                                                  ("hvd-spawn", "horovodrun", "horovod.run")])
def test_spawn_matches_command_line_launch(plugin_runs, spawned, cli, launcher):
    """Launched from Python (torch.multiprocessing.spawn, horovod.run): the same record as under the command
    line launcher, and exactly the same losses."""
    meta = read_meta(plugin_runs[spawned])
    assert (meta["status"], meta["launcher"], meta["backend"], meta["world_size"]) == ("ok", launcher, "gloo", 2)
    assert read_losses(plugin_runs[spawned]) == read_losses(plugin_runs[cli])  # exactly


@pytest.mark.slow
def test_compare_run_takes_a_plugin_and_names_it_launched_from_python(tmp_path):
    """compare run with the user's own model, its workers started from Python (--launcher spawn)."""
    out = tmp_path / "cmp"
    result = ok(run([sys.executable, "-m", "compare", "run", "--workload", EXAMPLE, "--np", "2", "--seeds", "0",
                     "--repeats", "0", "--launcher", "spawn", *SMALL, "--out", str(out)], timeout=600))
    assert re.search(r"parity:? holds", result.stdout), result.stdout
    metas = [read_meta(p.parent) for p in (out / "runs").rglob("run.json")]
    assert {m["framework"] for m in metas} == {"horovod", "ddp"}
    assert all(m["options"]["workload"] == EXAMPLE and m["workload"]["kind"] == "plug-in" for m in metas)
    assert read_meta(out / "runs" / "ddp-np2")["launcher"] == "spawn"
    assert read_meta(out / "runs" / "horovod-np2")["launcher"] == "horovod.run"
