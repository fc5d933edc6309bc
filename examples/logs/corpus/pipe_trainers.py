"""Large-model trainers' pipe-separated key-value lines, printed through the same logging calls and format
strings as the trainers themselves (none of them installs here: Megatron-LM and fairseq need CUDA builds and
fetch their own dependencies), over tiny.py's job:

- `megatron`: Megatron-LM's training_log (print_rank_last of " [time] iteration N/ M | consumed samples: ... |
  learning rate: 5.000000E-01 | global batch size: ... | lm loss: 1.234567E+00 | loss scale: 65536.0 | grad
  norm: ... |"), the loss the mean over the log interval, and its evaluate_and_print_results block
  ("validation loss at iteration N | lm loss value: ... | lm loss PPL: ... |" between dashes);
- `fairseq`: fairseq's logging format ("time | INFO | train_inner | ...") with --log-format simple: the
  progress bar's "epoch 001:     10 / 20 loss=1.23, ..., num_updates=10, lr=0.5, loss_scale=128, ..." every
  log interval (the loss the interval's mean), the end-of-epoch "epoch 001 | loss ... | num_updates 20 | ..."
  (the epoch's mean, no step's loss) and the validation "epoch 001 | valid on 'valid' subset | loss ... |";
- `fairseq_json`: the same with --log-format json: {"epoch": 1, "update": 0.25, "loss": "1.212", ...,
  "num_updates": "5", ...} behind the logging prefix, the summaries' keys behind their tag ("valid_loss",
  "train_loss", "train_num_updates": the epoch's mean, no step's loss).

Captured with (from the repository root):
    .venv/bin/python examples/logs/corpus/pipe_trainers.py megatron > examples/logs/corpus/megatron.log 2>&1
    .venv/bin/python examples/logs/corpus/pipe_trainers.py fairseq > examples/logs/corpus/fairseq.log 2>&1
    .venv/bin/python examples/logs/corpus/pipe_trainers.py fairseq_json > examples/logs/corpus/fairseq_json.log 2>&1
Import: python -m compare import text examples/logs/corpus/megatron.log --out runs/x
"""

import json
import logging
import math
import sys
import time
from datetime import datetime

from tiny import dump, evaluate, job, printed, train_step

kind = sys.argv[1]
x, y, model, opt = job(samples=640)
steps, evals = {}, {}
batch, total, interval = 32, 60, 5
fairseq, as_json = kind.startswith("fairseq"), kind == "fairseq_json"
if fairseq:  # fairseq's own basicConfig
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", level=logging.INFO, stream=sys.stdout)
    logging.getLogger("fairseq_cli.train").info("begin training epoch 1")
losses, epoch_losses, start = [], [], time.perf_counter()
per_epoch = 20
for step in range(1, total + 1):
    i = (step * batch) % 640
    loss = train_step(model, opt, x[i:i + batch], y[i:i + batch])
    losses.append(loss)
    epoch_losses.append(loss)
    lr = opt.param_groups[0]["lr"]
    if step % interval == 0:
        mean = sum(losses) / len(losses)
        losses = []
        elapsed = (time.perf_counter() - start) * 1000 / interval
        start = time.perf_counter()
        if kind == "megatron":
            line = f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S')}]"
            line += f" iteration {step:8d}/{total:8d} |"
            line += f" consumed samples: {step * batch:12d} |"
            line += f" elapsed time per iteration (ms): {elapsed:.1f} |"
            line += f" learning rate: {lr:.6E} |"
            line += f" global batch size: {batch:5d} |"
            line += " {}: {:.6E} |".format("lm loss", mean)
            line += f" loss scale: {65536.0:.1f} |"
            line += " grad norm: {:.3f} |".format(math.sqrt(sum(p.grad.pow(2).sum().item()
                                                             for p in model.parameters())))
            line += f" number of skipped iterations: {0:3d} |"
            line += f" number of nan iterations: {0:3d} |"
            print(line)
            steps[step] = printed(mean, ".6E")
        else:
            epoch, counter = (step - 1) // per_epoch + 1, (step - 1) % per_epoch + 1
            stats = {"loss": f"{mean:.3f}", "nll_loss": f"{mean / math.log(2):.3f}",
                     "ppl": f"{2 ** (mean / math.log(2)):.2f}", "wps": "1234.5", "ups": "300.1", "wpb": "32",
                     "bsz": "32", "num_updates": str(step), "lr": f"{lr:g}", "gnorm": "0.512",
                     "loss_scale": "128", "train_wall": "0", "gb_free": "10.2", "wall": "1"}
            if as_json:  # JsonProgressBar.log: the epoch and the fractional update first
                record = {"epoch": epoch, "update": round(epoch - 1 + counter / per_epoch, 3), **stats}
                logging.getLogger("train_inner").info(json.dumps(record))
            else:
                postfix = ", ".join(f"{k}={v}" for k, v in stats.items())
                logging.getLogger("train_inner").info(f"epoch {epoch:03d}:  {counter:5d} / {per_epoch:d} {postfix}")
            steps[step] = printed(mean, ".3f")
    if kind == "megatron" and step % 20 == 0:
        val_loss, _ = evaluate(model, x[:128], y[:128])
        text = f" validation loss at iteration {step} | "
        text += "{} value: {:.6E} | ".format("lm loss", val_loss)
        text += "{} PPL: {:.6E} | ".format("lm loss", math.exp(min(20, val_loss)))
        print("-" * (len(text) + 1))
        print(text)
        print("-" * (len(text) + 1))
        evals[step] = {"eval_loss": printed(val_loss, ".6E")}
    if fairseq and step % per_epoch == 0:
        epoch = step // per_epoch
        val_loss, _ = evaluate(model, x[:128], y[:128])
        valid = {"loss": f"{val_loss:.3f}", "nll_loss": "1.1", "ppl": "2.1", "wps": "4321", "wpb": "32",
                 "bsz": "32", "num_updates": str(step)}
        mean = sum(epoch_losses) / len(epoch_losses)
        epoch_losses = []
        train = {"loss": f"{mean:.3f}", "nll_loss": "1.2", "ppl": "2.3", "wps": "1234.5", "ups": "300.1",
                 "wpb": "32", "bsz": "32", "num_updates": str(step), "lr": f"{lr:g}", "gnorm": "0.512",
                 "loss_scale": "128", "train_wall": "0", "gb_free": "10.2", "wall": "1"}
        for tag, stats in (("valid", valid), ("train", train)):
            if tag == "train":
                logging.getLogger("fairseq_cli.train").info(f"end of epoch {epoch} (average epoch stats below)")
            if as_json:  # JsonProgressBar.print: every key behind its tag
                line = json.dumps({f"{tag}_{k}": v for k, v in {"epoch": epoch, **stats}.items()})
            else:  # SimpleProgressBar.print: pipes; the validation's own "valid on 'valid' subset"
                subset = ["valid on 'valid' subset"] if tag == "valid" else []
                line = " | ".join([f"epoch {epoch:03d}", *subset, *(f"{k} {v}" for k, v in stats.items())])
            logging.getLogger(tag).info(line)
        evals[step] = {"eval_loss": printed(val_loss, ".3f")}
dump(kind, steps, evals, flags=[])
