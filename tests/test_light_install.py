"""The light install: `pip install .` of the project, without extras, into a clean virtual environment gives
`hvd-compare migrate` with no torch there; the comparison's commands and `migrate --verify` say in one line what
they lack.

The tests of the install are marked slow although they start no launcher: making the environment and installing
the project with its three dependencies (from the package index pip is configured with) took 45-90 s here, too
long for the first stage of `make test`, which runs in parallel in about two minutes. One environment serves
them all."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

# What the Dockerfile copies too: the project as a package, without the tests, examples and results.
PROJECT = ("pyproject.toml", "README.md", "workload", "hvd_impl", "native_impl", "compare", "recorder")
REPOSITORY = ROOT / "examples" / "repos" / "trainer_class"


def clean_env() -> dict[str, str]:
    """Nothing of the project's own environment: no PYTHONPATH to this tree, no virtual environment."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def light(tmp_path_factory) -> Path:
    """The bin directory of a new virtual environment with the project installed as a user installs it."""
    root = tmp_path_factory.mktemp("light")
    source = root / "source"  # a copy: pip builds in the source tree, which must stay as it is
    source.mkdir()
    for name in PROJECT:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(source)],
                             env=clean_env(), capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    return venv / "bin"


def run(light: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(light / "hvd-compare"), *args], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_no_torch_there(light, tmp_path):
    probe = subprocess.run([str(light / "python"), "-c", "import torch"], cwd=tmp_path, env=clean_env(),
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 1 and "No module named 'torch'" in probe.stderr
    assert (light / "hvd-compare").is_file()


@pytest.mark.slow
def test_hvd_compare_migrates_a_repository(light, tmp_path):
    out = tmp_path / "trainer_ddp"
    result = run(light, "migrate", str(REPOSITORY), "-o", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"migrate: wrote {out} (MIGRATION.md inside)")
    assert "import torch.distributed as dist" in (out / "train.py").read_text() + (out / "trainer.py").read_text()
    assert not re.search(r"\b(import|from) horovod\b|horovod\.torch|\bhvd\.", (out / "trainer.py").read_text())
    assert (out / "MIGRATION.md").is_file()


@pytest.mark.slow
def test_verify_says_in_one_line_what_it_needs(light, tmp_path):
    """Refused before anything is written: the migration alone would have been written otherwise."""
    out = tmp_path / "trainer_ddp"
    result = run(light, "migrate", str(REPOSITORY), "-o", str(out), "--verify", "--entry", "train.py", cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("hvd-compare: error: --verify needs torch, scipy")
    assert "scripts/setup.sh (the `compare` extra" in result.stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("args", [["check", "a", "b"], ["run", "--np", "1", "--steps", "2", "--out", "results"]])
def test_the_comparisons_commands_say_what_they_need(light, tmp_path, args):
    result = run(light, *args, cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert f"error: {args[0]} needs " in result.stderr and "the `compare` extra" in result.stderr
    assert not (tmp_path / "results").exists()


def test_only_a_comparison_module_is_turned_into_one_line():
    """Any other missing module (a user's workload importing what is not there) keeps its traceback."""
    from compare.install import not_installed

    line = not_installed(ModuleNotFoundError("No module named 'scipy.stats'", name="scipy.stats"), "check")
    assert line is not None and line.startswith("check needs scipy, which is not installed here")
    assert not_installed(ModuleNotFoundError("No module named 'my_plugin'", name="my_plugin"), "run") is None
