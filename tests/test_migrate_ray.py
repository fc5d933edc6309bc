"""python -m compare migrate on Horovod jobs that Ray starts: horovod.ray's RayExecutor and Ray Train's
HorovodTrainer become Ray Train's TorchTrainer (the rewrite, its report, its flags), and (slow) the written Ray
example verified through a real local Ray, with a planted bug that must fail."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest
from helpers import ROOT, launch_mode_of, run

from compare.__main__ import main as compare_main
from compare.loss_lines import read_loss_log
from compare.migrate import migrate_source
from compare.migrate.migrate_tree import migrate_tree
from compare.migrate.read.repository import Repository
from compare.migrate.report.migration_report import render
from compare.names import Exit, LaunchedBy

RAY_EXAMPLE = ROOT / "examples" / "platform_scripts" / "ray_train_horovod.py"
RAY_TRAINER_EXAMPLE = ROOT / "examples" / "platform_scripts" / "ray_train_horovod_trainer.py"
RAY_ELASTIC = ROOT / "examples" / "horovod_scripts" / "ray_elastic_digits.py"

HOROVOD_TRAINER = """\
import horovod.torch as hvd
import ray.train
import torch
from ray.train import ScalingConfig
from ray.train.horovod import HorovodConfig, HorovodTrainer


def train_func(config):
    hvd.init()
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"] * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(3):
        optimizer.zero_grad()
        loss = model(torch.ones(2, 4)).sum()
        loss.backward()
        optimizer.step()
        ray.train.report({"loss": loss.item(), "rank": hvd.rank()})
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "model.pt")


trainer = HorovodTrainer(train_func, train_loop_config={"lr": 0.1},
                         scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
                         horovod_config=HorovodConfig(timeout_s=60, verbose=2))
result = trainer.fit()
"""

EXECUTOR = """\
import horovod.torch as hvd
from horovod.ray import RayExecutor


def train(lr):
    hvd.init()
    return hvd.rank()


def main(args):
    settings = RayExecutor.create_settings(timeout_s=30)
    executor = RayExecutor(settings, num_workers=4, cpus_per_worker=2, use_gpu=args.gpu, gpus_per_worker=1{extra})
    executor.start()
    executor.run(train, kwargs={{"lr": 0.1}})
    executor.shutdown()
"""


def _left_horovod(code: str) -> list[str]:
    return [ast.unparse(node) for node in ast.walk(ast.parse(code))
            if (isinstance(node, ast.Name) and node.id in ("hvd", "RayExecutor", "HorovodTrainer", "HorovodConfig"))
            or (isinstance(node, (ast.Import, ast.ImportFrom)) and "horovod" in ast.unparse(node))]


def test_ray_executor_becomes_one_torch_trainer_fit():
    migration = migrate_source(RAY_EXAMPLE.read_text())
    code = migration.code
    assert migration.flags == []
    assert _left_horovod(code) == []
    assert (
        '    results = TorchTrainer(train_loop_calling(train_fn),\n'
        '                           train_loop_config={"args": [args.lr, args.steps, args.seed], "kwargs": {}},\n'
        '                           scaling_config=ScalingConfig(num_workers=args.num_workers,\n'
        '                                                        use_gpu=False,\n'
        '                                                        resources_per_worker={"CPU": 1}),\n'
        '                           torch_config=TorchConfig(backend="gloo")).fit()\n'
        '    print("rank 0 returned:", results.metrics["return"])\n') in code
    # the executor's life cycle is gone with it; Ray's own start stays
    assert "create_settings" not in code and "executor" not in code and "ray.init(num_cpus=" in code
    # the training function: Ray makes the process group, its context gives rank and size, prepare_model wraps
    assert "init_process_group" not in code and "destroy_process_group" not in code and "import torch.distributed" \
        not in code
    for text in ["lr=lr * ray.train.get_context().get_world_size(), momentum=0.9)\n"
                 "    ddp_model = ray.train.torch.prepare_model(model)\n",
                 "DistributedSampler(dataset, seed=seed)",
                 "if ray.train.get_context().get_world_rank() == 0:",
                 'value = fn(*config["args"], **config["kwargs"])',
                 'ray.train.report({"return": value}, checkpoint=ray.train.Checkpoint.from_directory(empty) if rank_0',
                 "import tempfile\n",
                 "from ray.train.torch import TorchConfig, TorchTrainer", "from ray.train import ScalingConfig"]:
        assert text in code, text
    assert "DDP" not in code
    # every change is in the report, with its line
    report = render(migrate_tree(Repository.read(RAY_EXAMPLE)), "ray_train_horovod.py", "ray_train_horovod_ddp.py")
    for before in ["hvd.init()", "executor.run(train_fn", "executor.start()", "executor.shutdown()",
                   "settings = RayExecutor.create_settings", "from horovod.ray import RayExecutor", "results[0]"]:
        assert any(before in line for line in report.splitlines() if line.startswith("| ")), before
    assert "fit() returns one ray.train.Result" in report and "Nothing: every Horovod use was migrated." in report
    assert "DistributedDataParallel, for Ray Train's TorchTrainer." in report and "through Ray Train's " \
        "TorchTrainer (np 2, CPU)" in report


def test_executor_options_map_to_the_scaling_config():
    migration = migrate_source(EXECUTOR.format(extra=""))
    assert migration.flags == []
    call = ast.parse(migration.code).body[-1].body[0].value  # type: ignore[attr-defined]
    assert ast.unparse(call) == (
        "TorchTrainer(train_loop_calling(train), train_loop_config={'args': (), 'kwargs': {'lr': 0.1}}, "
        "scaling_config=ScalingConfig(num_workers=4, use_gpu=args.gpu, resources_per_worker={'CPU': 2, 'GPU': 1}), "
        "torch_config=TorchConfig(backend='nccl' if args.gpu else 'gloo')).fit()")
    assert "    return ray.train.get_context().get_world_rank()\n" in migration.code


@pytest.mark.parametrize(("extra", "category", "words"), [
    (", min_workers=2, max_workers=4", "elastic", "FailureConfig(max_failures=N)"),
    (", num_hosts=2", "multi-host", "per-host layout"),
])
def test_executor_without_a_counterpart_stays_flagged(extra, category, words):
    migration = migrate_source(EXECUTOR.format(extra=extra))
    assert [f.category for f in migration.flags] == [category]
    assert words in migration.flags[0].why and migration.flags[0].line == 12
    # left as it was, with its import, so that it still runs as before
    assert "executor = RayExecutor(settings" in migration.code and "from horovod.ray import RayExecutor" in \
        migration.code and "TorchTrainer" not in migration.code


def test_an_executor_method_without_a_counterpart_keeps_the_executor():
    source = EXECUTOR.format(extra="").replace("    executor.shutdown()\n",
                                               "    executor.execute(lambda worker: 1)\n    executor.shutdown()\n")
    migration = migrate_source(source)
    assert [(f.category, f.line) for f in migration.flags] == [("Ray", 15)]
    assert "executor.start()" in migration.code and "TorchTrainer" not in migration.code


def test_the_executor_by_its_module_and_positional_arguments():
    source = EXECUTOR.format(extra="").replace("from horovod.ray import RayExecutor", "import horovod.ray").replace(
        "RayExecutor", "horovod.ray.RayExecutor").replace(
        "(settings, num_workers=4, cpus_per_worker=2, use_gpu=args.gpu, gpus_per_worker=1)", "(settings, 3)")
    migration = migrate_source(source)
    assert migration.flags == [] and _left_horovod(migration.code) == [] and "horovod" not in migration.code
    assert "scaling_config=ScalingConfig(num_workers=3),\n" in migration.code
    assert 'torch_config=TorchConfig(backend="gloo")).fit()' in migration.code
    mode = launch_mode_of(source, [])
    assert mode.mode == "api" and mode.sides[0] == "python (Horovod's RayExecutor on a local Ray)"  # type: ignore[index]


def test_ray_train_horovod_trainer_becomes_torch_trainer():
    migration = migrate_source(HOROVOD_TRAINER)
    code = migration.code
    assert migration.flags == [] and _left_horovod(code) == []
    assert ('trainer = TorchTrainer(train_func, train_loop_config={"lr": 0.1},\n'
            '                       scaling_config=ScalingConfig(num_workers=2, use_gpu=False),\n'
            '                       torch_config=TorchConfig())\n'
            'result = trainer.fit()\n') in code
    assert "from ray.train.torch import TorchConfig, TorchTrainer" in code
    assert 'torch.save(model.state_dict(), "model.pt")' in code  # the model itself: its own keys, wrapped or not
    assert "ddp_model = ray.train.torch.prepare_model(model)\n    for step in range(3):" in code
    assert "loss = ddp_model(torch.ones(2, 4)).sum()" in code
    dropped = next(c for c in migration.changes if c.before.startswith("horovod_config="))
    assert dropped.after == "torch_config=TorchConfig()" and dropped.note.endswith("Dropped here: timeout_s=60, "
                                                                                   "verbose=2.")
    # Ray Train makes the process group: the import is gone, and its row says so in Ray's words
    assert "import torch.distributed" not in code
    gone = next(c for c in migration.changes if c.before == "import horovod.torch as hvd")
    assert gone.after == "" and gone.note.startswith("horovod.torch is gone: Ray Train makes the process group")


def test_an_elastic_ray_job_is_flagged_and_the_rest_rewritten(tmp_path, capsys):
    out = tmp_path / "ray_elastic_digits_ddp.py"
    assert compare_main(["migrate", str(RAY_ELASTIC), "-o", str(out)]) == Exit.NEEDS_A_PERSON
    code = out.read_text()
    ast.parse(code)
    source = RAY_ELASTIC.read_text().splitlines()
    migration = migrate_source(RAY_ELASTIC.read_text())
    flagged = {(f.category, source[f.line - 1].strip()) for f in migration.flags}
    assert flagged == {
        ("elastic", "@hvd.elastic.run"), ("elastic", "state.commit()"),
        ("elastic", "state = hvd.elastic.TorchState(net, optimizer, epoch=0, batch=0)"),
        ("elastic", "executor = ElasticRayExecutor(settings, use_gpu=False, cpus_per_slot=1)"),
        ("Adasum", "op=hvd.Adasum if opts.adasum else hvd.Average)"),
        ("Ray", "tag = f\"worker {os.environ.get('HOROVOD_RANK', '?')}\"  # Ray interleaves every worker's lines"),
    }
    elastic = [f for f in migration.flags if f.category == "elastic"]
    assert all("ray.train.FailureConfig(max_failures=N)" in f.why and "RunConfig" in f.why for f in elastic)
    report = out.with_suffix(".migration.md").read_text()
    for flag in migration.flags:
        assert f"- line {flag.line}, **{flag.category}**:" in report
    assert "needs a person" in capsys.readouterr().err
    # the rest is Ray Train's: no Horovod init, the context's rank and size, prepare_model where Horovod's
    # optimizer was, the sampler's defaults, the metric average through a helper
    assert "hvd.init()" not in code and "hvd.rank()" not in code and "hvd.size()" not in code
    assert "return opts.lr if opts.adasum else opts.lr * ray.train.get_context().get_world_size()" in code
    assert "    if ray.train.get_context().get_world_rank() == 0:\n        print(f\"held out:" in code
    assert "            sampler = DistributedSampler(train_set)\n" in code
    # trained through the elastic state (`state.model(pixels)`), which no wrapper can reach: Horovod's averaging
    # at step() stays (the elastic part needs a person anyway), and so does its float16 compression under --fp16
    assert "    compression = default_hooks.fp16_compress_hook if opts.fp16 else None\n" \
           "    optimizer = average_gradients_at_step(optimizer, compression=compression)\n" in code
    assert "    return all_reduce_mean(torch.tensor(value)).item()" in code
    # what stays needs its imports to resolve
    assert "import horovod.torch as hvd" in code and "from horovod.ray import ElasticRayExecutor" in code


def test_a_ray_script_runs_as_plain_python_on_both_sides():
    mode = launch_mode_of(RAY_EXAMPLE.read_text(), [])
    assert mode.mode == "api" and mode.option == "--num-workers"
    assert mode.sides == ("python (Horovod's RayExecutor on a local Ray)",
                          "python (Ray Train's TorchTrainer on a local Ray)")
    assert launch_mode_of(HOROVOD_TRAINER, []).sides[0].startswith("python (Ray Train's HorovodTrainer")  # type: ignore[index]


def test_verify_without_ray_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    import compare.verify.launch_mode as launch_mode

    found = launch_mode.importlib.util.find_spec
    monkeypatch.setattr(launch_mode.importlib.util, "find_spec", lambda name: None if name == "ray" else found(name))
    script = tmp_path / "job.py"
    script.write_text(RAY_EXAMPLE.read_text())
    assert compare_main(["migrate", str(script), "--verify"]) == 2
    err = capsys.readouterr().err
    assert "needs Ray Train here: pip install 'ray[train]'" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.py"]


def test_ray_worker_lines_are_read_as_their_ranks():
    """Ray's driver prints each worker's lines behind `(RayTrainWorker pid=N)` in colour, sometimes twice."""
    lines = [f"\x1b[36m(RayTrainWorker pid=41{rank})\x1b[0m [verify rank={rank} size=2]:step {step} loss {loss}"
             for step, loss in ((1, 2.5), (2, 2.25)) for rank in (0, 1)]
    lines += ["\x1b[36m(RayTrainWorker pid=410)\x1b[0m [verify rank=0 size=2]:step 1 loss 2.5",  # printed again
              "\x1b[36m(RayTrainWorker pid=410)\x1b[0m [verify rank=0 size=2]:step 3 loss 2.0",
              "2026-12-04 03:00:00,000\tINFO worker.py:1 -- Started a local Ray instance.",
              "rank 0 returned: {'rank': 0, 'steps': 3, 'last_loss': 2.0}"]
    log = read_loss_log("\n".join(lines))
    assert {step: entry["loss"] for step, entry in log.steps.items()} == {1: 2.5, 2: 2.25, 3: 2.0}
    assert log.world_size == 2 and log.repeated == []


def test_a_ray_worker_writes_its_step_times_as_it_goes(tmp_path, monkeypatch):
    """Ray kills its workers (ray.kill) without their exit handlers: the rank tag writes after every step there."""
    import importlib
    import json
    import time
    import types

    import torch

    from compare.verify.verify import rank_tag_module

    tag = rank_tag_module()
    timer = tag.StepTimer()
    handles = timer.install(importlib.import_module("torch.optim.optimizer"))
    timer.on_step = tag.WriteUnderRay(timer, str(tmp_path))
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))
    try:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
        for _ in range(3):
            optimizer.step()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            written = [json.loads(path.read_text()) for path in tmp_path.glob("rank-*.json")]
            if written and len(written[0]["ends"]) == 3:
                break
            time.sleep(0.01)
    finally:
        for handle in handles:
            handle.remove()
    assert len(written) == 1 and len(written[0]["ends"]) == 3, written  # no exit handler ran
    # without Ray nothing is written before the exit handler
    quiet = tag.StepTimer()
    quiet.on_step = tag.WriteUnderRay(quiet, str(tmp_path / "quiet"))
    monkeypatch.delitem(sys.modules, "ray")
    quiet.on_step()
    assert quiet.on_step.under_ray is False and not (tmp_path / "quiet").exists()


# ---- through a real local Ray ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_verified(tmp_path_factory):
    """The Ray example migrated and verified: Horovod's RayExecutor against Ray Train's TorchTrainer."""
    pytest.importorskip("ray.train.torch", reason="Ray Train is not installed (pip install '.[ray]')")
    pytest.importorskip("horovod.ray", reason="Horovod's Ray executor is not installed")
    out = tmp_path_factory.mktemp("migrate_ray")
    result = run([sys.executable, "-m", "compare", "migrate", str(RAY_EXAMPLE), "-o", str(out / "ray_ddp.py"),
                  "--verify", "--verify-out", str(out / "verify"), "--timeout", "240"], timeout=600)
    return out, result


@pytest.mark.slow
def test_the_ray_example_trains_the_same_under_torch_trainer(ray_verified):
    _, result = ray_verified
    assert result.returncode == Exit.OK, result.stdout + result.stderr
    first = result.stdout.splitlines()[1:3]
    assert first[0] == ("verify: ray_train_horovod.py under python (Horovod's RayExecutor on a local Ray) and "
                        "ray_ddp.py under python (Ray Train's TorchTrainer on a local Ray), np 2"), first
    verdict = re.search(r"^parity holds: .*?max relative difference ([^\s)]+)\)", result.stdout, re.MULTILINE)
    assert verdict, result.stdout
    assert float(verdict.group(1)) <= 1e-5  # the same shards, order and weights: only summation order differs
    for side in ("horovod", "ddp"):
        assert re.search(rf"^  {side}: 40 steps and 0 evaluations read from rank 0's lines", result.stdout,
                         re.MULTILINE), result.stdout


@pytest.mark.slow
def test_a_planted_bug_in_the_ray_migration_fails_the_check(ray_verified):
    """The migrated Ray script with its learning rate no longer scaled by the world size: parity must fail."""
    from compare.launch.lines import Program
    from compare.launch.scheduling import LocalScheduler
    from compare.verify.step_times import THROUGHPUT
    from compare.verify.verify import read_side, run_launched, side_launch

    out, result = ray_verified
    assert result.returncode == Exit.OK, result.stdout + result.stderr
    code = (out / "ray_ddp.py").read_text()
    scaled = "lr=lr * ray.train.get_context().get_world_size()"
    assert scaled in code
    planted = out / "ray_planted.py"
    planted.write_text(code.replace(scaled, "lr=lr"))
    run_dir = out / "planted"
    launch = side_launch("ddp", Program((str(planted),), ()), run_dir, RAY_EXAMPLE.parent, LocalScheduler(), np=2,
                         mode=LaunchedBy.API, controller="gloo", device="cpu")  # as --verify runs the migrated side
    status, output = run_launched(launch, LocalScheduler(), 240)
    assert status == 0, output[-3000:]
    side = read_side("ddp", output, run_dir, RAY_EXAMPLE, loss_regex=None, eval_regex=None, step_from="log",
                     throughput_regex=THROUGHPUT, warmup=5)
    assert side.world == 2 and side.problem is None
    check = subprocess.run([sys.executable, "-m", "compare", "check", str(out / "verify" / "horovod"),
                            str(run_dir)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert check.returncode == Exit.PARITY_FAILS, check.stdout + check.stderr
    assert "parity fails: diverges at step 2" in check.stdout, check.stdout


@pytest.mark.slow
def test_a_horovod_trainer_job_trains_the_same_under_torch_trainer(tmp_path):
    """HorovodTrainer runs on Ray Train V1 only: the original with RAY_TRAIN_V2_ENABLED=0, the migration on V2."""
    pytest.importorskip("ray.train.horovod", reason="Ray Train is not installed (pip install '.[ray]')")
    result = run([sys.executable, "-m", "compare", "migrate", str(RAY_TRAINER_EXAMPLE), "-o",
                  str(tmp_path / "trainer_ddp.py"), "--verify", "--verify-out", str(tmp_path / "verify"),
                  "--timeout", "240"], timeout=600)
    assert result.returncode == Exit.OK, result.stdout + result.stderr
    assert "under python (Ray Train's HorovodTrainer, Train V1: RAY_TRAIN_V2_ENABLED=0, on a local Ray) and " \
           "trainer_ddp.py under python (Ray Train's TorchTrainer on a local Ray), np 2" in result.stdout
    assert re.search(r"^parity holds: every common step of 1 seed", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^  ddp: 20 steps and 0 evaluations read", result.stdout, re.MULTILINE), result.stdout
