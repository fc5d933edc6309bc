"""Structured lines (a family of formats.py): a JSON object printed on stdout, Hugging Face Trainer's printed
dict, MLPerf's :::MLLOG lines. Each `parse` turns a line into (training values or None, evaluation values or
None); the table's regex only marks candidates."""

from __future__ import annotations

import ast
import json
import re

from compare.loss_lines.tokens import LOSS_KEYS, STEP_KEYS, is_numeric


def json_line(text: str) -> tuple[dict | None, dict | None]:
    """A JSON object printed on stdout ({"step": 10, "loss": 0.52}); Python's json writes NaN and Infinity."""
    start = text.find("{")
    try:
        entry = json.loads(text[start:])
    except ValueError:
        return None, None
    return _structured(entry) if isinstance(entry, dict) else (None, None)


def python_dict(text: str) -> tuple[dict | None, dict | None]:
    """Hugging Face Trainer's print of its logs: {'loss': 0.52, 'learning_rate': 4e-05, 'epoch': 0.1}."""
    start = text.find("{")
    quoted = re.sub(r"(?<=[:\[,(]\s)(-?(?:nan|inf))\b", r"'\1'", text[start:])  # repr's nan/inf as strings
    try:
        entry = ast.literal_eval(quoted)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None, None
    return _structured(entry) if isinstance(entry, dict) else (None, None)


def mllog(text: str) -> tuple[dict | None, dict | None]:
    """MLPerf's ':::MLLOG {"key": "train_loss", "value": 0.5, "metadata": {"step": 10, "epoch_num": 1}}'."""
    try:
        entry = json.loads(text[text.index(":::MLLOG") + len(":::MLLOG"):])
    except ValueError:
        return None, None
    if not isinstance(entry, dict):
        return None, None
    key, value, meta = entry.get("key"), entry.get("value"), entry.get("metadata") or {}
    if key in LOSS_KEYS and is_numeric(value):
        return {"loss": float(value), **({"step": meta["step"]} if is_numeric(meta.get("step")) else {})}, None
    if key in ("eval_accuracy", "eval_loss") and is_numeric(value):
        return None, {key: float(value)}
    return None, None



def _structured(entry: dict) -> tuple[dict | None, dict | None]:
    """A structured line's training values (loss, lr, step) and evaluation values, by their usual keys."""
    train = None
    # the run's or the epoch's mean loss, not a step's: Hugging Face's closing dict, fairseq's end of epoch
    summary = any(str(key).startswith("train_runtime") or key == "train_num_updates" for key in entry)
    loss = None if summary else next((entry[k] for k in LOSS_KEYS if is_numeric(entry.get(k))), None)
    if loss is not None:
        train = {"loss": float(loss)}
        if is_numeric(lr := entry.get("lr", entry.get("learning_rate"))):
            train["lr"] = float(lr)
        if (step := next((entry[k] for k in STEP_KEYS if is_numeric(entry.get(k))), None)) is not None:
            train["step"] = step
    evals = {}
    for key, value in entry.items():
        found = re.fullmatch(r"(?i)(?:val|valid|eval|test)[_/](loss|acc|accuracy)", str(key))
        if found and is_numeric(value):
            evals["eval_loss" if found[1].lower() == "loss" else "eval_accuracy"] = float(value)
    return train, evals or None

