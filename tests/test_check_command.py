"""python -m compare on recorded fixtures and bad input: no launcher starts (tests/test_compare.py launches)."""

from __future__ import annotations

import json
import sys

import pytest
from fixtures import write_run
from helpers import run


def compare(*args: str, timeout: float = 120):
    return run([sys.executable, "-m", "compare", *args], timeout=timeout)


def _pair(tmp_path, b_losses, status="ok"):
    base = [2.3 - 0.01 * i for i in range(30)]
    for seed in (0, 1, 2):
        write_run(tmp_path / "a" / f"seed-{seed}", framework="horovod", world_size=2, seed=seed,
                  losses=[x + 0.01 * seed for x in base])
        write_run(tmp_path / "b" / f"seed-{seed}", framework="ddp", world_size=2, seed=seed,
                  losses=[x + 0.01 * seed for x in b_losses], status=status if seed == 2 else "ok")
    return str(tmp_path / "a"), str(tmp_path / "b")


def test_check_passes_on_reduction_order_noise(tmp_path):
    noisy = [(2.3 - 0.01 * i) * (1 + 1e-7 * (-1) ** i) for i in range(30)]
    result = compare("check", *_pair(tmp_path, noisy))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parity holds" in result.stdout and "note: no --calibration" not in result.stdout


def test_check_fails_on_divergence_and_names_the_step(tmp_path):
    diverging = [2.3 - 0.01 * i + (0.002 * i if i >= 3 else 0) for i in range(30)]
    result = compare("check", *_pair(tmp_path, diverging))
    assert result.returncode == 1
    assert "diverges at step 4" in result.stdout
    # Without a calibration the default band decided: the check says how far that goes (docs/parity.md).
    assert "note: no --calibration" in result.stdout
    calibrated = compare("check", *_pair(tmp_path, diverging), "--calibration", str(tmp_path / "a" / "seed-0"),
                         str(tmp_path / "a" / "seed-0"))
    assert calibrated.returncode == 1 and "note: no --calibration" not in calibrated.stdout, calibrated.stdout


def test_check_reports_a_failed_run(tmp_path):
    result = compare("check", *_pair(tmp_path, [2.3 - 0.01 * i for i in range(30)], status="failed"))
    assert result.returncode == 3
    assert "run failed" in result.stderr


def test_corrupt_record_is_one_line_naming_file_and_line(tmp_path):
    write_run(tmp_path / "a", framework="horovod", world_size=2, seed=0, losses=[2.0, 1.9, 1.8])
    write_run(tmp_path / "b", framework="ddp", world_size=2, seed=0, losses=[2.0, 1.9, 1.8])
    metrics = tmp_path / "b" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[1] = lines[1][:20]
    metrics.write_text("\n".join(lines) + "\n")
    result = compare("check", str(tmp_path / "a"), str(tmp_path / "b"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "metrics.jsonl:2" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args,message", [
    (["run", "--np", "0"], "--np values must be positive"),
    (["run", "--frameworks", "mxnet"], "frameworks are horovod and ddp"),
    (["run", "--np", "64", "--dataset-size", "100"], "leaves no full batch per worker"),
    (["run", "--batch-size", "0"], "--batch-size must be a positive integer"),
    (["report", "/nonexistent/dir"], "no such directory"),
    (["run", "--tuned", "/nonexistent/tuned.json"], "--tuned /nonexistent/tuned.json: No such file"),
    (["run", "--tuned", "BAD_JSON"], "not JSON"),
    (["run", "--tuned", "BAD_ARGS"], "horovod's arguments --fusion-threshold-mb lots"),
    (["run", "--tuned", "UNFAIR"], "ddp's arguments change lr; tuning may change only"),
    (["run", "--tuned", "THREADS_ENV"], "env.ddp sets OMP_NUM_THREADS"),
    (["run", "--tuned", "ENV_LIST"], "expected an object with lists horovod, ddp"),
    (["run", "--tuned", "BINARY"], "--tuned"),
    (["matrix", "--workload", "no_such_module:make"], "no module named 'no_such_module'"),
])
def test_bad_input(tmp_path, args, message):
    files = {"BAD_JSON": b"{not json", "BAD_ARGS": json.dumps({"horovod": ["--fusion-threshold-mb", "lots"]}),
             "UNFAIR": json.dumps({"ddp": ["--bucket-cap-mb", "1", "--lr", "9"]}),
             "THREADS_ENV": json.dumps({"env": {"ddp": {"OMP_NUM_THREADS": "2"}}}),
             "ENV_LIST": json.dumps({"env": ["x"]}), "BINARY": b"\xff\xfe\x00garbage"}
    for name, text in files.items():
        if name in args:
            (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
            args = [str(tmp_path / name) if a == name else a for a in args]
    result = compare(*args, "--out", str(tmp_path / "o")) if args[0] in ("run", "matrix") else compare(*args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "o" / "report.md").exists()


def test_help_lists_every_registered_command_and_exit_status():
    """--help is generated: from the command registry and compare/names.py, so it cannot fall behind them."""
    from compare.commands.options import COMMAND_SPECS as COMMANDS
    from compare.names import Exit

    result = compare("--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # argparse wraps long help lines
    for name in COMMANDS:
        assert f" {name} " in text, name
    for code in Exit:
        assert f"{code.value} {code.words}" in text, code


def test_a_command_loads_only_its_own_module():
    """`compare check` runs after every launch in the suite and in users' CI: it reads records and needs neither
    torch nor LibCST nor matplotlib (4.4 CPU-seconds of imports here when every command's module was loaded)."""
    code = ("import sys\nfrom compare.commands.cli import build_parser\nbuild_parser(['check'])\n"
            "print(sorted(m for m in ('torch', 'libcst', 'matplotlib') if m in sys.modules))")
    result = run([sys.executable, "-c", code])
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr
