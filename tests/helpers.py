"""What the tests share: run the real launchers from the project's virtual environment and read run records."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def script_module(name: str) -> ModuleType:
    """scripts/NAME.py imported as the module NAME, once per process (scripts/ is no package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    return str(path) if path.exists() else (shutil.which(name) or name)


def launch_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    env.update(extra)
    return env


def run(args: list[str], timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Run a command from the repository root; its output is kept for the assertion message."""
    return subprocess.run(args, cwd=ROOT, env=launch_env(**env), capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)


def horovodrun(np: int, controller: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run([tool("horovodrun"), "-np", str(np), f"--{controller}", sys.executable, "-m", "hvd_impl",
                *args], **env)


def torchrun(np: int, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run([tool("torchrun"), "--standalone", "--nproc-per-node", str(np), "-m", "native_impl", *args],
               **env)


def reference(np: int, *args: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "workload.reference", "--emulate-world-size", str(np), *args])


def read_steps(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [entry for entry in map(json.loads, lines) if entry["kind"] == "step"]


def read_losses(run_dir: Path) -> list[float]:
    return [entry["loss"] for entry in read_steps(run_dir)]


def read_meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def finished(result: subprocess.CompletedProcess, *, record: Path | None = None,
             last_line: str | None = None) -> subprocess.CompletedProcess:
    """ok(), except for a torchrun launch of a user-shaped script whose only failure is a worker's abort as its
    interpreter exited, after the work is shown done (its run record says "ok", or it printed its last line):
    that counts as done, as the project's launchers count it (PyTorch's Gloo teardown race,
    docs/fault-tolerance.md, "Gloo's abort at exit"). The project's own entry points leave with os._exit and
    go through ok()."""
    from compare.launch.logs import TEARDOWN_ABORT
    from workload.record_format import says_ok

    aborted_at_exit = result.returncode != 0 and TEARDOWN_ABORT in result.stdout + result.stderr
    work_done = (record is not None and says_ok(record)) or (last_line is not None and last_line in result.stdout)
    return result if aborted_at_exit and work_done else ok(result)


def launch_mode_of(source: str, script_args: list[str], requested: str = "auto"):
    """compare migrate's launch decision for a script's text, from the facts the migration reads of its tree."""
    from compare.migrate.plan.launch_facts import launch_facts_of
    from compare.verify.launch_mode import decide

    return decide(launch_facts_of(source), script_args, requested)
