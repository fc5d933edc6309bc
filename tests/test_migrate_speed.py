"""`compare migrate --verify`'s timing: the rank tag's optimizer step hooks (the outermost step() only, a
step that raised dropped), the step times of a launch (the slowest rank's), printed throughput, the speed
lines and verdict from the same analysis as `compare run`, and (slow) through horovodrun and torchrun on a
synthetic-data benchmark (examples/horovod_scripts/synthetic_throughput.py) and on an MNIST-style script."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.optim.optimizer as optimizer_module
from helpers import ROOT, ok, run

from compare.__main__ import main as compare_main
from compare.analysis import group_sequential
from compare.names import Exit
from compare.verify import speed_design
from compare.verify.speed import Launched, Timing, run_speed_rounds, source_of, speed_report
from compare.verify.step_times import (
    THROUGHPUT_SOURCE,
    compile_throughput,
    read_step_times,
    read_throughput,
    summary,
)
from compare.verify.verify import rank_tag_module
from workload.record_format import CONTENTION_RECORD

CORPUS = ROOT / "examples" / "horovod_scripts"
BENCHMARK = CORPUS / "synthetic_throughput.py"


class Clock:
    """A clock that advances by one second each time it is read."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def timer():
    tag = rank_tag_module()
    timer = tag.StepTimer(clock=Clock())
    handles = timer.install(optimizer_module)
    yield timer
    for handle in handles:
        handle.remove()


def _params():
    return [torch.nn.Parameter(torch.ones(2))]


class Wrapped(torch.optim.SGD):
    """As Horovod's DistributedOptimizer: a subclass whose step() calls its base class's, both hooked."""

    def step(self, closure=None):
        return super().step(closure)


class Outer(torch.optim.Optimizer):
    """A step() that calls another optimizer's hooked step() inside its own (a wrapper such as Lookahead)."""

    def __init__(self, inner):
        super().__init__(inner.param_groups[0]["params"], {})
        self.inner = inner

    def step(self, closure=None):
        self.inner.step()


class Raises(torch.optim.SGD):
    def step(self, closure=None):
        raise RuntimeError("a failed step")


def test_nested_steps_count_once(timer):
    for optimizer in (Wrapped(_params(), lr=0.1), Outer(Wrapped(_params(), lr=0.1))):
        before = len(timer.steps)
        for _ in range(3):
            optimizer.step()
        assert len(timer.steps) == before + 3, timer.steps
    # the same (start, end) pairs a plain SGD would give: one start and one end read per step
    plain = torch.optim.SGD(_params(), lr=0.1)
    plain.step()
    start, end = timer.steps[-1]
    assert end - start == 1.0


def test_a_step_that_raised_is_dropped_and_later_steps_count(timer):
    plain = torch.optim.SGD(_params(), lr=0.1)
    plain.step()
    with pytest.raises(RuntimeError):
        Raises(_params(), lr=0.1).step()
    plain.step()
    plain.step()
    assert len(timer.steps) == 3


HOROVOD_STEPS = """\
import torch, torch.optim.optimizer as optimizer_module, horovod.torch as hvd
from compare.verify.verify import rank_tag_module
timer = rank_tag_module().StepTimer()
timer.install(optimizer_module)
hvd.init()
model = torch.nn.Linear(2, 2)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters())
hvd.broadcast_optimizer_state(optimizer, root_rank=0)  # a zero-gradient step() on a fresh optimizer
for _ in range(4):
    optimizer.zero_grad()
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
print("steps", len(timer.steps))
"""


def test_hooks_count_each_step_of_horovods_distributed_optimizer_once(horovod_built):
    """Horovod 0.28.1's DistributedOptimizer.step() calls its base class's: the hooks fire twice, nested."""
    result = ok(run([sys.executable, "-c", HOROVOD_STEPS], timeout=120, PYTHONPATH=str(ROOT)))
    assert result.stdout.strip().splitlines()[-1] == "steps 5", result.stdout


def test_the_tag_writes_step_times_only_where_a_process_stepped(tmp_path, timer, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    timer.write(str(tmp_path / "none"))
    assert not (tmp_path / "none").exists()
    torch.optim.SGD(_params(), lr=0.1).step()
    timer.write(str(tmp_path))
    written = json.loads(next(tmp_path.glob("rank-1-*.json")).read_text())
    assert written["rank"] == "1" and len(written["ends"]) == 1


def _ranks(directory: Path, ends: dict[int, list[float]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for rank, values in ends.items():
        (directory / f"rank-{rank}-{100 + rank}.json").write_text(json.dumps({"rank": str(rank), "ends": values}))


def test_step_times_are_the_slowest_ranks_between_step_ends(tmp_path):
    _ranks(tmp_path, {0: [0.0, 1.0, 3.0, 4.0], 1: [0.0, 2.0, 3.0, 4.5, 9.0]})
    (tmp_path / "rank-?-7.json").write_text(json.dumps({"rank": "?", "ends": [0.0, 50.0]}))  # no rank: ignored
    times = read_step_times(tmp_path)
    assert times.seconds == [2.0, 2.0, 1.5] and times.ranks == 2 and times.steps == 4 and times.uneven
    assert read_step_times(tmp_path / "nothing") is None
    assert summary([9.0, 1.0, 2.0, 3.0], 1) == {"n": 3, "median_s": 2.0, "warmup": 1}
    assert summary([9.0, 1.0], 5)["warmup"] == 1  # at least one step stays


BENCHMARK_LINES = """\
[1,0]<stdout>:[verify rank=0 size=2]:convnet, 16 images a batch on each of 2 CPU(s)
[1,0]<stdout>:[verify rank=0 size=2]:Iter #0: 640.5 img/sec per CPU
[1,1]<stdout>:[verify rank=1 size=2]:Iter #0: 9999.0 img/sec per CPU
[1,0]<stdout>:[verify rank=0 size=2]:Iter #1: 650.0 img/sec per CPU
[1,0]<stdout>:[verify rank=0 size=2]:Iter #2: 1.2e3 img/sec per CPU
[1,0]<stdout>:[verify rank=0 size=2]:mean img/sec per CPU: 830.2 (+-10.0); all ranks: 1660.4
"""


def test_printed_throughput_is_rank_zeros():
    found = read_throughput(BENCHMARK_LINES)
    assert found.values == [640.5, 650.0, 1200.0] and found.unit == "img/sec" and found.median == 650.0


@pytest.mark.parametrize(("text", "values", "unit"), [
    ("epoch 1: 1234.5 samples/s\nepoch 2: 1300 samples/sec", [1234.5, 1300.0], "samples/s"),
    ("train: 100%|####| 50/50 [00:04<00:00, 12.50it/s]", [12.5], "it/s"),
    ("train:  10%|#   | 5/50 [00:10<01:30, 2.00s/it]", [0.5], "it/s"),
    ("processed 32 images/sec", [32.0], "img/sec"),
    ("loss 0.5 at step 3", None, None),
    ("12 img/section", None, None),
])
def test_throughput_units(text, values, unit):
    found = read_throughput(text)
    assert (found.values, found.unit) == (values, unit) if values else found is None


def test_throughput_regex():
    regex = compile_throughput(r"(?P<throughput>[\d.]+) tokens/s")
    found = read_throughput("step 1 | 5000.5 tokens/s\nstep 2 | 4000 tokens/s", regex)
    assert found.values == [5000.5, 4000.0]
    with pytest.raises(ValueError, match="named group throughput"):
        compile_throughput(r"([\d.]+) tokens/s")


def test_throughput_regex_is_checked_before_anything_is_written(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(BENCHMARK.read_text())
    assert compare_main(["migrate", str(script), "--verify", "--throughput-regex", "(x"]) == Exit.USAGE
    assert compare_main(["migrate", str(script), "--speed-rounds", "2"]) == Exit.USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--throughput-regex" in err[0] and "go with --verify" in err[1], err
    assert sorted(p.name for p in tmp_path.iterdir()) == [script.name]


# ---- the speed lines, from the same analysis as compare run -----------------------------------------------

def _launch(tmp_path: Path, number: int, framework: str, step_s: float, *, started: float, others: float = 0.0,
            ranks: int = 2, cores: int = 2, hooked: bool = True, printed: list[float] | None = None) -> Launched:
    run_dir = tmp_path / f"round-{number}" / framework
    run_dir.mkdir(parents=True)
    (run_dir / CONTENTION_RECORD).write_text(json.dumps({
        "started_unix": started, "wall_s": 10.0, "ranks": ranks, "threads_per_rank": 1, "available_cores": cores,
        "own_cpu_s": 10.0, "others_cores": others, "steal_fraction": 0.0, "load_before": [0, 0, 0],
        "load_after": [0, 0, 0], "own_cpu_per_rank": 0.5, "top_others": []}))
    from compare.verify.step_times import StepTimes, Throughput

    times = StepTimes([step_s * 3] * 2 + [step_s] * 20, 2, 23) if hooked else None
    rates = Throughput(printed, "img/sec", len(printed)) if printed else None
    return Launched(number, framework, run_dir, Timing(times, rates))


def _rounds(tmp_path: Path, ratios: list[float], **kwargs) -> list[Launched]:
    launches = []
    for number, ratio in enumerate(ratios, start=1):
        order = ["horovod", "ddp"] if number % 2 else ["ddp", "horovod"]
        for place, framework in enumerate(order):
            step = 0.010 * (ratio if framework == "horovod" else 1.0)
            launches.append(_launch(tmp_path, number, framework, step, started=100.0 * number + place, **kwargs))
    return launches


@pytest.mark.parametrize(("ratio", "step_times", "speed_up"), [
    (1.2, "Horovod 12 ms, DDP 10 ms", "DDP's speed-up over Horovod 1.20x"),
    (1 / 1.25, "Horovod 8 ms, DDP 10 ms", "Horovod's speed-up over DDP 1.25x"),
    (1.0, "Horovod 10 ms, DDP 10 ms", "speed-up 1.00x either way")])
def test_one_launch_each_says_the_faster_sides_speed_up_once_and_asks_for_rounds(tmp_path, ratio, step_times,
                                                                                speed_up):
    """The figure has one direction, the faster side's, said once (the throughput derived from the same step
    times repeats no ratio), with no interval from one launch each."""
    lines, timed = speed_report(_rounds(tmp_path, [ratio]), 2, 5, 0)
    assert timed
    assert lines[0] == (f"speed: median step time {step_times} (optimizer step hooks, 5 warm-up steps left out): "
                        f"{speed_up} (one launch each: no interval)")
    assert lines[1].startswith("speed: throughput Horovod ") and lines[1].endswith("steps/s (1 / the median step time)")
    assert "no verdict from 1 round of launches" in lines[2] and "--speed-rounds 2" in lines[2]
    assert not any("Horovod/DDP" in line or "DDP/Horovod" in line for line in lines), lines


def _planted(tmp_path: Path, ratios: list[float], contended: tuple[int, ...] = (), **kwargs):
    """A launch callback that plants round r's Horovod/DDP ratio, ratios[r - 1] (contended: other processes
    used 150% of a core), and the rounds it was asked for."""
    asked: list[int] = []

    def launch(number: int) -> list[Launched]:
        asked.append(number)
        others = 1.5 if number in contended else 0.0
        return [launch for launch in _rounds(tmp_path / f"r{number}", ratios[:number], others=others, **kwargs)
                if launch.round == number]

    return launch, asked


def _verdict(tmp_path: Path, ratios: list[float], contended: tuple[int, ...] = (), **kwargs) -> list[str]:
    """The speed lines after --speed-rounds len(ratios) - 1 rounds planted with these ratios (one look, the last)."""
    launch, _ = _planted(tmp_path, ratios, contended, **kwargs)
    design = speed_design.start_design(len(ratios) - 1, 2)
    first = _rounds(tmp_path / "r1", ratios[:1], others=1.5 if 1 in contended else 0.0, **kwargs)
    launches = run_speed_rounds(launch, design, first, 2, 5)
    return speed_report(launches, 2, 5, len(ratios) - 1, design)[0]


def test_rounds_name_the_faster_side_only_when_the_interval_excludes_one(tmp_path, capsys):
    lines = _verdict(tmp_path / "a", [1.2, 1.25, 1.18, 1.22])
    assert re.fullmatch(r"speed: DDP is 1\.21x faster than Horovod at np 2 \(group-sequential 95% interval "
                        r"1\.1\d-1\.2\d, 4 rounds\)", lines[-2]), lines
    # the verdict says the speed-up: the step times' line does not say it again
    assert lines[0].endswith("(medians of 4 launches each, optimizer step hooks, 5 warm-up steps left out)"), lines
    assert "needs about" not in capsys.readouterr().out  # a decided verdict asks for nothing more
    lines = _verdict(tmp_path / "b", [1.2, 0.85, 1.1, 0.9])
    # rounds whose ratios multiply to 1.01: equal at the printed precision, so neither side is named
    assert lines[-2].startswith("speed: no clear difference at np 2: speed-up 1.00x either way (group-sequential 95% "
                                "interval "), lines
    assert "needs about" in capsys.readouterr().out  # undecided at its first look: what the target would need


def test_contention_and_oversubscription_withhold_the_verdict(tmp_path, capsys):
    lines = _verdict(tmp_path / "busy", [1.2, 1.25, 1.18, 1.22], contended=(1, 2, 3, 4))
    assert lines[-2].startswith("speed: no reliable speed verdict at np 2: other processes used 150% of a core"), lines
    # a withheld verdict gives no figure: the step times' line gives the speed-up, with no interval
    assert re.search(r": DDP's speed-up over Horovod 1\.2\dx \(medians of 4 launches each\)$", lines[0]), lines
    assert capsys.readouterr().out.startswith("rounds: np 2 has no spread to forecast from after its first 4 rounds "
                                              "(4 contended, left out)")
    lines = _verdict(tmp_path / "over", [1.2, 1.25, 1.18, 1.22], ranks=4)
    assert lines[-2] == "speed: no reliable speed verdict at np 2: 4 ranks x threads on 2 cores (oversubscribed)"


def test_printed_throughput_when_the_hooks_saw_nothing(tmp_path):
    launches = [_launch(tmp_path, 1, "horovod", 0.01, started=1.0, hooked=False, printed=[600.0, 620.0, 640.0]),
                _launch(tmp_path, 1, "ddp", 0.01, started=2.0, hooked=False, printed=[700.0, 720.0])]
    assert source_of(launches) == THROUGHPUT_SOURCE
    lines, timed = speed_report(launches, 2, 5, 0)
    assert timed and lines[1] == ("speed: throughput Horovod 620 img/sec, DDP 710 img/sec (rank 0's printed values, "
                                  "median): DDP's speed-up over Horovod 1.15x (one launch each: no interval)")


def test_neither_hooks_nor_throughput_cannot_be_timed(tmp_path):
    launches = [_launch(tmp_path, 1, "horovod", 0.01, started=1.0),
                _launch(tmp_path, 1, "ddp", 0.01, started=2.0, hooked=False)]
    lines, timed = speed_report(launches, 2, 5, 0)
    assert not timed and lines == [
        "speed: cannot be timed: on the DDP side no optimizer step went through torch's step hooks and rank 0 "
        "printed no throughput (img/sec, samples/s, it/s; give --throughput-regex)"]


# ---- --speed-rounds under compare run's group-sequential design ------------------------------------------------

@pytest.mark.parametrize(("speed_rounds", "looks"), [(1, [2]), (2, [3]), (3, [4]), (8, [3, 5, 7, 9]),
                                                     (9, [4, 6, 8, 10])])
def test_the_looks_come_in_pairs_up_to_the_budgets_last_round(speed_rounds, looks):
    assert speed_design.looks(speed_design.start_design(speed_rounds, 2)) == looks


def test_rounds_stop_at_the_look_where_the_interval_is_within_the_target(tmp_path, capsys):
    ratios = [1.20, 1.21, 1.19, 1.20] + [1.5, 0.7] * 3  # rounds 5-10 would widen it: they must not run
    launch, asked = _planted(tmp_path, ratios)
    design = speed_design.start_design(9, 2)
    launches = run_speed_rounds(launch, design, _rounds(tmp_path / "r1", ratios[:1]), 2, 5)
    assert asked == [2, 3, 4] and {launch.round for launch in launches} == {1, 2, 3, 4}
    assert design["world_sizes"]["2"] == {"looks": [4], "final": False, "stopped": "precision", "rounds": 4}
    assert "needs about" not in capsys.readouterr().out  # a size that reached its target is told nothing more
    lines, _ = speed_report(launches, 2, 5, 9, design)
    assert re.fullmatch(r"speed: DDP is 1\.20x faster than Horovod at np 2 \(group-sequential 95% interval "
                        r"1\.1\d-1\.2\d, 4 rounds\)", lines[-2]), lines
    assert re.fullmatch(r"rounds: np 2 ±\d\.\d% \(target ±15%\) after 4 rounds: within the target, before the "
                        r"design's last planned look \(10 rounds\)", lines[-1]), lines
    assert lines[0].startswith("speed: median step time Horovod 12 ms, DDP 10 ms (medians of 4 launches each")


def test_a_spread_the_budget_cannot_narrow_is_forecast_at_the_first_look(tmp_path, capsys):
    ratios = [1.4, 0.8, 1.3, 0.9, 1.35, 0.85]
    launch, asked = _planted(tmp_path, ratios)
    design = speed_design.start_design(5, 2)  # looks after 4 and 6 rounds
    launches = run_speed_rounds(launch, design, _rounds(tmp_path / "r1", ratios[:1]), 2, 5)
    assert asked == [2, 3, 4, 5, 6] and design["world_sizes"]["2"]["looks"] == [4, 6]
    assert design["world_sizes"]["2"]["final"] and design["stopped"] == "last look" and design["rounds"] == 6
    forecast = capsys.readouterr().out.strip().splitlines()
    sd = float(np.std(np.log(ratios[:4]), ddof=1))
    found = re.fullmatch(rf"rounds: np 2 spreads {sd:.3f} over its first 4 rounds: ±15% needs about (\d+), "
                         r"--speed-rounds 5 holds 6 \(--speed-rounds (\d+) for (\d+)\)", forecast[-1])
    assert found and int(found.group(2)) == int(found.group(1)) - 1 == int(found.group(3)) - 1, forecast

    # the budget named is the smallest whose last look reaches ±15% at this spread
    def last_width(planned: int) -> float:
        counts = tuple(group_sequential.looks_at(4, planned))
        return group_sequential.t_multiplier(counts, planned, True) * sd / np.sqrt(planned)

    wanted = int(found.group(1))
    assert last_width(wanted) <= np.log(1.15) < last_width(wanted - 2)
    lines, _ = speed_report(launches, 2, 5, 5, design)
    assert re.match(r"speed: no clear difference at np 2: .* \(group-sequential 95% interval [\d.]+-[\d.]+ over "
                    r"6 rounds\)$", lines[-2]), lines
    assert re.fullmatch(r"rounds: np 2 ±\d+\.\d% \(target ±15%\) after 6 rounds: short of the target at the "
                        r"design's last planned look \(6 rounds, --speed-rounds 5 and the verify launches\)",
                        lines[-1]), lines


def test_a_contended_round_is_counted_once_and_named(tmp_path):
    ratios = [1.20, 1.21, 1.19, 1.20, 1.22]
    launch, _ = _planted(tmp_path, ratios, contended=(3,))
    design = speed_design.start_design(4, 2)  # looks after 3 and 5 rounds
    launches = run_speed_rounds(launch, design, _rounds(tmp_path / "r1", ratios[:1]), 2, 5)
    lines, _ = speed_report(launches, 2, 5, 4, design)
    # the design's rounds (every round that timed both sides) are the verdict's 4 and the one it names left out
    assert design["rounds"] == 5 and "medians of 5 launches each" in lines[0], lines
    assert re.search(r", 4 rounds\); left out: .* launch of round 3", lines[-2]), lines
    assert "after 5 rounds" in lines[-1], lines


# ---- through the real launchers ------------------------------------------------------------------------------

def _verify(script: Path, out: Path, args: list[str], *extra: str):
    return run([sys.executable, "-m", "compare", "migrate", str(script), "-o", str(out / f"{script.stem}_ddp.py"),
                "--force", "--verify", "--verify-out", str(out / "verify"), "--timeout", "240", *extra, "--", *args],
               timeout=900)


@pytest.mark.slow
def test_synthetic_benchmark_reports_both_throughputs_and_the_ratio(tmp_path, horovod_built):
    result = _verify(BENCHMARK, tmp_path, ["--model", "convnet", "--batch-size", "16", "--iters", "4",
                                           "--warmup-batches", "3", "--batches-per-iter", "5"],
                     "--speed-rounds", "2")
    assert result.returncode == Exit.OK, result.stdout + result.stderr
    out = result.stdout
    assert "\nparity: not checked (the script prints no loss)\n" in out, out
    for side in ("horovod", "ddp"):  # 3 + 4 x 5 steps; Horovod's broadcast_optimizer_state steps once more
        assert re.search(rf"^  {side}: step times from the optimizer step hooks: 2[34] optimizer steps on each of 2 "
                         r"ranks .*median [\d.]+ ms .*; printed throughput: median [\d.]+ img/sec over 4 values",
                         out, re.MULTILINE), out
        record = json.loads((tmp_path / "verify" / side / "run.json").read_text())
        assert record["step_times"]["ranks"] == 2 and len(record["step_times"]["seconds"]) >= 22
    # printed beside the step times: a measure of its own, with its own speed-up in the one direction
    assert re.search(r"^speed: throughput Horovod [\d.]+ img/sec, DDP [\d.]+ img/sec \(rank 0's printed values, "
                     r"median\): ((Horovod|DDP)'s speed-up over (DDP|Horovod)|speed-up) [\d.]+x( either way)?$", out,
                     re.MULTILINE), out
    # --speed-rounds 2: the design's one look, after round 3, spends all; every count of rounds says 3
    assert len(re.findall(r"^  round [23], (horovod|ddp): exit 0", out, re.MULTILINE)) == 4, out
    assert re.search(r"^speed rounds: each side launched up to 2 more times, .* looks after 3 rounds", out,
                     re.MULTILINE), out
    assert "(medians of 3 launches each" in out and re.fullmatch(
        r"rounds: np 2 (±[\d.]+%|no interval) \(target ±15%\) after 3 rounds: .*", out.rstrip().splitlines()[-1]), out
    verdict = re.search(r"^speed: (.*)$", out.rstrip().splitlines()[-2]).group(1)
    named = re.match(r"(Horovod|DDP) is [\d.]+x faster than (Horovod|DDP) at np 2 \(group-sequential 95% interval "
                     r"([\d.]+)-([\d.]+), 3 rounds\)", verdict)
    if named:  # named only when the interval excludes 1
        low, high = float(named.group(3)), float(named.group(4))
        assert low > 1 and high > low, verdict
    else:
        assert verdict.startswith(("no clear difference at np 2", "no reliable speed verdict at np 2")), verdict


STEPS_WITHOUT_A_LAUNCHER = """\
import sys
assert "torch" not in sys.modules  # the rank tag imports no torch of its own
import torch
optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
for _ in range(3):
    optimizer.step()
"""


def test_the_tag_times_steps_once_the_job_imports_torch(tmp_path):
    """Loaded as --verify loads it (first on PYTHONPATH, the directory in its variable): the hooks are
    registered when the script imports torch.optim, and each process that stepped writes its file."""
    tag = rank_tag_module()
    env = {"PYTHONPATH": str(Path(tag.__file__).parent), tag.STEP_TIMES_VARIABLE: str(tmp_path / "times"),
           "RANK": "0", "WORLD_SIZE": "1"}
    ok(run([sys.executable, "-c", STEPS_WITHOUT_A_LAUNCHER], timeout=120, **env))
    ok(run([sys.executable, "-c", "print('no torch here')"], timeout=60, **env))
    written = list((tmp_path / "times").glob("rank-*.json"))
    assert len(written) == 1 and len(json.loads(written[0].read_text())["ends"]) == 3, written
    times = read_step_times(tmp_path / "times")
    assert times.ranks == 1 and times.steps == 3 and len(times.seconds) == 2


def test_a_side_that_prints_no_loss_gets_a_timing_record(tmp_path, capsys):
    from compare.analysis.records import load_run
    from compare.verify.step_times import THROUGHPUT
    from compare.verify.verify import read_side

    run_dir = tmp_path / "horovod"
    _ranks(run_dir / "step-times", {0: [0.0, 0.05, 0.10, 0.16], 1: [0.0, 0.06, 0.10, 0.15]})
    side = read_side("horovod", BENCHMARK_LINES, run_dir, BENCHMARK, loss_regex=None, eval_regex=None,
                     step_from="log", throughput_regex=THROUGHPUT, warmup=1)
    assert side.no_loss and side.world == 2 and side.timing.hooked
    record = load_run(run_dir)
    assert record.meta["parity"] == "not checked (the script prints no loss)" and record.world_size == 2
    assert record.meta["step_times"]["seconds"] == [0.06, 0.05, 0.06] and record.meta["throughput"]["unit"] == "img/sec"
    assert [s["step_time_s"] for s in record.steps] == [0.06, 0.05, 0.06]
    out = capsys.readouterr().out
    assert out.startswith("  horovod: step times from the optimizer step hooks: 4 optimizer steps on each of 2 ranks")
    assert "median 55 ms over 2 steps after 1 warm-up; printed throughput: median 650 img/sec over 3 values" in out
