"""compare/loss_lines.py and compare/migrate/launch_mode.py on text: every launcher's rank prefix, glued
lines, epoch-relative counters, the refusal of a log whose ranks cannot be told apart, and how a Horovod
script is launched. Through the real launchers: tests/test_horovod_styles.py."""

from __future__ import annotations

import pytest

from compare.__main__ import main as compare_main
from compare.loss_lines import LossLogError, read_loss_log, split_pieces
from compare.migrate.launch_mode import Undecided, decide


def mnist_lines(rank: int, epochs: int = 2, per_epoch: int = 10, prefix: str = "") -> list[str]:
    """The lines Horovod's MNIST example prints on one rank: a sample counter that restarts every epoch."""
    return [f"{prefix}Train Epoch: {epoch} [{i * 64}/3200 ({i * 2}%)]\t"
            f"Loss: {2.3 - 0.01 * (epoch * per_epoch + i) - rank:.6f}"
            for epoch in range(1, epochs + 1) for i in range(per_epoch)]


def interleave(*ranks: list[str]) -> str:
    return "\n".join(line for lines in zip(*ranks, strict=True) for line in lines)


RANK0 = {step: 2.3 - 0.01 * (10 + step - 1) for step in range(1, 21)}


@pytest.mark.parametrize("prefix", ["[1,{r}]<stdout>:", "[{r}]<stdout>:", "{r}: ", "[default{r}]:", "[rank{r}]:",
                                    "[1,{r}]<stdout>:[verify rank={r} size=2]:"])
def test_every_launchers_prefix_keeps_rank_0s_lines(prefix):
    text = interleave(*(mnist_lines(r, prefix=prefix.format(r=r)) for r in (1, 0)))  # rank 1's lines first
    log = read_loss_log(text + "\n" + prefix.format(r=0) + "Test set: Average loss: 0.6419, Accuracy: 88.70%")
    assert log.prefixed and log.ranks == (0, 1)
    assert {step: values["loss"] for step, values in log.steps.items()} == pytest.approx(RANK0)
    assert log.evals == {20: {"eval_loss": 0.6419, "eval_accuracy": pytest.approx(0.887)}}
    assert log.step_rule.startswith("epoch and counter on a grid: counter / 64")


def test_rank_1_is_chosen_with_rank_and_the_order_of_ranks_does_not_matter():
    a = read_loss_log(interleave(mnist_lines(0, prefix="[1,0]<stdout>:"), mnist_lines(1, prefix="[1,1]<stdout>:")),
                      rank=1)
    b = read_loss_log("\n".join(mnist_lines(1, prefix="[1,1]<stdout>:") + mnist_lines(0, prefix="[1,0]<stdout>:")),
                      rank=1)
    assert a.steps == b.steps and a.steps[1]["loss"] == pytest.approx(2.3 - 0.1 - 1)


def test_a_log_without_prefixes_where_two_ranks_print_is_refused_never_mixed():
    with pytest.raises(LossLogError, match="several ranks print"):
        read_loss_log(interleave(mnist_lines(0), mnist_lines(1)))
    with pytest.raises(LossLogError, match="several ranks print"):  # one block per rank: looks like a restart
        read_loss_log("\n".join(mnist_lines(0) + mnist_lines(1)))
    single = read_loss_log("\n".join(mnist_lines(0)))  # one rank printing: fine
    assert not single.prefixed and len(single.steps) == 20


def test_glued_lines_are_split_where_a_new_line_begins():
    pieces = split_pieces("[1,0]<stdout>:step 1 loss 2.5[1,1]<stdout>:step 1 loss 9.5")
    assert [(p.rank, p.text) for p in pieces] == [(0, "step 1 loss 2.5"), (1, "step 1 loss 9.5")]
    with pytest.raises(LossLogError, match="printed twice"):  # two unprefixed writers in one line
        read_loss_log("step 1 loss 2.5step 1 loss 2.7\nstep 2 loss 2.2")
    # a line cut by another writer's: the cut one is dropped, not read across the two
    log = read_loss_log("step 1 loss 2.5\nstep 2 lostep 2 loss 2.2\nstep 3 loss 2.0")
    assert log.steps == {1: {"loss": 2.5}, 2: {"loss": 2.2}, 3: {"loss": 2.0}}


def test_steps_come_from_the_log_from_order_or_from_epoch_and_counter():
    text = "\n".join(f"[0]<stdout>:epoch {e} batch {b} loss {e + b / 100}" for e in (0, 1) for b in range(0, 30, 10))
    by_epoch = read_loss_log(text, train=r"epoch (?P<epoch>\d+) batch (?P<step>\d+) loss (?P<loss>\S+)")
    assert sorted(by_epoch.steps) == [1, 2, 3, 4, 5, 6] and by_epoch.steps[4]["loss"] == 1.0
    in_order = read_loss_log(text, train=r"batch (?P<step>\d+) loss (?P<loss>\S+)", step_from="order")
    assert in_order.steps == by_epoch.steps
    restarted = read_loss_log(text, train=r"batch (?P<step>\d+) loss (?P<loss>\S+)")  # no epoch group
    assert sorted(restarted.steps) == [0, 10, 20] and [r[0] for r in restarted.repeated] == ["0", "10", "20"]


def test_pytorch_style_accuracy_is_a_fraction_and_an_evaluation_belongs_to_the_last_step():
    text = ("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300000\nTrain Epoch: 1 [640/60000 (1%)]\tLoss: 1.200000\n"
            "\nTest set: Average loss: 0.0331, Accuracy: 9890/10000 (99%)\n")
    log = read_loss_log(text)
    assert log.evals == {2: {"eval_loss": 0.0331, "eval_accuracy": 0.989}}


@pytest.mark.parametrize(("text", "kwargs", "message"), [
    ("[1,0]<stdout>:step 1 loss 2\n[1,1]<stdout>:step 1 loss 3", {"rank": 2}, "no training loss line of rank 2"),
    ("[verify rank=0 size=2]:step 1 loss 2", {"rank": 2}, "beyond the world size 2"),
    ("step 1 loss 2", {"rank": 1}, "carry no rank prefix"),
    ("nothing here", {}, "no training loss found"),
    ("step 1 loss 2", {"train": r"(?P<step>\d+)"}, "lacks loss"),
    ("step 1 loss 2", {"evaluation": r"acc (\d+)"}, "--eval-regex needs a named group"),
    ("step 1 loss 2", {"train": r"(?P<step"}, "not a valid regular expression"),
])
def test_what_cannot_be_read_is_one_line(text, kwargs, message):
    with pytest.raises(LossLogError, match=message) as raised:
        read_loss_log(text, **kwargs)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("extra", "message"), [
    (["--regex", r"(?P<step>\d+) (?P<lr>\S+)"], "lacks loss"),
    (["--rank", "1"], "no training loss line of rank 1"),
    (["--rank", "2", "--world-size", "2"], "outside the world size 2"),
])
def test_import_text_refuses_bad_input_with_one_line_and_writes_nothing(tmp_path, capsys, extra, message):
    log = tmp_path / "train.log"
    log.write_text("\n".join(mnist_lines(0, prefix="[1,0]<stdout>:")))
    out = tmp_path / "out"
    assert compare_main(["import", "text", str(log), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_import_text_says_on_screen_that_a_step_came_back(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text("\n".join(mnist_lines(0, prefix="[1,0]<stdout>:")))
    assert compare_main(["import", "text", str(log), "--out", str(tmp_path / "out"), "--regex",
                         r"\[(?P<step>\d+)/\d+.*Loss: (?P<loss>\S+)"]) == 0
    assert "step 0 was logged again with another loss" in capsys.readouterr().err


DUAL = '''
import argparse
import horovod
import horovod.torch as hvd
parser = argparse.ArgumentParser()
parser.add_argument("--num-proc", type=int)
def main(args):
    hvd.init()
if __name__ == "__main__":
    args = parser.parse_args()
    {body}
'''


@pytest.mark.parametrize(("body", "args", "mode"), [
    ("if args.num_proc:\n        horovod.run(main, args=(args,), np=args.num_proc)\n    else:\n        main(args)",
     [], "cli"),
    ("if args.num_proc:\n        horovod.run(main, args=(args,), np=args.num_proc)\n    else:\n        main(args)",
     ["--epochs", "1", "--num-proc", "2"], "api"),
    ("if args.num_proc:\n        horovod.run(main, args=(args,), np=args.num_proc)\n    else:\n        main(args)",
     ["--num-proc=2"], "api"),
    ("if args.num_proc is None:\n        main(args)\n    else:\n        horovod.run(main, np=args.num_proc)",
     [], "cli"),
    ("if not args.num_proc:\n        main(args)\n    else:\n        horovod.run(main, np=args.num_proc)",
     ["--num-proc", "2"], "api"),
    ("horovod.run(main, args=(args,), np=2)", [], "api"),
    ("main(args)", ["--num-proc", "2"], "cli"),
])
def test_the_launch_mode_follows_the_scripts_arguments(body, args, mode):
    assert decide(DUAL.format(body=body), args).mode == mode


def test_a_condition_that_names_no_argument_asks_for_launch_mode():
    source = DUAL.format(body="if launched_by_hand():\n        horovod.run(main, np=2)\n    else:\n        main(args)")
    with pytest.raises(Undecided, match="--launch-mode"):
        decide(source, [])
    forced = decide(DUAL.format(body="if args.num_proc:\n        horovod.run(main, np=2)"), [], "api")
    assert forced.mode == "api" and forced.option == "--num-proc"
