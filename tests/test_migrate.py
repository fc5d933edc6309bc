"""python -m compare migrate: the rewrite of every corpus script, the report, the flags, bad input, the
launch line, and (slow) each migrated script against its original through horovodrun, torchrun and
`compare check`."""

from __future__ import annotations

import ast
import concurrent.futures
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import ROOT, finished, launch_env, ok, run, tool

from compare.__main__ import main as compare_main
from compare.launch.lines import Program, torchrun
from compare.launch.scheduling import LocalScheduler
from compare.migrate import migrate_source
from compare.migrate.report.launch_line import torchrun_lines
from compare.migrate.report.migration_report import place_changes
from compare.names import Exit, LaunchedBy
from compare.verify.verify import (
    FINISHED,
    RANK_TAG,
    every_rank_finished,
    record_from_output,
    run_launched,
    side_launch,
)

TORCHRUN_WORKER_FAILED = 1  # torchrun's exit status when a worker fails (ChildFailedError)

CORPUS = ROOT / "examples" / "horovod_scripts"
RUNNABLE = ["plain", "accumulation", "fp16_clip", "amp", "checkpoint_resume", "uneven_join", "inner_accumulation"]
# The same rewrite trained through the real launchers elsewhere: metric_average's all_reduce_mean is the helper
# that wrapper_module, script_paths and plugin_backend average their metrics with (tests/test_fixture_repos.py,
# whose planted bugs turn it into a sum).
TRAINED_IN_REPOS = ["metric_average"]
# horovod.run -> torch.multiprocessing.spawn: launched in tests/test_horovod_styles.py as dual_launch.py
# --num-proc 2, the same rewrite and the same launch mode.
LAUNCHED_ELSEWHERE = ["horovod_run"]
NOT_ON_CPU = ["sync_batchnorm"]
SPEED_ONLY = ["synthetic_throughput"]  # prints no loss: verified for speed (tests/test_migrate_speed.py)
FLAGGED = {"adasum": {"Adasum"}, "elastic": {"elastic"},
           "unknown_call": {"unrecognised", "timeline", "training forward not found"}}
# What each rewrite must contain (and, below, must no longer contain).
MUST_CONTAIN = {
    "plain": ["import torch.distributed as dist", "dist.init_process_group()", "ddp_model = DDP(model)",
              "output = ddp_model(data)",
              'torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))', "lr=args.lr * dist.get_world_size()",
              "train_dataset, seed=args.seed)", "and dist.get_rank() == 0:", "dist.destroy_process_group()",
              "# Horovod: broadcast parameters & optimizer state."],
    "accumulation": ["with contextlib.nullcontext() if (batch_idx + 1) % args.accum_steps == 0 else "
                     "ddp_model.no_sync():\n                    loss.backward()"],
    "fp16_clip": ["compression = default_hooks.fp16_compress_hook if args.fp16_allreduce else None",
                  "if compression is not None:\n    ddp_model.register_comm_hook(None, compression)",
                  "clip_grad_norm_(model.parameters(), args.clip_norm)\n        optimizer.step()"],
    "amp": ["scaler.unscale_(optimizer)\n        scaler.step(optimizer)"],
    "checkpoint_resume": ["broadcast_copy(torch.tensor(resume_from_epoch), 0).item()",
                          'model.load_state_dict(checkpoint["model"])',
                          "ddp_model = DDP(model)\noptimizer_state = [optimizer.state_dict()]\n"
                          "dist.broadcast_object_list(optimizer_state, src=0)\n"
                          "optimizer.load_state_dict(optimizer_state[0])",
                          '{"model": model.state_dict()'],  # the model's own keys: no .module
    "uneven_join": ["    with Join([ddp_model]):\n        for data, target in loader:",
                    "from torch.distributed.algorithms.join import Join"],
    "sync_batchnorm": ["self.bn = torch.nn.SyncBatchNorm(8, momentum=0.1)  # Horovod: statistics over all ranks"],
    "horovod_run": ["ranks = run_spawned(train, args=(args.lr, args.epochs, args.seed, run_dir), np=args.np)",
                    "torch.multiprocessing.spawn(", "    return dist.get_rank()"],
    "metric_average": ["avg_tensor = all_reduce_mean(tensor)",
                       "result = (result / dist.get_world_size()).to(tensor.device)"],
    "synthetic_throughput": ["    ddp_model = DDP(model)\n    if compression is not None:\n"
                             "        ddp_model.register_comm_hook(None, compression)",
                             "lr=0.01 * dist.get_world_size())", "printing = dist.get_rank() == 0",
                             "torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))"],
    "inner_accumulation": ["        passes = range(0, len(inputs), args.micro_batch)\n        for start in passes:\n",
                           "            with contextlib.nullcontext() if start == passes[-1] else "
                           "ddp_model.no_sync():\n                micro_loss.backward()",
                           "labels[start:stop]) / backward_passes\n",
                           "            step_loss += micro_loss.item()\n        optimizer.step()"],
}
GONE = ["synchronize", "skip_synchronize", "DistributedOptimizer"]  # attributes that must not remain


def _migrate(name: str):
    return migrate_source((CORPUS / f"{name}.py").read_text())


@pytest.mark.parametrize("name", [*RUNNABLE, *TRAINED_IN_REPOS, *LAUNCHED_ELSEWHERE, *NOT_ON_CPU, *SPEED_ONLY])
def test_corpus_script_migrates_completely(name):
    migration = _migrate(name)
    assert migration.flags == [], migration.flags
    for text in MUST_CONTAIN[name]:
        assert text in migration.code, f"{name}: missing {text!r}\n{migration.code}"
    left = [ast.unparse(node) for node in ast.walk(ast.parse(migration.code))
            if (isinstance(node, ast.Name) and node.id in ("hvd", "horovod"))
            or (isinstance(node, ast.Attribute) and node.attr in GONE)
            or (isinstance(node, (ast.Import, ast.ImportFrom)) and "horovod" in ast.unparse(node))]
    assert left == [], f"{name}: Horovod remains: {left}"
    assert migration.has_sync_batchnorm == (name in NOT_ON_CPU)


def test_comments_and_formatting_survive():
    source = (CORPUS / "plain.py").read_text()
    code = _migrate("plain").code
    comments = [line.strip() for line in source.splitlines() if line.strip().startswith("#")]
    assert all(comment in code for comment in comments)
    # an untouched multi-line statement keeps its layout exactly
    assert 'parser.add_argument("--lr", type=float, default=0.01, help="learning rate (scaled by the number of ' \
           'workers)")' in code


def test_report_lines_point_at_the_code():
    migration = _migrate("checkpoint_resume")
    source, new = migration.source.splitlines(), migration.code.splitlines()
    for change in place_changes(migration):
        if change.line:
            assert change.before.split("(")[0].split(".")[-1] in " ".join(source[change.line - 1:change.line + 2]) \
                or change.before.startswith("(")
        if change.line and change.new_line and change.after and not change.after.startswith("("):
            head = change.after.split("  #")[0].split("; ")[-1].split("(")[0]
            assert head in new[change.new_line - 1], (change, new[change.new_line - 1])
    wrap = next(c for c in migration.changes if c.after == "ddp_model = DDP(model)")
    assert new[wrap.new_line - 1] == "ddp_model = DDP(model)"
    assert "hvd.broadcast_parameters" in source[wrap.line - 1]
    helpers = next(c for c in migration.changes if c.line == 0)
    assert new[helpers.new_line].startswith("def broadcast_copy(")


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_needs_a_person_is_flagged_with_lines_and_exit_6(name, tmp_path, capsys):
    script = CORPUS / f"{name}.py"
    out = tmp_path / f"{name}_ddp.py"
    assert compare_main(["migrate", str(script), "-o", str(out)]) == 6
    report = out.with_suffix(".migration.md").read_text()
    source = script.read_text().splitlines()
    migration = _migrate(name)
    assert {flag.category for flag in migration.flags} == FLAGGED[name]
    for flag in migration.flags:
        assert f"line {flag.line}" in report
        assert "hvd." in source[flag.line - 1] or ".commit()" in source[flag.line - 1], flag  # the use itself
    stderr = capsys.readouterr().err
    assert "needs a person" in stderr
    assert compare_main(["migrate", str(script), "-o", str(out), "--force", "--allow-partial"]) == 0


def test_flag_lines_name_the_horovod_uses():
    lines = {flag.category: flag.line for flag in _migrate("adasum").flags}
    source = (CORPUS / "adasum.py").read_text().splitlines()
    assert "hvd.Adasum" in source[lines["Adasum"] - 1]
    unknown = _migrate("unknown_call")
    source = (CORPUS / "unknown_call.py").read_text().splitlines()
    assert [source[f.line - 1].split("(")[0] for f in unknown.flags] == [
        "hvd.start_timeline", "optimizer = hvd.DistributedOptimizer", "means = hvd.grouped_allreduce",
        "hvd.stop_timeline"]  # the optimizer's: nothing trains the model here, so no DDP is made
    assert "hvd.grouped_allreduce" in unknown.code and "import horovod.torch as hvd" in unknown.code  # kept
    elastic = _migrate("elastic")
    source = (CORPUS / "elastic.py").read_text().splitlines()
    assert any("state.commit()" in source[f.line - 1] for f in elastic.flags)


@pytest.mark.parametrize("content, suffix, message", [
    (b"\x89PNG\r\n\x1a\n\x00\x00binary", ".py", "not a Python file"),
    (b"print('hi')\n", ".txt", "not a Python file"),
    (b"import horovod.torch as hvd\ndef f(:\n", ".py", "not valid Python"),
    (b"import torch\nprint(torch.ones(2))\n", ".py", "no Horovod use"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, content, suffix, message, capsys):
    script = tmp_path / f"train{suffix}"
    script.write_bytes(content)
    assert compare_main(["migrate", str(script)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [script.name]


@pytest.mark.parametrize(("extra", "message"), [
    (["--loss-regex", r"step (?P<step>\d+)"], "--loss-regex needs the named groups"),
    (["--eval-regex", r"acc (\d+)"], "--eval-regex needs a named group"),
])
def test_verify_options_are_checked_before_anything_is_written(tmp_path, extra, message, capsys):
    script = tmp_path / "train.py"
    script.write_text((CORPUS / "plain.py").read_text())
    assert compare_main(["migrate", str(script), "--verify", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [script.name]


def test_a_condition_without_an_argument_asks_for_launch_mode_before_writing(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text("import horovod\nimport horovod.torch as hvd\n\ndef main():\n    hvd.init()\n\n"
                      "if by_hand():\n    horovod.run(main, np=2)\nelse:\n    main()\n")
    assert compare_main(["migrate", str(script), "--verify"]) == 2
    assert "--launch-mode cli (horovodrun) or api" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == [script.name]


def test_bad_input_from_the_command_line_has_no_traceback(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import horovod.torch as hvd\nhvd.init(\n")
    result = run([sys.executable, "-m", "compare", "migrate", str(script)])
    assert result.returncode == 2 and "not valid Python" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_existing_output_is_refused_without_force(tmp_path, capsys):
    out = tmp_path / "plain_ddp.py"
    out.write_text("keep me\n")
    assert compare_main(["migrate", str(CORPUS / "plain.py"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--force" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == "keep me\n"
    assert not out.with_suffix(".migration.md").exists()
    assert compare_main(["migrate", str(CORPUS / "plain.py"), "-o", str(out), "--force"]) == 0
    assert "dist.init_process_group()" in out.read_text()
    assert "| 52 | - | `hvd.broadcast_parameters(" in out.with_suffix(".migration.md").read_text()


@pytest.mark.skipif(torch.cuda.is_available(), reason="runs where there is no GPU")
def test_sync_batchnorm_is_not_verified_on_cpu(tmp_path, capsys):
    out = tmp_path / "sbn_ddp.py"
    assert compare_main(["migrate", str(CORPUS / "sync_batchnorm.py"), "-o", str(out), "--verify"]) == 3
    assert "SyncBatchNorm needs GPUs" in capsys.readouterr().err
    assert "Runs on CPU: **no**" in out.with_suffix(".migration.md").read_text()


def test_launch_line_per_node():
    lines = torchrun_lines("horovodrun -np 8 -H a:4,b:4 python train.py --epochs 3", ("train.py", "train_ddp.py"))
    commands = [line for line in lines if line.startswith("torchrun")]
    assert commands == ["torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint a:29400 "
                        "--rdzv-id job train_ddp.py --epochs 3"] * 2
    assert any("docs/slurm.md" in line and "docs/kubernetes.md" in line for line in lines)
    # -np below the slots fills the hosts in order, as horovodrun does
    commands = [line for line in torchrun_lines("horovodrun -np 5 -H a:4,b:4 python -m pkg.train")
                if line.startswith("torchrun")]
    assert [c.split()[4] for c in commands] == ["4", "1"] and commands[0].endswith("-m pkg.train")
    single = torchrun_lines("horovodrun -np 2 --gloo python train.py")
    assert "torchrun --standalone --nproc-per-node 2 train.py" in single


def test_launch_through_the_cli(capsys):
    assert compare_main(["migrate", "--launch", "horovodrun -np 4 -H a:2,b:2 python train.py"]) == 0
    assert capsys.readouterr().out.count("--rdzv-endpoint a:29400") == 2
    assert compare_main(["migrate", "--launch", "horovodrun -np 9 -H a:4,b:4 python train.py"]) == 2
    assert "more than the 8 slots" in capsys.readouterr().err
    assert compare_main(["migrate", "--launch", "mpirun -np 2 python train.py"]) == 2


@pytest.mark.parametrize("where", ["a repository", "--in-place", "--diff"])
def test_launch_with_a_path_it_would_drop_is_refused(tmp_path, capsys, where):
    """--launch beside a PATH names the migrated script's file; where no such file is written (a repository,
    --in-place, --diff) the line was dropped without a word: it is refused, in one line, before anything runs."""
    script = tmp_path / "train.py"
    script.write_text((ROOT / "examples" / "horovod_scripts" / "plain.py").read_text())
    path, extra = (tmp_path, []) if where == "a repository" else (script, [where])
    code = compare_main(["migrate", str(path), *extra, "--launch", "horovodrun -np 2 python train.py"])
    err = capsys.readouterr().err
    assert code == 2 and "--launch with a PATH" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_script_arguments_after_double_dash():
    from compare.commands.cli import parse

    ns = parse(["migrate", "a.py", "--verify", "--", "--epochs", "1", "--np", "4"])
    assert ns.script_args == ["--epochs", "1", "--np", "4"] and ns.verify_np == 2 and ns.verify


def test_loss_lines_become_a_run_record(tmp_path):
    output = "\n".join(["[0]<stdout>:step 1 loss 2.5", "[1]<stdout>:step 1 loss 9.0", "[0]<stdout>:step 2 loss 2.25",
                        "[1,0]<stdout>:[verify rank=0 size=2]:step 3 loss 2.0", "noise"])
    log = record_from_output(output, tmp_path, framework="horovod", train=r"step (?P<step>\d+) loss (?P<loss>[\d.]+)")
    assert len(log.steps) == 3 and log.world_size == 2
    from compare.analysis.records import load_run

    record = load_run(tmp_path)
    assert [s["loss"] for s in record.steps] == [2.5, 2.25, 2.0] and record.complete


# ---- through the real launchers ------------------------------------------------------------------------------

def _verify(name: str, out: Path, args: list[str]) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "compare", "migrate", str(CORPUS / f"{name}.py"), "-o",
                str(out / f"{name}_ddp.py"), "--verify", "--verify-out", str(out / name), "--timeout", "240",
                "--", *args], timeout=600)


@pytest.fixture(scope="module")
def verified(tmp_path_factory, horovod_built):
    """Every runnable corpus script migrated and verified (two at a time: much of a launch is waiting)."""
    out = tmp_path_factory.mktemp("migrate")
    checkpoint = out / "checkpoint"
    ok(run([tool("horovodrun"), "-np", "2", "--gloo", "--network-interfaces", "lo", "-H", "localhost:2",
            sys.executable, str(CORPUS / "checkpoint_resume.py"), "--epochs", "1"],
           RUN_DIR=str(checkpoint), PYTHONPATH=str(ROOT)))
    args = {name: ["--epochs", "1"] for name in RUNNABLE}
    args["checkpoint_resume"] = ["--epochs", "2", "--resume", str(checkpoint / "checkpoint-1.pt")]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = dict(zip(RUNNABLE, pool.map(lambda name: _verify(name, out, args[name]), RUNNABLE), strict=True))
    return out, results


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNABLE)
def test_migrated_script_trains_the_same(verified, name):
    out, results = verified
    result = ok(results[name])
    # the verdict may go on to say how the losses were printed ("(the ... side's losses are printed in units of...")
    verdict = re.search(r"^parity holds: .*?max relative difference ([^\s)]+)\)", result.stdout, re.MULTILINE)
    assert verdict, result.stdout
    assert float(verdict.group(1)) <= 1e-5  # the same data, order and weights: only summation order differs
    for side in ("horovod", "ddp"):
        assert (out / name / side / "metrics.jsonl").exists()


@pytest.mark.slow
def test_wrong_hand_translation_fails_the_check(verified):
    """The migrated plain script with the learning rate no longer scaled by the world size: check must fail."""
    out, _ = verified
    wrong = out / "plain_wrong.py"
    code = (out / "plain_ddp.py").read_text()
    assert "lr=args.lr * dist.get_world_size()" in code
    wrong.write_text(code.replace("lr=args.lr * dist.get_world_size()", "lr=args.lr"))
    finished(run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", str(wrong), "--epochs", "1"],
                 RUN_DIR=str(out / "wrong"), PYTHONPATH=str(ROOT)), record=out / "wrong")
    check = run([sys.executable, "-m", "compare", "check", str(out / "plain" / "horovod"), str(out / "wrong")])
    assert check.returncode == Exit.PARITY_FAILS, check.stdout + check.stderr
    # the same data, order and weights: the first update is the first to differ, at step 2 of seed 42
    assert "parity fails: diverges at step 2 (seed 42)" in check.stdout.splitlines(), check.stdout
    assert re.search(r"^likely cause: diverged at step 2, .*learning-rate scaling", check.stdout, re.MULTILINE)


@pytest.mark.slow
def test_clipping_added_on_one_side_of_inner_accumulation_fails(verified):
    out, _ = verified
    code = (out / "inner_accumulation_ddp.py").read_text()
    step = "        optimizer.step()  # one update for all the passes\n"
    assert step in code
    planted = out / "inner_accumulation_clipped.py"
    planted.write_text(code.replace(step, "        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)\n" + step))
    finished(run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", str(planted), "--epochs", "1"],
                 RUN_DIR=str(out / "clipped"), PYTHONPATH=str(ROOT)), record=out / "clipped")
    check = run([sys.executable, "-m", "compare", "check", str(out / "inner_accumulation" / "horovod"),
                 str(out / "clipped")])
    assert check.returncode == 1 and "parity fails" in check.stdout, check.stdout + check.stderr


# A script without a run record whose rank 1 aborts as Gloo's thread does at exit (after every exit handler,
# as the interpreter frees the script's globals), or in the middle of its work.
ABORTING = """\
import os, sys
rank = int(os.environ["RANK"])


class AbortsWhenFreed:
    def __del__(self):
        os.write(2, b"terminate called without an active exception\\n")
        os.abort()


if rank == 1:
    keeper = AbortsWhenFreed()
for step in range(1, 4):
    if rank == 0:
        print(f"step {step} loss {1 / step:.4f}", flush=True)
    if rank == 1 and step == 2 and sys.argv[1] == "midway":
        os.write(2, b"terminate called without an active exception\\n")
        os.abort()
"""


@pytest.mark.slow
@pytest.mark.parametrize("when", ["at exit", "midway"])
def test_verify_forgives_an_abort_at_exit_only_after_every_rank_finished(tmp_path, when):
    script = tmp_path / "aborting.py"
    script.write_text(ABORTING)
    launch = side_launch("ddp", Program((str(script),), (when.replace(" ", ""),)), tmp_path / "out", tmp_path,
                         LocalScheduler(), np=2, mode=LaunchedBy.CLI, controller="gloo", device="cpu")
    code, output = run_launched(launch, LocalScheduler(), 120)
    assert "terminate called without an active exception" in output, output
    assert "step 3 loss" in output or when == "midway", output
    # run_launched's status: 0 for a launch that counts as done (every rank finished, then Gloo's abort at exit:
    # docs/fault-tolerance.md); otherwise the launcher's own, torchrun's 1 when a worker failed (its
    # ChildFailedError), on which --verify stops with Exit.RUN_FAILED.
    assert code == (Exit.OK if when == "at exit" else TORCHRUN_WORKER_FAILED), (code, output)


@pytest.mark.slow
def test_torchrun_is_not_tagged_as_a_rank_under_slurm_variables(tmp_path):
    """Under `srun torchrun` the launcher itself has SLURM_PROCID and SLURM_NTASKS (its node, the nodes): the rank
    tag must leave its lines, and its last one, untagged, or the job looks like ranks of two sizes."""
    script = tmp_path / "hello.py"
    script.write_text("print('hello')\n")
    launched = subprocess.run(torchrun(2, [str(script)]), capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**launch_env(), "PYTHONPATH": str(RANK_TAG), "SLURM_PROCID": "0",
                                   "SLURM_NTASKS": "1"})
    output = launched.stdout + launched.stderr
    assert launched.returncode == 0, output
    said = [(m["tag"], m["size"]) for m in FINISHED.finditer(output)]
    assert sorted(said) == [("0", "2"), ("1", "2")], output
    assert every_rank_finished(output)


def test_the_same_script_migrates_to_the_same_text_every_time():
    """Statements were once matched to their replacements by id(): a removed statement's id, reused by a
    node made later, dropped that node (CI lost fp16_clip's `rec.close()` once). Repeated migrations in
    one process, allocating and freeing as they go, must agree and keep every statement they do not change."""
    texts = {_migrate("fp16_clip").code for _ in range(30)}
    assert len(texts) == 1
    assert "rec.close()\ndist.barrier()\ndist.destroy_process_group()\n" in texts.pop()
