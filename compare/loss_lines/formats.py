"""The table of named formats, in one place: each kind of line the reader knows, written against a log
captured from the tool itself (examples/logs/corpus/, beside the script that printed it). The first format
whose regex matches a line of the rank is used; docs/own-job.md ("Text logs") lists them for users."""

from __future__ import annotations

from compare.loss_lines.fields import FIELDS_TRAIN, FieldLines
from compare.loss_lines.key_value import KEY_VALUE_EVAL, KEY_VALUE_TRAIN, key_values
from compare.loss_lines.structured import json_line, mllog, python_dict
from compare.loss_lines.tokens import EPOCH_TRAIN, GENERIC_TRAIN, LOSS, NUMBER, STEP, Format

FORMATS: tuple[Format, ...] = (
    Format("mnist", EPOCH_TRAIN, "epoch grid", "horovodrun_mpi.log"),
    # the PyTorch tutorials' "Epoch [1/2], Step [100/600], Loss: 0.2153": a batch counter with its total
    Format("epoch-step", rf"(?i)Epoch \[(?P<epoch>\d+)/\d+\],?\s*Step \[(?P<step>\d+)/(?P<total>\d+)\],?\s*"
                         rf"Loss:\s*(?P<loss>{NUMBER})", "epoch grid", "epoch_step_every5.log"),
    # tqdm's bar with a loss postfix, Lightning's TQDMProgressBar: "Epoch 0:  45%|####5  | 9/20 [..., train_loss=0.7]"
    Format("progress-bar", rf"(?i)(?:epoch\s*(?P<epoch>\d+)\s*:\s*)?\d+%\|[^|]*\|\s*(?P<step>\d+)/(?P<total>\d+)\s*"
                           rf"\[[^\]]*?{LOSS}=(?P<loss>{NUMBER})", "epoch grid", "tqdm_bar.log", bar=True),
    # Keras: "Epoch 1/3" then "20/20 - 1s - 51ms/step - accuracy: 0.68 - loss: 0.8830 - val_loss: 0.49"
    # (a date "12/05 10:12:00" is no counter)
    Format("keras", rf"^\s*(?P<step>\d+)/(?P<total>\d+)(?!/|\s+\d{{1,2}}:\d{{2}})\s.*?{LOSS}:\s*(?P<loss>{NUMBER})",
           "epoch grid", "keras_fit_v2.log", context=r"^\s*Epoch (?P<epoch>\d+)/\d+\s*$", bar=True),
    # nanoGPT: "iter 10: loss 3.2345, time 123.45ms, mfu 1.23%"; "step 250: train loss 2.1, val loss 2.2"
    Format("nanogpt", rf"^\s*iter (?P<step>{STEP}): loss (?P<loss>{NUMBER})", "as printed", "nanogpt.log",
           evals=(rf"^\s*step (?P<step>\d+): train loss {NUMBER}, val loss (?P<eval_loss>{NUMBER})",)),
    Format("mlperf", r':::MLLOG\s*\{.*"key":\s*"(?:loss|train_loss)"', "key", "mllog.log", parse=mllog,
           evals=(r':::MLLOG\s*\{.*"key":\s*"eval_(?:accuracy|loss)"',)),
    # a JSON object per line, behind a logging prefix too (fairseq's --log-format json: "... | train_inner | {")
    Format("json-lines", r'^[^{]*\{.*"(?:loss|train_loss|train/loss)"\s*:', "key", "jsonl_stdout.log",
           parse=json_line, evals=(r'^[^{]*\{.*"(?:val|valid|eval|test)_\w+"\s*:',)),
    Format("hugging-face", r"^\s*\{'loss':", "key", "hf_trainer.log", parse=python_dict,
           evals=(r"^\s*\{'eval_\w+':",)),
    # Megatron-LM's "iteration 10/ 100 | ... | lm loss: 2.31E+00 | loss scale: ... |", fairseq's "... | epoch 001:
    # 10 / 20 loss=2.31, ..., num_updates=10, lr=0.0001, loss_scale=128" (key_value.py)
    Format("key-value", KEY_VALUE_TRAIN, "key", "megatron.log", parse=key_values, evals=(KEY_VALUE_EVAL,)),
    Format("step-loss", GENERIC_TRAIN, "as printed", "logging_timestamps.log"),
    # by rule, not by format (fields.py): key-value lines (timm's "Train: 0 [ 600/1251 ( 48%)]  Loss: 3.41 (4.02)",
    # MMEngine's "Epoch(train) [2][ 50/400]  lr: ...  loss: 2.05  loss_cls: ...", Detectron2's "iter: 19
    # total_loss: 2.011  loss_cls: ..."), and tables with a header row (fastai's "epoch  train_loss  valid_loss")
    Format("fields", FIELDS_TRAIN, "key", "mmengine_train.log", parse=FieldLines, stateful=True),
)
DEFAULT_TRAIN = tuple(f.train for f in FORMATS)  # the first that matches a line of the rank is used
