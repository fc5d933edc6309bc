"""python -m compare migrate on Horovod jobs that Spark starts: horovod.spark.run and Databricks' sparkdl.HorovodRunner
become pyspark's TorchDistributor (the rewrite, its report, its flags, how --verify launches each side), and (slow)
the written Spark examples verified through a real local Spark (local[2]), with a planted bug that must fail."""

from __future__ import annotations

import ast
import concurrent.futures
import re
import sys
from pathlib import Path

import pytest
from helpers import ROOT, launch_mode_of, run

from compare.__main__ import main as compare_main
from compare.migrate import migrate_source
from compare.migrate.migrate_tree import migrate_tree
from compare.migrate.read import notes
from compare.migrate.read.repository import Repository
from compare.migrate.report.migration_report import render
from compare.names import Exit, LaunchedBy
from compare.verify import spark_launch as spark_launch_module
from compare.verify.launch_mode import Undecided

PLATFORM = ROOT / "examples" / "platform_scripts"
SPARK_RUN_EXAMPLE = PLATFORM / "spark_horovod_run.py"
RUNNER_EXAMPLE = PLATFORM / "spark_horovod_runner.py"
NOTEBOOK_EXAMPLE = PLATFORM / "databricks_runner_notebook.py"  # HorovodRunner(np=-args.num_proc)
SPARK_ESTIMATOR = ROOT / "examples" / "horovod_scripts" / "spark_estimator_digits.py"

RUNNER = """\
from sparkdl import HorovodRunner
import horovod.torch as hvd


def main(lr=0.1):
    hvd.init()
    return hvd.rank()


hr = HorovodRunner(np={np})
hr.run(main, lr=0.2)
"""

SPARK_RUN = """\
import horovod.spark
import horovod.torch as hvd


def train(a, b=1):
    hvd.init()
    return hvd.rank()


{call}
"""


def _horovod_left(code: str) -> list[str]:
    """The Horovod and sparkdl names, imports and calls still in the code."""
    return [ast.unparse(node) for node in ast.walk(ast.parse(code))
            if (isinstance(node, ast.Name) and node.id in ("hvd", "horovod", "HorovodRunner", "sparkdl"))
            or (isinstance(node, (ast.Import, ast.ImportFrom)) and re.search("horovod|sparkdl", ast.unparse(node)))]


def _function(code: str, name: str) -> ast.FunctionDef:
    return next(node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.FunctionDef) and node.name == name)


# ---- the rewrite, no Spark started -------------------------------------------------------------------------------

def test_spark_run_becomes_torch_distributor_and_the_function_becomes_ddp():
    migration = migrate_source(SPARK_RUN_EXAMPLE.read_text())
    code = migration.code
    assert migration.flags == []
    assert _horovod_left(code) == []
    assert "from pyspark.ml.torch.distributor import TorchDistributor\n" in code
    assert ("    results = TorchDistributor(num_processes=args.num_proc, local_mode=False, use_gpu=False).run(\n"
            "        train, args.lr, args.epochs, args.batch_size, args.seed)\n    weights = results\n") in code
    # inside the training function, as for a horovodrun script: the group first, the sampler's defaults, the wrap
    train = _function(code, "train")
    assert ast.unparse(train.body[0]) == "if not dist.is_initialized():\n    dist.init_process_group()"
    assert "sampler = torch.utils.data.distributed.DistributedSampler(dataset, seed=seed)" in code
    assert "optimizer = torch.optim.SGD(model.parameters(), lr=lr * dist.get_world_size(), momentum=0.9)" in code
    assert "    ddp_model = DDP(model)\n    step = 0\n" in code
    assert [ast.unparse(s) for s in train.body[-3:]] == [
        "dist.barrier()", "dist.destroy_process_group()",
        "return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}"]
    compile(code, "spark_horovod_run_ddp.py", "exec")
    by_note = {change.note: change for change in migration.changes}
    assert by_note[notes.SPARK_RUN].line == 64 and by_note[notes.SPARK_RUN_RESULT].before == "results[0]"
    assert by_note[notes.SPARK_IMPORT].before == "import horovod.spark"
    assert notes.SPARK_DROPPED in by_note and notes.SPARK_GPU_OFF in by_note  # use_gloo=True, no CUDA
    report = render(migrate_tree(Repository.read(SPARK_RUN_EXAMPLE)), "spark_horovod_run.py",
                    "spark_horovod_run_ddp.py")
    assert "TorchDistributor.run returns rank 0's alone: the [0] goes" in report
    assert "+ DistributedDataParallel, for pyspark's TorchDistributor. 17 change(s); 0 place(s)" in report


def test_horovod_runner_is_migrated_not_left_around_a_ddp_function(tmp_path, capsys):
    """Once the runner stayed (exit 0) around a function rewritten for torchrun, which cannot work."""
    out = tmp_path / "runner_ddp.py"
    assert compare_main(["migrate", str(RUNNER_EXAMPLE), "-o", str(out)]) == Exit.OK
    code = out.read_text()
    assert _horovod_left(code) == []
    assert "    hr = TorchDistributor(num_processes=2, local_mode=True, use_gpu=False)\n" in code
    assert "    weights = hr.run(train_hvd, learning_rate=0.02, epochs=2)\n" in code  # called as HorovodRunner's
    train = _function(code, "train_hvd")
    assert ast.unparse(train.body[0]) == "import torch.distributed as dist"  # imported where hvd was
    assert "if not dist.is_initialized():\n    dist.init_process_group()" in [ast.unparse(s) for s in train.body]
    assert "train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset, seed=seed)" in code
    report = out.with_suffix(".migration.md").read_text()
    assert "driver_log_verbosity dropped" in report and "local_mode=N < 0" in report
    assert "the driver gets the value of whichever finished last" in report  # local_mode's return value
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("np", "expected"), [
    ("-3", "TorchDistributor(num_processes=3, local_mode=True, use_gpu=False)"),
    ("4", "TorchDistributor(num_processes=4, local_mode=False, use_gpu=False)"),
    ("args.np", "TorchDistributor(num_processes=abs(args.np), local_mode=args.np < 0, use_gpu=False)"),
])
def test_horovod_runner_np_sign_is_where_the_processes_run(np, expected):
    migration = migrate_source(RUNNER.format(np=np))
    assert migration.flags == []
    assert f"hr = {expected}\nhr.run(main, lr=0.2)\n" in migration.code
    assert (notes.HOROVOD_RUNNER_EXPRESSION in {c.note for c in migration.changes}) == (np == "args.np")


def test_a_notebook_whose_np_is_an_expression_reads_it_once(tmp_path, capsys):
    """HorovodRunner(np=-args.num_proc) was flagged ("cannot be read twice"); np is now bound once, before the
    statement, and both arguments read that name."""
    out = tmp_path / "notebook_ddp.py"
    assert compare_main(["migrate", str(NOTEBOOK_EXAMPLE), "-o", str(out)]) == Exit.OK
    code = out.read_text()
    assert _horovod_left(code) == []
    assert ('spark.sparkContext.setLogLevel("ERROR")\nrunner_np = -args.num_proc\n'
            "hr = TorchDistributor(num_processes=abs(runner_np), local_mode=runner_np < 0, use_gpu=False)\n"
            "trained = hr.run(fit_classifier, epochs=args.epochs)\n") in code
    assert "# Databricks notebook source\n" in code and code.count("# COMMAND ----------") == 5  # cells kept
    report = out.with_suffix(".migration.md").read_text()
    assert "runner_np = -args.num_proc; num_processes=abs(runner_np), local_mode=runner_np < 0" in report
    assert "it is read once, into runner_np (a new name)" in report
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("statement", "expected"), [
    # the name shadows nothing of the script's
    ("runner_np = 1\nhr = HorovodRunner(np=-n * 2)",
     "runner_np = 1\nrunner_np_2 = -n * 2\nhr = TorchDistributor(num_processes=abs(runner_np_2), "
     "local_mode=runner_np_2 < 0, use_gpu=False)\n"),
    # inside a function, its comments above the binding, the call read where it was
    ("def go(cfg):\n    # on the driver\n    return HorovodRunner(np=cfg['np'] - 4).run(main)",
     "def go(cfg):\n    # on the driver\n    runner_np = cfg['np'] - 4\n    return TorchDistributor("
     "num_processes=abs(runner_np), local_mode=runner_np < 0, use_gpu=False).run(main)\n"),
    ("hr = HorovodRunner(np=(\n    -workers()))", "runner_np = (\n    -workers())\nhr = TorchDistributor("),
])
def test_horovod_runner_np_expression_is_bound_once(statement, expected):
    migration = migrate_source(RUNNER.replace("hr = HorovodRunner(np={np})\nhr.run(main, lr=0.2)\n", statement + "\n"))
    assert migration.flags == [] and _horovod_left(migration.code) == []
    assert expected in migration.code, migration.code
    compile(migration.code, "x.py", "exec")


@pytest.mark.parametrize("statement", [
    "hr = HorovodRunner(np=-n) if use else None",               # np read only if use
    "runs = [HorovodRunner(np=-k).run(main) for k in (1, 2)]",  # np read in the comprehension's scope, each time
    "n = 2; hr = HorovodRunner(np=-n)",                         # np read after the statement before it
    "if HorovodRunner(np=-n).run(main):\n    pass",            # a compound statement's header
    # the second np would be read before the first runner ran: the first is bound, the second flagged
    "both = (HorovodRunner(np=-n).run(main), HorovodRunner(np=m + 1).run(main))",
])
def test_an_np_expression_that_cannot_be_bound_before_its_statement_stays_flagged(statement):
    migration = migrate_source(RUNNER.replace("hr = HorovodRunner(np={np})\nhr.run(main, lr=0.2)\n", statement + "\n"))
    assert [(f.category, f.why) for f in migration.flags] == [("Spark", notes.RUNNER_SHAPE)]
    assert "HorovodRunner(np=" in migration.code and "from sparkdl import HorovodRunner" in migration.code
    assert migration.code.count("runner_np") == (3 if statement.startswith("both") else 0)
    compile(migration.code, "x.py", "exec")


def test_horovod_runner_np_0_is_flagged_and_kept(tmp_path, capsys):
    script = tmp_path / "runner.py"
    script.write_text(RUNNER.format(np="0"))
    assert compare_main(["migrate", str(script)]) == Exit.NEEDS_A_PERSON
    migration = migrate_source(script.read_text())
    assert [(f.line, f.category, f.why) for f in migration.flags] == [(10, "Spark", notes.RUNNER_NP_ZERO)]
    assert "from sparkdl import HorovodRunner\n" in migration.code and "hr = HorovodRunner(np=0)\n" in migration.code
    assert "HorovodRunner(np=0) took every task slot" in capsys.readouterr().err


@pytest.mark.parametrize(("call", "expected"), [
    # a [0] on the result goes; kwargs= written out; no num_proc: the task slots, as horovod.spark.run took them
    ('print(horovod.spark.run(train, args=(1,), kwargs={"b": 2})[0])',
     "print(TorchDistributor(num_processes=SparkSession.active().sparkContext.defaultParallelism, local_mode=False, "
     "use_gpu=False).run(\n    train, 1, b=2))"),
    ("out = horovod.spark.run(train, extra, opts, 2, use_mpi=False)\nrank0 = out[0]",
     "out = TorchDistributor(num_processes=2, local_mode=False, use_gpu=False).run(train, *extra, **opts)\n"
     "rank0 = out\n"),
    ("horovod.spark.run(train, args=(1,), kwargs=None, num_proc=None)",
     "TorchDistributor(num_processes=SparkSession.active().sparkContext.defaultParallelism, local_mode=False, "
     "use_gpu=False).run(\n    train, 1)\n"),
])
def test_spark_run_calls(call, expected):
    migration = migrate_source(SPARK_RUN.format(call=call))
    assert migration.flags == []
    assert expected in migration.code, migration.code
    assert _horovod_left(migration.code) == []
    assert ("from pyspark.sql import SparkSession" in migration.code) == ("SparkSession" in expected)
    compile(migration.code, "x.py", "exec")


def test_a_training_function_on_cuda_asks_for_gpus():
    source = SPARK_RUN.format(call="horovod.spark.run(train, num_proc=2)").replace(
        "    hvd.init()\n", "    hvd.init()\n    torch.cuda.set_device(hvd.local_rank())\n")
    migration = migrate_source(source)
    assert "TorchDistributor(num_processes=2, local_mode=False, use_gpu=True).run(train)" in migration.code
    assert notes.SPARK_GPU_ON in {c.note for c in migration.changes}


@pytest.mark.parametrize(("call", "category", "why"), [
    ("horovod.spark.run(train, num_proc=2, start_timeout=60)", "Spark", "horovod.spark.run(start_timeout=...)"),
    ("horovod.spark.run(train, num_proc=2, env={'A': '1'})", "Spark", "in os.environ at the top of the training"),
    ("horovod.spark.run_elastic(train, num_proc=2)", "elastic", notes.SPARK_ELASTIC),
    ("runner = horovod.spark.run", "Spark", notes.SPARK_RUN_SHAPE),
    ("r = horovod.spark.run(train, num_proc=2)\nprint(len(r))", "Spark", notes.SPARK_RESULT_LIST),
    ("r = horovod.spark.run(train, num_proc=2)\nprint(r[1])", "Spark", notes.SPARK_RESULT_LIST),
])
def test_what_has_no_counterpart_is_flagged(call, category, why):
    migration = migrate_source(SPARK_RUN.format(call=call))
    assert [f.category for f in migration.flags] == [category]
    assert why in migration.flags[0].why
    assert migration.flags[0].line == 10 + call.count("\n")
    compile(migration.code, "x.py", "exec")
    if "r = " not in call:  # the use stays, so does its import
        assert "import horovod.spark\n" in migration.code


def test_a_spark_estimator_job_is_flagged_with_what_to_do(tmp_path, capsys):
    out = tmp_path / "estimator_ddp.py"
    assert compare_main(["migrate", str(SPARK_ESTIMATOR), "-o", str(out)]) == Exit.NEEDS_A_PERSON
    source = SPARK_ESTIMATOR.read_text().splitlines()
    migration = migrate_source(SPARK_ESTIMATOR.read_text())
    assert {f.category for f in migration.flags} == {"Spark estimator"}
    assert [source[f.line - 1].split("(")[0].strip() for f in migration.flags] == [
        "intermediate = Store.create", "runner = SparkBackend", "estimator = TorchEstimator"]
    assert all(f.why == notes.SPARK_ESTIMATOR for f in migration.flags)
    # nothing else in it is Horovod's: the result is the script, and it parses
    assert out.read_text() == SPARK_ESTIMATOR.read_text()
    ast.parse(out.read_text())
    report = out.with_suffix(".migration.md").read_text()
    assert all(f"line {f.line}" in report for f in migration.flags)
    assert "TorchDistributor(num_processes=N, local_mode=False" in report
    assert capsys.readouterr().err.count("needs a person") == 3


def test_verify_launches_spark_scripts_as_python(monkeypatch):
    # as here: pyspark installed, sparkdl not (it installs only on Databricks)
    monkeypatch.setattr(spark_launch_module.importlib.util, "find_spec",
                        lambda name, *a: object() if name == "pyspark" else None)
    spark = launch_mode_of(SPARK_RUN_EXAMPLE.read_text(), [])
    assert (spark.mode, spark.sides, spark.original_prefix) == (
        "api", ("python (horovod.spark.run)", "python (TorchDistributor)"), ())
    runner = launch_mode_of(RUNNER_EXAMPLE.read_text(), [])
    assert runner.sides[0] == "horovodrun (the training function HorovodRunner runs)"
    assert runner.original_prefix == (str(spark_launch_module.STANDIN_RUNNER),)
    assert "sparkdl (Databricks' HorovodRunner) is not installed here" in runner.why
    assert "runs under horovodrun -np 2 --gloo" in runner.why  # HorovodRunner(np=-2)
    monkeypatch.setattr(spark_launch_module.importlib.util, "find_spec", lambda name, *a: object())  # on Databricks
    databricks = launch_mode_of(RUNNER_EXAMPLE.read_text(), [])
    assert (databricks.sides[0], databricks.original_prefix) == ("python (sparkdl.HorovodRunner)", ())
    with pytest.raises(Undecided, match="not under horovodrun"):
        launch_mode_of(SPARK_RUN_EXAMPLE.read_text(), [], "cli")
    monkeypatch.setattr(spark_launch_module.importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(Undecided, match="pyspark is not installed here"):
        launch_mode_of(SPARK_RUN_EXAMPLE.read_text(), [])


def test_verify_without_pyspark_is_one_line_and_nothing_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(spark_launch_module.importlib.util, "find_spec", lambda name, *a: None)
    script = tmp_path / "job.py"
    script.write_text(SPARK_RUN_EXAMPLE.read_text())
    assert compare_main(["migrate", str(script), "--verify"]) == 2
    err = capsys.readouterr().err
    assert "pyspark is not installed here" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.py"]


# ---- through a real local Spark ----------------------------------------------------------------------------------

SCALED = "lr=lr * dist.get_world_size()"


def _verify(script: Path, out: Path) -> tuple[int, str]:
    result = run([sys.executable, "-m", "compare", "migrate", str(script), "-o", str(out / f"{script.stem}_ddp.py"),
                  "--verify", "--verify-out", str(out / script.stem), "--timeout", "300"], timeout=600)
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def spark_runs(tmp_path_factory, horovod_built):
    """Through a real local Spark, two at a time (much of a launch is the JVM's start): the horovod.spark.run example
    verified, the HorovodRunner notebook verified (HorovodRunner(np=-args.num_proc): the runner's launch, and an np
    that is an expression), and the first's migration with a planted bug (the learning rate no longer scaled by the
    world size) run through TorchDistributor as --verify runs a side. The plainer HorovodRunner example
    (np=-2) takes the same route; its sample in docs/migration.md is checked on its stored records."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")
    from compare.launch.lines import Program
    from compare.launch.scheduling import LocalScheduler
    from compare.verify.verify import run_launched, side_launch

    out = tmp_path_factory.mktemp("spark")
    migrated = migrate_source(SPARK_RUN_EXAMPLE.read_text()).code
    assert SCALED in migrated
    planted = out / "unscaled.py"
    planted.write_text(migrated.replace(SCALED, "lr=lr"))
    unscaled = side_launch("ddp", Program((str(planted),), ()), out / "unscaled", PLATFORM, LocalScheduler(), np=2,
                           mode=LaunchedBy.API, controller="gloo", device="cpu")  # as --verify runs the migrated side
    jobs = {"spark_run": lambda: _verify(SPARK_RUN_EXAMPLE, out),
            "notebook": lambda: _verify(NOTEBOOK_EXAMPLE, out),
            "unscaled": lambda: run_launched(unscaled, LocalScheduler(), 300)}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return out, {name: future.result() for name, future in futures.items()}


@pytest.mark.slow
def test_spark_example_holds_through_a_real_spark(spark_runs):
    out, results = spark_runs
    code, output = results["spark_run"]
    assert code == Exit.OK, output
    lines = output.splitlines()
    assert lines[1] == ("verify: spark_horovod_run.py under python (horovod.spark.run) and spark_horovod_run_ddp.py "
                        "under python (TorchDistributor), np 2"), output
    assert "the script starts its job through horovod.spark.run" in lines[2]
    assert re.search(r"^  horovod: 40 steps and 0 evaluations read from rank 0's lines", output, re.MULTILINE), output
    assert re.search(r"^  ddp: 40 steps and 0 evaluations read from rank 0's lines", output, re.MULTILINE), output
    verdict = re.search(r"^parity holds: .*?max relative difference ([^\s)]+)\)", output, re.MULTILINE)
    assert verdict and float(verdict.group(1)) <= 1e-5, output
    assert re.search(r"^  ddp: step times from the optimizer step hooks: 40 optimizer steps on each of 2 ranks",
                     output, re.MULTILINE), output  # the rank tag times the steps of TorchDistributor's processes
    # the rank tag reached every Spark-started process: each side's ranks said world size 2
    for side in ("horovod", "ddp"):
        log = (out / "spark_horovod_run" / side / "launch.log").read_text()
        assert "[verify rank=0 size=2]:epoch 0 step 1 loss" in log and "[verify rank=1 size=2]:" in log, log[-2000:]
    # Horovod's own prefix before the tag (horovod.spark.run under Gloo: "[0]<stdout>:")
    original = (out / "spark_horovod_run" / "horovod" / "launch.log").read_text()
    assert re.search(r"^\[0\]<stdout>:\[verify rank=0 size=2\]:epoch 1 step 40 loss", original, re.MULTILINE)


@pytest.mark.slow
def test_learning_rate_left_unscaled_fails_through_a_real_spark(spark_runs):
    from compare.verify.verify import record_from_output

    out, results = spark_runs
    assert results["spark_run"][0] == Exit.OK, results["spark_run"][1]
    status, log = results["unscaled"]
    assert status == 0, log[-3000:]
    record_from_output(log, out / "unscaled", framework="ddp")
    check = run([sys.executable, "-m", "compare", "check", str(out / "spark_horovod_run" / "horovod"),
                 str(out / "unscaled")])
    assert check.returncode == Exit.PARITY_FAILS, check.stdout + check.stderr
    assert "parity fails: diverges at step 2" in check.stdout, check.stdout  # step 1's update is the first to differ


@pytest.mark.slow
def test_a_notebook_with_an_np_expression_verifies_through_a_real_spark(spark_runs):
    out, results = spark_runs
    code, output = results["notebook"]
    assert code == Exit.OK, output
    lines = output.splitlines()
    assert lines[1].startswith("verify: databricks_runner_notebook.py under horovodrun (the training function "
                               "HorovodRunner runs) and databricks_runner_notebook_ddp.py under python "
                               "(TorchDistributor), np 2"), output
    assert "sparkdl (Databricks' HorovodRunner) is not installed here" in lines[2], output
    assert "runner_np = -args.num_proc\n" in (out / "databricks_runner_notebook_ddp.py").read_text()
    for side in ("horovod", "ddp"):
        assert re.search(rf"^  {side}: 32 steps and 0 evaluations read from rank 0's lines", output,
                         re.MULTILINE), output
    verdict = re.search(r"^parity holds: .*?max relative difference ([^\s)]+)\)", output, re.MULTILINE)
    assert verdict and float(verdict.group(1)) <= 1e-5, output
    original, migrated = ((out / "databricks_runner_notebook" / side / "launch.log").read_text()
                          for side in ("horovod", "ddp"))
    assert "sparkdl stand-in: HorovodRunner(np=-2) would run fit_classifier on the driver" in original
    assert re.search(r"^\[0\]<stdout>:\[verify rank=0 size=2\]:", original, re.MULTILINE), original[-2000:]
    # -args.num_proc read once on each side: two processes on the driver, and the same weights back on it
    norms = [float(re.search(r"^driver: 4 trained tensors, 513 numbers, norm ([\d.]+)$", log, re.MULTILINE).group(1))
             for log in (original, migrated)]
    assert norms[0] == pytest.approx(norms[1], rel=1e-5), norms
