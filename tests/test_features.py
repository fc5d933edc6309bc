"""Each feature, in its idiomatic form on either side, through the real launchers at np 2.

Features that are the same computation on both sides are held to step-wise parity; features with no
equivalent on one side give a clear one-line error there.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from helpers import horovodrun, ok, read_losses, read_meta, read_steps, run, torchrun

from compare.analysis.parity import relative_difference, stepwise

pytestmark = pytest.mark.slow
JOB = ["--workload", "mlp", "--dataset-size", "1024", "--batch-size", "16", "--epochs", "2", "--steps", "24",
       "--seed", "5", "--log-every", "6"]


def both(tmp_path, *args: str, controller: str = "gloo") -> tuple[list[float], list[float]]:
    ok(horovodrun(2, controller, *JOB, *args, "--out", str(tmp_path / "hvd")))
    ok(torchrun(2, *JOB, *args, "--out", str(tmp_path / "ddp")))
    return read_losses(tmp_path / "hvd"), read_losses(tmp_path / "ddp")


@pytest.fixture(scope="module")
def plain(tmp_path_factory, horovod_built) -> dict[str, Path]:
    """The plain JOB once per framework: every feature's off switch (the same job without its flag). Run to
    step 40, into the second epoch, for the even run of the uneven-inputs tests; its first 24 steps are JOB's."""
    root = tmp_path_factory.mktemp("plain")
    ok(horovodrun(2, "gloo", *JOB, "--steps", "40", "--out", str(root / "hvd")))
    ok(torchrun(2, *JOB, "--steps", "40", "--out", str(root / "ddp")))
    return {"hvd": root / "hvd", "ddp": root / "ddp"}


def another_trajectory(plain: Path, feature: Path) -> None:
    result = stepwise(read_losses(plain), read_losses(feature))
    assert not result.passed, f"the same as the plain run (max relative difference {result.max_rel_diff:.2e})"


def rounds_to_half(plain: Path, feature: Path) -> None:
    # Half-precision rounding of the reduced gradients moves the losses by about 7e-6 relative within 24 steps
    # (measured here), inside the parity band; the same job run twice is exactly equal, so a floor of 1e-6.
    result = stepwise(read_losses(plain), read_losses(feature))
    assert result.max_rel_diff > 1e-6, f"fp16 compression left the losses as plain ({result.max_rel_diff:.2e})"


def clips_from_the_first_update(plain: Path, feature: Path) -> None:
    # A global norm of 0.5 is below the mlp's gradient norm: the first update is already another (the loss
    # of step 1 comes before any update); a clip that never bites leaves every step exactly as plain.
    result = stepwise(read_losses(plain), read_losses(feature))
    assert result.identical_through == 1 and not result.passed, (result.identical_through, result.max_rel_diff)


def warms_up_to_the_scaled_rate(plain: Path, feature: Path) -> None:
    # lr x 2 (world size), warmed up from lr x 2 / 2 over 5 updates: the first update is the plain one, the
    # second is not. Ignoring either flag changes the second update (or leaves every step as plain).
    base = read_steps(plain)[0]["lr"]
    lrs = [entry["lr"] for entry in read_steps(feature)]
    assert lrs[:7] == pytest.approx([base * f for f in (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.0)]), lrs[:7]
    result = stepwise(read_losses(plain), read_losses(feature))
    assert result.identical_through == 2 and not result.passed, (result.identical_through, result.max_rel_diff)


def adam_from_the_first_update(plain: Path, feature: Path) -> None:
    # AdamW's first update moves every weight by about lr whatever its gradient (m / sqrt(v) is +-1): the loss
    # of step 2 is 74% off plain SGD's here, while SGD with the same weight decay moves it by 3e-6.
    a, b = read_losses(plain), read_losses(feature)
    assert a[0] == b[0] and relative_difference(a[1], b[1]) > 0.1, (a[:2], b[:2])


def feature(*args: str, changes_training=another_trajectory):
    return pytest.param(list(args), changes_training, id=" ".join(args))


@pytest.mark.parametrize("args,changes_training", [
    feature("--compression", "fp16", changes_training=rounds_to_half),
    feature("--accum-steps", "2"),  # 2 micro-batches a step: other samples, another curve
    feature("--amp"),  # bfloat16 autocast on the CPU
    feature("--clip-norm", "0.5", changes_training=clips_from_the_first_update),
    feature("--lr-scaling", "linear", "--warmup-steps", "5", changes_training=warms_up_to_the_scaled_rate),
    # The optimizer-state broadcast trap stays avoided:
    feature("--optimizer", "adamw", "--weight-decay", "0.01", changes_training=adam_from_the_first_update),
])
def test_feature_parity(tmp_path, plain, args, changes_training):
    hvd, ddp = both(tmp_path, *args)
    assert len(hvd) == len(ddp) == 24
    # Each feature changes training on each side against the same job without its flag (a flag ignored on both
    # sides would otherwise pass the parity below) ...
    for side in ("hvd", "ddp"):
        changes_training(plain[side], tmp_path / side)
    # ... and changes it the same way on both. fp16 compression: Horovod compresses then averages, DDP's hook
    # divides then sums, each rounding to half precision (about 5e-4): their losses part at the 1e-5 level
    # within 24 steps, a reduced-precision floor.
    result = stepwise(hvd, ddp, rtol=1e-4 if "fp16" in args else 1e-5)
    assert result.passed, f"max relative difference {result.max_rel_diff:.2e} at step {result.max_at_step}"


@pytest.fixture(scope="module")
def uneven(tmp_path_factory, plain) -> dict[str, Path]:
    """Runs past the join: 1024 samples / 2 ranks / 16 = 32 steps an epoch on rank 0, 31 on rank 1, so rank 1
    joins before step 32 and again before step 40; 40 steps cross into the second epoch. The even run is the
    plain DDP run of the same 40 steps."""
    root = tmp_path_factory.mktemp("uneven")
    job = [*JOB, "--steps", "40"]
    ok(horovodrun(2, "gloo", *job, "--uneven-inputs", "--out", str(root / "hvd")))
    ok(torchrun(2, *job, "--uneven-inputs", "--out", str(root / "ddp")))
    return {"hvd": root / "hvd", "ddp": root / "ddp", "even": plain["ddp"]}


def read_evals(run_dir: Path) -> list[dict]:
    entries = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return [entry for entry in entries if entry["kind"] == "eval"]


def test_uneven_inputs_really_are_uneven(uneven, horovod_built):
    # Identical to the even run until rank 1 runs out of batches; from the join on, another trajectory: the
    # step at the end of epoch 0 is rank 0's alone, and its update averages rank 0's gradient with zeros.
    even, odd = read_losses(uneven["even"]), read_losses(uneven["ddp"])
    assert len(even) == len(odd) == 40
    assert odd[:31] == even[:31]
    assert odd[31] != even[31]
    assert not stepwise(even[32:], odd[32:]).passed
    assert read_evals(uneven["even"])[0]["eval_loss"] != read_evals(uneven["ddp"])[0]["eval_loss"]


def test_uneven_inputs_parity_past_the_join(uneven, horovod_built):
    # Both average over the whole world with zeros from a joined rank; DDP's Join then broadcasts the last
    # joiner's model, and hvd_impl does the same after hvd.join() (without it, rank 1 keeps its stale
    # parameters: the evaluation and every step after the join differ; docs/features.md).
    hvd, ddp = read_losses(uneven["hvd"]), read_losses(uneven["ddp"])
    result = stepwise(hvd, ddp, k=40)
    assert result.n_common == 40 and result.passed, \
        f"max rel diff {result.max_rel_diff:.2e} at step {result.max_at_step}"
    hvd_evals, ddp_evals = read_evals(uneven["hvd"]), read_evals(uneven["ddp"])
    assert [e["step"] for e in hvd_evals] == [e["step"] for e in ddp_evals] == [32, 40]
    for a, b in zip(hvd_evals, ddp_evals, strict=True):
        assert a["eval_loss"] == pytest.approx(b["eval_loss"], rel=1e-5), (a, b)
        assert a["eval_accuracy"] == pytest.approx(b["eval_accuracy"], rel=1e-5), (a, b)


# 64 x 256 + 256 + 256 x 256 + 256 + 256 x 10 + 10: the mlp's parameters, each with its momentum when unsharded.
MLP_ELEMENTS = 85002
SHARD_LINE = re.compile(r"ZeroRedundancyOptimizer: rank (\d+) holds the optimizer state of (\d+) of (\d+) parameter")


def test_zero_shards_the_optimizer_state_and_matches_horovod_plain(tmp_path, plain):
    result = ok(torchrun(2, *JOB, "--zero", "--out", str(tmp_path / "zero")))
    # Each rank's local optimizer holds the state of its own shard only: whole tensors, assigned greedily
    # largest first, so the 256 x 256 weight alone (77%) is rank 0's and the rest (23%) rank 1's.
    shards = {int(rank): int(held) for rank, held, total in SHARD_LINE.findall(result.stderr)
              if int(total) == MLP_ELEMENTS}
    assert sorted(shards) == [0, 1], result.stderr[-3000:]
    assert sum(shards.values()) == MLP_ELEMENTS and all(0 < held <= 0.8 * MLP_ELEMENTS for held in shards.values()), \
        shards
    assert stepwise(read_losses(plain["hvd"]), read_losses(tmp_path / "zero")).passed


def test_adasum_runs_on_mpi_and_differs_from_average(tmp_path, plain):
    # The average is the plain job's (Gloo: the same sum over ranks, then the division, as on MPI).
    ok(horovodrun(2, "mpi", *JOB, "--adasum", "--out", str(tmp_path / "adasum")))
    assert read_meta(tmp_path / "adasum")["backend"] == "mpi"
    assert not stepwise(read_losses(tmp_path / "adasum"), read_losses(plain["hvd"])).passed


def test_powersgd_runs(tmp_path):
    ok(torchrun(2, *JOB, "--powersgd-rank", "2", "--out", str(tmp_path)))
    assert read_meta(tmp_path)["status"] == "ok"


@pytest.mark.parametrize("module,args,message", [
    ("hvd_impl", ["--zero"], "--zero has no Horovod equivalent"),
    ("hvd_impl", ["--powersgd-rank", "2"], "--powersgd-rank has no Horovod equivalent"),
    ("native_impl", ["--adasum"], "--adasum has no DDP equivalent"),
    ("hvd_impl", ["--adasum", "--fail-rank", "0"], "--adasum needs Horovod's MPI operations"),
    ("native_impl", ["--workload", "resnet", "--sync-bn"], "--sync-bn needs --device cuda"),
    ("hvd_impl", ["--workload", "resnet", "--sync-bn"], "--sync-bn needs --device cuda"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_no_equivalent_is_one_clear_line(tmp_path, horovod_built, module, args, message):
    if module == "hvd_impl" and args[0] == "--adasum":
        result = horovodrun(2, "gloo", *args, "--out", str(tmp_path))  # Gloo alone has no Adasum
        assert result.returncode != 0 and message in result.stdout + result.stderr
        return
    result = run([sys.executable, "-m", module, *args, "--out", str(tmp_path)], timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and message in result.stderr, result.stderr


def test_resume_in_the_same_directory_keeps_the_whole_record(tmp_path):
    job = [*JOB, "--checkpoint-every", "8"]
    ok(torchrun(2, *job, "--steps", "12", "--out", str(tmp_path)))
    ok(torchrun(2, *job, "--resume", str(tmp_path / "checkpoint.pt"), "--out", str(tmp_path)))
    steps = [entry["step"] for entry in read_steps(tmp_path)]
    assert steps == list(range(1, 25))


def test_corrupt_checkpoint_is_one_clear_line(tmp_path):
    bad = tmp_path / "checkpoint.pt"
    bad.write_bytes(b"not a checkpoint")
    result = run([sys.executable, "-m", "native_impl", "--resume", str(bad), "--out", str(tmp_path / "o")])
    assert result.returncode == 2 and "not a readable checkpoint" in result.stderr, result.stderr


def test_profile_writes_traces_and_timeline(tmp_path, horovod_built):
    both(tmp_path, "--profile")
    assert (tmp_path / "hvd" / "horovod-timeline.json").stat().st_size > 1000
    for side in ("hvd", "ddp"):
        for rank in (0, 1):
            trace = json.loads((tmp_path / side / f"trace-rank-{rank}.json").read_text())
            assert trace["traceEvents"]


MATRIX_HALF = 6  # compare matrix --steps 12 checkpoints its resume runs half way


@pytest.fixture(scope="module")
def matrix(tmp_path_factory, horovod_built):
    """compare matrix on the user's own model (the example plug-in), three rows and the baseline. Its resume
    row is also the cross-framework checkpoint test below: one launch set serves both."""
    out = tmp_path_factory.mktemp("matrix") / "matrix"
    result = run([sys.executable, "-m", "compare", "matrix", "--steps", "12", "--only", "ZeRO,resume,SyncBatchNorm",
                  "--workload", "examples/digits_cnn.py:make_workload", "--out", str(out)], timeout=1100)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return out, result


def test_matrix_command(matrix):
    out, result = matrix
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["base_options"]["workload"] == "examples/digits_cnn.py:make_workload"  # the user's own model
    verdicts = {row["feature"]: row["verdict"] for row in matrix["rows"]}
    assert verdicts["plain data parallel (baseline)"] == "parity holds"
    assert verdicts["ZeroRedundancyOptimizer"] == "parity holds"
    assert verdicts["checkpoint and resume, across frameworks"] == "parity holds"
    assert verdicts["SyncBatchNorm"] == "CUDA only"
    assert "| SyncBatchNorm |" in (out / "matrix.md").read_text()
    # Every row says its verdict under its header while the matrix runs.
    lines = result.stderr.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("[") and "] " in line:
            assert lines[index + 1].startswith("    "), f"no verdict under {line!r}"


@pytest.mark.parametrize("writer,reader", [("horovod", "ddp"), ("ddp", "horovod")])
def test_checkpoint_resumes_across_frameworks(matrix, writer, reader):
    """A checkpoint one framework wrote half way, resumed by the other: the uninterrupted curve of the reader
    (the matrix's baseline) from the next step on. SGD's momentum buffers are state that matters: a resume
    that dropped them would part from the curve at once."""
    out, _ = matrix
    resumed_dir = out / "checkpoint-and-resume--across-frameworks" / f"{writer}-to-{reader}"
    full, resumed = read_losses(out / "plain-data-parallel--baseline" / reader), read_losses(resumed_dir)
    assert read_meta(resumed_dir)["resumed_from_step"] == MATRIX_HALF
    assert len(resumed) == len(full) - MATRIX_HALF
    assert stepwise(full[MATRIX_HALF:], resumed, rtol=1e-5).passed, (full[MATRIX_HALF:], resumed)


@pytest.mark.timeout(1200)
def test_matrix_judges_uneven_inputs_past_the_join(tmp_path, horovod_built):
    out = tmp_path / "matrix"
    result = run([sys.executable, "-m", "compare", "matrix", "--steps", "12", "--only", "uneven", "--out", str(out)],
                 timeout=1100)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    matrix = json.loads((out / "matrix.json").read_text())
    verdicts = {row["feature"]: row["verdict"] for row in matrix["rows"]}
    # Judged past the join, in the second epoch (2048 training samples / 2 / 16 = 64 steps an epoch), on
    # every step and on the evaluations.
    uneven = read_steps(out / "uneven-inputs" / "ddp")
    assert len(uneven) > 64 and verdicts["uneven inputs"] == "parity holds"
    row = next(r for r in matrix["rows"] if r["feature"] == "uneven inputs")
    assert row["effect"]["eval_max_rel_diff"] is not None and row["effect"]["eval_max_rel_diff"] <= 1e-5


@pytest.mark.campaign
@pytest.mark.timeout(3600)
def test_the_full_matrix(tmp_path, horovod_built):
    """Every row of `compare matrix` at its defaults (about 15 minutes on 2 cores, so a campaign: `make
    test-campaign`). The rows the default suite covers one by one are the features above and the --only
    runs; this is the command as a user runs it."""
    out = tmp_path / "matrix"
    result = run([sys.executable, "-m", "compare", "matrix", "--out", str(out)], timeout=3500)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    verdicts = {row["feature"]: row["verdict"] for row in json.loads((out / "matrix.json").read_text())["rows"]}
    from compare.commands.matrix import FEATURES

    assert set(verdicts) == {feature.name for feature in FEATURES}
    for feature in FEATURES:
        if feature.kind == "cuda-only":
            assert verdicts[feature.name] == "CUDA only"
        elif feature.parity_expected and feature.kind not in ("tuning", "profile"):
            assert verdicts[feature.name] == "parity holds", (feature.name, verdicts[feature.name])
        else:
            assert not verdicts[feature.name].startswith("failed"), (feature.name, verdicts[feature.name])
