"""python -m compare through the real launchers, and its check/report commands on recorded fixtures."""

from __future__ import annotations

import json
import sys

import pytest
from fixtures import write_run
from helpers import ok, run

pytestmark = pytest.mark.slow
SMALL = ["--steps", "20", "--batch-size", "16", "--dataset-size", "512", "--log-every", "5"]


def compare(*args: str, timeout: float = 600):
    return run([sys.executable, "-m", "compare", *args], timeout=timeout)


def test_end_to_end_np2(tmp_path, horovod_built):
    out = tmp_path / "cmp"
    result = ok(compare("run", "--np", "2", "--seeds", "0,1", *SMALL, "--out", str(out)))
    assert "parity: holds" in result.stdout
    assert "compared: defaults vs defaults" in result.stdout
    assert "report:" in result.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["schema_version"] == 1
    assert report["analysis"]["verdict"]["parity"] == "holds"
    commands = " ".join(report["commands"])
    assert "horovodrun -np 2" in commands and "torchrun --standalone --nproc-per-node 2" in commands
    assert "workload.reference --emulate-world-size 2" in commands
    assert "OMP_NUM_THREADS=1" in commands
    markdown = (out / "report.md").read_text()
    assert markdown.startswith("# Horovod vs DDP: parity holds")
    for plot in ("loss_curves.png", "rel_diff.png", "step_times.png"):
        assert (out / plot).stat().st_size > 10_000
    for framework in ("horovod", "ddp", "reference"):
        meta = json.loads((out / "runs" / f"{framework}-np2" / "seed-1" / "run.json").read_text())
        assert meta["status"] == "ok" and meta["threads"] == 1 and meta["seed"] == 1

    # report: rebuilt from the records alone gives the same verdict
    (out / "report.md").unlink()
    rebuilt = ok(compare("report", str(out)))
    assert "parity: holds" in rebuilt.stdout and (out / "report.md").exists()

    # check: the records of the two frameworks, directly
    checked = ok(compare("check", str(out / "runs" / "horovod-np2"), str(out / "runs" / "ddp-np2")))
    assert "parity holds" in checked.stdout


def test_tuned_against_tuned(tmp_path, horovod_built):
    tuned = tmp_path / "tuned.json"  # the format `compare bench` writes
    tuned.write_text(json.dumps({"horovod": ["--cycle-time-ms", "2", "--fusion-threshold-mb", "0"],
                                 "ddp": ["--bucket-cap-mb", "1"], "env": {"horovod": {}, "ddp": {"GLOO_NTHREADS": "1"}},
                                 "tuned_for": {"workload": "digits"}}))
    out = tmp_path / "cmp"
    result = ok(compare("run", "--np", "2", "--seeds", "0", *SMALL, "--reference", "off", "--tuned", str(tuned),
                        "--out", str(out)))
    assert "parity: holds" in result.stdout
    assert "compared: tuned vs tuned" in result.stdout
    assert "was tuned for workload digits (here mlp)" in result.stderr
    assert "**Compared:** tuned vs tuned" in (out / "report.md").read_text()
    horovod = json.loads((out / "runs" / "horovod-np2" / "run.json").read_text())
    ddp = json.loads((out / "runs" / "ddp-np2" / "run.json").read_text())
    assert horovod["env"]["HOROVOD_CYCLE_TIME"] == "2.0" and horovod["env"]["HOROVOD_FUSION_THRESHOLD"] == "0"
    assert ddp["options"]["bucket_cap_mb"] == 1 and horovod["options"]["bucket_cap_mb"] is None
    report = json.loads((out / "report.json").read_text())
    assert report["analysis"]["tuning"]["configuration"] == "tuned"
    assert "GLOO_NTHREADS=1" in " ".join(report["commands"])
    (out / "report.md").unlink()
    ok(compare("report", str(out)))  # rebuilt from the records: it still says what was compared
    assert "**Compared:** tuned vs tuned" in (out / "report.md").read_text()


def test_a_failed_run_is_reported_and_the_rest_analysed(tmp_path, horovod_built):
    # Rank 1 exits at step 5: np 1 has no rank 1 and finishes; both np 2 launches fail.
    out = tmp_path / "cmp"
    result = compare("run", "--np", "1,2", "--seeds", "0", *SMALL, "--fail-at-step", "5", "--fail-rank", "1",
                     "--reference", "off", "--horovod-controller", "gloo", "--out", str(out))
    assert result.returncode == 3, result.stderr[-2000:]
    assert "FAILED horovod np2: exited" in result.stderr and "rank 1 failed first" in result.stderr
    assert "FAILED ddp np2: exited" in result.stderr
    report = json.loads((out / "report.json").read_text())
    failures = report["analysis"]["failures"]
    assert {(f["framework"], f["world_size"], f.get("failing_rank")) for f in failures if f["seed"] is None} == {
        ("horovod", 2, 1), ("ddp", 2, 1)}
    assert "injecting fault" in (out / "report.md").read_text()  # the log tail is in the report
    assert report["analysis"]["summary"], "the np 1 runs are still analysed"


def test_launch_timeout_kills_the_whole_tree(tmp_path):
    import psutil

    from compare.launch.commands import build_launch
    from compare.launch.process import run_launch
    from workload.options import Options

    options = Options(steps=1000, fail_at_step=2, fail_rank=1, fail_mode="hang", seeds=(0,))
    launch = build_launch("ddp", 2, options, tmp_path / "run")
    before = {p.pid for p in psutil.process_iter()}
    outcome = run_launch(launch, timeout_s=20)
    assert outcome.timed_out and not outcome.ok
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if p.pid not in before
                 and str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []


# --- check and report on recorded fixtures ------------------------------------------------------------

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
    assert "parity holds" in result.stdout


def test_check_fails_on_divergence_and_names_the_step(tmp_path):
    diverging = [2.3 - 0.01 * i + (0.002 * i if i >= 3 else 0) for i in range(30)]
    result = compare("check", *_pair(tmp_path, diverging))
    assert result.returncode == 1
    assert "first beyond tolerance at step 4" in result.stdout


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
    result = compare(*args, "--out", str(tmp_path / "o")) if args[0] == "run" else compare(*args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "o" / "report.md").exists()
