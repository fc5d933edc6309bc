"""scripts/setup.sh without a set-up: its choices stick (the stamp records them, --if-stale keeps them), and its
prerequisites are checked first, each missing one named in one line before anything is installed.

Every run here is one that installs nothing: `--stamp` and `--check` by design, and `--if-stale` only against a
fake virtual environment whose python prints no version, so that a stale stamp stops at the prerequisite check
(exit 1) instead of setting anything up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

SETUP = ROOT / "scripts" / "setup.sh"
CHOICES = ("TORCH_VERSION", "HOROVOD_VERSION", "HOROVOD_GPU_OPERATIONS", "EXTRAS", "VENV", "PYTHON")


def setup_sh(mode: str, venv: Path, path: str | None = None, **choices: str) -> subprocess.CompletedProcess:
    """scripts/setup.sh MODE with only the choices given (CI exports EXTRAS: it must not leak in)."""
    env = {key: value for key, value in os.environ.items() if key not in CHOICES}
    env.update(VENV=str(venv), **choices)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(["bash", str(SETUP), mode], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


def stamp_of(result: subprocess.CompletedProcess) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


@pytest.fixture
def fake_venv(tmp_path) -> Path:
    """A virtual environment as --if-stale sees one: an executable bin/python (one that prints nothing: were the
    stamp found stale, the set-up would stop at its prerequisite check) and, written by the test, a stamp."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\nexit 0\n")
    (venv / "bin" / "python").chmod(0o755)
    return venv


def test_the_recorded_choices_stick(fake_venv):
    """`TORCH_VERSION=2.12.0 EXTRAS=ray make setup`, then `make compare`: the stamp it wrote matches the next
    --if-stale with the variables unset, so nothing is set up again and torch stays 2.12.0."""
    chosen = setup_sh("--stamp", fake_venv, TORCH_VERSION="2.12.0", EXTRAS="ray")
    (fake_venv / ".setup-stamp").write_text(chosen.stdout)
    kept = stamp_of(setup_sh("--stamp", fake_venv))
    assert kept == stamp_of(chosen) and (kept["torch"], kept["extras"]) == ("2.12.0", "ray")
    fresh = setup_sh("--if-stale", fake_venv)
    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (0, "", "")


def test_a_set_up_that_failed_keeps_its_choices_for_the_next(fake_venv):
    """`TORCH_VERSION=2.12.0 make setup` that fails half-way (no stamp) leaves its choices: the next `make compare`
    sets up torch 2.12.0 again, not the default or the torch of the set-up before it."""
    (fake_venv / ".setup-choices").write_text("torch=2.12.0\nhorovod=0.28.1\ngpu=\nextras=ray\n")
    retried = stamp_of(setup_sh("--stamp", fake_venv))
    assert (retried["torch"], retried["extras"]) == ("2.12.0", "ray")
    stale = setup_sh("--if-stale", fake_venv)
    assert "running scripts/setup.sh with torch 2.12.0, extras ray" in stale.stdout, stale.stdout
    assert stamp_of(setup_sh("--stamp", fake_venv, TORCH_VERSION="2.13.0"))["torch"] == "2.13.0"  # set: it decides
    # It failed after an earlier set-up had succeeded: the stamp is the earlier one's, the choice the new one.
    (fake_venv / ".setup-stamp").write_text(setup_sh("--stamp", fake_venv, TORCH_VERSION="2.13.0").stdout)
    assert stamp_of(setup_sh("--stamp", fake_venv))["torch"] == "2.12.0"
    assert "with torch 2.12.0" in setup_sh("--if-stale", fake_venv).stdout


def test_a_new_choice_makes_the_set_up_stale(fake_venv):
    """The other direction: a variable that is set replaces the recorded choice; set empty, it is the default."""
    (fake_venv / ".setup-stamp").write_text(setup_sh("--stamp", fake_venv, TORCH_VERSION="2.12.0",
                                                     EXTRAS="ray").stdout)
    assert stamp_of(setup_sh("--stamp", fake_venv, TORCH_VERSION="2.13.0"))["torch"] == "2.13.0"
    assert stamp_of(setup_sh("--stamp", fake_venv, TORCH_VERSION=""))["torch"] == "2.13.0"  # the default
    assert stamp_of(setup_sh("--stamp", fake_venv, EXTRAS=""))["extras"] == ""
    stale = setup_sh("--if-stale", fake_venv, TORCH_VERSION="2.13.0")
    assert stale.returncode == 1  # stopped at the prerequisites: the fake python prints no version
    assert "stale: running scripts/setup.sh with torch 2.13.0, extras ray" in stale.stdout
    assert stale.stderr.startswith("setup: Python 3.11 or newer is needed") and len(stale.stderr.splitlines()) == 1


def test_a_stamp_of_the_older_one_line_form_keeps_its_choices(fake_venv):
    (fake_venv / ".setup-stamp").write_text("torch=2.12.0 horovod=0.28.1 extras=ray,spark patches=p2 files=0\n")
    stamp = stamp_of(setup_sh("--stamp", fake_venv))
    assert (stamp["torch"], stamp["extras"], stamp["gpu"]) == ("2.12.0", "ray,spark", "")


def test_an_unknown_extra_is_one_line(tmp_path):
    result = setup_sh("--check", tmp_path / "venv", EXTRAS="slurm,gpu")
    assert result.returncode == 2 and result.stderr == "setup: EXTRAS: unknown extra 'gpu' (slurm, ray, spark)\n"


def path_without(tmp_path: Path, *left_out: str) -> tuple[str, Path]:
    """A PATH of one directory holding every command of this PATH but those left out, and an apt-get and a sudo
    that leave a mark when anything calls them (a prerequisite check must install nothing)."""
    bin_dir, marks = tmp_path / "bin", tmp_path / "installed"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for command in sorted(Path(directory).glob("*")) if Path(directory).is_dir() else ():
            target = bin_dir / command.name
            if command.name not in left_out and not target.exists() and os.access(command, os.X_OK):
                target.symlink_to(command)
    for name in ("apt-get", "sudo"):
        (bin_dir / name).unlink(missing_ok=True)
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {marks}\n')
        (bin_dir / name).chmod(0o755)
    return str(bin_dir), marks


def test_a_missing_build_tool_stops_it_first(tmp_path):
    """mpirun is left out too, so that Open MPI's Debian packages are due: still nothing is installed."""
    path, marks = path_without(tmp_path, "cmake", "mpirun")
    result = setup_sh("--check", tmp_path / "venv", path=path, PYTHON=sys.executable)
    assert result.returncode == 1
    assert result.stderr == "setup: cmake not found: Horovod is built from source (Debian: apt-get install cmake)\n"
    assert not marks.exists() and not (tmp_path / "venv").exists()


def test_an_old_python_stops_it_first(tmp_path):
    """A distribution's Python 3.10: named before anything is installed or built (it once failed after Horovod's
    build, minutes in)."""
    python = tmp_path / "python3.10"
    python.write_text("#!/bin/sh\necho 3.10.12\n")
    python.chmod(0o755)
    path, marks = path_without(tmp_path, "mpirun")
    result = setup_sh("", tmp_path / "venv", path=path, PYTHON=str(python))
    assert result.returncode == 1
    assert result.stderr == (f"setup: Python 3.11 or newer is needed; {python} is 3.10.12 (PYTHON=/path/to/python3.11 "
                             "or newer)\n")
    assert result.stdout == ""
    assert not marks.exists() and not (tmp_path / "venv").exists()


def test_the_check_says_what_it_would_install(tmp_path):
    path, marks = path_without(tmp_path, "mpirun")
    result = setup_sh("--check", tmp_path / "venv", path=path, PYTHON=sys.executable, EXTRAS="spark")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("setup: prerequisites met; would install openmpi-bin libopenmpi-dev")
    assert "(extras spark)" in result.stdout
    assert not marks.exists() and not (tmp_path / "venv").exists()


def test_a_cuda_torch_for_a_cpu_set_up_stops_before_the_build(tmp_path):
    """`TORCH_VERSION=2.12.0 make setup` on a CPU machine: pip's default index gives torch 2.12.0+cu130, and Horovod's
    build against it failed minutes in (CMake: "Could NOT find CUDAToolkit"; with the toolkit named, the CUDA
    runtime for torch's target). It now stops after torch, in one line that says what to do. The virtual
    environment's python here answers as such a one would: Python 3.11, its headers, pip, torch with CUDA 13.0."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    calls = tmp_path / "python-calls"
    (venv / "bin" / "python").write_text(f"""#!/bin/sh
echo "$*" >> {calls}
case "$*" in
    *version_info*) echo 3.11.7 ;;
    *torch.version.cuda*) echo 13.0 ;;
esac
exit 0
""")
    (venv / "bin" / "python").chmod(0o755)
    path, marks = path_without(tmp_path)
    result = setup_sh("", venv, path=path, TORCH_VERSION="2.12.0")
    if marks.exists():
        pytest.skip("Debian packages are missing here: the set-up would install them first")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr == ("setup: torch 2.12.0 is a CUDA 13.0 build, against which Horovod builds only as a CUDA "
                             "build: give TORCH_INDEX (PyTorch's index of CPU wheels) for a CPU torch, or, on a CUDA "
                             "machine, HOROVOD_GPU_OPERATIONS=NCCL\n")
    assert "pip install -q --disable-pip-version-check torch==2.12.0" in calls.read_text()
    assert "building Horovod" not in result.stdout and "pip wheel" not in calls.read_text()
    # On a CUDA machine, with GPU operations asked for, the same torch goes on to the build.
    on_gpu = setup_sh("", venv, path=path, TORCH_VERSION="2.12.0", HOROVOD_GPU_OPERATIONS="NCCL")
    assert "building Horovod 0.28.1" in on_gpu.stdout and "CUDA 13.0 build" not in on_gpu.stderr
