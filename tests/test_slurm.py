"""compare run --scheduler slurm on a real Slurm cluster (tests/slurm_cluster.py: two emulated nodes).

Each side is launched as its users launch it under Slurm (docs/slurm.md) and must train exactly as it does
without Slurm: identical losses, step by step, at np 2 on one node and across two nodes, in both forms of
each side. A failing rank is named, a Ctrl-C cancels the job, a job over its time limit is reported as
such, and no process of any job is left behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, launch_env, read_losses, read_meta
from slurm_cluster import SlurmCluster, unavailable

JOB = ["--np", "2", "--workload", "mlp", "--steps", "8", "--seeds", "0", "--log-every", "1", "--reference", "off",
       "--repeats", "0"]


def need(reason: str | None) -> None:
    """Skip where no cluster can start (no Slurm packages, not root), but never in CI: the set-up installs them."""
    if reason:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"no Slurm cluster here: {reason}")


def compare_command(out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "compare", "run", *args, "--out", str(out)]


def compare_run(cluster: SlurmCluster | None, out: Path, *args: str,
                timeout: float = 600) -> subprocess.CompletedProcess:
    env = cluster.env(launch_env()) if cluster else launch_env()
    return subprocess.run(compare_command(out, *args), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)


def succeeded(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def job_record(run_dir: Path) -> dict:
    return json.loads((run_dir / "slurm-job.json").read_text())


def answer_ctrl_c() -> None:
    """In the child, before exec: Ctrl-C as at a terminal. A shell that runs the suite in the background
    (`make test &`) starts it with SIGINT ignored, and Python keeps an inherited SIG_IGN (no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    need(unavailable())
    root = tmp_path_factory.mktemp("slurm")
    with SlurmCluster(root / "cluster", nodes=2, cpus=4) as made:
        # Slurm enforces time limits in whole minutes, checked every 30 s: start the job that overruns its
        # limit first, so that its minute passes while the other tests run (it holds one stopped process).
        made.over_time_out = root / "over-time"
        made.over_time = subprocess.Popen(
            compare_command(made.over_time_out, "--scheduler", "slurm", "--frameworks", "horovod", "--np", "1",
                            "--steps", "6", "--seeds", "0", "--log-every", "1", "--reference", "off", "--repeats",
                            "0", "--time", "1", "--fail-at-step", "2", "--fail-mode", "hang"),
            cwd=ROOT, env=made.env(launch_env()), stdout=(root / "over-time.log").open("w"), stderr=subprocess.STDOUT,
            text=True, start_new_session=True, preexec_fn=answer_ctrl_c)
        try:
            yield made
        finally:
            if made.over_time.poll() is None:
                made.over_time.send_signal(signal.SIGINT)  # compare cancels its job on Ctrl-C
                made.over_time.wait(timeout=120)


@pytest.fixture(scope="module")
def local(tmp_path_factory, horovod_built):
    out = tmp_path_factory.mktemp("local")
    started = time.monotonic()
    stdout = succeeded(compare_run(None, out, *JOB))
    return out, stdout, time.monotonic() - started


def slurm_run(cluster: SlurmCluster, out: Path, *args: str) -> tuple[Path, str, float]:
    started = time.monotonic()
    stdout = succeeded(compare_run(cluster, out, "--scheduler", "slurm", *JOB, *args))
    return out, stdout, time.monotonic() - started


@pytest.fixture(scope="module")
def two_nodes(cluster, tmp_path_factory, horovod_built):
    """The default forms: Horovod through srun --mpi=pmix, DDP through srun torchrun (one per node)."""
    return slurm_run(cluster, tmp_path_factory.mktemp("two-nodes"), "--nodes", "2")


@pytest.fixture(scope="module")
def one_node(cluster, tmp_path_factory, horovod_built):
    """The other forms: Horovod under mpirun inside the allocation, DDP as one srun task per rank."""
    return slurm_run(cluster, tmp_path_factory.mktemp("one-node"), "--nodes", "1", "--slurm-horovod", "mpirun",
                     "--slurm-ddp", "srun")


@pytest.mark.slow
@pytest.mark.parametrize(("runs", "nodes", "launchers"), [
    ("two_nodes", ("n[1-2]",), {"horovod": "srun", "ddp": "torchrun"}),
    ("one_node", ("n1", "n2"), {"horovod": "mpirun", "ddp": "srun"}),  # whichever node Slurm has free first
])
def test_parity_holds_and_losses_match_the_local_launch(cluster, request, local, runs, nodes, launchers):
    local_out, _, _ = local
    out, stdout, _ = request.getfixturevalue(runs)
    assert re.search(r"^parity:? holds", stdout, re.M), stdout
    for framework, launcher in launchers.items():
        run_dir = out / "runs" / f"{framework}-np2"
        # Bit for bit the losses of the same job launched without Slurm.
        assert read_losses(run_dir) == read_losses(local_out / "runs" / f"{framework}-np2")
        meta, job = read_meta(run_dir), job_record(run_dir)
        assert (meta["launcher"], meta["world_size"], meta["status"]) == (launcher, 2, "ok")
        # The record names the scheduler's job and its nodes, as Slurm told the ranks.
        assert job["scheduler"] == "slurm" and job["state"] == "COMPLETED" and job["nodes"] in nodes, job
        assert meta["env"]["SLURM_JOB_ID"] == job["job_id"]
        assert meta["env"]["SLURM_JOB_NODELIST"] == job["nodes"]
        assert meta["env"]["OMP_NUM_THREADS"] == "1"  # threads set on both sides (srun sets none)
        assert len(meta["hosts"]) == 2


@pytest.mark.slow
def test_batch_scripts_are_kept_and_usable_by_hand(cluster, two_nodes, one_node):
    expected = {(two_nodes, "horovod"): "srun --mpi=pmix", (two_nodes, "ddp"): "bash -c 'exec torchrun",
                (one_node, "horovod"): "mpirun", (one_node, "ddp"): "RANK=$SLURM_PROCID"}
    for ((out, _, _), framework), launch_line in expected.items():
        script = out / "runs" / f"{framework}-np2" / "job.sbatch"
        text = script.read_text()
        nodes = 2 if out == two_nodes[0] else 1
        assert f"#SBATCH --nodes={nodes}\n" in text and " OMP_NUM_THREADS=1 " in text
        assert launch_line in text
        # Slurm accepts it as it is (--test-only: checked and scheduled, not run).
        checked = subprocess.run(["sbatch", "--test-only", str(script)], env=cluster.env(), capture_output=True,
                                 text=True, timeout=60)
        assert checked.returncode == 0 and "to start at" in checked.stderr, checked.stderr


@pytest.mark.slow
def test_failing_rank_is_named_and_nothing_is_left(cluster, tmp_path, horovod_built):
    result = compare_run(cluster, tmp_path, "--scheduler", "slurm", "--nodes", "2", "--frameworks", "horovod",
                         *JOB, "--fail-at-step", "3", "--fail-rank", "1")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "rank 1 failed first" in result.stdout + result.stderr
    job = job_record(tmp_path / "runs" / "horovod-np2")
    assert job["state"] == "FAILED", job
    assert "injecting fault" in (tmp_path / "runs" / "horovod-np2" / "launch.log").read_text()
    assert wait_for_nothing(cluster, job["job_id"]) == {}


@pytest.mark.slow
def test_ctrl_c_cancels_the_job(cluster, tmp_path):
    process = subprocess.Popen(compare_command(tmp_path, "--scheduler", "slurm", "--nodes", "2", "--frameworks", "ddp",
                                               "--np", "2", "--epochs", "500", "--seeds", "0", "--reference", "off"),
                               cwd=ROOT, env=cluster.env(launch_env()), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=answer_ctrl_c)
    run_dir = tmp_path / "runs" / "ddp-np2"
    try:
        deadline = time.monotonic() + 180
        while not (run_dir / "metrics.jsonl.part").exists():  # training has started on both nodes
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.2)
        job_id = read_meta(run_dir)["env"]["SLURM_JOB_ID"]
        assert cluster.job_processes(job_id)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output
    assert "JobState=CANCELLED" in cluster.scontrol("show", "job", job_id)
    assert wait_for_nothing(cluster, job_id) == {}


@pytest.mark.slow
def test_job_over_its_time_limit_is_reported_as_such(cluster):
    cluster.over_time.wait(timeout=240)
    output = (cluster.over_time_out.parent / "over-time.log").read_text()
    assert cluster.over_time.returncode == 3, output
    job = job_record(cluster.over_time_out / "runs" / "horovod-np1")
    assert job["state"] == "TIMEOUT" and job["timed_out"], job
    assert "TIMEOUT, over its time limit of 00:01:00" in output
    assert wait_for_nothing(cluster, job["job_id"]) == {}


@pytest.mark.slow
def test_migrate_verify_runs_both_sides_as_slurm_jobs(cluster, tmp_path, horovod_built):
    """`compare migrate REPO -o OUT --verify --entry train.py --scheduler slurm`: the original's entry point through
    srun --mpi=pmix and its migration through srun torchrun, one rank on each node, each tree on its
    PYTHONPATH; judged as a local --verify is."""
    verify_out = tmp_path / "verify"
    result = subprocess.run(
        [sys.executable, "-m", "compare", "migrate", str(ROOT / "examples" / "repos" / "wrapper_module"),
         "-o", str(tmp_path / "out"), "--verify", "--entry", "train.py", "--verify-out", str(verify_out),
         "--scheduler", "slurm", "--nodes", "2", "--timeout", "240", "--", "--epochs", "1"],
        cwd=ROOT, env=cluster.env(launch_env()), capture_output=True, text=True, timeout=600,
        start_new_session=True)
    stdout = succeeded(result)
    assert "under srun --mpi=pmix (a Slurm job) and train.py under srun torchrun (a Slurm job)" in stdout, stdout
    assert re.search(r"^parity holds: .*max relative difference 0\b", stdout, re.MULTILINE), stdout
    for side in ("horovod", "ddp"):
        job = job_record(verify_out / side)
        assert job["state"] == "COMPLETED" and job["nodes"] == "n[1-2]", job
        assert f"slurm job {job['job_id']} on n[1-2]" in stdout, stdout
        assert "compare migrate --verify --scheduler slurm" in (verify_out / side / "job.sbatch").read_text()
        assert wait_for_nothing(cluster, job["job_id"]) == {}
    # The migrated tree's entry point ran, not the original's, and each side's tree was first on its path.
    assert str(tmp_path / "out" / "train.py") in (verify_out / "ddp" / "job.sbatch").read_text()


def wait_for_nothing(cluster: SlurmCluster, job_id: str, within_s: float = 30) -> dict[int, str]:
    """The job's processes still running after within_s (the job has left the queue: none should be)."""
    deadline = time.monotonic() + within_s
    while (left := cluster.job_processes(job_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


# Without a cluster: what the scripts say, and bad input.


def test_ranks_spread_evenly_over_the_nodes():
    from compare.launch.slurm import SlurmSettings, nodes_for
    from workload.errors import UsageError

    assert nodes_for(4, SlurmSettings(nodes=2)) == 2
    assert nodes_for(1, SlurmSettings(nodes=2)) == 1  # never more nodes than ranks
    with pytest.raises(UsageError, match="does not spread evenly"):
        nodes_for(3, SlurmSettings(nodes=2))


@pytest.mark.parametrize(("framework", "horovod_form", "ddp_form", "expected"), [
    ("horovod", "srun", "torchrun", ["#SBATCH --ntasks-per-node=2", "#SBATCH --cpus-per-task=3",
                                     "srun --mpi=pmix --kill-on-bad-exit=1 python -m hvd_impl"]),
    ("horovod", "mpirun", "torchrun", ["#SBATCH --ntasks-per-node=2", '-np "$SLURM_NTASKS" python -m hvd_impl']),
    ("ddp", "srun", "torchrun", ["#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=6",
                                 '--nnodes "$SLURM_JOB_NUM_NODES" --nproc-per-node 2 --rdzv-backend c10d',
                                 "is_host=$((SLURM_NODEID == 0))"]),
    ("ddp", "srun", "srun", ["#SBATCH --ntasks-per-node=2", "RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS",
                             'export MASTER_ADDR="$head_addr"']),
])
def test_batch_script_for_each_form(tmp_path, framework, horovod_form, ddp_form, expected):
    from compare.launch.slurm import SlurmSettings, build_slurm_job
    from workload.options import Options

    settings = SlurmSettings(nodes=2, partition="gpu", time_min=7, sbatch_args=("--account=ml",),
                             horovod_form=horovod_form, ddp_form=ddp_form)
    launch = build_slurm_job(framework, 4, Options(steps=30, threads=3), tmp_path / "run", settings)
    text = launch.script
    for line in [*expected, "#SBATCH --nodes=2", "#SBATCH --partition=gpu", "#SBATCH --time=7",
                 f"#SBATCH --output={tmp_path / 'run' / 'launch.log'}", " OMP_NUM_THREADS=3 "]:
        assert line in text, line
    assert launch.command == ["sbatch", "--parsable", "--account=ml", str(tmp_path / "run" / "job.sbatch")]
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0  # it parses as a script
    # The training options, each flag with its value on one line, reach the program unchanged.
    assert "--steps 30" in text and "--threads 3" in text


def test_failing_rank_from_srun_lines():
    from compare.launch.slurm import SlurmLaunch, SlurmSettings, failing_rank

    log = "srun: error: n2: task 1: Exited with exit code 13\nsrun: error: n1: task 0: Killed\n"
    per_rank = SlurmLaunch("horovod", 2, (0,), "", {}, Path("r"), Path("r/launch.log"), SlurmSettings(), 2)
    per_node = SlurmLaunch("ddp", 2, (0,), "", {}, Path("r"), Path("r/launch.log"), SlurmSettings(), 2)
    assert failing_rank(log, per_rank) == 1
    assert failing_rank(log, per_node) is None  # under torchrun a task is a node, not a rank


@pytest.mark.parametrize(("args", "message"), [
    (["--nodes", "0"], "--nodes must be positive"),
    (["--nodes", "2", "--np", "3"], "does not spread evenly"),
    (["--time", "0"], "--time is in minutes"),
])
def test_bad_input_one_line(tmp_path, capsys, args, message):
    from compare.__main__ import main
    from compare.launch.slurm import unavailable as no_slurm_commands

    need(no_slurm_commands())
    code = main(["run", "--scheduler", "slurm", "--steps", "8", "--out", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_slurm_options_need_the_scheduler(tmp_path, capsys):
    from compare.__main__ import main

    code = main(["run", "--nodes", "2", "--partition", "gpu", "--steps", "8", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "--nodes, --partition need --scheduler slurm" in err, err


def test_a_slurm_job_aborted_at_exit_is_judged_by_its_records(tmp_path):
    """The teardown forgiveness asks the launch for its evidence of finished work (Launch.finished_per_log);
    a Slurm job's ranks write run records, so those decide, as for a local launch."""
    from compare.launch.logs import TEARDOWN_ABORT, aborted_after_the_work
    from compare.launch.slurm import SlurmLaunch

    job = SlurmLaunch("ddp", 2, (0,), "", {}, tmp_path, tmp_path / "job.log", settings=None, nodes=1)
    log = f"step 3 loss 0.5\n{TEARDOWN_ABORT}\n"
    assert not aborted_after_the_work(log, job)  # no record yet: a failure
    (tmp_path / "run.json").write_text(json.dumps({"status": "ok"}))
    (tmp_path / "metrics.jsonl").write_text("")
    assert aborted_after_the_work(log, job) and not aborted_after_the_work("step 3 loss 0.5\n", job)


def test_without_slurm_the_tests_skip_and_say_how_to_get_it(tmp_path, monkeypatch):
    """A developer's machine set up without the slurm extra: a skip that names it; under CI, a failure."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm command on it
    reason = unavailable()
    assert reason is not None and "sbatch" in reason and "`make setup EXTRAS=slurm` installs" in reason
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="EXTRAS=slurm"):
        need(reason)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="EXTRAS=slurm"):
        need(reason)


def test_without_slurm_the_command_says_in_one_line_what_to_set_up(tmp_path):
    result = subprocess.run(compare_command(tmp_path / "out", "--scheduler", "slurm", "--steps", "8"), cwd=ROOT,
                            env=launch_env(PATH=str(tmp_path)), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "Slurm's sbatch, squeue, scontrol, scancel, srun not found on PATH" in result.stderr
    assert "`make setup EXTRAS=slurm`" in result.stderr
    assert not (tmp_path / "out").exists()
