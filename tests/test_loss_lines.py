"""compare/loss_lines/ and compare/verify/launch_mode.py on text: every launcher's rank prefix, glued
lines, epoch-relative counters, the refusal of a log whose ranks cannot be told apart, and how a Horovod
script is launched. Through the real launchers: tests/test_horovod_styles.py."""

from __future__ import annotations

import math

import pytest
from helpers import launch_mode_of, read_steps

from compare.__main__ import main as compare_main
from compare.loss_lines import LossLogError, read_loss_log, split_pieces
from compare.verify.launch_mode import Undecided


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
    assert launch_mode_of(DUAL.format(body=body), args).mode == mode


def test_a_condition_that_names_no_argument_asks_for_launch_mode():
    source = DUAL.format(body="if launched_by_hand():\n        horovod.run(main, np=2)\n    else:\n        main(args)")
    with pytest.raises(Undecided, match="--launch-mode"):
        launch_mode_of(source, [])
    forced = launch_mode_of(DUAL.format(body="if args.num_proc:\n        horovod.run(main, np=2)"), [], "api")
    assert forced.mode == "api" and forced.option == "--num-proc"


# ---- the misreads of issue 35: each with the reader's rule, through read_loss_log and `compare import text` ----

def losses(text: str, **kwargs) -> dict[int, float]:
    return {step: values["loss"] for step, values in read_loss_log(text, **kwargs).steps.items()}


@pytest.mark.parametrize("line", ["step 10 val_loss 0.9 loss 0.52", "step 10 eval_loss 0.9 loss 0.52",
                                  "step 10 avg_loss 0.9 loss 0.52", "step 10: val loss 0.9, loss 0.52",
                                  "step 10 best loss 0.9 train_loss 0.52", "step 10 mean loss=0.9 train/loss=0.52",
                                  "[step=10] running loss 0.9 Loss: 0.52"])
def test_the_training_loss_is_a_loss_token_never_an_evaluation_or_an_average(line):
    assert losses(line) == {10: 0.52}


def test_evaluation_tokens_are_evaluations_at_their_step():
    log = read_loss_log("step 10 loss 0.52\nstep 10 val_loss 0.9 val_acc 81.5%\nstep 20 loss 0.4 eval_accuracy 0.8")
    assert log.evals == {10: {"eval_loss": 0.9, "eval_accuracy": pytest.approx(0.815)}, 20: {"eval_accuracy": 0.8}}


def test_an_evaluation_no_pattern_reads_is_named_in_a_note(tmp_path, capsys):
    log = read_loss_log("step 1 loss 0.5\nValidation: acc(top1)=0.7\nstep 2 loss 0.4\n")
    assert log.evals == {} and "look like evaluations but match no evaluation pattern" in log.notes[0]
    source = tmp_path / "train.log"
    source.write_text("step 1 loss 0.5\nValidation: acc(top1)=0.7\nstep 2 loss 0.4\n")
    assert compare_main(["import", "text", str(source), "--out", str(tmp_path / "out")]) == 0
    assert "give --eval-regex to read them" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "steps"), [
    ("step 999 loss 0.6\nstep 1,000 loss 0.5\nstep 1,001 loss 0.4", [999, 1000, 1001]),
    ("Step: 1,000, Loss: 0.5", [1000]),
    ("Step: 1, Loss: 0.5\nStep: 2, Loss: 0.4", [1, 2]),  # a comma after the step is no separator
])
def test_thousands_separators_in_the_step(text, steps):
    assert sorted(losses(text)) == steps


@pytest.mark.parametrize(("token", "value"), [("NaN", math.nan), ("nan", math.nan), ("Infinity", math.inf),
                                              ("-inf", -math.inf), ("inf", math.inf), ("-Infinity", -math.inf)])
def test_any_case_of_nan_and_inf_is_read_as_non_finite_not_dropped(token, value, tmp_path):
    lines = [f"Train Epoch: 1 [{i * 64}/640 ({i * 10}%)]\tLoss: {token if i == 3 else 2.0 - i / 10}"
             for i in range(6)]
    got = losses("\n".join(lines))
    assert sorted(got) == [1, 2, 3, 4, 5, 6]
    assert (math.isnan(got[4]) if math.isnan(value) else got[4] == value) and got[5] == 1.6
    source = tmp_path / "train.log"
    source.write_text("\n".join(f"step {s} loss {token if s == 3 else 1.0}" for s in range(1, 6)))
    assert compare_main(["import", "text", str(source), "--out", str(tmp_path / "out")]) == 0
    steps = read_steps(tmp_path / "out")
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5] and steps[2]["loss"] is None  # strict JSON: null


@pytest.mark.parametrize("regex", [r"(?P<step>\d+) loss=(?P<loss>\S+)", r"it\s*(?P<step>\d+).*?loss=(?P<loss>\S+)",
                                   r"(?P<step>\d+)\D+(?P<loss>[\d.]+)$"])
def test_a_regex_not_anchored_on_the_left_keeps_the_whole_step(regex, tmp_path):
    text = "\n".join(f"it {s} loss={1 / s:.4f}" for s in (123, 124, 125))
    assert sorted(losses(text, train=regex)) == [123, 124, 125]
    source = tmp_path / "train.log"
    source.write_text(text)
    assert compare_main(["import", "text", str(source), "--out", str(tmp_path / "out"), "--regex", regex]) == 0
    assert [s["step"] for s in read_steps(tmp_path / "out")] == [123, 124, 125]


def test_step_from_order_needs_no_integer_step_and_a_bad_step_is_one_line(tmp_path, capsys):
    keras = "\n".join(f"Epoch {e}/3\n20/20 - 0s - loss: {1 / e:.4f}" for e in (1, 2, 3))
    assert losses(keras, train=r"loss: (?P<loss>\S+)", step_from="order") == {1: 1.0, 2: 0.5, 3: 0.3333}
    hf = "{'loss': 0.52, 'epoch': 0.1}\n{'loss': 0.41, 'epoch': 0.2}"
    assert losses(hf, train=r"'loss': (?P<loss>[\d.]+), 'epoch': (?P<step>[\d.]+)", step_from="order") == {
        1: 0.52, 2: 0.41}
    source = tmp_path / "hf.log"
    source.write_text(hf)
    regex = ["--regex", r"'loss': (?P<loss>[\d.]+), 'epoch': (?P<step>[\d.]+)"]
    assert compare_main(["import", "text", str(source), "--out", str(tmp_path / "a"), *regex]) == 2
    err = capsys.readouterr().err
    assert "the step '0.1' is not a whole number" in err and "give --step-from order" in err and err.count("\n") == 1
    assert compare_main(["import", "text", str(source), "--out", str(tmp_path / "b"), *regex,
                         "--step-from", "order"]) == 0


@pytest.mark.parametrize("other", ["(best step 5 loss 0.4)", "val step 5 loss 0.4", "Best: step 5, loss 0.4"])
def test_a_step_printed_again_by_another_kind_of_line_never_overwrites_training(other):
    lines = [f"[1,0]<stdout>:epoch 1 step {s} loss {1 / s:.4f}" for s in range(1, 11)]
    lines.insert(7, f"[1,0]<stdout>:{other}")
    log = read_loss_log("\n".join([*lines, f"[1,0]<stdout>:done {other}"]))
    assert log.steps[5] == {"loss": 0.2} and sorted(log.steps) == list(range(1, 11)) and not log.repeated
    unprefixed = read_loss_log("\n".join(line.removeprefix("[1,0]<stdout>:") for line in lines))
    assert unprefixed.steps[5] == {"loss": 0.2}  # not "printed twice": another kind of line


def test_epoch_and_step_of_n_keeps_every_epoch():
    text = "\n".join(f"Epoch [{e}/3], Step [{i}/50], Loss: {e + i / 100:.4f}" for e in (1, 2, 3) for i in (25, 50))
    assert losses(text) == {25: 1.25, 50: 1.5, 75: 2.25, 100: 2.5, 125: 3.25, 150: 3.5}


def test_epoch_relative_counters_at_different_intervals_share_one_grid():
    """The same run logged every 4 and every 6 batches: a step is the same batch in both."""
    run = {(e, i): round(3 - e - i / 100, 4) for e in (1, 2) for i in range(1, 25)}
    every = [{(e, i): v for (e, i), v in run.items() if i % n == 0} for n in (4, 6)]
    a, b = (losses("\n".join(f"Epoch [{e}/2], Step [{i}/24], Loss: {v}" for (e, i), v in log.items()))
            for log in every)
    assert set(a) & set(b) == {12, 24, 36, 48} and all(a[s] == b[s] for s in set(a) & set(b))
    # a sample counter: with the batch (from --global-batch / --world-size) on the optimizer steps
    a, b = (losses("\n".join(f"Train Epoch: {e} [{(i - 1) * 8}/192 ({100 * (i - 1) / 24:.0f}%)]\tLoss: {v}"
                             for (e, i), v in run.items() if (i - 1) % n == 0), batch=8) for n in (4, 6))
    assert set(a) & set(b) == {1, 13, 25, 37} and all(a[s] == b[s] for s in set(a) & set(b))
    with pytest.raises(LossLogError, match="not a multiple of the per-rank batch 5"):
        read_loss_log("Train Epoch: 1 [8/192 (4%)]\tLoss: 1.0", batch=5)


def test_tqdm_repaints_keep_the_last_repaint_of_each_counter():
    bar = "".join(f"\repoch 1: {i * 10}%|##| {i}/10 [00:01<00:02, loss={v}]" for i in range(1, 4)
                  for v in (f"{9 - i}.0", f"{i}.5"))  # each counter repainted: the stale postfix, then its own
    assert losses(bar + "\n") == {1: 1.5, 2: 2.5, 3: 3.5}


def test_a_qualified_step_is_no_training_line_even_at_a_new_step():
    text = "step 10 loss 0.5\nval step 15 loss 0.9\n(best step 5 loss 0.1)\nstep 20 loss 0.4"
    assert losses(text) == {10: 0.5, 20: 0.4}


def test_a_runs_closing_summary_is_not_a_step():
    """Hugging Face's and a JSON logger's last line: the mean training loss of the run, with its runtime."""
    hf = "{'loss': 0.52, 'epoch': 0.5}\n{'loss': 0.41, 'epoch': 1.0}\n{'train_runtime': 1.9, 'train_loss': 0.46}"
    assert losses(hf) == {1: 0.52, 2: 0.41}
    jsonl = ('{"step": 1, "loss": 0.52}\n{"step": 2, "loss": 0.41}\n'
             '{"step": 3, "train_runtime": 1.9, "train_loss": 0.46}')
    assert losses(jsonl) == {1: 0.52, 2: 0.41}


def test_a_nan_printed_again_is_the_same_value_not_two_writers():
    got = losses("step 1 loss 0.5\nstep 2 loss nan\nstep 2 loss nan\nTrain done: step 2 loss nan")
    assert sorted(got) == [1, 2] and math.isnan(got[2])


# ---- issue 53: lines read by rule (compare/loss_lines/fields.py), without a regex ----

@pytest.mark.parametrize("text", [
    "iter: 5  loss_cls: 0.8  total_loss: 2.0  loss_box_reg: 0.7  max_mem: 2644M\niter: 6  total_loss: 1.5",
    "iter=5, loss_rpn=0.1, total_loss=2.0, lr=0.01\niter=6, total_loss=1.5",  # key=value between commas
    "iter 5\ttotal_loss 2.0\tloss_cls 0.8\niter 6\ttotal_loss 1.5",  # key value between tabs
    "| iter: 5 | loss_cls: 0.8 | total_loss: 2.0 |\n| iter: 6 | total_loss: 1.5 |",  # pipes
])
def test_key_value_lines_in_every_spelling_take_the_loss_by_rule_never_a_component(text):
    log = read_loss_log(text)
    assert log.format == "fields" and losses(text) == {5: 2.0, 6: 1.5}
    assert log.keys == {"loss": "total_loss", "step": "iter"}


def test_the_loss_is_the_first_of_the_stated_keys_and_never_its_running_mean():
    assert losses("iter: 1  train_loss: 0.7  loss: 0.5\niter: 2  loss: 0.4") == {1: 0.5, 2: 0.4}  # loss first
    timm = "Train: 0 [   0/20 (  5%)]  Loss: 1.55 (1.55)  LR: 1.0e-01\nTrain: 0 [   5/20 ( 30%)]  Loss: 1.08 (1.39)"
    assert losses(timm) == {1: 1.55, 6: 1.08}  # the batch's value, not the mean in parentheses


def test_dates_and_times_are_never_counters():
    """MMEngine's "12/05 10:12:00" was taken for Keras' "12/20" counter: the import stopped on a repeated step."""
    text = "\n".join(f"12/05 10:12:0{i} - mmengine - INFO - Epoch(train) [{e}][{i * 5:>2}/10]  lr: 1.0e-02  "
                     f"eta: 0:00:0{i}  loss: {e + i / 10}  loss_cls: 0.5" for e in (1, 2) for i in (1, 2))
    log = read_loss_log(text)
    assert log.format == "fields" and losses(text) == {5: 1.1, 10: 1.2, 15: 2.1, 20: 2.2}
    assert log.step_rule == "epoch and batch counter on a grid of 10 batches per epoch, from 1"


def test_a_counter_from_0_printed_after_its_interval_is_shifted_and_no_other():
    assert sorted(losses("iter: 19  total_loss: 2\niter: 39  total_loss: 1\niter: 49  total_loss: 0.5")) == [20, 40,
                                                                                                          50]
    assert sorted(losses("iter: 20  total_loss: 2\niter: 40  total_loss: 1")) == [20, 40]
    assert sorted(losses("iter: 1  total_loss: 2\niter: 11  total_loss: 1\niter: 21  total_loss: 1")) == [1, 11, 21]


def test_a_table_is_read_by_column_name_its_validation_columns_as_evaluations():
    table = ("epoch     train_loss  valid_loss  accuracy  time    \n0         0.759857    0.482940    0.898438  00:02\n"
             "\r Epoch 2/2 : |####| 100.00% [20/20 00:00<00:00]\r\r1         0.558308    0.369067    0.937500  00:01\n")
    log = read_loss_log(table)
    assert losses(table) == {0: 0.759857, 1: 0.558308} and not log.notes
    assert log.evals == {0: {"eval_loss": 0.48294, "eval_accuracy": 0.898438},
                         1: {"eval_loss": 0.369067, "eval_accuracy": 0.9375}}
    without_validation = "epoch  train_loss  accuracy\n0  0.75  0.9\n1  0.55  0.95"  # a training accuracy
    assert read_loss_log(without_validation).evals == {}


def test_an_evaluation_lines_running_mean_is_the_evaluation_at_its_last_line():
    text = ("Train: 0 [   0/2 ( 50%)]  Loss: 1.5 (1.5)\nTrain: 0 [   1/2 (100%)]  Loss: 1.2 (1.35)\n"
            "Test: [   0/1]  Loss:   0.900 ( 0.900)  Acc@1:  50.000 ( 50.000)\n"
            "Test: [   1/1]  Loss:   0.700 ( 0.800)  Acc@1:  70.000 ( 60.000)\n")
    log = read_loss_log(text)
    assert losses(text) == {1: 1.5, 2: 1.2} and log.evals == {2: {"eval_loss": 0.8, "eval_accuracy": 60.0}}


def test_the_field_options_name_the_keys_of_a_text_log(tmp_path, capsys):
    source = tmp_path / "train.log"
    source.write_text("".join(f"it={s} objective={1 / s} rate=0.1 holdout={2 / s}\n" for s in range(1, 6)))
    out = tmp_path / "out"
    assert compare_main(["import", "text", str(source), "--out", str(out), "--loss-field", "objective",
                         "--step-field", "it", "--lr-field", "rate", "--eval-loss-field", "holdout"]) == 0
    assert "the loss from the key 'objective', the step from the key 'it'" in capsys.readouterr().out
    assert [(s["step"], s["loss"], s["lr"]) for s in read_steps(out)] == [(s, 1 / s, 0.1) for s in range(1, 6)]
    assert compare_main(["import", "text", str(source), "--out", str(tmp_path / "no"), "--loss-field",
                         "nothing"]) == 2
    err = capsys.readouterr().err
    assert "no line has the key 'nothing' (--loss-field) with a step" in err and err.count("\n") == 1


def test_a_loss_key_without_a_step_is_refused_in_one_line(tmp_path, capsys):
    source = tmp_path / "train.log"
    source.write_text("final loss: 0.5\nfinal loss: 0.4\n")
    assert compare_main(["import", "text", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "train.log:1: a loss but no step on the line ('final loss: 0.5')" in err and err.count("\n") == 1
