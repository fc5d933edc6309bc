"""Hugging Face transformers' Trainer, with a tiny BERT built in code from a config (no download): it prints
a Python dict per logging_steps, `{'loss': '0.6935', 'grad_norm': ..., 'learning_rate': ..., 'epoch': '0.4'}`
(transformers 5 prints the values as strings of 4 significant digits; 4.x printed floats),
evaluation dicts `{'eval_loss': ..., 'eval_accuracy': ..., 'epoch': 1.0}` and at the end one dict with
`train_loss` (the mean over the run, not a step's loss). No step is printed: the reader numbers the lines in
order, one per logging_steps. A callback dumps the logs with their global step.

Captured with (from the repository root; transformers and accelerate installed only for the capture):
    python examples/logs/corpus/hf_trainer.py > examples/logs/corpus/hf_trainer.log 2>&1
Import: python -m compare import text examples/logs/corpus/hf_trainer.log --out runs/x
"""

import os
import warnings

import numpy as np
import torch
from tiny import HERE, dump, printed
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

warnings.filterwarnings("ignore")
os.environ["WANDB_DISABLED"] = "true"
torch.manual_seed(0)
config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16, num_labels=2)
model = BertForSequenceClassification(config)
ids = torch.randint(1, 50, (160, 8))
labels = (ids[:, 0] > 25).long()


class Data(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": ids[i], "labels": labels[i]}


def accuracy(prediction) -> dict:
    return {"accuracy": float((np.argmax(prediction.predictions, -1) == prediction.label_ids).mean())}


steps, evals = {}, {}
LOGGING_STEPS = 4


class Truth(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if "loss" in logs:  # the order the reader numbers by: one line per logging_steps
            steps[state.global_step // LOGGING_STEPS] = printed(logs["loss"], ".4g")  # as printed
        if "eval_loss" in logs:
            evals[state.global_step // LOGGING_STEPS] = {"eval_loss": printed(logs["eval_loss"], ".4g"),
                                                         "eval_accuracy": printed(logs["eval_accuracy"], ".4g")}


args = TrainingArguments(output_dir=str(HERE / "hf_out"), num_train_epochs=2, per_device_train_batch_size=16,
                         logging_steps=LOGGING_STEPS, eval_strategy="epoch", save_strategy="no", report_to=[],
                         disable_tqdm=True, use_cpu=True, seed=0, learning_rate=1e-3)
Trainer(model=model, args=args, train_dataset=Data(160), eval_dataset=Data(32), compute_metrics=accuracy,
        callbacks=[Truth()]).train()
dump("hf_trainer", steps, evals, flags=[], note=f"step = the line's place: logging_steps={LOGGING_STEPS} "
     "optimizer steps each")
