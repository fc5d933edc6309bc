"""Scripts written the way Horovod's examples are (examples/horovod_styles/), through horovodrun, horovod.run,
torchrun and torch.multiprocessing.spawn: `compare migrate --verify` launches them as their users do and reads
rank 0's printed lines; `compare import text` takes their raw logs; planted hand-migration bugs fail and
harmless refactors hold."""

from __future__ import annotations

import concurrent.futures
import re
import sys
from pathlib import Path

import pytest
from helpers import ROOT, ok, read_meta, read_steps, run, tool

from compare.__main__ import main as compare_main
from compare.launch.logs import TEARDOWN_ABORT

STYLES = ROOT / "examples" / "horovod_styles"
DUAL = STYLES / "dual_launch.py"
EVERY_RANK = STYLES / "every_rank_prints.py"
EVERY_RANK_REGEX = r"epoch (?P<epoch>\d+) \| batch (?P<step>\d+)/\d+ \| loss (?P<loss>\S+)"
EVERY_RANK_EVAL = r"val_loss (?P<eval_loss>\S+) \| val_acc (?P<eval_accuracy>\S+)"

pytestmark = pytest.mark.slow


def verify(script: Path, out: Path, *args: str, script_args: tuple[str, ...] = ("--epochs", "2")):
    return run([sys.executable, "-m", "compare", "migrate", str(script), "-o", str(out / f"{script.stem}_ddp.py"),
                "--force", "--allow-partial", "--verify", "--verify-out", str(out / "verify"), "--timeout", "240",
                *args, "--", *script_args], timeout=600)


def holds(result) -> float:
    """The max relative difference of a 'parity holds' verdict (the run must have exited 0)."""
    verdict = re.search(r"^parity holds: .*?max relative difference ([^\s)]+)\)", ok(result).stdout, re.MULTILINE)
    assert verdict, result.stdout
    return float(verdict.group(1))


@pytest.fixture(scope="module")
def dual(tmp_path_factory, horovod_built):
    """The dual-launch digits script verified as its users launch it (horovodrun), and its migration."""
    out = tmp_path_factory.mktemp("dual")
    return out, verify(DUAL, out)


def test_a_dual_mode_script_is_verified_under_horovodrun_and_torchrun(dual):
    out, result = dual
    assert "under horovodrun and dual_launch_ddp.py under torchrun, np 2" in result.stdout
    assert "calls horovod.run only with --num-proc, which is not given" in result.stdout
    assert holds(result) == 0.0  # the same data, order and weights at np 2: bit-identical
    assert "24 common of 24 and 24" in result.stdout and "2 evaluations, 2 metrics, agree" in result.stdout
    for side in ("horovod", "ddp"):
        assert read_meta(out / "verify" / side)["world_size"] == 2


def test_the_verify_shows_step_times_for_both_sides(dual):
    """Every --verify times the optimizer steps on both sides (the rank tag's step hooks) and says what one launch
    each can and cannot tell."""
    _, result = dual
    out = result.stdout
    for side in ("horovod", "ddp"):
        assert re.search(rf"^  {side}: step times from the optimizer step hooks: \d+ optimizer steps on each of 2 "
                         r"ranks .*median [\d.]+ ms over \d+ steps after 5 warm-up$", out, re.MULTILINE), out
    assert re.search(r"^speed: median step time Horovod [\d.]+ ms, DDP [\d.]+ ms \(.*\): ((Horovod|DDP)'s speed-up "
                     r"over (DDP|Horovod)|speed-up) [\d.]+x( either way)? \(one launch each: no interval\)$", out,
                     re.MULTILINE), out
    assert "speed: no verdict from 1 round of launches" in out or "no reliable speed verdict" in out, out


def test_with_num_proc_the_script_starts_its_own_workers_on_both_sides(tmp_path, horovod_built):
    result = verify(DUAL, tmp_path, script_args=("--epochs", "1", "--num-proc", "2"))
    assert "under python (horovod.run) and dual_launch_ddp.py under python (torch.multiprocessing.spawn)" \
        in result.stdout
    assert holds(result) == 0.0 and "12 common of 12 and 12" in result.stdout


def test_a_side_at_another_world_size_is_a_failed_verify_not_a_comparison(tmp_path, horovod_built):
    result = verify(DUAL, tmp_path, "--launch-mode", "api", script_args=("--epochs", "1"))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "the horovod side ran at world size 1, not 2: nothing compared" in result.stderr
    assert "(give --num-proc 2 after --)" in result.stderr and "parity" not in result.stdout


def test_a_script_where_every_rank_prints_is_read_from_rank_0_with_a_regex(tmp_path, horovod_built):
    result = verify(EVERY_RANK, tmp_path, "--loss-regex", EVERY_RANK_REGEX, "--eval-regex", EVERY_RANK_EVAL)
    assert holds(result) == 0.0 and "40 common of 40 and 40" in result.stdout
    assert "2 evaluations, 2 metrics, agree" in result.stdout
    planted = plant(tmp_path / f"{EVERY_RANK.stem}_ddp.py", "shuffle=True)", "shuffle=False)")
    assert check(tmp_path / "verify" / "horovod", torchrun_imported(planted, tmp_path / "no-shuffle",
                                                                    "--regex", EVERY_RANK_REGEX)) == 1


# ---- raw logs, as the launchers print them, through `compare import text` --------------------------------------

def raw_log(command: list[str], log: Path) -> Path:
    """A launch's raw output (no rank tag), as a user would have saved it. A launch that a worker's abort at
    exit failed (PyTorch's Gloo race, docs/fault-tolerance.md; these scripts have no record to show that
    training ended) runs again, up to twice more: the job is deterministic, so only the race can differ. (One
    retry was not enough: under CI's load the race hit both launches of one test, 1 in 10 each.)"""
    for _ in range(3):
        result = run(command, timeout=300, PYTHONPATH=str(STYLES))
        if result.returncode == 0 or TEARDOWN_ABORT not in result.stdout + result.stderr:
            break
    ok(result)
    log.write_text(result.stdout + result.stderr)
    return log


def imported(log: Path, out: Path, *extra: str) -> Path:
    assert compare_main(["import", "text", str(log), "--out", str(out), *extra]) == 0
    return out


def torchrun_imported(script: Path, out: Path, *extra: str) -> Path:
    log = raw_log([tool("torchrun"), "--standalone", "--nproc-per-node", "2", "--tee", "3", str(script),
                   "--epochs", "2"], out.with_suffix(".log"))
    return imported(log, out, "--framework", "ddp", "--world-size", "2", *extra)


def check(a: Path, b: Path) -> int:
    return compare_main(["check", str(a), str(b)])


@pytest.fixture(scope="module")
def horovod_log(tmp_path_factory, horovod_built) -> Path:
    out = tmp_path_factory.mktemp("raw")
    return raw_log([tool("horovodrun"), "-np", "2", "--mpi", "-H", "localhost:2", sys.executable, str(DUAL),
                    "--epochs", "2"], out / "horovod.log")


@pytest.fixture(scope="module")
def horovod_imported(horovod_log) -> Path:
    return imported(horovod_log, horovod_log.parent / "horovod", "--framework", "horovod", "--world-size", "2")


def test_raw_logs_import_with_every_logged_step_and_check_holds(dual, horovod_log, horovod_imported, tmp_path,
                                                                capsys):
    assert "[1,1]<stdout>:Train Epoch: 2" in horovod_log.read_text()  # both ranks print, epoch counters restart
    steps = read_steps(horovod_imported)
    assert [s["step"] for s in steps] == list(range(1, 25))  # 12 logged lines in each of the 2 epochs
    assert read_meta(horovod_imported)["imported"]["fields"]["steps"].startswith("epoch and counter on a grid")
    ddp = torchrun_imported(dual[0] / "dual_launch_ddp.py", tmp_path / "ddp")
    assert check(horovod_imported, ddp) == 0
    assert "parity holds" in capsys.readouterr().out
    # rank 1's lines first: the same record
    lines = (tmp_path / "ddp.log").read_text().splitlines()
    reordered = tmp_path / "reordered.log"
    reordered.write_text("\n".join(sorted(lines, key=lambda line: not line.startswith("[default1]:"))))
    again = imported(reordered, tmp_path / "reordered", "--framework", "ddp", "--world-size", "2")
    assert read_steps(again) == read_steps(ddp)


def test_a_raw_log_whose_ranks_print_without_prefixes_is_refused(dual, tmp_path, capsys):
    log = raw_log([tool("torchrun"), "--standalone", "--nproc-per-node", "2", str(dual[0] / "dual_launch_ddp.py"),
                   "--epochs", "1"], tmp_path / "plain.log")
    assert compare_main(["import", "text", str(log), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "several ranks print" in err and "torchrun --tee 3" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


# ---- hand-migration bugs fail, harmless refactors hold ------------------------------------------------------

def plant(migrated: Path, old: str, new: str) -> Path:
    code = migrated.read_text()
    assert old in code, old
    planted = migrated.with_name(f"planted_{abs(hash((old, new)))}.py")
    planted.write_text(code.replace(old, new, 1))
    return planted


LR_CUT_AT_EPOCH_2 = ("    for epoch in range(1, opts.epochs + 1):\n",
                     "    for epoch in range(1, opts.epochs + 1):\n        if epoch == 2:  # planted: a 1% lr cut\n"
                     "            for group in optimizer.param_groups:\n                group['lr'] *= 0.99\n")
PLANTED = {
    "lr not scaled": ("lr=opts.lr * dist.get_world_size()", "lr=opts.lr"),
    "set_epoch dropped": ("        train_sampler.set_epoch(epoch)", "        pass"),
    "shuffle=False": ("DistributedSampler(dataset, shuffle=shuffle)", "DistributedSampler(dataset, shuffle=False)"),
    "a per-rank seed": ("torch.manual_seed(opts.seed)", "torch.manual_seed(opts.seed + dist.get_rank())"),
    "a 1% lr cut from epoch 2": LR_CUT_AT_EPOCH_2,
    "clipping on one side": ("            optimizer.step()\n",
                             "            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)\n"
                             "            optimizer.step()\n"),
}
HARMLESS = {
    "reduction='sum' divided by the batch": ("loss = F.nll_loss(ddp_model(images), labels)\n",
                                             "loss = F.nll_loss(ddp_model(images), labels, reduction='sum') / "
                                             "len(images)\n"),
    "another bucket size": ("ddp_model = DDP(model)", "ddp_model = DDP(model, bucket_cap_mb=1)"),
}


@pytest.fixture(scope="module")
def planted(dual, horovod_imported, tmp_path_factory) -> dict[str, Path]:
    """Every planted variant of the migrated script under torchrun --tee 3, imported (two launches at a time:
    much of a launch is start-up and waiting)."""
    out = tmp_path_factory.mktemp("planted")
    variants = {**PLANTED, **HARMLESS}
    scripts = {name: plant(dual[0] / "dual_launch_ddp.py", *change) for name, change in variants.items()}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = pool.map(lambda item: torchrun_imported(item[1], out / f"run{item[0]}"), enumerate(scripts.values()))
        return dict(zip(scripts, runs, strict=True))


@pytest.mark.parametrize("bug", PLANTED)
def test_a_planted_hand_migration_bug_fails(horovod_imported, planted, bug, capsys):
    assert check(horovod_imported, planted[bug]) == 1
    out = capsys.readouterr().out
    assert "parity fails" in out
    if bug == "a 1% lr cut from epoch 2":  # bit-identical for all of epoch 1: a job change, not float noise
        assert "identical to step 13, then" in out and "summation order" not in out, out


@pytest.mark.parametrize("refactor", HARMLESS)
def test_a_harmless_refactor_holds(horovod_imported, planted, refactor, capsys):
    assert check(horovod_imported, planted[refactor]) == 0
    assert "parity holds" in capsys.readouterr().out
